//! The AODV core with scripted time: single nodes fed by hand, and small
//! networks where a harness carries control packets between neighbours.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use meshemu_ondemand::{Input, Protocol, BROADCAST};

use crate::packet::{Message, Rrep, Rreq};
use crate::{Aodv, Config, Event, Output, PrecursorRule};

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

fn addr(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, index as u8 + 1)
}

fn rreqs(outputs: &[Output]) -> Vec<(u8, Rreq)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { to, ttl, payload } if *to == BROADCAST => match Message::decode(payload) {
                Ok(Message::Rreq(rreq)) => Some((*ttl, rreq)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A network of AODV nodes: a packet sent at t reaches the sender's
/// neighbours (all of them, or the addressed one) at t + 1 ms.
struct Net {
    nodes: Vec<Aodv>,
    links: BTreeSet<(usize, usize)>,
    now: Duration,
    in_flight: Vec<(Duration, usize, Ipv4Addr, u8, Vec<u8>)>,
    /// The kernel routes of every node: dst -> next hop.
    kernel: Vec<BTreeMap<Ipv4Addr, Ipv4Addr>>,
    /// Every output, with the node and the time.
    log: Vec<(Duration, usize, Output)>,
}

impl Net {
    fn new(count: usize, config: Config) -> Net {
        Net {
            nodes: (0..count).map(|i| Aodv::new(config.clone(), addr(i), i as u64, Duration::ZERO)).collect(),
            links: BTreeSet::new(),
            now: Duration::ZERO,
            in_flight: Vec::new(),
            kernel: vec![BTreeMap::new(); count],
            log: Vec::new(),
        }
    }

    fn chain(count: usize, config: Config) -> Net {
        let mut net = Net::new(count, config);
        for i in 1..count {
            net.link(i - 1, i);
        }
        net
    }

    fn link(&mut self, a: usize, b: usize) {
        self.links.insert((a.min(b), a.max(b)));
    }

    fn unlink(&mut self, a: usize, b: usize) {
        self.links.remove(&(a.min(b), a.max(b)));
    }

    fn linked(&self, a: usize, b: usize) -> bool {
        self.links.contains(&(a.min(b), a.max(b)))
    }

    fn input(&mut self, node: usize, input: Input<'_>) {
        let mut out = Vec::new();
        self.nodes[node].handle(self.now, input, &mut out);
        self.apply(node, out);
    }

    fn timeout(&mut self, node: usize) {
        let mut out = Vec::new();
        self.nodes[node].handle_timeout(self.now, &mut out);
        self.apply(node, out);
    }

    fn apply(&mut self, node: usize, out: Vec<Output>) {
        for output in out {
            match &output {
                Output::Send { to, ttl, payload } => {
                    for peer in 0..self.nodes.len() {
                        let addressed = *to == BROADCAST || *to == addr(peer);
                        if peer != node && addressed && self.linked(node, peer) {
                            self.in_flight.push((self.now + ms(1), peer, addr(node), *ttl, payload.clone()));
                        }
                    }
                }
                Output::SetRoute { dst, next_hop, .. } => {
                    self.kernel[node].insert(*dst, *next_hop);
                }
                Output::DeleteRoute { dst } => {
                    self.kernel[node].remove(dst);
                }
                _ => {}
            }
            self.log.push((self.now, node, output));
        }
    }

    /// Runs every delivery and timer up to `until`.
    fn run_until(&mut self, until: Duration) {
        loop {
            let delivery = self.in_flight.iter().map(|f| f.0).min();
            let timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
            let Some(next) = delivery.into_iter().chain(timer).min().filter(|&t| t <= until) else { break };
            self.now = self.now.max(next);
            if delivery == Some(next) {
                let position = self.in_flight.iter().position(|f| f.0 == next).unwrap();
                let (_, to, from, ttl, payload) = self.in_flight.remove(position);
                self.input(to, Input::Control { from, ttl, payload: &payload });
            } else {
                for node in 0..self.nodes.len() {
                    if self.nodes[node].poll_timeout().is_some_and(|t| t <= self.now) {
                        self.timeout(node);
                    }
                }
            }
        }
        self.now = until;
    }

    /// The path data would take from `src` to `dst` over the kernel routes.
    fn path(&self, src: usize, dst: usize) -> Option<Vec<usize>> {
        let mut path = vec![src];
        while *path.last().unwrap() != dst {
            let here = *path.last().unwrap();
            let next_hop = self.kernel[here].get(&addr(dst))?;
            let next = (0..self.nodes.len()).find(|&i| addr(i) == *next_hop)?;
            if path.contains(&next) || path.len() > self.nodes.len() {
                return None;
            }
            path.push(next);
        }
        Some(path)
    }

    fn events(&self, node: usize) -> Vec<(Duration, Event)> {
        self.log
            .iter()
            .filter(|(_, n, _)| *n == node)
            .filter_map(|(t, _, o)| match o {
                Output::Event(event) => Some((*t, event.clone())),
                _ => None,
            })
            .collect()
    }

    fn outputs(&self, node: usize) -> Vec<Output> {
        self.log.iter().filter(|(_, n, _)| *n == node).map(|(_, _, o)| o.clone()).collect()
    }

    /// Data flows `src` -> `dst` (and back) every 100 ms until `until`, as the
    /// daemon reports it from the kernel's route-use lists.
    fn traffic(&mut self, src: usize, dst: usize, until: Duration) {
        while self.now < until {
            if let Some(path) = self.path(src, dst) {
                for &node in &path {
                    self.input(node, Input::RouteUsed { addr: addr(dst) });
                    self.input(node, Input::RouteUsed { addr: addr(src) });
                }
            }
            let next = self.now + ms(100);
            self.run_until(next.min(until));
        }
    }
}

fn quiet() -> Config {
    // No HELLOs (and so link-layer feedback) unless a test wants them: fewer packets to look at.
    Config { hello_interval_ms: 0, link_layer_feedback: true, broadcast_jitter_ms: 0, ..Config::default() }
}

#[test]
fn rreq_for_unknown_destination_starts_expanding_ring() {
    let config = Config { hello_interval_ms: 0, link_layer_feedback: true, ..Config::default() };
    let mut node = Aodv::new(config.clone(), addr(0), 1, Duration::ZERO);
    let target = addr(9);
    let mut sent = Vec::new();
    let mut out = Vec::new();
    node.handle(ms(0), Input::NoRoute { src: addr(0), dst: target, local: true }, &mut out);
    assert!(out.contains(&Output::Event(Event::DiscoveryStarted { dst: target })));
    sent.push((ms(0), rreqs(&out)));
    let mut dropped_at = None;
    while let Some(now) = node.poll_timeout() {
        let mut out = Vec::new();
        node.handle_timeout(now, &mut out);
        sent.push((now, rreqs(&out)));
        if out.contains(&Output::Drop { dst: target }) {
            dropped_at = Some(now);
            break;
        }
    }
    let sent: Vec<(Duration, u8)> =
        sent.into_iter().flat_map(|(t, r)| r.into_iter().map(move |(ttl, _)| (t, ttl))).collect();
    // TTL 2, 4, 6 each wait 2 * 40 ms * (TTL + 2); then the diameter (35),
    // retried twice with waits 2.8 s, 5.6 s, 11.2 s.
    let expected = [(0, 2), (320, 4), (320 + 480, 6), (320 + 480 + 640, 35), (4240, 35), (9840, 35)];
    let expected: Vec<(Duration, u8)> = expected.iter().map(|&(t, ttl)| (ms(t), ttl)).collect();
    assert_eq!(sent, expected);
    assert_eq!(dropped_at, Some(ms(9840 + 11200)));
    let counters = node.counters();
    assert_eq!((counters.discoveries_started, counters.discoveries_failed), (1, 1));
    assert_eq!(counters.control_sent["rreq"].packets, 6);
}

#[test]
fn first_rreq_asks_only_the_destination_with_an_unknown_sequence_number() {
    let mut node = Aodv::new(quiet(), addr(0), 1, Duration::ZERO);
    let mut out = Vec::new();
    node.handle(ms(5), Input::NoRoute { src: addr(0), dst: addr(3), local: true }, &mut out);
    let (ttl, rreq) = rreqs(&out).remove(0);
    assert_eq!(ttl, 2);
    assert!(rreq.destination_only && rreq.unknown_seq && !rreq.gratuitous);
    assert_eq!((rreq.orig, rreq.orig_seq, rreq.hop_count), (addr(0), 1, 0));
}

#[test]
fn expanding_ring_off_floods_the_whole_network_at_once() {
    let config = Config { expanding_ring_search: false, ..quiet() };
    let mut node = Aodv::new(config, addr(0), 1, Duration::ZERO);
    let mut out = Vec::new();
    node.handle(ms(0), Input::NoRoute { src: addr(0), dst: addr(3), local: true }, &mut out);
    assert_eq!(rreqs(&out)[0].0, 35);
}

#[test]
fn rreq_rate_limit_postpones_the_eleventh_discovery() {
    let mut node = Aodv::new(quiet(), addr(0), 1, Duration::ZERO);
    let mut out = Vec::new();
    for i in 0..11 {
        node.handle(ms(0), Input::NoRoute { src: addr(0), dst: addr(100 + i), local: true }, &mut out);
    }
    let mut sent: Vec<(Duration, Ipv4Addr)> = rreqs(&out).into_iter().map(|(_, r)| (ms(0), r.dst)).collect();
    assert_eq!(sent.len(), 10);
    while let Some(now) = node.poll_timeout().filter(|&t| t < ms(5000)) {
        let mut out = Vec::new();
        node.handle_timeout(now, &mut out);
        sent.extend(rreqs(&out).into_iter().map(|(_, r)| (now, r.dst)));
    }
    for &(start, _) in &sent {
        let in_window = sent.iter().filter(|(t, _)| *t >= start && *t < start + ms(1000)).count();
        assert!(in_window <= 10, "{in_window} RREQs in the second from {start:?}");
    }
    let first_of_eleventh = sent.iter().find(|(_, dst)| *dst == addr(110)).map(|(t, _)| *t);
    assert!(first_of_eleventh.is_some_and(|t| t >= ms(1000)), "{first_of_eleventh:?}");
}

#[test]
fn discovery_over_a_chain_installs_routes_both_ways_and_releases_held_packets() {
    let mut net = Net::chain(5, quiet());
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(4), local: true });
    net.run_until(ms(2000));
    assert_eq!(net.path(0, 4), Some(vec![0, 1, 2, 3, 4]));
    assert_eq!(net.path(4, 0), Some(vec![4, 3, 2, 1, 0]));
    let events = net.events(0);
    let succeeded = events.iter().find_map(|(t, e)| match e {
        Event::DiscoverySucceeded { hops, .. } => Some((*t, *hops)),
        _ => None,
    });
    // TTL 2 found nothing (320 ms), TTL 4 reaches 4 hops: 4 ms out, 4 ms back.
    assert_eq!(succeeded, Some((ms(328), 4)));
    assert!(net.outputs(0).contains(&Output::Release { dst: addr(4), spacing: Duration::ZERO }));
    // Only the destination answered (D flag): one RREP per hop on the way back.
    let rreps: u64 = (0..5).map(|i| net.nodes[i].counters().control_sent.get("rrep").map_or(0, |t| t.packets)).sum();
    assert_eq!(rreps, 4);
}

