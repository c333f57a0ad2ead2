//! The COPAS state machine, sans-IO: time and inputs in, [`Output`]s out.
//!
//! Every node keeps routes per (source, destination) of packets. A pair
//! (src, dst) is named by the node that discovered it; both ends keep a
//! [`Pair`] with its forward path (src's data) and reverse path (dst's
//! traffic back, TCP ACKs), both listed from src to dst. A ROUTE message
//! installs, on every relay of its path, the routes of both directions
//! along it; so when one path breaks, an end moves its traffic to the
//! other path by changing its own first hop only. An end's own packets
//! follow a plain host route (they all have its address as source); the
//! relays' routes are per (source, destination).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use meshemu_ondemand::{Counters, Input, Protocol, BROADCAST};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::Config;
use crate::packet::{Hop, Message, Probe, Rerr, Role, Route, RouteAck, Rreq, BROKEN, MAX_PATH};
use crate::select::{select_pair, select_partner, select_replacement, Candidate, Selection};
use crate::{Event, Output};

/// How long an (originator, RREQ id) is remembered against duplicates.
const SEEN_RREQ_TIME: Duration = Duration::from_secs(10);
/// At most one RERR per direction of a pair in this time.
const RERR_INTERVAL: Duration = Duration::from_secs(1);
/// A frame dropped at the retry limit to a neighbour heard from within this
/// time is contention, not a broken link.
const NEIGHBOR_ALIVE: Duration = Duration::from_secs(1);

/// A route of this node for packets from `src` to `dst` (key of `routes`).
#[derive(Clone, Debug)]
struct Entry {
    next_hop: Ipv4Addr,
    /// The pair's path it lies on (src to dst of the pair, not of the packets).
    path: Vec<Ipv4Addr>,
    expires: Duration,
}

/// What an end knows of its pair.
#[derive(Clone, Debug)]
struct Pair {
    forward: Vec<Ipv4Addr>,
    reverse: Vec<Ipv4Addr>,
    /// This end sends over the other role's path (its own broke) until a new one comes.
    switched: bool,
    last_used: Duration,
    next_probe: Duration,
    /// Relays' contention sum on the path this end receives on, as last probed.
    incoming_contention: Option<u32>,
    /// No new reroute of the forward / reverse path before these times.
    hold_forward: Duration,
    hold_reverse: Duration,
}

impl Pair {
    /// A pair just chosen or announced: used now, first probe one interval on.
    fn new(forward: Vec<Ipv4Addr>, reverse: Vec<Ipv4Addr>, now: Duration, probe_interval: Duration) -> Self {
        Pair {
            forward,
            reverse,
            switched: false,
            last_used: now,
            next_probe: now + probe_interval,
            incoming_contention: None,
            hold_forward: now,
            hold_reverse: now,
        }
    }

    fn path(&self, role: Role) -> &Vec<Ipv4Addr> {
        if role == Role::Reverse { &self.reverse } else { &self.forward }
    }

    fn hold(&mut self, role: Role) -> &mut Duration {
        if role == Role::Reverse { &mut self.hold_reverse } else { &mut self.hold_forward }
    }
}

/// A discovery this node started as src: packets wait for the forward path.
#[derive(Clone, Debug)]
struct Discovery {
    started: Duration,
    attempts: u32,
    deadline: Duration,
}

/// RREQ copies gathered by the node that chooses, until `deadline`.
#[derive(Clone, Debug)]
struct Collection {
    role: Role,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    replaced_contention: u32,
    candidates: Vec<Candidate>,
    deadline: Duration,
}

/// The rule a choice followed, to choose again by it.
#[derive(Clone, Debug)]
enum Rule {
    /// A discovery: `select_pair`; for one role with the other's path kept, `select_partner`.
    Discovery,
    /// A reroute of one path: `select_replacement` with these arguments.
    Replacement { avoid: Vec<Ipv4Addr>, max_hops: usize, below: Option<u32> },
}

/// The RREQ copies of a choice this node made, kept while its ROUTEs wait
/// for their acks: when one dies at this node's first hop, it chooses again
/// from them without that neighbour (README, "ROUTE delivery").
#[derive(Clone, Debug)]
struct Choice {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    rule: Rule,
    candidates: Vec<Candidate>,
    /// The choice number its latest ROUTEs carry (0: the first choice).
    number: u8,
    expires: Duration,
}

/// A ROUTE sent to a neighbour that has not acknowledged it yet.
#[derive(Clone, Debug)]
struct PendingRoute {
    route: Route,
    transmissions: u32,
    deadline: Duration,
}

