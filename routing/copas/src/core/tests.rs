//! The COPAS core with scripted time on hand-built networks: a harness
//! carries control packets between neighbours, keeps every node's kernel
//! routes and feeds each node its MAC backoff counter (`Input::MacBackoffs`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use meshemu_ondemand::{Input, Protocol};

use crate::{Copas, Event, Output};
use crate::config::Config;
use crate::packet::{Message, Role, Route, ROUTE, ROUTE_ACK};

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
    /// (from, to, message type) -> how many more such unicasts are lost.
    losses: BTreeMap<(usize, usize, u8), u32>,
}

impl Net {
    fn new(count: usize, links: &[(usize, usize)]) -> Net {
        Net::with_config(count, links, Config::default())
    }

    fn with_config(count: usize, links: &[(usize, usize)], config: Config) -> Net {
        Net {
            nodes: (0..count).map(|i| Copas::new(config.clone(), addr(i), i as u64, Duration::ZERO)).collect(),
            links: links.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect(),
            now: Duration::ZERO,
            in_flight: Vec::new(),
            kernel: vec![BTreeMap::new(); count],
            backoff_rate: vec![0; count],
            backoffs: vec![0.0; count],
            log: Vec::new(),
            losses: BTreeMap::new(),
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

    fn timeout(&mut self, node: usize) {
        let mut out = Vec::new();
        self.nodes[node].handle_timeout(self.now, &mut out);
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
            let next_timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
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
                    let lost = self.losses.get_mut(&(from, n, payload[0])).filter(|left| **left > 0).map(|left| *left -= 1).is_some();
                    if self.linked(from, n) && !lost { vec![n] } else { vec![] }
                };
                for n in receivers {
                    self.input(n, Input::Control { from: addr(from), ttl, payload: &payload });
                }
            }
            for node in 0..self.nodes.len() {
                if self.nodes[node].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.timeout(node);
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

    /// When `from` sent messages of `kind` to `to`.
    fn sent(&self, from: usize, to: usize, kind: u8) -> Vec<Duration> {
        self.log
            .iter()
            .filter_map(|(t, n, o)| match o {
                Output::Send { to: addr_to, payload, .. } if *n == from && *addr_to == addr(to) && payload[0] == kind => Some(*t),
                _ => None,
            })
            .collect()
    }
}

const S: usize = 0;
const D: usize = 1;

/// The paper's Fig. 2 shape: three node-disjoint routes from S to D,
/// i through 2-3, j through 4-5, k through 6-7.
const THREE_ROUTES: [(usize, usize); 9] = [(S, 2), (2, 3), (3, D), (S, 4), (4, 5), (5, D), (S, 6), (6, 7), (7, D)];

fn three_routes() -> Net {
    Net::new(8, &THREE_ROUTES)
}

/// Three routes with contention sums i 6, j 10, k 2 (backoffs per second
/// per relay 3+3, 5+5, 1+1), settled for 5 s, then S discovers D.
fn fig2_discovered() -> Net {
    fig2_with_losses(Config::default(), &[])
}

/// [`fig2_discovered`] with another config, and unicasts lost: (from, to, message type) -> how many.
fn fig2_with_losses(config: Config, losses: &[((usize, usize, u8), u32)]) -> Net {
    let mut net = Net::with_config(8, &THREE_ROUTES, config);
    net.losses = losses.iter().copied().collect();
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
    let released = net.log.iter().any(|(t, n, o)| *n == S && *o == Output::Release { dst: addr(D), spacing: Duration::ZERO } && *t >= ms(6500));
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
    // Relay 7 can no longer reach D: a frame failed, or its address could not be resolved.
    let failures = [
        (Input::LinkFailed { neighbor: addr(D) }, "link layer"),
        (Input::ResolutionFailed { neighbor: addr(D) }, "address resolution"),
    ];
    for (failure, cause) in failures {
        let mut net = fig2_discovered();
        net.links.remove(&(D, 7));
        let broke = net.now;
        net.input(7, failure);
        net.run_until(broke + ms(10));
        assert!(net.events(7).iter().any(|(_, e)| *e == Event::LinkBroken { neighbor: addr(D), cause }));
        assert_eq!(net.walk(S, D), vec![S, 2, 3, D], "data over the ACKs' path i, 2 ms after the break");
        assert!(net.events(S).iter().any(|(_, e)| matches!(e, Event::PathSwitched { role: "forward", cause: "rerr", .. })));
        net.run_until(broke + ms(3000));
        assert_eq!(net.walk(S, D), vec![S, 4, 5, D], "the rediscovery gives j, disjoint from i");
        assert_eq!(net.walk(D, S), vec![D, 3, 2, S]);
    }
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
        net.nodes[node].handle_timeout(later, &mut out);
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

// --- ROUTE acknowledgement and retransmission ---------------------------------------------
// In fig2_discovered, D sends the forward ROUTE over k (D-7-6-S) and the reverse one over i (D-3-2-S).

#[test]
fn every_node_acknowledges_a_route_to_the_hop_it_came_from_and_nothing_is_sent_twice() {
    let mut net = fig2_discovered();
    net.run_until(net.now + ms(5000));
    for (from, to) in [(7, D), (6, 7), (S, 6), (3, D), (2, 3), (S, 2)] {
        assert_eq!(net.sent(from, to, ROUTE_ACK).len(), 1, "{from} acks {to}'s ROUTE");
    }
    for (from, to) in [(D, 7), (7, 6), (6, S), (D, 3), (3, 2), (2, S)] {
        assert_eq!(net.sent(from, to, ROUTE).len(), 1, "{from} sent its ROUTE to {to} once: it was acknowledged");
    }
    assert_eq!(net.counter(D, "routes_acked"), 2);
    assert_eq!((net.counter(7, "routes_acked"), net.counter(6, "routes_acked")), (1, 1));
    let resent: u64 = (0..8).map(|n| net.counter(n, "route_retransmissions") + net.counter(n, "routes_abandoned")).sum();
    assert_eq!(resent, 0);
}

#[test]
fn a_lost_route_is_sent_again_after_the_ack_timeout_and_the_path_is_set_up() {
    let net = fig2_with_losses(Config::default(), &[((D, 7, ROUTE), 1)]);
    let sends = net.sent(D, 7, ROUTE);
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert_eq!(sends[1] - sends[0], ms(200), "route_ack_timeout_ms");
    assert_eq!(net.counter(D, "route_retransmissions"), 1);
    assert_eq!(net.walk(S, D), vec![S, 6, 7, D], "the forward path arrived with the retransmission");
    assert_eq!(net.nodes[S].counters().discoveries_succeeded, 1);
    assert_eq!(net.counter(D, "routes_acked"), 2);
}

#[test]
fn a_route_never_acknowledged_is_abandoned_after_the_retries_with_an_event() {
    // S asks only once in this time: no newer ROUTE replaces the lost one.
    let config = Config { discovery_timeout_ms: 10_000, ..Config::default() };
    let mut net = fig2_with_losses(config, &[((D, 7, ROUTE), u32::MAX)]);
    net.run_until(ms(12_000));
    let sends = net.sent(D, 7, ROUTE);
    let first = sends[0];
    let waits: Vec<Duration> = sends.windows(2).take(3).map(|w| w[1] - w[0]).collect();
    assert_eq!(waits, vec![ms(200), ms(400), ms(800)], "the wait doubles");
    let abandoned: Vec<(Duration, Event)> =
        net.events(D).into_iter().filter(|(_, e)| matches!(e, Event::RouteAbandoned { .. })).collect();
    assert_eq!(abandoned.len(), 1);
    let (when, event) = abandoned[0].clone();
    assert_eq!(when - first, ms(3000), "200 + 400 + 800 + 1600 ms");
    let Event::RouteAbandoned { src, dst, role, next_hop, path, transmissions } = event else { unreachable!() };
    assert_eq!((src, dst, role, next_hop, transmissions), (addr(S), addr(D), "forward", addr(7), 4));
    assert_eq!(path, vec![addr(S), addr(6), addr(7), addr(D)]);
    assert_eq!((net.counter(D, "route_retransmissions"), net.counter(D, "routes_abandoned")), (3, 1));
    assert_eq!(sends.len(), 4, "1 + route_retries, then no more");
}

#[test]
fn a_duplicate_route_is_acknowledged_again_but_not_passed_on_or_applied_twice() {
    // 7's ack to D is lost once: D sends the ROUTE again, 7 gets it twice.
    let net = fig2_with_losses(Config::default(), &[((7, D, ROUTE_ACK), 1)]);
    assert_eq!(net.sent(D, 7, ROUTE).len(), 2);
    assert_eq!(net.sent(7, D, ROUTE_ACK).len(), 2, "the copy is acknowledged too");
    assert_eq!(net.sent(7, 6, ROUTE).len(), 1, "passed on once");
    assert_eq!(net.counter(7, "route_duplicates"), 1);
    assert_eq!(net.counter(D, "route_retransmissions"), 1);
    assert_eq!(net.counter(D, "routes_abandoned"), 0);
    let route_outputs = net.log.iter().filter(|(_, n, o)| *n == 7 && matches!(o, Output::SetPairRoute { .. })).count();
    assert_eq!(route_outputs, 2, "one route each way, set once");
    // The same at an end: S's ack to 6 lost once; S must not take the forward path twice.
    let net = fig2_with_losses(Config::default(), &[((S, 6, ROUTE_ACK), 1)]);
    assert_eq!(net.sent(6, S, ROUTE).len(), 2);
    assert_eq!(net.counter(S, "route_duplicates"), 1);
    let releases = net.log.iter().filter(|(_, n, o)| *n == S && matches!(o, Output::Release { .. })).count();
    assert_eq!(releases, 1);
    assert_eq!(net.nodes[S].counters().discoveries_succeeded, 1);
}

#[test]
fn a_newer_route_for_the_same_path_replaces_an_unacknowledged_older_one() {
    // Relay 7 alone: D's forward ROUTE over 6 is never acknowledged; 100 ms
    // later a newer forward ROUTE of the same pair goes over 4 instead.
    let mut relay = Copas::new(Config::default(), addr(7), 7, Duration::ZERO);
    let mut out = Vec::new();
    let route = |id, via| Route { role: Role::Forward, toward_dst: false, id, contention: 0, choice: 0, path: vec![addr(S), addr(via), addr(7), addr(D)] };
    let old = Message::Route(route(1, 6)).encode();
    let new = Message::Route(route(2, 4)).encode();
    relay.handle(ms(1000), Input::Control { from: addr(D), ttl: 1, payload: &old }, &mut out);
    relay.handle(ms(1100), Input::Control { from: addr(D), ttl: 1, payload: &new }, &mut out);
    out.clear();
    for t in (1110..=1400).step_by(10) {
        relay.handle_timeout(ms(t), &mut out);
    }
    let resent: Vec<(Ipv4Addr, Vec<u8>)> =
        out.iter().filter_map(|o| if let Output::Send { to, payload, .. } = o { Some((*to, payload.clone())) } else { None }).collect();
    assert_eq!(resent, vec![(addr(4), new)], "only the newer ROUTE is sent again, 200 ms after it");
    assert_eq!(relay.counters().protocol.get("routes_abandoned"), None);
}

// --- a new choice when the chooser's own ROUTE dies at its first hop ------------------------

fn path(nodes: &[usize]) -> Vec<Ipv4Addr> {
    nodes.iter().map(|&n| addr(n)).collect()
}

/// The (role, path) of every path `node` selected for `cause`, in order.
fn selections(net: &Net, node: usize, cause: &str) -> Vec<(&'static str, Vec<Ipv4Addr>)> {
    net.events(node)
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::PathSelected { role, path, cause: c, .. } if c == cause => Some((role, path)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_route_never_acknowledged_by_the_first_hop_is_chosen_again_without_that_neighbour() {
    // D's forward ROUTE over k (D-7-6-S) never reaches 7; S asks only once in this time.
    let config = Config { discovery_timeout_ms: 10_000, ..Config::default() };
    let mut net = fig2_with_losses(config, &[((D, 7, ROUTE), u32::MAX)]);
    net.run_until(ms(12_000));
    assert_eq!(net.sent(D, 7, ROUTE).len(), 4, "abandoned after the retries, as before");
    assert_eq!(net.counter(D, "routes_abandoned"), 1);
    assert_eq!(net.counter(D, "route_rechoices"), 1);
    // Of i and j (k goes through 7), j is the one disjoint from the ACKs' i, which stays.
    assert_eq!(selections(&net, D, "unacked"), vec![("forward", path(&[S, 4, 5, D]))]);
    assert_eq!(net.sent(D, 5, ROUTE).len(), 1, "the new ROUTE went once: acknowledged");
    assert_eq!(net.walk(S, D), vec![S, 4, 5, D], "data over j");
    assert_eq!(net.walk(D, S), vec![D, 3, 2, S], "ACKs still over i");
    let paths = (path(&[S, 4, 5, D]), path(&[D, 3, 2, S]).into_iter().rev().collect::<Vec<_>>());
    for end in [S, D] {
        let (forward, reverse) = net.nodes[end].paths(addr(S), addr(D)).unwrap();
        assert_eq!((forward.to_vec(), reverse.to_vec()), paths.clone(), "node {end}'s pair");
    }
    assert_eq!(net.nodes[S].counters().discoveries_succeeded, 1);
    assert_eq!(net.nodes[S].counters().discoveries_failed, 0);
}

#[test]
fn a_new_choice_reaches_an_end_that_took_the_first_one_already() {
    // 3 gets D's reverse ROUTE and passes it on, but its acks never reach D:
    // D gives up on it and chooses again; S, which took the first, takes the new one too.
    let config = Config { discovery_timeout_ms: 10_000, ..Config::default() };
    let mut net = fig2_with_losses(config, &[((3, D, ROUTE_ACK), u32::MAX)]);
    assert_eq!(net.walk(D, S), vec![D, 3, 2, S], "the first choice arrived");
    net.run_until(ms(12_000));
    assert_eq!(selections(&net, D, "unacked"), vec![("reverse", path(&[S, 4, 5, D]))]);
    assert_eq!(net.walk(D, S), vec![D, 5, 4, S]);
    assert_eq!(net.nodes[S].paths(addr(S), addr(D)), net.nodes[D].paths(addr(S), addr(D)), "both ends agree");
    assert_eq!(net.counter(S, "route_duplicates"), 0, "the new choice is no copy of the first");
}

#[test]
fn without_a_candidate_avoiding_the_silent_neighbour_the_route_is_only_abandoned() {
    // Every path to D ends through 4: S-2-4-D and S-3-4-D.
    let config = Config { discovery_timeout_ms: 10_000, ..Config::default() };
    let mut net = Net::with_config(5, &[(S, 2), (S, 3), (2, 4), (3, 4), (4, D)], config);
    net.losses.insert((D, 4, ROUTE), u32::MAX);
    net.send_data(S, D);
    net.run_until(ms(8000));
    assert_eq!(net.sent(D, 4, ROUTE).len(), 4);
    assert_eq!((net.counter(D, "routes_abandoned"), net.counter(D, "route_rechoices")), (1, 0));
    assert!(net.events(D).iter().any(|(_, e)| matches!(e, Event::RouteAbandoned { .. })));
    assert!(selections(&net, D, "unacked").is_empty());
    assert!(net.nodes[D].choices.is_empty(), "nothing left to choose from: forgotten");
}

#[test]
fn a_neighbour_that_never_acknowledged_is_left_out_of_the_next_discovery_too() {
    // D's forward ROUTE over k dies at 7 (one retry: given up 600 ms after the
    // first try, at about 7.1 s) and D chooses j instead; at 8 s S asks again.
    for (silent_hold_ms, forward, reverse, avoided) in [(10_000, [S, 2, 3, D], [S, 4, 5, D], 1), (0, [S, 6, 7, D], [S, 2, 3, D], 0)] {
        let config = Config { route_retries: 1, silent_hold_ms, ..Config::default() };
        let mut net = fig2_with_losses(config, &[((D, 7, ROUTE), u32::MAX)]);
        net.run_until(ms(8000));
        assert_eq!(selections(&net, D, "unacked"), vec![("forward", path(&[S, 4, 5, D]))]);
        net.send_data(S, D);
        net.run_until(ms(10_000));
        // The first discovery's two; without 7, the least contended disjoint pair is i and j (k and i with it).
        assert_eq!(selections(&net, D, "discovery")[2..], [("forward", path(&forward)), ("reverse", path(&reverse))], "silent_hold_ms {silent_hold_ms}");
        assert_eq!(net.counter(D, "silent_neighbors_avoided"), avoided);
    }
}

#[test]
fn a_neighbour_still_silent_after_a_retransmission_is_left_out_of_a_newer_choice() {
    // D's forward ROUTE over k waits for 7's ack (sent at about 6.5, 6.7, 7.1
    // and 7.9 s) when S asks again at 7.5 s; D chooses again at about 9 s, before
    // it would give the ROUTE up (9.5 s).
    let config = Config { discovery_timeout_ms: 2500, ..Config::default() };
    let mut net = fig2_with_losses(config, &[((D, 7, ROUTE), u32::MAX)]);
    net.run_until(ms(9200));
    let choices = selections(&net, D, "discovery");
    let (first, i, j, k) = (&choices[..2], path(&[S, 2, 3, D]), path(&[S, 4, 5, D]), path(&[S, 6, 7, D]));
    assert_eq!(first, [("forward", k), ("reverse", i.clone())]);
    assert_eq!(choices[2..], [("forward", i), ("reverse", j)], "the second choice leaves 7 out");
    assert_eq!(net.counter(D, "silent_neighbors_avoided"), 1);
    assert_eq!(net.counter(D, "routes_abandoned"), 0, "the newer forward ROUTE replaced the one 7 held up");
}

#[test]
fn a_silent_neighbour_is_left_out_wherever_it_is_on_the_path() {
    // S-2-D, S-2-3-D and S-4-5-D; D's neighbour 2 never acknowledges. The first
    // choice: S-2-D forward (mu 1), S-4-5-D reverse. S asks again at 7.5 s;
    // S-2-3-D starts at D's neighbour 3 but crosses 2 further on.
    let config = Config { discovery_timeout_ms: 2500, ..Config::default() };
    let mut net = Net::with_config(6, &[(S, 2), (2, D), (2, 3), (3, D), (S, 4), (4, 5), (5, D)], config);
    net.losses.insert((D, 2, ROUTE), u32::MAX);
    for (node, rate) in [(2, 1), (3, 1), (4, 3), (5, 3)] {
        net.backoff_rate[node] = rate;
    }
    net.run_until(ms(5000));
    net.send_data(S, D);
    net.run_until(ms(9200));
    let choices = selections(&net, D, "discovery");
    assert_eq!(choices[..2], [("forward", path(&[S, 2, D])), ("reverse", path(&[S, 4, 5, D]))]);
    assert_eq!(choices[2..], [("both", path(&[S, 4, 5, D]))], "nothing through 2: the one path left, both ways");
    assert_eq!(net.counter(D, "silent_neighbors_avoided"), 1);
}

#[test]
fn the_candidates_are_forgotten_once_the_routes_are_acknowledged() {
    let mut net = Net::new(8, &THREE_ROUTES);
    net.run_until(ms(1000));
    net.send_data(S, D);
    // Up to D's choice: its candidates are kept while the ROUTEs are on their way.
    while !net.events(D).iter().any(|(_, e)| matches!(e, Event::PathSelected { .. })) {
        net.run_until(net.now + ms(1));
    }
    assert_eq!(net.nodes[D].choices.len(), 1);
    // Both ROUTEs acknowledged (one hop and back: 2 ms): forgotten, long before route_ack_window.
    net.run_until(net.now + ms(5));
    assert_eq!(net.counter(D, "routes_acked"), 2);
    assert!(net.nodes[D].choices.is_empty());
}