#[test]
fn intermediate_node_answers_when_allowed_and_tells_the_destination() {
    let config = Config { intermediate_replies: true, gratuitous_rrep: true, ..quiet() };
    let mut net = Net::chain(4, config);
    net.input(1, Input::NoRoute { src: addr(1), dst: addr(3), local: true });
    net.run_until(ms(1000));
    assert_eq!(net.path(1, 3), Some(vec![1, 2, 3]));
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(ms(1100));
    assert_eq!(net.path(0, 3), Some(vec![0, 1, 2, 3]));
    // Node 1 answered from its table; node 3 learnt the way to 0 from the gratuitous RREP.
    assert_eq!(net.nodes[3].counters().control_received.get("rreq").map_or(0, |t| t.packets), 1);
    assert_eq!(net.path(3, 0), Some(vec![3, 2, 1, 0]));
}

#[test]
fn destination_only_flag_keeps_intermediate_nodes_quiet() {
    let mut net = Net::chain(4, quiet());
    net.input(1, Input::NoRoute { src: addr(1), dst: addr(3), local: true });
    net.run_until(ms(1000));
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(ms(2000));
    assert_eq!(net.path(0, 3), Some(vec![0, 1, 2, 3]));
    // The second RREQ travelled to the destination itself.
    assert_eq!(net.nodes[3].counters().control_received["rreq"].packets, 2);
}