/// One COPAS node.
pub struct Copas {
    config: Config,
    me: Ipv4Addr,
    rreq_id: u32,
    /// (packet src, packet dst) -> route.
    routes: BTreeMap<(Ipv4Addr, Ipv4Addr), Entry>,
    /// (src, dst) of pairs this node is an end of.
    pairs: BTreeMap<(Ipv4Addr, Ipv4Addr), Pair>,
    discoveries: BTreeMap<Ipv4Addr, Discovery>,
    /// (originator, RREQ id) -> copies gathered.
    collections: BTreeMap<(Ipv4Addr, u32), Collection>,
    /// (originator, RREQ id) -> the copies of a choice made, while its ROUTEs are unacknowledged.
    choices: BTreeMap<(Ipv4Addr, u32), Choice>,
    seen_rreqs: BTreeMap<(Ipv4Addr, u32), Duration>,
    /// (next hop, ROUTE) -> sent, awaiting its ack.
    pending_routes: BTreeMap<(Ipv4Addr, RouteAck), PendingRoute>,
    /// ROUTEs received -> until when a copy of one is a retransmission.
    seen_routes: BTreeMap<RouteAck, Duration>,
    /// Relayed RREQs waiting for their jitter: (when, ttl, payload).
    delayed: Vec<(Duration, u8, Vec<u8>)>,
    /// (packet src, packet dst) -> no RERR about it before.
    rerr_hold: BTreeMap<(Ipv4Addr, Ipv4Addr), Duration>,
    /// When the radio last received a frame from each neighbour or had one
    /// acknowledged by it: on a path that carries one direction only, the
    /// next hop sends nothing back but ACKs.
    heard: BTreeMap<Ipv4Addr, Duration>,
    /// Neighbours that left a ROUTE of this node unacknowledged -> until
    /// when this node's choices avoid them.
    silent: BTreeMap<Ipv4Addr, Duration>,
    contention: Contention,
    rng: ChaCha8Rng,
    counters: Counters,
}

/// mu = (1 - alpha) mu + alpha N every T_BACKOFF, N the MAC backoffs activity
/// in the medium caused in it (`Input::MacBackoffs`).
#[derive(Clone, Debug)]
struct Contention {
    mu: f64,
    /// The counter as last reported, and at the last sample.
    total: Option<u64>,
    at_sample: Option<u64>,
    next_sample: Duration,
}

impl Contention {
    fn centi(&self) -> u16 {
        (self.mu * 100.0).round().clamp(0.0, u16::MAX as f64) as u16
    }
}

fn contention_of(hops: &[Hop]) -> (u32, u32) {
    hops.iter().fold((0, 0), |(sum, max), h| (sum + u32::from(h.contention), max.max(u32::from(h.contention))))
}

impl Copas {
    /// A node with address `me`, its config checked by the caller
    /// ([`Config::validate`]); `seed` drives every random choice (jitter).
    pub fn new(config: Config, me: Ipv4Addr, seed: u64, now: Duration) -> Copas {
        let contention = Contention { mu: 0.0, total: None, at_sample: None, next_sample: now + config.t_backoff() };
        Copas {
            config,
            me,
            rreq_id: 0,
            routes: BTreeMap::new(),
            pairs: BTreeMap::new(),
            discoveries: BTreeMap::new(),
            collections: BTreeMap::new(),
            choices: BTreeMap::new(),
            seen_rreqs: BTreeMap::new(),
            pending_routes: BTreeMap::new(),
            seen_routes: BTreeMap::new(),
            delayed: Vec::new(),
            rerr_hold: BTreeMap::new(),
            heard: BTreeMap::new(),
            silent: BTreeMap::new(),
            contention,
            rng: ChaCha8Rng::seed_from_u64(seed),
            counters: Counters::default(),
        }
    }

    pub fn address(&self) -> Ipv4Addr {
        self.me
    }

    /// This node's smoothed contention (backoffs per T_BACKOFF).
    pub fn contention(&self) -> f64 {
        self.contention.mu
    }

    /// The next hop of packets from `src` to `dst`, if this node has a route.
    pub fn next_hop(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.routes.get(&(src, dst)).map(|e| e.next_hop)
    }

