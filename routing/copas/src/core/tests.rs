//! The COPAS core with scripted time on hand-built networks: a harness
//! carries control packets between neighbours, keeps every node's kernel
//! routes and feeds each node its MAC backoff counter (`Input::MacBackoffs`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use meshemu_aodv::ondemand::{Event, Input, Output, Protocol};

use super::Copas;
use crate::config::Config;

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

fn addr(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, index as u8 + 1)
}

/// A network of COPAS nodes: a packet sent at t reaches the sender's
/// neighbours (all, or the addressed one) at t + 1 ms.
struct Net {
    nodes: Vec<Copas>,
    links: BTreeSet<(usize, usize)>,
    now: Duration,
    in_flight: Vec<(Duration, usize, Ipv4Addr, u8, Vec<u8>)>,
    /// Every node's kernel routes: (packet src, packet dst) -> next hop.
    kernel: Vec<BTreeMap<(Ipv4Addr, Ipv4Addr), Ipv4Addr>>,
    /// Contention backoffs per second each node's MAC counts, and the counters.
    backoff_rate: Vec<u64>,
    backoffs: Vec<f64>,
    log: Vec<(Duration, usize, Output)>,
}

impl Net {
    fn new(count: usize, links: &[(usize, usize)]) -> Net {
        let config = Config::default();
        Net {
            nodes: (0..count).map(|i| Copas::new(config.clone(), addr(i), i as u64, Duration::ZERO)).collect(),
            links: links.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect(),
            now: Duration::ZERO,
            in_flight: Vec::new(),
            kernel: vec![BTreeMap::new(); count],
            backoff_rate: vec![0; count],
            backoffs: vec![0.0; count],
            log: Vec::new(),
        }
    }

    fn linked(&self, a: usize, b: usize) -> bool {
        self.links.contains(&(a.min(b), a.max(b)))
    }

    fn index(&self, address: Ipv4Addr) -> usize {
        address.octets()[3] as usize - 1
    }

    fn input(&mut self, node: usize, input: Input<'_>) {
        let mut out = Vec::new();
        self.nodes[node].handle(self.now, input, &mut out);
        self.carry_out(node, out);
    }

    fn carry_out(&mut self, node: usize, out: Vec<Output>) {
        for output in out {
            match &output {
                Output::Send { to, ttl, payload } => {
                    self.in_flight.push((self.now + ms(1), node, *to, *ttl, payload.clone()));
                }
                Output::SetPairRoute { src, dst, next_hop } => {
                    self.kernel[node].insert((*src, *dst), *next_hop);
                }
                Output::DeletePairRoute { src, dst } => {
                    self.kernel[node].remove(&(*src, *dst));
                }
                Output::SetRoute { dst, next_hop, .. } => {
                    self.kernel[node].insert((addr(node), *dst), *next_hop);
                }
                Output::DeleteRoute { dst } => {
                    self.kernel[node].remove(&(addr(node), *dst));
                }
                _ => {}
            }
            self.log.push((self.now, node, output));
        }
    }

    /// Runs until `until`: deliveries, timers, and every 100 ms the MAC
    /// counters and the route use of every node with a route.
    fn run_until(&mut self, until: Duration) {
        loop {
            let next_delivery = self.in_flight.iter().map(|f| f.0).min();
            let next_timer = self.nodes.iter().filter_map(|n| n.poll_at()).min();
            let next_report = ms((self.now.as_millis() as u64 / 100 + 1) * 100);
            let next = [next_delivery, next_timer, Some(next_report)].into_iter().flatten().min().unwrap();
            if next > until {
                self.now = until;
                return;
            }
            self.now = next;
            if next == next_report {
                for node in 0..self.nodes.len() {
                    self.backoffs[node] += self.backoff_rate[node] as f64 / 10.0;
                    let total = self.backoffs[node] as u64;
                    self.input(node, Input::MacBackoffs { total });
                    let used: BTreeSet<Ipv4Addr> = self.kernel[node].keys().flat_map(|&(s, d)| [s, d]).collect();
                    for addr in used {
                        self.input(node, Input::RouteUsed { addr });
                    }
                }
            }
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight).into_iter().partition(|f| f.0 <= self.now);
            self.in_flight = later;
            for (_, from, to, ttl, payload) in due {
                let receivers: Vec<usize> = if to == Ipv4Addr::BROADCAST {
                    (0..self.nodes.len()).filter(|&n| n != from && self.linked(from, n)).collect()
                } else {
                    let n = self.index(to);
                    if self.linked(from, n) { vec![n] } else { vec![] }
                };
                for n in receivers {
                    self.input(n, Input::Control { from: addr(from), ttl, payload: &payload });
                }
            }
            for node in 0..self.nodes.len() {
                if self.nodes[node].poll_at().is_some_and(|t| t <= self.now) {
                    self.input(node, Input::Tick);
                }
            }
        }
    }

    /// The nodes packets from `src` to `dst` cross, following the kernel routes.
    fn walk(&self, src: usize, dst: usize) -> Vec<usize> {
        let (from, to) = (addr(src), addr(dst));
        let mut path = vec![src];
        let mut at = src;
        while at != dst && path.len() < 20 {
            let Some(&next) = self.kernel[at].get(&(from, to)) else { break };
            at = self.index(next);
            path.push(at);
        }
        path
    }

    /// Node `src` has data for `dst`: the kernel found no route, a discovery runs.
    fn send_data(&mut self, src: usize, dst: usize) {
        self.input(src, Input::NoRoute { src: addr(src), dst: addr(dst), local: true });
    }

    fn events(&self, node: usize) -> Vec<(Duration, Event)> {
        self.log
            .iter()
            .filter(|(_, n, _)| *n == node)
            .filter_map(|(t, _, o)| if let Output::Event(e) = o { Some((*t, e.clone())) } else { None })
            .collect()
    }

    fn counter(&self, node: usize, name: &str) -> u64 {
        self.nodes[node].counters().protocol.get(name).copied().unwrap_or(0)
    }
}