#[test]
fn destination_takes_the_sequence_number_the_originator_expects() {
    let mut node = Aodv::new(quiet(), addr(1), 1, Duration::ZERO);
    let first = Rreq {
        join: false,
        repair: false,
        gratuitous: false,
        destination_only: true,
        unknown_seq: false,
        hop_count: 0,
        id: 1,
        dst: addr(1),
        dst_seq: 1,
        orig: addr(0),
        orig_seq: 5,
    };
    let rreq = Message::Rreq(first.clone());
    let mut out = Vec::new();
    node.handle(ms(0), Input::Control { from: addr(0), ttl: 2, payload: &rreq.encode() }, &mut out);
    assert_eq!(node.sequence_number(), 1);
    // The same RREQ again (relayed by another neighbour) is a duplicate.
    let mut out = Vec::new();
    node.handle(ms(1), Input::Control { from: addr(0), ttl: 2, payload: &rreq.encode() }, &mut out);
    assert!(!out.iter().any(|o| matches!(o, Output::Send { .. })));
    assert_eq!(node.counters().ignored, 1);
    // RFC 3561 6.1: asked for more than the next number, it answers with the larger one.
    let further = Message::Rreq(Rreq { id: 2, dst_seq: 7, ..first });
    node.handle(ms(2), Input::Control { from: addr(0), ttl: 2, payload: &further.encode() }, &mut out);
    assert_eq!(node.sequence_number(), 7);
}

#[test]
fn ns2_preset_destination_renumbers_every_reply() {
    let mut node = Aodv::new(Config::ns2(), addr(1), 1, Duration::ZERO);
    let rreq = Rreq {
        join: false,
        repair: false,
        gratuitous: false,
        destination_only: false,
        unknown_seq: false,
        hop_count: 0,
        id: 1,
        dst: addr(1),
        dst_seq: 4,
        orig: addr(0),
        orig_seq: 5,
    };
    let mut out = Vec::new();
    let first = Message::Rreq(rreq.clone());
    node.handle(ms(0), Input::Control { from: addr(0), ttl: 2, payload: &first.encode() }, &mut out);
    assert_eq!(node.sequence_number(), 5, "ns-2: max(own, asked) + 1");
    let second = Message::Rreq(Rreq { id: 2, ..rreq });
    node.handle(ms(1), Input::Control { from: addr(0), ttl: 2, payload: &second.encode() }, &mut out);
    assert_eq!(node.sequence_number(), 6, "a reply to the same question is news again");
}

/// A node between an originator (0) and a destination (4) that already has
/// a route to 4 through neighbour 2, with the number and hop count of the
/// reply that now comes back through neighbour 3: the reply is no news to
/// it. What it sends towards the originator.
fn relay_of_a_reply_that_is_no_news(config: Config) -> (Vec<Rrep>, Aodv) {
    let mut node = Aodv::new(config, addr(1), 1, Duration::ZERO);
    let mut out = Vec::new();
    let known = Rrep {
        repair: false,
        ack_required: false,
        prefix_size: 0,
        hop_count: 1,
        dst: addr(4),
        dst_seq: 5,
        orig: addr(1),
        lifetime_ms: 10_000,
    };
    node.handle(ms(0), Input::Control { from: addr(2), ttl: 1, payload: &Message::Rrep(known.clone()).encode() }, &mut out);
    assert_eq!(node.route(addr(4)), Some((addr(2), 2)));
    let rreq = Rreq {
        join: false,
        repair: false,
        gratuitous: false,
        destination_only: true,
        unknown_seq: true,
        hop_count: 0,
        id: 1,
        dst: addr(4),
        dst_seq: 0,
        orig: addr(0),
        orig_seq: 3,
    };
    node.handle(ms(10), Input::Control { from: addr(0), ttl: 30, payload: &Message::Rreq(rreq).encode() }, &mut out);
    let reply = Rrep { orig: addr(0), ..known };
    let mut out = Vec::new();
    node.handle(ms(20), Input::Control { from: addr(3), ttl: 1, payload: &Message::Rrep(reply).encode() }, &mut out);
    let sent = out
        .iter()
        .filter_map(|o| match o {
            Output::Send { to, payload, .. } if *to == addr(0) => match Message::decode(payload) {
                Ok(Message::Rrep(rrep)) => Some(rrep),
                _ => None,
            },
            _ => None,
        })
        .collect();
    (sent, node)
}

#[test]
fn a_reply_that_is_no_news_goes_on_as_the_own_route() {
    let (sent, node) = relay_of_a_reply_that_is_no_news(quiet());
    let [relayed] = sent.as_slice() else { panic!("one reply towards the originator: {sent:?}") };
    assert_eq!((relayed.dst, relayed.dst_seq, relayed.hop_count, relayed.orig), (addr(4), 5, 2, addr(0)));
    assert_eq!(node.route(addr(4)), Some((addr(2), 2)), "the own route stays");
    assert_eq!(node.counters().protocol.get("replies_relayed_as_own_route"), Some(&1));
}

#[test]
fn without_relay_every_reply_a_reply_that_is_no_news_ends_there() {
    let (sent, node) = relay_of_a_reply_that_is_no_news(Config { relay_every_reply: false, ..quiet() });
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(node.counters().ignored, 1);
}

#[test]
fn a_neighbour_met_and_lost_again_and_again_is_still_found() {
    // Mobility: 2 comes into 0's range (0 hears it relay someone's RREQ: a
    // route without a new number) and leaves (a link failure raises the
    // number) several times. 0's discovery then asks for a number 2 never
    // had; 2 must still answer.
    let mut net = Net::chain(3, quiet());
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
    net.run_until(ms(1000));
    assert_eq!(net.path(0, 2), Some(vec![0, 1, 2]));
    for id in 1..=3 {
        let relayed = Message::Rreq(Rreq {
            join: false,
            repair: false,
            gratuitous: false,
            destination_only: false,
            unknown_seq: true,
            hop_count: 1,
            id,
            dst: addr(9),
            dst_seq: 0,
            orig: addr(8),
            orig_seq: id,
        });
        net.input(0, Input::Control { from: addr(2), ttl: 5, payload: &relayed.encode() });
        assert_eq!(net.path(0, 2), Some(vec![0, 2]));
        net.input(0, Input::LinkFailed { neighbor: addr(2) });
        net.run_until(net.now + ms(100));
    }
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
    net.run_until(net.now + ms(1000));
    assert_eq!(net.path(0, 2), Some(vec![0, 1, 2]));
}