    /// The (forward, reverse) paths of a pair this node is an end of.
    pub fn paths(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Option<(&[Ipv4Addr], &[Ipv4Addr])> {
        self.pairs.get(&(src, dst)).map(|p| (p.forward.as_slice(), p.reverse.as_slice()))
    }

    pub fn discovering(&self, dst: Ipv4Addr) -> bool {
        self.discoveries.contains_key(&dst)
    }

    fn bump(&mut self, counter: &'static str) {
        *self.counters.protocol.entry(counter).or_default() += 1;
    }

    fn send(&mut self, to: Ipv4Addr, ttl: u8, message: &Message, out: &mut Vec<Output>) {
        let payload = message.encode();
        self.counters.control_sent.entry(message.kind()).or_default().add(payload.len());
        out.push(Output::Send { to, ttl, payload });
    }

    fn my_hop(&self) -> Hop {
        Hop { addr: self.me, contention: self.contention.centi() }
    }

    // --- routes -----------------------------------------------------------------------

    fn set_route(&mut self, now: Duration, src: Ipv4Addr, dst: Ipv4Addr, next_hop: Ipv4Addr, path: &[Ipv4Addr], out: &mut Vec<Output>) {
        let expires = now + self.config.active_route_timeout();
        let changed = self.routes.get(&(src, dst)).is_none_or(|e| e.next_hop != next_hop);
        self.routes.insert((src, dst), Entry { next_hop, path: path.to_vec(), expires });
        if !changed {
            return;
        }
        // This node's own packets take a plain host route: a local sender
        // that has not chosen its source address yet (ping, unbound UDP) is
        // routed before any `from` rule could match it.
        if src == self.me {
            out.push(Output::SetRoute { dst, next_hop, hops: (path.len() - 1) as u8 });
        } else {
            out.push(Output::SetPairRoute { src, dst, next_hop });
        }
    }

    fn delete_route(&mut self, src: Ipv4Addr, dst: Ipv4Addr, out: &mut Vec<Output>) {
        if self.routes.remove(&(src, dst)).is_some() {
            out.push(if src == self.me { Output::DeleteRoute { dst } } else { Output::DeletePairRoute { src, dst } });
        }
    }

    /// Points this end's own traffic of `pair` at the path it should use now.
    fn point_outgoing(&mut self, now: Duration, key: (Ipv4Addr, Ipv4Addr), out: &mut Vec<Output>) {
        let Some(pair) = self.pairs.get(&key) else { return };
        let (src, dst) = key;
        let own_role = if self.me == src { Role::Forward } else { Role::Reverse };
        let use_role = match (own_role, pair.switched) {
            (role, false) => role,
            (Role::Forward, true) => Role::Reverse,
            (_, true) => Role::Forward,
        };
        let path = pair.path(use_role).clone();
        let (to, next_hop) = if self.me == src { (dst, path[1]) } else { (src, path[path.len() - 2]) };
        self.set_route(now, self.me, to, next_hop, &path, out);
    }

    // --- discovery ----------------------------------------------------------------------

    fn no_route(&mut self, now: Duration, src: Ipv4Addr, dst: Ipv4Addr, local: bool, out: &mut Vec<Output>) {
        if !local {
            self.counters.forward_no_route += 1;
            return;
        }
        if src != self.me || dst == self.me || self.discoveries.contains_key(&dst) {
            return;
        }
        self.counters.discoveries_started += 1;
        out.push(Output::Event(Event::DiscoveryStarted { dst }));
        self.discoveries.insert(dst, Discovery { started: now, attempts: 0, deadline: now });
        self.send_discovery_rreq(now, dst, out);
    }

    fn send_discovery_rreq(&mut self, now: Duration, dst: Ipv4Addr, out: &mut Vec<Output>) {
        let Some(discovery) = self.discoveries.get_mut(&dst) else { return };
        discovery.attempts += 1;
        discovery.deadline = now + self.config.discovery_timeout();
        let attempt = discovery.attempts;
        let rreq = self.new_rreq(now, Role::Both, self.me, dst, 0);
        out.push(Output::Event(Event::RreqSent { dst, ttl: self.config.net_diameter, attempt }));
        self.send(BROADCAST, self.config.net_diameter, &Message::Rreq(rreq), out);
    }

    fn new_rreq(&mut self, now: Duration, role: Role, src: Ipv4Addr, dst: Ipv4Addr, replaced_contention: u32) -> Rreq {
        self.rreq_id = self.rreq_id.wrapping_add(1);
        self.seen_rreqs.insert((self.me, self.rreq_id), now + SEEN_RREQ_TIME);
        Rreq { role, id: self.rreq_id, src, dst, replaced_contention, hops: vec![self.my_hop()] }
    }

    fn receive_rreq(&mut self, now: Duration, ttl: u8, mut rreq: Rreq) {
        let originator = rreq.hops[0].addr;
        let target = if originator == rreq.src { rreq.dst } else { rreq.src };
        if originator == self.me {
            self.counters.ignored += 1;
            return;
        }
        if target == self.me {
            self.collect(now, originator, rreq);
            return;
        }
        let first_copy = self.seen_rreqs.insert((originator, rreq.id), now + SEEN_RREQ_TIME).is_none();
        let on_path = rreq.hops.iter().any(|h| h.addr == self.me);
        if !first_copy || on_path || ttl <= 1 || rreq.hops.len() + 1 >= MAX_PATH {
            self.counters.ignored += 1;
            return;
        }
        rreq.hops.push(self.my_hop());
        // The contention appended is the one now, not after the jitter: close enough at 10 ms.
        let payload = Message::Rreq(rreq).encode();
        let wait = self.jitter();
        self.delayed.push((now + wait, ttl - 1, payload));
    }

    fn jitter(&mut self) -> Duration {
        let max = self.config.broadcast_jitter().as_micros() as u64;
        Duration::from_micros(if max == 0 { 0 } else { self.rng.random_range(0..=max) })
    }

    /// The target keeps RREQ copies that came through different last relays for T_COLLECT.
    fn collect(&mut self, now: Duration, originator: Ipv4Addr, rreq: Rreq) {
        let t_collect = self.config.t_collect();
        let max = self.config.max_candidates;
        let collection = self.collections.entry((originator, rreq.id)).or_insert_with(|| Collection {
            role: rreq.role,
            src: rreq.src,
            dst: rreq.dst,
            replaced_contention: rreq.replaced_contention,
            candidates: Vec::new(),
            deadline: now + t_collect,
        });
        let mut path: Vec<Ipv4Addr> = rreq.hops.iter().map(|h| h.addr).collect();
        path.push(self.me);
        if originator != rreq.src {
            path.reverse();
        }
        let last_relay = rreq.hops.last().map(|h| h.addr);
        let duplicate = collection.candidates.iter().any(|c| {
            let other_last = if originator == rreq.src { c.path[c.path.len() - 2] } else { c.path[1] };
            Some(other_last) == last_relay
        });
        if now > collection.deadline || duplicate || collection.candidates.len() >= max {
            self.counters.ignored += 1;
            return;
        }
        let (sum, _) = contention_of(&rreq.hops[1..]);
        let arrival = collection.candidates.len();
        collection.candidates.push(Candidate { path, contention: sum, arrival });
    }

    fn collection_due(&mut self, now: Duration, key: (Ipv4Addr, u32), out: &mut Vec<Output>) {
        let Some(mut collection) = self.collections.remove(&key) else { return };
        if self.avoid_silent_neighbors(now, &mut collection.candidates) {
            self.bump("silent_neighbors_avoided");
        }
        let id = key.1;
        let pair_key = (collection.src, collection.dst);
        if collection.role == Role::Both {
            let Some(selection) = select_pair(&collection.candidates, usize::from(self.config.length_slack)) else { return };
            self.bump(if matches!(selection, Selection::Disjoint { .. }) { "disjoint_selections" } else { "single_route_selections" });
            self.choose_pair(now, pair_key, selection, id, 0, "discovery", out);
            self.keep_choice(now, key, pair_key, Rule::Discovery, collection.candidates);
            return;
        }
        // A reroute of one path: this end chooses, the originator asked.
        let role = collection.role;
        let Some(pair) = self.pairs.get(&pair_key) else {
            self.counters.ignored += 1;
            return;
        };
        let other = if role == Role::Forward { &pair.reverse } else { &pair.forward };
        let avoid: Vec<Ipv4Addr> = other[1..other.len() - 1].to_vec();
        let current = pair.path(role);
        let max_hops = current.len() - 1 + usize::from(self.config.length_slack);
        let below = (collection.replaced_contention != BROKEN).then_some(collection.replaced_contention);
        match select_replacement(&collection.candidates, &avoid, max_hops, below) {
            Some(choice) => {
                self.bump("reroutes");
                let cause = if below.is_some() { "contention" } else { "rerr" };
                self.replace_path(now, pair_key, role, &choice, id, 0, cause, out);
                self.keep_choice(now, key, pair_key, Rule::Replacement { avoid, max_hops, below }, collection.candidates);
            }
            None => {
                self.bump("reroutes_declined");
                let (src, dst) = pair_key;
                let candidates = collection.candidates.len();
                out.push(Output::Event(Event::RerouteDeclined { src, dst, role: role.name(), candidates }));
            }
        }
    }

    /// A discovery's choice: the pair's two paths (or one both ways), and their ROUTEs.
    #[allow(clippy::too_many_arguments)]
    fn choose_pair(&mut self, now: Duration, key: (Ipv4Addr, Ipv4Addr), selection: Selection, id: u32, number: u8, cause: &'static str, out: &mut Vec<Output>) {
        let (forward, reverse) = match selection {
            Selection::Disjoint { forward, reverse } => (forward, reverse),
            Selection::Single(path) => (path.clone(), path),
        };
        let pair = Pair::new(forward.path.clone(), reverse.path.clone(), now, self.config.probe_interval());
        self.pairs.insert(key, pair);
        self.point_outgoing(now, key, out);
        if forward.path == reverse.path {
            self.announce(now, key, Role::Both, &forward, id, number, cause, out);
        } else {
            self.announce(now, key, Role::Forward, &forward, id, number, cause, out);
            self.announce(now, key, Role::Reverse, &reverse, id, number, cause, out);
        }
    }

    /// One path of the pair moves to `choice`; its ROUTE goes ahead of this end's traffic.
    #[allow(clippy::too_many_arguments)]
    fn replace_path(&mut self, now: Duration, key: (Ipv4Addr, Ipv4Addr), role: Role, choice: &Candidate, id: u32, number: u8, cause: &'static str, out: &mut Vec<Output>) {
        let Some(pair) = self.pairs.get_mut(&key) else { return };
        if role == Role::Forward { pair.forward = choice.path.clone() } else { pair.reverse = choice.path.clone() }
        let sends_on_it = (role == Role::Forward) == (self.me == key.0);
        if sends_on_it {
            pair.switched = false;
        }
        self.announce(now, key, role, choice, id, number, cause, out);
        self.point_outgoing(now, key, out);
    }

    /// Keeps a choice's candidates until its ROUTEs are acknowledged (or route_ack_window passes).
    fn keep_choice(&mut self, now: Duration, key: (Ipv4Addr, u32), pair: (Ipv4Addr, Ipv4Addr), rule: Rule, candidates: Vec<Candidate>) {
        let (src, dst) = pair;
        let expires = now + self.config.route_ack_window();
        self.choices.insert(key, Choice { src, dst, rule, candidates, number: 0, expires });
    }

    /// Sends the ROUTE of a chosen path toward the pair's other end.
    #[allow(clippy::too_many_arguments)]
    fn announce(&mut self, now: Duration, key: (Ipv4Addr, Ipv4Addr), role: Role, choice: &Candidate, id: u32, number: u8, cause: &'static str, out: &mut Vec<Output>) {
        let (src, dst) = key;
        out.push(Output::Event(Event::PathSelected {
            src,
            dst,
            role: role.name(),
            path: choice.path.clone(),
            contention_centi: choice.contention,
            cause,
        }));
        let toward_dst = self.me == src;
        let path = &choice.path;
        let next = if toward_dst { path[1] } else { path[path.len() - 2] };
        let route = Route { role, toward_dst, id, contention: choice.contention, choice: number, path: path.clone() };
        self.send_route(now, next, route, out);
    }

    /// Sends a ROUTE to the next node of its path and keeps it until that node acknowledges it.
    fn send_route(&mut self, now: Duration, next: Ipv4Addr, route: Route, out: &mut Vec<Output>) {
        let id = route.ack();
        // A newer ROUTE for the same path of the pair makes an unacknowledged older one moot:
        // retransmitted after it, the older one would set the old path again.
        self.pending_routes.retain(|(_, older), _| (older.src, older.dst, older.role) != (id.src, id.dst, id.role));
        self.send(next, 1, &Message::Route(route.clone()), out);
        let deadline = now + self.config.route_ack_wait(0);
        self.pending_routes.insert((next, id), PendingRoute { route, transmissions: 1, deadline });
    }

    /// The next hop did not acknowledge a ROUTE in time: again, with a doubled
    /// wait, or after the last retry, given up where a study can see it (and,
    /// if this node chose the path, chosen again without that neighbour).
    fn route_ack_due(&mut self, now: Duration, key: (Ipv4Addr, RouteAck), out: &mut Vec<Output>) {
        let next = key.0;
        let Some(pending) = self.pending_routes.get_mut(&key) else { return };
        if pending.transmissions <= self.config.route_retries {
            pending.deadline = now + self.config.route_ack_wait(pending.transmissions);
            pending.transmissions += 1;
            let route = pending.route.clone();
            self.bump("route_retransmissions");
            self.send(next, 1, &Message::Route(route), out);
            return;
        }
        let PendingRoute { route, transmissions, .. } = self.pending_routes.remove(&key).expect("looked up above");
        self.bump("routes_abandoned");
        self.silent.insert(next, now + self.config.silent_hold());
        let (src, dst) = (route.path[0], route.path[route.path.len() - 1]);
        out.push(Output::Event(Event::RouteAbandoned { src, dst, role: route.role.name(), next_hop: next, path: route.path.clone(), transmissions }));
        self.choose_again(now, next, &route, out);
    }

    /// Leaves out the candidates with a silent neighbour among their relays,
    /// anywhere on the path (as a new choice leaves out every path through the
    /// neighbour that never acknowledged): one that never acknowledged a ROUTE
    /// of this node lately (given up within `silent_hold`), or has one waiting
    /// past a retransmission. The pair's other end is on every path, so it
    /// does not count. Unless that leaves none: a path to try beats none.
    /// True when it left some out.
    fn avoid_silent_neighbors(&self, now: Duration, candidates: &mut Vec<Candidate>) -> bool {
        if self.config.silent_hold().is_zero() {
            return false;
        }
        let silent = |node: &Ipv4Addr| {
            self.silent.get(node).is_some_and(|&until| now < until)
                || self.pending_routes.iter().any(|((next, _), p)| next == node && p.transmissions > 1)
        };
        let through_silent = |c: &Candidate| c.path[1..c.path.len() - 1].iter().any(silent);
        if !candidates.iter().any(through_silent) || candidates.iter().all(through_silent) {
            return false;
        }
        candidates.retain(|c| !through_silent(c));
        true
    }

    /// This node's own ROUTE died at its first hop `next`: a new choice from
    /// the same RREQ copies, by the same rule, among those not through `next`.
    /// The choice is dropped when none qualifies, or when a newer choice
    /// replaced that path meanwhile (the pair no longer uses it).
    fn choose_again(&mut self, now: Duration, next: Ipv4Addr, route: &Route, out: &mut Vec<Output>) {
        let (src, dst) = (route.path[0], route.path[route.path.len() - 1]);
        let (chooser, originator) = if route.toward_dst { (src, dst) } else { (dst, src) };
        let key = (originator, route.id);
        if chooser != self.me {
            return; // a relay's ROUTE
        }
        let Some(mut choice) = self.choices.remove(&key) else { return };
        let Some(pair) = self.pairs.get(&(src, dst)) else { return };
        let in_use = match route.role {
            Role::Both => pair.forward == route.path && pair.reverse == route.path,
            role => *pair.path(role) == route.path,
        };
        let Some(number) = choice.number.checked_add(1) else { return };
        if !in_use {
            return;
        }
        choice.candidates.retain(|c| !c.path.contains(&next));
        let avoided = self.avoid_silent_neighbors(now, &mut choice.candidates);
        let slack = usize::from(self.config.length_slack);
        match (&choice.rule, route.role) {
            (Rule::Discovery, Role::Both) => {
                let Some(selection) = select_pair(&choice.candidates, slack) else { return };
                self.choose_pair(now, (src, dst), selection, route.id, number, "unacked", out);
            }
            (rule, role) => {
                let new = match rule {
                    Rule::Discovery => {
                        let kept = if role == Role::Forward { &pair.reverse } else { &pair.forward };
                        select_partner(&choice.candidates, kept, slack)
                    }
                    Rule::Replacement { avoid, max_hops, below } => select_replacement(&choice.candidates, avoid, *max_hops, *below),
                };
                let Some(new) = new else { return };
                self.replace_path(now, (src, dst), role, &new, route.id, number, "unacked", out);
            }
        }
        self.bump("route_rechoices");
        if avoided {
            self.bump("silent_neighbors_avoided");
        }
        choice.number = number;
        choice.expires = now + self.config.route_ack_window();
        self.choices.insert(key, choice);
    }

    fn receive_route_ack(&mut self, from: Ipv4Addr, ack: RouteAck) {
        if self.pending_routes.remove(&(from, ack)).is_none() {
            self.counters.ignored += 1; // the ack of a copy already acknowledged, or of an abandoned ROUTE
            return;
        }
        self.bump("routes_acked");
        self.silent.remove(&from);
        // The choice's candidates are no longer needed once none of its ROUTEs waits for an ack here.
        let originator = if ack.toward_dst { ack.dst } else { ack.src };
        let waiting = self.pending_routes.keys().any(|(_, p)| (p.src, p.dst, p.id, p.toward_dst) == (ack.src, ack.dst, ack.id, ack.toward_dst));
        let mine = self.choices.get(&(originator, ack.id)).is_some_and(|c| (c.src, c.dst) == (ack.src, ack.dst));
        if mine && !waiting {
            self.choices.remove(&(originator, ack.id));
        }
    }

    fn receive_route(&mut self, now: Duration, from: Ipv4Addr, route: Route, out: &mut Vec<Output>) {
        // Acknowledged whatever it holds: sending it again would not change that.
        let id = route.ack();
        self.send(from, 1, &Message::RouteAck(id), out);
        // A copy of a ROUTE taken already is a retransmission whose ack was lost:
        // applied or passed on again, it could set a path that a newer ROUTE replaced since.
        if self.seen_routes.insert(id, now + self.config.route_ack_window()).is_some() {
            self.bump("route_duplicates");
            return;
        }
        let path = &route.path;
        let Some(position) = path.iter().position(|&a| a == self.me) else {
            self.counters.ignored += 1;
            return;
        };
        let (src, dst) = (path[0], path[path.len() - 1]);
        let last = path.len() - 1;
        if position != 0 && position != last {
            // A relay: both directions along this path, then pass it on.
            self.set_route(now, src, dst, path[position + 1], path, out);
            self.set_route(now, dst, src, path[position - 1], path, out);
            let next = if route.toward_dst { path[position + 1] } else { path[position - 1] };
            self.send_route(now, next, route, out);
            return;
        }
        if (position == last) != route.toward_dst {
            self.counters.ignored += 1; // an end that is not where the message was going
            return;
        }
        let key = (src, dst);
        let probe_interval = self.config.probe_interval();
        let pair = self.pairs.entry(key).or_insert_with(|| Pair::new(path.clone(), path.clone(), now, probe_interval));
        match route.role {
            Role::Both => {
                pair.forward = path.clone();
                pair.reverse = path.clone();
                pair.switched = false;
            }
            Role::Forward => pair.forward = path.clone(),
            Role::Reverse => pair.reverse = path.clone(),
        }
        let own_role = if self.me == src { Role::Forward } else { Role::Reverse };
        if route.role == own_role || route.role == Role::Both {
            pair.switched = false;
        }
        self.point_outgoing(now, key, out);
        if self.me == src && route.role != Role::Reverse {
            if let Some(discovery) = self.discoveries.remove(&dst) {
                self.counters.discoveries_succeeded += 1;
                let elapsed_ms = (now - discovery.started).as_millis() as u64;
                out.push(Output::Event(Event::DiscoverySucceeded { dst, hops: (path.len() - 1) as u8, elapsed_ms }));
                out.push(Output::Release { dst, spacing: Duration::ZERO });
            }
        }
    }

    // --- monitoring and reroutes --------------------------------------------------------

    fn send_probes(&mut self, now: Duration, out: &mut Vec<Output>) {
        let due: Vec<(Ipv4Addr, Ipv4Addr)> = self
            .pairs
            .iter()
            .filter(|(_, p)| p.next_probe <= now)
            .map(|(key, _)| *key)
            .collect();
        for key in due {
            let (src, dst) = key;
            let interval = self.config.probe_interval();
            let idle = self.config.probe_idle();
            let pair = self.pairs.get_mut(&key).expect("listed above");
            pair.next_probe = now + interval;
            let own_path = if self.me == src { &pair.forward } else { &pair.reverse };
            if now.saturating_sub(pair.last_used) > idle || own_path.len() <= 2 {
                continue; // idle, or nothing between the ends to watch
            }
            let (role, to) = if self.me == src { (Role::Forward, dst) } else { (Role::Reverse, src) };
            let Some(next_hop) = self.next_hop(self.me, to) else { continue };
            let probe = Probe { role, src, dst, hops: vec![self.my_hop()] };
            self.send(next_hop, 1, &Message::Probe(probe), out);
        }
    }

    fn receive_probe(&mut self, now: Duration, mut probe: Probe, out: &mut Vec<Output>) {
        let (from, to) = if probe.role == Role::Forward { (probe.src, probe.dst) } else { (probe.dst, probe.src) };
        if to == self.me {
            self.probed(now, probe, out);
            return;
        }
        let next_hop = self.next_hop(from, to);
        let on_path = probe.hops.iter().any(|h| h.addr == self.me);
        match next_hop {
            Some(next_hop) if !on_path && probe.hops.len() < MAX_PATH => {
                probe.hops.push(self.my_hop());
                self.send(next_hop, 1, &Message::Probe(probe), out);
            }
            _ => self.bump("probes_lost"),
        }
    }

    /// The receiving end of a path learns its relays' contention; above the
    /// threshold it floods a RREQ for the sending end to choose a new path.
    fn probed(&mut self, now: Duration, probe: Probe, out: &mut Vec<Output>) {
        let key = (probe.src, probe.dst);
        let threshold = self.config.backoff_thres_centi();
        let hold = self.config.reroute_hold();
        let Some(pair) = self.pairs.get_mut(&key) else {
            self.counters.ignored += 1;
            return;
        };
        let (sum, max) = contention_of(&probe.hops[1..]);
        pair.incoming_contention = Some(sum);
        if max <= threshold || now < *pair.hold(probe.role) {
            return;
        }
        *pair.hold(probe.role) = now + hold;
        // The new path may be at most length_slack hops longer: the flood need not go further.
        let max_hops = pair.path(probe.role).len() - 1 + usize::from(self.config.length_slack);
        let ttl = max_hops.clamp(2, usize::from(self.config.net_diameter)) as u8;
        let (src, dst) = key;
        out.push(Output::Event(Event::ContentionHigh { src, dst, role: probe.role.name(), max_centi: max, sum_centi: sum }));
        self.bump("reroutes_started");
        let rreq = self.new_rreq(now, probe.role, src, dst, sum);
        self.send(BROADCAST, ttl, &Message::Rreq(rreq), out);
    }

    /// The path this end sends on broke: over the other path at once, and a
    /// new one searched meanwhile; with a single path, the pair is gone.
    fn own_path_broken(&mut self, now: Duration, key: (Ipv4Addr, Ipv4Addr), out: &mut Vec<Output>) {
        let (src, dst) = key;
        let Some(pair) = self.pairs.get_mut(&key) else {
            let to = if self.me == src { dst } else { src };
            self.delete_route(self.me, to, out);
            return;
        };
        let own_role = if self.me == src { Role::Forward } else { Role::Reverse };
        let other = if self.me == src { &pair.reverse } else { &pair.forward };
        if pair.forward == pair.reverse || pair.switched || other.len() <= 2 {
            // Nothing to fall back to: forget the pair; the next packet starts a discovery.
            self.pairs.remove(&key);
            let to = if self.me == src { dst } else { src };
            self.delete_route(self.me, to, out);
            return;
        }
        pair.switched = true;
        *pair.hold(own_role) = now + self.config.reroute_hold();
        self.bump("path_switches");
        out.push(Output::Event(Event::PathSwitched { src, dst, role: own_role.name(), cause: "rerr" }));
        self.point_outgoing(now, key, out);
        self.bump("reroutes_started");
        let rreq = self.new_rreq(now, own_role, src, dst, BROKEN);
        self.send(BROADCAST, self.config.net_diameter, &Message::Rreq(rreq), out);
    }

    fn receive_rerr(&mut self, now: Duration, from: Ipv4Addr, rerr: Rerr, out: &mut Vec<Output>) {
        let path = &rerr.path;
        let Some(position) = path.iter().position(|&a| a == self.me) else {
            self.counters.ignored += 1;
            return;
        };
        let (src, dst) = (path[0], path[path.len() - 1]);
        let sender_end = if rerr.role == Role::Forward { 0 } else { path.len() - 1 };
        self.counters.rerr_received += 1;
        out.push(Output::Event(Event::RerrReceived { from, unreachable: vec![if rerr.role == Role::Forward { dst } else { src }] }));
        if position == sender_end {
            let pair = self.pairs.get(&(src, dst));
            let uses_it = pair.is_some_and(|p| !p.switched && p.path(rerr.role) == path);
            if uses_it {
                self.own_path_broken(now, (src, dst), out);
            } else {
                self.counters.ignored += 1; // about a path no longer in use
            }
            return;
        }
        let next = if rerr.role == Role::Forward { path[position - 1] } else { path[position + 1] };
        self.send(next, 1, &Message::Rerr(rerr), out);
    }

    /// The radio could not reach `neighbor` (a frame failed, or the kernel
    /// could not resolve its address): routes through it are broken,
    /// unless the neighbour is still heard (or acknowledges frames). In a busy static network most
    /// retry drops are lost contention (hidden terminals, capture), which
    /// probes and reroutes deal with; a RERR for each would churn the paths.
    fn link_failed(&mut self, now: Duration, neighbor: Ipv4Addr, cause: &'static str, out: &mut Vec<Output>) {
        if self.heard.get(&neighbor).is_some_and(|&at| now.saturating_sub(at) < NEIGHBOR_ALIVE) {
            self.bump("retry_drops_to_live_neighbors");
            return;
        }
        self.counters.link_breaks += 1;
        out.push(Output::Event(Event::LinkBroken { neighbor, cause }));
        let broken: Vec<((Ipv4Addr, Ipv4Addr), Vec<Ipv4Addr>)> = self
            .routes
            .iter()
            .filter(|(_, e)| e.next_hop == neighbor)
            .map(|(key, e)| (*key, e.path.clone()))
            .collect();
        for ((from, to), path) in broken {
            self.counters.route_breaks += 1;
            if from == self.me {
                let key = if self.pairs.contains_key(&(self.me, to)) { (self.me, to) } else { (to, self.me) };
                self.own_path_broken(now, key, out);
                continue;
            }
            self.delete_route(from, to, out);
            out.push(Output::Event(Event::RouteRemoved { dst: to, reason: "link layer" }));
            if self.rerr_hold.get(&(from, to)).is_some_and(|&until| now < until) {
                continue;
            }
            self.rerr_hold.insert((from, to), now + RERR_INTERVAL);
            // Back along the path toward the node that sends these packets.
            let Some(position) = path.iter().position(|&a| a == self.me) else { continue };
            let role = if from == path[0] { Role::Forward } else { Role::Reverse };
            let previous = if role == Role::Forward { position.checked_sub(1) } else { Some(position + 1).filter(|&p| p < path.len()) };
            let Some(previous) = previous else { continue };
            self.counters.rerr_sent += 1;
            out.push(Output::Event(Event::RerrSent { to: path[previous], unreachable: vec![to] }));
            self.send(path[previous], 1, &Message::Rerr(Rerr { role, path }), out);
        }
    }

    fn route_used(&mut self, now: Duration, addr: Ipv4Addr) {
        let expires = now + self.config.active_route_timeout();
        for ((src, dst), entry) in self.routes.iter_mut() {
            if *src == addr || *dst == addr {
                entry.expires = expires;
            }
        }
        for ((src, dst), pair) in self.pairs.iter_mut() {
            if *src == addr || *dst == addr {
                pair.last_used = now;
            }
        }
    }

    // --- timers -------------------------------------------------------------------------

    fn tick(&mut self, now: Duration, out: &mut Vec<Output>) {
        while self.contention.next_sample <= now {
            let c = &mut self.contention;
            if let (Some(total), Some(before)) = (c.total, c.at_sample) {
                let count = total.saturating_sub(before) as f64;
                c.mu = (1.0 - self.config.alpha) * c.mu + self.config.alpha * count;
            }
            c.at_sample = c.total;
            c.next_sample += self.config.t_backoff();
        }
        let due: Vec<(u8, Vec<u8>)> = {
            let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed).into_iter().partition(|d| d.0 <= now);
            self.delayed = waiting;
            due.into_iter().map(|(_, ttl, payload)| (ttl, payload)).collect()
        };
        for (ttl, payload) in due {
            self.counters.control_sent.entry("rreq").or_default().add(payload.len());
            out.push(Output::Send { to: BROADCAST, ttl, payload });
        }
        let due: Vec<(Ipv4Addr, u32)> = self.collections.iter().filter(|(_, c)| c.deadline <= now).map(|(k, _)| *k).collect();
        for key in due {
            self.collection_due(now, key, out);
        }
        let due: Vec<Ipv4Addr> = self.discoveries.iter().filter(|(_, d)| d.deadline <= now).map(|(k, _)| *k).collect();
        for dst in due {
            let discovery = &self.discoveries[&dst];
            if discovery.attempts > self.config.rreq_retries {
                let elapsed_ms = (now - discovery.started).as_millis() as u64;
                self.discoveries.remove(&dst);
                self.counters.discoveries_failed += 1;
                out.push(Output::Event(Event::DiscoveryFailed { dst, elapsed_ms }));
                out.push(Output::Drop { dst });
            } else {
                self.send_discovery_rreq(now, dst, out);
            }
        }
        let due: Vec<(Ipv4Addr, RouteAck)> = self.pending_routes.iter().filter(|(_, p)| p.deadline <= now).map(|(k, _)| *k).collect();
        for key in due {
            self.route_ack_due(now, key, out);
        }
        self.send_probes(now, out);
        let timeout = self.config.active_route_timeout();
        let idle: Vec<(Ipv4Addr, Ipv4Addr)> =
            self.pairs.iter().filter(|(_, p)| now.saturating_sub(p.last_used) >= timeout).map(|(k, _)| *k).collect();
        for key in idle {
            self.pairs.remove(&key);
        }
        let expired: Vec<(Ipv4Addr, Ipv4Addr)> = self.routes.iter().filter(|(_, e)| e.expires <= now).map(|(k, _)| *k).collect();
        for (src, dst) in expired {
            self.delete_route(src, dst, out);
            out.push(Output::Event(Event::RouteRemoved { dst, reason: "expired" }));
        }
        self.seen_rreqs.retain(|_, until| *until > now);
        self.seen_routes.retain(|_, until| *until > now);
        self.choices.retain(|_, c| c.expires > now);
        self.rerr_hold.retain(|_, until| *until > now);
        self.heard.retain(|_, at| now.saturating_sub(*at) < NEIGHBOR_ALIVE);
        self.silent.retain(|_, until| *until > now);
    }