const S: usize = 0;
const D: usize = 1;

/// The paper's Fig. 2 shape: three node-disjoint routes from S to D,
/// i through 2-3, j through 4-5, k through 6-7.
fn three_routes() -> Net {
    Net::new(8, &[(S, 2), (2, 3), (3, D), (S, 4), (4, 5), (5, D), (S, 6), (6, 7), (7, D)])
}

/// Three routes with contention sums i 6, j 10, k 2 (backoffs per second
/// per relay 3+3, 5+5, 1+1), settled for 5 s, then S discovers D.
fn fig2_discovered() -> Net {
    let mut net = three_routes();
    for (node, rate) in [(2, 3), (3, 3), (4, 5), (5, 5), (6, 1), (7, 1)] {
        net.backoff_rate[node] = rate;
    }
    net.run_until(ms(5000));
    net.send_data(S, D);
    net.run_until(ms(7000));
    net
}

#[test]
fn fig2_the_two_least_contended_disjoint_routes_are_chosen_and_the_least_carries_data() {
    let net = fig2_discovered();
    assert!((net.nodes[2].contention() - 3.0).abs() < 0.01, "mu settles at the rate: {}", net.nodes[2].contention());
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D], "data over k");
    assert_eq!(net.walk(D, S), vec![D, 3, 2, S], "ACKs over i");
    let released = net.log.iter().any(|(t, n, o)| *n == S && *o == Output::Release { dst: addr(D) } && *t >= ms(6500));
    assert!(released, "held packets go once the forward path is known, after T_COLLECT");
    let (forward, reverse) = net.nodes[S].paths(addr(S), addr(D)).unwrap();
    assert_eq!((forward, reverse), net.nodes[D].paths(addr(S), addr(D)).unwrap(), "both ends know both paths");
    assert!(net.kernel[4].is_empty() && net.kernel[5].is_empty(), "j is not used");
    assert_eq!(net.counter(D, "disjoint_selections"), 1);
}

#[test]
fn without_disjoint_routes_the_least_contended_single_route_carries_both_ways() {
    // Every route crosses node 2: S-2-3-D and S-2-4-D; node 3 is busy.
    let mut net = Net::new(5, &[(S, 2), (2, 3), (2, 4), (3, D), (4, D)]);
    net.backoff_rate[3] = 8;
    net.run_until(ms(3000));
    net.send_data(S, D);
    net.run_until(ms(5000));
    assert_eq!(net.walk(S, D), vec![S, 2, 4, D]);
    assert_eq!(net.walk(D, S), vec![D, 4, 2, S]);
    assert_eq!(net.counter(D, "single_route_selections"), 1);
}

#[test]
fn a_contention_spike_on_the_forward_path_moves_it_within_a_few_t_backoff() {
    let mut net = fig2_discovered();
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D]);
    // Node 6 starts to back off 20 times a second (a neighbouring flow, say).
    let spike = net.now;
    net.backoff_rate[6] = 20;
    net.run_until(spike + ms(6000));
    let moved = net
        .events(S)
        .into_iter()
        .find(|(_, e)| matches!(e, Event::PathSelected { role: "forward", cause: "contention", .. }))
        .map(|(t, _)| t - spike)
        .expect("S chose a new forward path");
    assert!(moved <= ms(4000), "re-routed {moved:?} after the spike (T_BACKOFF 1 s, T_COLLECT 1.5 s)");
    assert_eq!(net.walk(S, D), vec![S, 4, 5, D], "data moves to j, disjoint from the ACKs' i");
    assert_eq!(net.walk(D, S), vec![D, 3, 2, S], "the ACKs stay");
    assert!(net.events(D).iter().any(|(_, e)| matches!(e, Event::ContentionHigh { role: "forward", .. })), "D watched the forward path");
    assert_eq!(net.counter(S, "reroutes"), 1);
    let reroute_ttls: Vec<u8> = net
        .log
        .iter()
        .filter(|(t, n, _)| *n == D && *t > spike)
        .filter_map(|(_, _, o)| match o {
            Output::Send { to, ttl, .. } if *to == Ipv4Addr::BROADCAST => Some(*ttl),
            _ => None,
        })
        .collect();
    assert_eq!(reroute_ttls, vec![4], "the reroute RREQ goes as far as a path one hop longer than k's 3");
    // No ROUTE went back to D: S switched by itself and told the relays on the way.
    let routes_sent_by_d = net.nodes[D].counters().control_sent.get("route").map_or(0, |t| t.packets);
    assert_eq!(routes_sent_by_d, 2, "only the discovery's two");
}