#[test]
fn malformed_and_own_packets_are_counted_and_dropped() {
    let mut node = Aodv::new(quiet(), addr(0), 1, Duration::ZERO);
    let mut out = Vec::new();
    node.handle(ms(0), Input::Control { from: addr(1), ttl: 1, payload: &[1, 0, 0] }, &mut out);
    node.handle(ms(0), Input::Control { from: addr(1), ttl: 1, payload: &[] }, &mut out);
    node.handle(ms(0), Input::Control { from: addr(0), ttl: 1, payload: &Message::RrepAck.encode() }, &mut out);
    assert_eq!((node.counters().malformed, node.counters().ignored), (2, 1));
    assert!(out.iter().all(|o| matches!(o, Output::Event(Event::Malformed { .. }))));
}

#[test]
fn routes_expire_unless_data_uses_them() {
    let mut net = Net::chain(3, quiet());
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
    net.run_until(ms(500));
    assert!(net.path(0, 2).is_some());
    net.traffic(0, 2, ms(20_000));
    assert_eq!(net.path(0, 2), Some(vec![0, 1, 2]), "used routes stay");
    net.run_until(ms(20_000 + 5_000 + 100));
    assert!(!net.kernel[0].contains_key(&addr(2)), "idle routes expire after the active route timeout");
    assert!(!net.kernel[1].contains_key(&addr(2)));
}

#[test]
fn hello_loss_breaks_link_and_sends_rerr() {
    let config = Config { broadcast_jitter_ms: 0, ..Config::default() };
    let mut net = Net::chain(5, config);
    net.run_until(ms(3000)); // HELLOs: every node knows its neighbours
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(4), local: true });
    net.traffic(0, 4, ms(10_000));
    assert_eq!(net.path(0, 4), Some(vec![0, 1, 2, 3, 4]));
    net.unlink(3, 4);
    net.traffic(0, 4, ms(14_000));
    // Node 3 declares the link lost after 2 HELLO intervals (+100 ms slack) of silence.
    let broken = net.events(3).into_iter().find_map(|(t, e)| match e {
        Event::LinkBroken { neighbor, cause } if neighbor == addr(4) => Some((t, cause)),
        _ => None,
    });
    let (broken_at, cause) = broken.expect("link 3-4 declared broken");
    assert_eq!(cause, "hello loss");
    assert!(broken_at > ms(10_000) && broken_at <= ms(10_000 + 2_100), "at {broken_at:?}");
    // The RERR went hop by hop back to the source, which dropped its route.
    let rerr_at_source = net.events(0).into_iter().find_map(|(t, e)| match e {
        Event::RerrReceived { unreachable, .. } if unreachable.contains(&addr(4)) => Some(t),
        _ => None,
    });
    assert_eq!(rerr_at_source, Some(broken_at + ms(3)));
    assert!(!net.kernel[0].contains_key(&addr(4)));
    assert_eq!(net.nodes[3].counters().rerr_sent, 1);
}