    fn receive(&mut self, now: Duration, from: Ipv4Addr, ttl: u8, payload: &[u8], out: &mut Vec<Output>) {
        let message = match Message::decode(payload) {
            Ok(message) => message,
            Err(error) => {
                self.counters.malformed += 1;
                out.push(Output::Event(Event::Malformed { from, error: error.to_string() }));
                return;
            }
        };
        self.counters.control_received.entry(message.kind()).or_default().add(payload.len());
        match message {
            Message::Rreq(rreq) => self.receive_rreq(now, ttl, rreq),
            Message::Route(route) => self.receive_route(now, from, route, out),
            Message::RouteAck(ack) => self.receive_route_ack(from, ack),
            Message::Probe(probe) => self.receive_probe(now, probe, out),
            Message::Rerr(rerr) => self.receive_rerr(now, from, rerr, out),
        }
    }
}

impl Protocol for Copas {
    type Event = Event;

    fn handle(&mut self, now: Duration, input: Input<'_>, out: &mut Vec<Output>) {
        match input {
            Input::Control { from, ttl, payload } => self.receive(now, from, ttl, payload, out),
            Input::NeighborHeard { neighbor } | Input::NeighborAcked { neighbor } => {
                self.heard.insert(neighbor, now);
            }
            Input::NoRoute { src, dst, local } => self.no_route(now, src, dst, local, out),
            Input::RouteUsed { addr } => self.route_used(now, addr),
            Input::LinkFailed { neighbor } => {
                if self.config.link_layer_feedback {
                    self.link_failed(now, neighbor, "link layer", out);
                }
            }
            Input::ResolutionFailed { neighbor } => {
                if self.config.link_layer_feedback {
                    self.link_failed(now, neighbor, "address resolution", out);
                }
            }
            Input::MacBackoffs { total } => {
                let c = &mut self.contention;
                c.total = Some(total);
                c.at_sample.get_or_insert(total);
            }
        }
        // Whatever input woke us, timers that are due run now, in order.
        self.tick(now, out);
    }

    fn handle_timeout(&mut self, now: Duration, out: &mut Vec<Output>) {
        self.tick(now, out);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let deadlines = [
            Some(self.contention.next_sample),
            self.delayed.iter().map(|d| d.0).min(),
            self.collections.values().map(|c| c.deadline).min(),
            self.discoveries.values().map(|d| d.deadline).min(),
            self.pending_routes.values().map(|p| p.deadline).min(),
            self.pairs.values().map(|p| p.next_probe).min(),
            self.routes.values().map(|e| e.expires).min(),
        ];
        deadlines.into_iter().flatten().min()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
}

#[cfg(test)]
mod tests;