#[test]
fn a_spike_without_a_better_disjoint_path_keeps_the_path() {
    let mut net = fig2_discovered();
    // Every alternative is hotter: no reroute, however high k gets.
    net.backoff_rate[4] = 40;
    net.backoff_rate[5] = 40;
    net.backoff_rate[6] = 10;
    net.run_until(net.now + ms(8000));
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D]);
    assert!(net.counter(S, "reroutes_declined") >= 1);
}

#[test]
fn a_rerr_switches_the_source_to_the_other_path_at_once_then_a_new_one_comes() {
    let mut net = fig2_discovered();
    // Relay 7 can no longer reach D.
    net.links.remove(&(D, 7));
    let broke = net.now;
    net.input(7, Input::LinkFailed { neighbor: addr(D) });
    net.run_until(broke + ms(10));
    assert_eq!(net.walk(S, D), vec![S, 2, 3, D], "data over the ACKs' path i, 2 ms after the break");
    assert!(net.events(S).iter().any(|(_, e)| matches!(e, Event::PathSwitched { role: "forward", cause: "rerr", .. })));
    net.run_until(broke + ms(3000));
    assert_eq!(net.walk(S, D), vec![S, 4, 5, D], "the rediscovery gives j, disjoint from i");
    assert_eq!(net.walk(D, S), vec![D, 3, 2, S]);
}

#[test]
fn a_retry_drop_to_a_neighbour_still_heard_is_contention_not_a_break() {
    let mut net = fig2_discovered();
    net.input(7, Input::NeighborHeard { neighbor: addr(D) });
    net.now += ms(300);
    net.input(7, Input::LinkFailed { neighbor: addr(D) });
    net.run_until(net.now + ms(10));
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D], "no RERR, the path stays");
    assert_eq!(net.nodes[7].counters().rerr_sent, 0);
    assert_eq!(net.counter(7, "retry_drops_to_live_neighbors"), 1);
    // A neighbour that only acknowledges (D sends nothing back to 7 on this path) is alive too.
    net.now += ms(1000);
    net.input(7, Input::NeighborAcked { neighbor: addr(D) });
    net.now += ms(300);
    net.input(7, Input::LinkFailed { neighbor: addr(D) });
    net.run_until(net.now + ms(10));
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D]);
    assert_eq!(net.counter(7, "retry_drops_to_live_neighbors"), 2);
    // Silent for a second: now it is a break.
    net.now += ms(1000);
    net.input(7, Input::LinkFailed { neighbor: addr(D) });
    net.run_until(net.now + ms(10));
    assert_eq!(net.walk(S, D), vec![S, 2, 3, D]);
}

#[test]
fn a_failed_discovery_drops_the_held_packets_after_the_retries() {
    let mut net = Net::new(3, &[(S, 2)]);
    net.send_data(S, D);
    net.run_until(ms(20_000));
    let drops: Vec<_> = net.log.iter().filter(|(_, n, o)| *n == S && *o == Output::Drop { dst: addr(D) }).collect();
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].0, ms(9000), "three RREQs, 3 s each");
    assert_eq!(net.nodes[S].counters().discoveries_failed, 1);
}

#[test]
fn idle_routes_expire_everywhere() {
    let mut net = fig2_discovered();
    // Nothing uses the routes after this: 11 s later (timeout 10 s) every node has removed all of them.
    let mut out = Vec::new();
    let later = net.now + ms(11_000);
    for node in 0..net.nodes.len() {
        net.nodes[node].handle(later, Input::Tick, &mut out);
        let removed = out.iter().filter(|o| matches!(o, Output::DeletePairRoute { .. } | Output::DeleteRoute { .. })).count();
        assert_eq!(removed, net.kernel[node].len(), "node {node}");
        out.clear();
    }
}

#[test]
fn garbage_is_counted_and_the_same_inputs_give_the_same_outputs() {
    let mut net = three_routes();
    net.input(2, Input::Control { from: addr(S), ttl: 5, payload: &[64, 0, 1] });
    net.input(2, Input::Control { from: addr(S), ttl: 5, payload: &[1, 2, 3, 4] });
    assert_eq!(net.nodes[2].counters().malformed, 2);
    let a = fig2_discovered();
    let b = fig2_discovered();
    let outputs = |net: &Net| net.log.iter().map(|(t, n, o)| format!("{t:?} {n} {o:?}")).collect::<Vec<_>>();
    assert_eq!(outputs(&a), outputs(&b));
}