/// The paper's Fig. 1: the string A-B-C-D-E and F next to D and E.
fn fig1(config: Config) -> Net {
    let mut net = Net::new(6, config);
    for (a, b) in [(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (4, 5)] {
        net.link(a, b);
    }
    net
}

#[test]
fn fig1_break_is_repaired_through_the_new_neighbour() {
    // A-B-C-D-E and F next to D and E: E moves out of D's range.
    let config = Config { broadcast_jitter_ms: 0, ..Config::default() };
    let (a, d, e) = (0, 3, 4);
    let mut net = fig1(config);
    net.run_until(ms(3000));
    net.input(a, Input::NoRoute { src: addr(a), dst: addr(e), local: true });
    net.traffic(a, e, ms(10_000));
    assert_eq!(net.path(a, e), Some(vec![0, 1, 2, 3, 4]));
    net.unlink(d, e);
    net.traffic(a, e, ms(11_000));
    // The source's next packet finds no route once the RERR arrived: a new discovery.
    net.run_until(ms(13_000));
    net.input(a, Input::NoRoute { src: addr(a), dst: addr(e), local: true });
    net.traffic(a, e, ms(16_000));
    assert_eq!(net.path(a, e), Some(vec![0, 1, 2, 3, 5, 4]));
    assert_eq!(net.path(e, a), Some(vec![4, 5, 3, 2, 1, 0]));
    assert_eq!(net.nodes[a].counters().discoveries_succeeded, 2);
}

#[test]
fn local_repair_finds_the_new_neighbour_without_telling_the_source() {
    let config = Config { broadcast_jitter_ms: 0, local_repair: true, ..Config::default() };
    let (a, d, e) = (0, 3, 4);
    let mut net = fig1(config);
    net.run_until(ms(3000));
    net.input(a, Input::NoRoute { src: addr(a), dst: addr(e), local: true });
    net.traffic(a, e, ms(10_000));
    net.unlink(d, e);
    net.traffic(a, e, ms(14_000));
    assert_eq!(net.path(a, e), Some(vec![0, 1, 2, 3, 5, 4]));
    assert!(net.events(d).iter().any(|(_, e)| matches!(e, Event::LocalRepairStarted { .. })));
    // The repaired route is one hop longer: the RERR carries the N flag and the source keeps its route.
    assert_eq!(net.nodes[a].counters().discoveries_started, 1);
    assert_eq!(net.nodes[a].counters().route_breaks, 0);
}

#[test]
fn link_layer_feedback_breaks_at_once_only_when_on() {
    let failures = [
        (Input::LinkFailed { neighbor: addr(2) }, "link layer"),
        (Input::ResolutionFailed { neighbor: addr(2) }, "address resolution"),
    ];
    for (failure, cause) in failures {
        for feedback in [false, true] {
            let config = Config { link_layer_feedback: feedback, broadcast_jitter_ms: 0, ..Config::default() };
            let mut net = Net::chain(3, config);
            net.run_until(ms(3000));
            net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
            net.run_until(ms(3100));
            net.input(1, failure.clone());
            assert_eq!(net.kernel[1].contains_key(&addr(2)), !feedback, "{failure:?}");
            let causes: Vec<_> = net
                .events(1)
                .into_iter()
                .filter_map(|(_, event)| match event {
                    Event::LinkBroken { cause, .. } => Some(cause),
                    _ => None,
                })
                .collect();
            assert_eq!(causes, if feedback { vec![cause] } else { vec![] }, "{failure:?}");
        }
    }
}

#[test]
fn forwarded_packet_without_route_gets_a_rerr() {
    let mut node = Aodv::new(quiet(), addr(1), 1, Duration::ZERO);
    let mut out = Vec::new();
    node.handle(ms(0), Input::NoRoute { src: addr(0), dst: addr(7), local: false }, &mut out);
    let rerr = out.iter().find_map(|o| match o {
        Output::Send { to, ttl: 1, payload } if *to == BROADCAST => Message::decode(payload).ok(),
        _ => None,
    });
    assert!(matches!(rerr, Some(Message::Rerr(r)) if r.unreachable == vec![(addr(7), 0)]));
    assert_eq!(node.counters().forward_no_route, 1);
}

#[test]
fn rerr_rate_limit_caps_rerrs_per_second() {
    let mut node = Aodv::new(quiet(), addr(1), 1, Duration::ZERO);
    let mut out = Vec::new();
    for i in 0..15 {
        node.handle(ms(i), Input::NoRoute { src: addr(0), dst: addr(50), local: false }, &mut out);
    }
    assert_eq!(node.counters().rerr_sent, 10);
    node.handle(ms(1000), Input::NoRoute { src: addr(0), dst: addr(50), local: false }, &mut out);
    assert_eq!(node.counters().rerr_sent, 11);
}

#[test]
fn missing_rrep_ack_blacklists_the_neighbour() {
    let config = Config { rrep_ack: true, ..quiet() };
    let mut net = Net::chain(3, config);
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
    net.run_until(ms(500));
    // Acks were answered: nobody is blacklisted, routes work.
    assert_eq!(net.path(0, 2), Some(vec![0, 1, 2]));
    assert!(net.nodes[1].counters().control_received.contains_key("rrep_ack"));
}

#[test]
fn same_seed_same_outputs() {
    let run = || {
        let mut net = Net::chain(4, Config::default());
        net.run_until(ms(2500));
        net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
        net.run_until(ms(5000));
        net.log
    };
    assert_eq!(run(), run());
}

#[test]
fn frames_heard_by_the_link_layer_keep_a_neighbour_alive_without_hellos() {
    let config = Config { broadcast_jitter_ms: 0, ..Config::default() };
    let mut net = Net::chain(3, config);
    net.run_until(ms(3000));
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
    net.run_until(ms(3500));
    net.unlink(1, 2); // HELLOs lost (a busy channel), data frames still arrive
    while net.now < ms(8000) {
        net.input(1, Input::NeighborHeard { neighbor: addr(2) });
        let next = net.now + ms(500);
        net.run_until(next);
    }
    assert_eq!(net.path(0, 2), Some(vec![0, 1, 2]));
    net.run_until(ms(10_200));
    assert!(!net.kernel[1].contains_key(&addr(2)), "silence breaks the link");
}

#[test]
fn acked_frames_keep_a_neighbour_alive_only_when_asked() {
    // A one-way flow: node 1 forwards to node 2, which sends nothing back but
    // HELLOs (lost here) and link-layer acknowledgements.
    for acked_frames_alive in [false, true] {
        let config = Config { broadcast_jitter_ms: 0, acked_frames_alive, ..Config::default() };
        let mut net = Net::chain(3, config);
        net.run_until(ms(3000));
        net.input(0, Input::NoRoute { src: addr(0), dst: addr(2), local: true });
        net.run_until(ms(3500));
        net.unlink(1, 2);
        while net.now < ms(8000) {
            net.input(1, Input::NeighborAcked { neighbor: addr(2) });
            let next = net.now + ms(500);
            net.run_until(next);
        }
        assert_eq!(net.kernel[1].contains_key(&addr(2)), acked_frames_alive);
    }
}

/// fig1 with ns-2's preset: A's route to E over A-B-C-D-E installed, data flowing.
fn fig1_ns2() -> Net {
    let config = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    let mut net = fig1(config);
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(4), local: true });
    net.traffic(0, 4, ms(3000));
    assert_eq!(net.path(0, 4), Some(vec![0, 1, 2, 3, 4]));
    net
}

fn rerrs_sent(net: &Net, node: usize) -> Vec<(Ipv4Addr, Vec<Ipv4Addr>)> {
    sent_since(net, 0, node)
        .into_iter()
        .filter_map(|(_, to, m)| match m {
            Message::Rerr(rerr) => Some((to, rerr.unreachable.iter().map(|(d, _)| *d).collect())),
            _ => None,
        })
        .collect()
}

#[test]
fn ns2_paces_a_release_after_a_reply_and_not_after_a_request() {
    let config = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    let mut net = Net::chain(5, config);
    net.input(4, Input::NoRoute { src: addr(4), dst: addr(0), local: true });
    // Node 0 holds a packet for node 4 just before node 4's RREQ reaches it (at 4 ms).
    net.run_until(Duration::from_micros(3500));
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(4), local: true });
    net.run_until(ms(100));
    // That RREQ's way back is node 0's route: what it held leaves at once (recvRequest).
    assert!(net.outputs(0).contains(&Output::Release { dst: addr(4), spacing: Duration::ZERO }));
    // Node 0's reply brings node 4's route: 10 ms apart (recvReply's ARP_DELAY).
    assert!(net.outputs(4).contains(&Output::Release { dst: addr(0), spacing: ms(10) }));
}

#[test]
fn ns2_rule_repairs_a_break_nearer_the_destination_without_telling_anyone() {
    let (a, d, e) = (0, 3, 4);
    let mut net = fig1_ns2();
    // A's data reaches D after 3 hops and has 1 to go: ns-2's rt_ll_failed repairs.
    net.nodes[d].data_hops(net.now, addr(e), 3);
    net.unlink(d, e);
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    assert_eq!(net.kernel[d].get(&addr(e)), Some(&addr(e)), "the route stays while the repair searches");
    assert!(!net.outputs(d).contains(&Output::Flush { neighbor: addr(e) }), "what is queued for E stays");
    assert!(net.outputs(d).contains(&Output::HoldForwarded { dst: addr(e) }), "what arrives for E waits");
    let sent = rreqs(&net.outputs(d));
    // D's route never went down: ns-2's rt_last_hop_count is still INFINITY2, the RREQ covers the network.
    assert_eq!(sent.last().map(|(ttl, rreq)| (*ttl, rreq.dst)), Some((30, addr(e))));
    net.traffic(a, e, ms(6000));
    assert_eq!(net.path(a, e), Some(vec![0, 1, 2, 3, 5, 4]));
    assert!(net.events(d).iter().any(|(_, ev)| matches!(ev, Event::LocalRepairStarted { .. })));
    let outputs = net.outputs(d);
    let hold = outputs.iter().position(|o| *o == Output::HoldForwarded { dst: addr(e) });
    let release = outputs.iter().position(|o| *o == Output::Release { dst: addr(e), spacing: ms(10) });
    assert!(hold < release, "the repair's reply releases what waited, 10 ms apart");
    // Upstream never heard of it, even though the new route is longer.
    assert!((0..net.nodes.len()).all(|n| rerrs_sent(&net, n).is_empty()));
    assert_eq!(net.nodes[a].counters().discoveries_started, 1);
    assert_eq!(net.nodes[d].counters().route_breaks, 0);
}

/// What `node` sent from the `from`-th output of the log on: (when, to, message).
fn sent_since(net: &Net, from: usize, node: usize) -> Vec<(Duration, Ipv4Addr, Message)> {
    net.log[from..]
        .iter()
        .filter(|(_, n, _)| *n == node)
        .filter_map(|(t, _, o)| match o {
            Output::Send { to, payload, .. } => Message::decode(payload).ok().map(|m| (*t, *to, m)),
            _ => None,
        })
        .collect()
}

#[test]
fn ns2_repair_asks_for_the_number_it_has_so_a_node_as_fresh_answers() {
    let (b, c, d, e) = (1, 2, 3, 4);
    let mut net = fig1_ns2();
    net.nodes[d].data_hops(net.now, addr(e), 3);
    net.unlink(d, e);
    let from = net.log.len();
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    net.run_until(net.now + ms(200));
    let relayed = |node| {
        sent_since(&net, from, node).iter().any(|(_, _, m)| matches!(m, Message::Rreq(r) if r.orig == addr(d)))
    };
    // C's route to E (through D) has the number D asks for: C answers instead
    // of relaying, as ns-2's recvRequest does, so the flood ends there.
    let answered = sent_since(&net, from, c)
        .iter()
        .any(|(_, to, m)| *to == addr(d) && matches!(m, Message::Rrep(r) if r.dst == addr(e)));
    assert!(answered && !relayed(c) && !relayed(b));
    // That answer is 3 hops, D's route 1: D waits for the destination's
    // renumbered reply, which came round through F.
    assert_eq!(net.path(d, e), Some(vec![3, 5, 4]));
}

#[test]
fn ns2_repair_ends_with_a_neighbour_as_near_as_the_old_next_hop() {
    // A 6-hop chain; node 2 relays node 6's packets to node 0 and has come 4
    // hops with 2 to go: its link to node 1 fails once (a collision: node 1
    // still hears it), and node 2 repairs.
    let config = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    let mut net = Net::chain(7, config);
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(6), local: true });
    net.traffic(0, 6, ms(3000));
    net.nodes[2].data_hops(net.now, addr(0), 4);
    let from = net.log.len();
    net.input(2, Input::LinkFailed { neighbor: addr(1) });
    assert!(net.nodes[2].discovering(addr(0)));
    net.run_until(net.now + ms(50));
    // Node 1 answers with its own route, 1 hop: 2 hops from node 2, as many as
    // before. That ends the repair; node 3's answer (through node 2) does not.
    assert!(!net.nodes[2].discovering(addr(0)), "{:?}", net.events(2));
    assert_eq!(net.path(2, 0), Some(vec![2, 1, 0]));
    assert!(sent_since(&net, from, 0).is_empty(), "the flood ended at node 1");
}

#[test]
fn a_failed_repair_drops_what_it_held() {
    let (a, d, e, f) = (0, 3, 4, 5);
    let mut net = fig1_ns2();
    net.nodes[d].data_hops(net.now, addr(e), 3);
    net.unlink(d, e);
    net.unlink(d, f); // no way round: the repair cannot succeed
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    net.traffic(a, e, ms(40_000));
    let outputs = net.outputs(d);
    let hold = outputs.iter().position(|o| *o == Output::HoldForwarded { dst: addr(e) });
    let drop = outputs.iter().position(|o| *o == Output::Drop { dst: addr(e) });
    assert!(hold.is_some() && hold < drop, "{outputs:?}");
    assert!(!outputs.iter().any(|o| matches!(o, Output::Release { dst, .. } if *dst == addr(e))));
}

#[test]
fn ns2_repair_of_a_route_that_went_down_before_starts_from_its_hop_count() {
    let (a, d, e) = (0, 3, 4);
    let mut net = fig1_ns2();
    // D-E breaks where no data was seen: a plain break (D's route goes down at 1 hop).
    net.unlink(d, e);
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    net.run_until(net.now + ms(100));
    net.input(a, Input::NoRoute { src: addr(a), dst: addr(e), local: true });
    net.traffic(a, e, net.now + ms(3000));
    assert_eq!(net.path(a, e), Some(vec![0, 1, 2, 3, 5, 4]));
    // Now D-F fails with data seen: max(2 hops now, 1 when it went down) + TTL_INCREMENT.
    net.nodes[d].data_hops(net.now, addr(e), 3);
    net.input(d, Input::LinkFailed { neighbor: addr(5) });
    assert_eq!(rreqs(&net.outputs(d)).last().map(|(ttl, _)| *ttl), Some(4));
}

#[test]
fn ns2_rule_breaks_a_link_nearer_the_source_and_broadcasts_the_rerr() {
    let (a, b, c, e) = (0, 1, 2, 4);
    let mut net = fig1_ns2();
    // B is 1 hop from A and 3 from E: the route breaks, as at a source.
    net.nodes[b].data_hops(net.now, addr(e), 1);
    net.input(b, Input::LinkFailed { neighbor: addr(c) });
    assert!(!net.kernel[b].contains_key(&addr(e)));
    let rerrs = rerrs_sent(&net, b);
    assert!(rerrs.iter().any(|(to, dsts)| *to == BROADCAST && dsts.contains(&addr(e))), "{rerrs:?}");
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[a].contains_key(&addr(e)), "the RERR took the source's route");
    // ns-2 drops what B queued for C (rt_ll_failed) and what A queued for B (recvError).
    assert!(net.outputs(b).contains(&Output::Flush { neighbor: addr(c) }));
    assert!(net.outputs(a).contains(&Output::Flush { neighbor: addr(b) }));
    assert_eq!(net.nodes[b].counters().route_breaks, 2, "E and C, its next hop: ns-2 breaks every route over the link");
}

#[test]
fn ns2_rule_without_data_seen_breaks_as_at_a_source() {
    let (c, d, e) = (2, 3, 4);
    let mut net = fig1_ns2();
    net.unlink(d, e);
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    assert!(!net.kernel[d].contains_key(&addr(e)));
    assert!(rerrs_sent(&net, d).iter().any(|(to, _)| *to == BROADCAST));
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[c].contains_key(&addr(e)));
}

#[test]
fn a_rerr_from_the_old_next_hop_takes_a_repairing_route_out() {
    let (d, e) = (3, 4);
    let mut net = fig1_ns2();
    net.nodes[d].data_hops(net.now, addr(e), 3);
    net.unlink(d, e);
    net.unlink(3, 5); // no way round: the repair cannot succeed soon
    net.input(d, Input::LinkFailed { neighbor: addr(e) });
    assert!(net.kernel[d].contains_key(&addr(e)));
    let rerr = Message::Rerr(crate::packet::Rerr { no_delete: false, unreachable: vec![(addr(e), 99)] });
    net.input(d, Input::Control { from: addr(e), ttl: 1, payload: &rerr.encode() });
    assert!(!net.kernel[d].contains_key(&addr(e)));
    assert!(net.outputs(d).contains(&Output::Flush { neighbor: addr(e) }), "ns-2's recvError empties the queue for E");
    assert!(net.nodes[d].discovering(addr(e)), "the search goes on");
}

#[test]
fn rerr_broadcast_names_routes_without_precursors_and_never_unicasts() {
    for rerr_broadcast in [false, true] {
        let config = Config { rerr_broadcast, ..quiet() };
        let mut net = Net::chain(4, config);
        net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
        net.run_until(ms(500));
        // The source's own route has no precursors.
        net.input(0, Input::LinkFailed { neighbor: addr(1) });
        let at_source = rerrs_sent(&net, 0);
        assert_eq!(!at_source.is_empty(), rerr_broadcast, "{at_source:?}");
        // Node 2's route to 3 has one precursor (1): unicast unless rerr_broadcast.
        net.input(2, Input::LinkFailed { neighbor: addr(3) });
        let to: Vec<Ipv4Addr> = rerrs_sent(&net, 2).into_iter().map(|(to, _)| to).collect();
        assert_eq!(to, vec![if rerr_broadcast { BROADCAST } else { addr(1) }]);
    }
}

/// When each RERR of `node` left, from the outputs logged since `from`.
fn rerr_times(net: &Net, from: usize, node: usize) -> Vec<Duration> {
    sent_since(net, from, node)
        .into_iter()
        .filter(|(_, _, m)| matches!(m, Message::Rerr(_)))
        .map(|(t, _, _)| t)
        .collect()
}

#[test]
fn a_relayed_broadcast_rerr_waits_the_jitter_and_a_broken_links_does_not() {
    let jitter = ms(10);
    let config = Config { rerr_broadcast: true, broadcast_jitter_ms: 10, ..quiet() };
    let mut net = Net::chain(4, config);
    // 0 finds 3: 1's route to 3 lists 0 as its precursor.
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(ms(500));
    let (from, broken) = (net.log.len(), net.now);
    net.input(2, Input::LinkFailed { neighbor: addr(3) });
    net.run_until(broken + ms(50));
    // 2's own break leaves at once; 1 passes it on within the jitter after it arrived (1 ms).
    assert_eq!(rerr_times(&net, from, 2), vec![broken]);
    let relayed = rerr_times(&net, from, 1);
    assert_eq!(relayed.len(), 1, "{relayed:?}");
    assert!(relayed[0] > broken + ms(1) && relayed[0] <= broken + ms(1) + jitter, "{relayed:?}");
    assert!(!net.kernel[0].contains_key(&addr(3)));
}

fn precursors(net: &Net, node: usize, dst: usize) -> Vec<Ipv4Addr> {
    net.nodes[node].routes[&addr(dst)].precursors.iter().copied().collect()
}

#[test]
fn ns2_precursors_leave_the_way_back_without_them() {
    // 3 asks for 0, as a client does for its server; 0 sends back along the reverse route.
    let precursors_after_discovery = |precursor_rule| {
        let mut net = Net::chain(4, Config { precursor_rule, rerr_broadcast: true, ..quiet() });
        net.input(3, Input::NoRoute { src: addr(3), dst: addr(0), local: true });
        net.run_until(ms(500));
        assert_eq!(net.path(0, 3), Some(vec![0, 1, 2, 3]));
        // 1's routes to 0 and back to 3, and 2's route to its next hop towards 0.
        (precursors(&net, 1, 0), precursors(&net, 1, 3), precursors(&net, 2, 1), net)
    };
    let (to_dst, back, to_next_hop, _) = precursors_after_discovery(PrecursorRule::Rfc);
    assert_eq!((to_dst, back, to_next_hop), (vec![addr(2)], vec![addr(0)], vec![addr(3)]));
    let (to_dst, back, to_next_hop, mut net) = precursors_after_discovery(PrecursorRule::Ns2);
    assert_eq!((to_dst, back, to_next_hop), (vec![addr(2)], vec![], vec![]));
    // 2 loses 3: 1 takes its route back to 3 down and tells nobody; 0 keeps sending.
    net.input(2, Input::LinkFailed { neighbor: addr(3) });
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[1].contains_key(&addr(3)));
    assert!(net.kernel[0].contains_key(&addr(3)));
    // 0's next packet meets 1 without a route (ns-2's rt_resolve): dropped, and a RERR.
    net.input(1, Input::NoRoute { src: addr(0), dst: addr(3), local: false });
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[0].contains_key(&addr(3)));
    assert_eq!(net.nodes[1].counters().forward_no_route, 1);
}

#[test]
fn rfc_precursors_pass_a_break_on_the_way_back_on() {
    let mut net = Net::chain(4, Config { rerr_broadcast: true, ..quiet() });
    net.input(3, Input::NoRoute { src: addr(3), dst: addr(0), local: true });
    net.run_until(ms(500));
    net.input(2, Input::LinkFailed { neighbor: addr(3) });
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[0].contains_key(&addr(3)), "1 passed 2's RERR on to its precursor 0");
    assert_eq!(net.nodes[1].counters().forward_no_route, 0);
}

#[test]
fn ns2_precursors_go_with_a_rerr_passed_on_and_with_a_broken_link() {
    let config = Config { precursor_rule: PrecursorRule::Ns2, rerr_broadcast: true, ..quiet() };
    let mut net = Net::chain(5, config);
    // 0 asks for 3, then 4 asks for 0: 1 lists 0 on its route to 3 and 2 on its route to 0.
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(ms(1000));
    net.input(4, Input::NoRoute { src: addr(4), dst: addr(0), local: true });
    net.run_until(ms(2000));
    assert_eq!((precursors(&net, 1, 3), precursors(&net, 1, 0)), (vec![addr(0)], vec![addr(2)]));
    // 2 loses 3: 1 passes the RERR on to 0 and empties the list (recvError).
    net.input(2, Input::LinkFailed { neighbor: addr(3) });
    net.run_until(net.now + ms(10));
    assert!(!net.kernel[0].contains_key(&addr(3)));
    assert!(precursors(&net, 1, 3).is_empty());
    // 1 loses 2: 2 leaves every list of 1's (handle_link_failure).
    net.input(1, Input::LinkFailed { neighbor: addr(2) });
    assert!(precursors(&net, 1, 0).is_empty());
}

#[test]
fn ns2_preset_searches_as_ns2_does() {
    // Alone: every RREQ goes unanswered. ns-2's sendRequest for a new
    // destination: the diameter (30) at once, waits of 1.8 s x the count of
    // network-wide RREQs, RREQ_RETRIES 3, then it gives up (at 18 s).
    let config = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    let mut net = Net::new(1, config);
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(9), local: true });
    net.run_until(ms(40_000));
    let sent: Vec<(u64, u8)> = net
        .events(0)
        .iter()
        .filter_map(|(t, e)| match e {
            Event::RreqSent { ttl, .. } => Some((t.as_millis() as u64, *ttl)),
            _ => None,
        })
        .collect();
    assert_eq!(sent, vec![(0, 30), (1800, 30), (5400, 30), (10_800, 30)]);
    let failed = net.events(0).iter().find_map(|(t, e)| matches!(e, Event::DiscoveryFailed { .. }).then_some(*t));
    assert_eq!(failed, Some(ms(18_000)));
}

#[test]
fn the_preset_rings_once_past_the_threshold_and_waits_by_the_measured_hop_time() {
    // A route that went down at 6 hops: ns-2 sends TTL 6 + 2 = 8 (6 was below
    // TTL_THRESHOLD 7), RFC 3561 the diameter at once. The waits count the
    // first discovery's latency per hop (12 ms over 6 hops here: 2 ms), not
    // NODE_TRAVERSAL_TIME's 30 ms: 2 x 8 x 2 ms after the ring, then
    // 2 x 30 x 2 ms = 120 ms times the count of network-wide RREQs.
    let rreqs_after_a_break = |config: Config| {
        let mut net = Net::chain(7, config);
        net.input(0, Input::NoRoute { src: addr(0), dst: addr(6), local: true });
        net.run_until(ms(500));
        assert_eq!(net.path(0, 6), Some(vec![0, 1, 2, 3, 4, 5, 6]));
        net.unlink(0, 1);
        net.input(0, Input::LinkFailed { neighbor: addr(1) });
        let start = net.now;
        let before = net.events(0).len();
        net.input(0, Input::NoRoute { src: addr(0), dst: addr(6), local: true });
        net.run_until(net.now + ms(20_000));
        net.events(0)[before..]
            .iter()
            .filter_map(|(t, e)| match e {
                Event::RreqSent { ttl, .. } => Some(((*t - start).as_millis() as u64, *ttl)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let ns2 = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    assert_eq!(rreqs_after_a_break(ns2.clone()), vec![(0, 8), (32, 30), (152, 30), (392, 30), (752, 30)]);
    let rfc_ring = Config { ring_limit: crate::config::RingLimit::Rfc, measured_hop_time: false, ..ns2 };
    assert_eq!(rreqs_after_a_break(rfc_ring), vec![(0, 30), (1800, 30), (5400, 30), (10_800, 30)]);
}

#[test]
fn the_preset_rings_of_a_destination_known_before() {
    // A route that went down at 3 hops: TTL 5, then 7, then the diameter (ns-2: 3 + 2, 5 + 2, 30)
    // four times (RREQ_RETRIES 3), all within 2 s at the measured 2 ms per hop.
    let config = Config { broadcast_jitter_ms: 0, ..Config::ns2() };
    let mut net = Net::chain(4, config);
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(ms(500));
    assert_eq!(net.path(0, 3), Some(vec![0, 1, 2, 3]));
    net.unlink(0, 1);
    net.input(0, Input::LinkFailed { neighbor: addr(1) });
    let before = rreqs(&net.outputs(0)).len();
    net.input(0, Input::NoRoute { src: addr(0), dst: addr(3), local: true });
    net.run_until(net.now + ms(2000));
    let ttls: Vec<u8> = rreqs(&net.outputs(0))[before..].iter().map(|(ttl, _)| *ttl).collect();
    assert_eq!(ttls, vec![5, 7, 30, 30, 30, 30]);
}
