//! The AODV state machine (RFC 3561 section 6), sans-IO: time and inputs
//! in, [`Output`]s out. Section numbers in comments are the RFC's.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::Ipv4Addr;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use meshemu_ondemand::{Counters, Input, Protocol, BROADCAST};

use crate::config::{Config, PrecursorRule, RepairRule, RingLimit, RreqBackoff, MAX_RREQ_TIMEOUT};
use crate::packet::{seq_newer, Message, Rerr, Rrep, Rreq, MAX_RERR_DESTINATIONS};
use crate::{Event, Output};

const SECOND: Duration = Duration::from_secs(1);
/// The least measured time per hop that RREP waits count.
const MIN_HOP_TIME: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RouteState {
    Valid,
    Invalid,
    /// Broken, a local repair (6.12) searches a new route.
    Repairing,
}

/// Why a RERR is sent, which decides what it lists and how it leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RerrCause {
    /// A route broken here (a lost link, a failed repair, a packet with no
    /// route): at once, and with `rerr_broadcast` every broken route.
    Broken,
    /// A local repair found a longer route (6.12): the N flag, at once.
    Repaired,
    /// A neighbour's RERR passed on: broadcast ones wait the jitter of
    /// relayed broadcasts, as ns-2's `recvError` sends them.
    Relayed,
}

#[derive(Clone, Debug)]
struct Route {
    /// Destination sequence number; None: not valid (e.g. learnt from a neighbour's packet).
    seq: Option<u32>,
    hops: u8,
    next_hop: Ipv4Addr,
    state: RouteState,
    /// Valid: when it expires; invalid: when the entry is deleted.
    expires: Duration,
    /// Neighbours that route to this destination through us (RERR recipients).
    precursors: BTreeSet<Ipv4Addr>,
    /// The kernel has this route (only while valid, or under ns-2's repair).
    installed: bool,
    /// The hop count it had when it last went down here (ns-2's
    /// `rt_last_hop_count`; None: never).
    last_down_hops: Option<u8>,
    /// What this node's discoveries of the destination took per hop.
    hop_latency: HopLatency,
}

impl Route {
    /// Valid, or under ns-2's repair, which keeps the route in the kernel
    /// with its number and hop count (ns-2: `rt_hops != INFINITY2`): such a
    /// route answers RREQs, is taken out by a RERR from its next hop, and
    /// gives way only to a newer number or, with the same, as few hops
    /// (`gives_way_to`).
    fn in_use(&self) -> bool {
        self.state == RouteState::Valid || (self.state == RouteState::Repairing && self.installed)
    }

    /// Whether a route with this one's number and `hops` replaces it: any
    /// over a route out of use, fewer hops over a valid one, and no more
    /// over one under ns-2's repair. A node whose route runs through the
    /// repairing one answers with more hops; one as near answers with as
    /// many, and ends the repair. (ns-2 asks for fewer here too, so a
    /// relay's repair on a chain waits until its source rediscovers or
    /// `LocalRepairTimer` fires, at about twice the time of day: NS2.md.)
    fn gives_way_to(&self, hops: u8) -> bool {
        match self.state {
            RouteState::Valid => hops < self.hops,
            RouteState::Repairing if self.installed => hops <= self.hops,
            _ => true,
        }
    }
}

#[derive(Clone, Debug)]
struct Discovery {
    started: Duration,
    /// TTL of the last RREQ sent (0: none sent yet).
    ttl: u8,
    /// RREQs sent with the network diameter as TTL (they count against RREQ_RETRIES).
    attempts_at_diameter: u32,
    /// RREQs sent in all.
    attempts: u32,
    /// When to look again: retry, give up, or send once the rate limit allows.
    deadline: Duration,
    /// Waiting for the rate limit before the next RREQ.
    postponed: bool,
    /// A local repair: the hop count of the broken route.
    repair_of_hops: Option<u8>,
    /// When the last RREQ went out (a reply's latency counts from it).
    last_rreq_at: Duration,
}

/// A destination's measured discovery latency per hop, over its last
/// [`HopLatency::KEPT`] discoveries (ns-2's `rt_disc_latency`, MAX_HISTORY).
#[derive(Clone, Debug, Default)]
struct HopLatency {
    samples: VecDeque<Duration>,
}

impl HopLatency {
    const KEPT: usize = 3;

    fn record(&mut self, per_hop: Duration) {
        if self.samples.len() == Self::KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back(per_hop);
    }

    fn mean(&self) -> Option<Duration> {
        let count = u32::try_from(self.samples.len()).ok().filter(|&n| n > 0)?;
        Some(self.samples.iter().sum::<Duration>() / count)
    }
}

/// One AODV node.
pub struct Aodv {
    config: Config,
    me: Ipv4Addr,
    seq: u32,
    rreq_id: u32,
    routes: BTreeMap<Ipv4Addr, Route>,
    /// (originator, RREQ ID) seen, until when to remember it.
    seen_rreqs: BTreeMap<(Ipv4Addr, u32), Duration>,
    discoveries: BTreeMap<Ipv4Addr, Discovery>,
    rreq_times: VecDeque<Duration>,
    rerr_times: VecDeque<Duration>,
    /// Neighbours that sent HELLOs: when we last heard anything from them.
    heard: BTreeMap<Ipv4Addr, Duration>,
    next_hello: Option<Duration>,
    last_broadcast: Option<Duration>,
    /// Relayed broadcasts waiting for their jitter: (when, ttl, payload).
    delayed: Vec<(Duration, u8, Vec<u8>)>,
    /// Neighbours we asked for an RREP-ACK, until when we wait.
    awaiting_ack: BTreeMap<Ipv4Addr, Duration>,
    /// Neighbours whose RREQs are ignored (6.8), until when.
    blacklist: BTreeMap<Ipv4Addr, Duration>,
    /// Hops the last data packet to each destination had travelled when it
    /// left this node ([`Protocol::data_hops`]): ns-2's repair rule.
    data_hops: BTreeMap<Ipv4Addr, u8>,
    rng: ChaCha8Rng,
    counters: Counters,
}

impl Aodv {
    /// A node with address `me`, its config checked by the caller
    /// ([`Config::validate`]); `seed` drives every random choice (jitter).
    pub fn new(config: Config, me: Ipv4Addr, seed: u64, now: Duration) -> Aodv {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let next_hello = config.hello_interval().map(|interval| now + jitter(&mut rng, interval / 2));
        Aodv {
            config,
            me,
            seq: 0,
            rreq_id: 0,
            routes: BTreeMap::new(),
            seen_rreqs: BTreeMap::new(),
            discoveries: BTreeMap::new(),
            rreq_times: VecDeque::new(),
            rerr_times: VecDeque::new(),
            heard: BTreeMap::new(),
            next_hello,
            last_broadcast: None,
            delayed: Vec::new(),
            awaiting_ack: BTreeMap::new(),
            blacklist: BTreeMap::new(),
            data_hops: BTreeMap::new(),
            rng,
            counters: Counters::default(),
        }
    }

    pub fn address(&self) -> Ipv4Addr {
        self.me
    }

    pub fn sequence_number(&self) -> u32 {
        self.seq
    }

    /// The next hop and hop count of the valid route to `dst`, if any.
    pub fn route(&self, dst: Ipv4Addr) -> Option<(Ipv4Addr, u8)> {
        self.routes.get(&dst).filter(|r| r.state == RouteState::Valid).map(|r| (r.next_hop, r.hops))
    }

    /// A route discovery for `dst` is under way.
    pub fn discovering(&self, dst: Ipv4Addr) -> bool {
        self.discoveries.contains_key(&dst)
    }

    // --- sending ---

    fn send(&mut self, now: Duration, to: Ipv4Addr, ttl: u8, message: &Message, out: &mut Vec<Output>) {
        let payload = message.encode();
        self.count_sent(now, to, message.kind(self.me), &payload);
        out.push(Output::Send { to, ttl, payload });
    }

    fn count_sent(&mut self, now: Duration, to: Ipv4Addr, kind: &'static str, payload: &[u8]) {
        self.counters.control_sent.entry(kind).or_default().add(payload.len());
        if to == BROADCAST {
            self.last_broadcast = Some(now);
        }
    }

    /// A broadcast relayed for others, after a random jitter.
    fn relay_broadcast(&mut self, now: Duration, ttl: u8, message: &Message, out: &mut Vec<Output>) {
        let max = Duration::from_millis(self.config.broadcast_jitter_ms);
        if max.is_zero() {
            self.send(now, BROADCAST, ttl, message, out);
        } else {
            let when = now + jitter(&mut self.rng, max);
            self.delayed.push((when, ttl, message.encode()));
        }
    }

    // --- the route table ---

    /// Creates or updates the route to `dst` with new information (6.2,
    /// 6.7): a fresher sequence number, an equal one with fewer hops or
    /// over an invalid route, or no sequence number (a neighbour heard
    /// directly). Otherwise only the lifetime of the same valid path is
    /// extended. Returns whether the route was replaced. A route that
    /// becomes valid releases the packets held for `dst`, `release_spacing`
    /// apart.
    #[allow(clippy::too_many_arguments)] // the fields of a route entry, as the RFC lists them
    fn update_route(
        &mut self,
        now: Duration,
        dst: Ipv4Addr,
        seq: Option<u32>,
        hops: u8,
        next_hop: Ipv4Addr,
        lifetime: Duration,
        release_spacing: Duration,
        out: &mut Vec<Output>,
    ) -> bool {
        let replace = match self.routes.get(&dst) {
            None => true,
            Some(route) => match (seq, route.seq) {
                (None, _) => !route.in_use() || hops <= route.hops,
                (Some(_), None) => true,
                (Some(new), Some(old)) => seq_newer(new, old) || (new == old && route.gives_way_to(hops)),
            },
        };
        if !replace {
            if let Some(route) = self.routes.get_mut(&dst) {
                if route.state == RouteState::Valid && route.next_hop == next_hop {
                    route.expires = route.expires.max(now + lifetime);
                }
            }
            return false;
        }
        let was_repairing = self.routes.get(&dst).is_some_and(|r| r.state == RouteState::Repairing);
        let route = self.routes.entry(dst).or_insert_with(|| Route {
            seq: None,
            hops,
            next_hop,
            state: RouteState::Invalid,
            expires: now,
            precursors: BTreeSet::new(),
            installed: false,
            last_down_hops: None,
            hop_latency: HopLatency::default(),
        });
        let was_valid = route.state == RouteState::Valid;
        let path_changed = !route.installed || route.next_hop != next_hop || route.hops != hops;
        if seq.is_some() {
            route.seq = seq;
        }
        route.expires = if was_valid { route.expires.max(now + lifetime) } else { now + lifetime };
        route.next_hop = next_hop;
        route.hops = hops;
        route.state = RouteState::Valid;
        if path_changed {
            route.installed = true;
            out.push(Output::SetRoute { dst, next_hop, hops });
            out.push(Output::Event(Event::RouteAdded { dst, next_hop, hops }));
        }
        if !was_valid || was_repairing {
            self.route_became_valid(now, dst, hops, release_spacing, out);
        }
        true
    }

    /// A neighbour we heard directly: a one-hop route to it.
    fn heard_neighbor(&mut self, now: Duration, neighbor: Ipv4Addr, out: &mut Vec<Output>) {
        let lifetime = self.config.active_route_timeout();
        self.update_route(now, neighbor, None, 1, neighbor, lifetime, Duration::ZERO, out);
    }

    fn route_became_valid(&mut self, now: Duration, dst: Ipv4Addr, hops: u8, spacing: Duration, out: &mut Vec<Output>) {
        let Some(discovery) = self.discoveries.remove(&dst) else { return };
        let elapsed_ms = (now - discovery.started).as_millis() as u64;
        if let Some(route) = self.routes.get_mut(&dst).filter(|_| hops > 0 && discovery.attempts > 0) {
            route.hop_latency.record((now - discovery.last_rreq_at) / u32::from(hops));
        }
        self.counters.discoveries_succeeded += 1;
        out.push(Output::Event(Event::DiscoverySucceeded { dst, hops, elapsed_ms }));
        out.push(Output::Release { dst, spacing });
        if let Some(old_hops) = discovery.repair_of_hops {
            if hops > old_hops && self.config.local_repair_rule == RepairRule::Rfc {
                // 6.12: a longer route after repair: upstream nodes may look for a better one.
                // (ns-2 tells nobody: its upstream nodes never learn of a repair.)
                self.send_rerr(now, &[dst], RerrCause::Repaired, out);
            }
        }
    }

    /// Takes a valid route out of use: the kernel route goes, the entry
    /// stays (with its sequence number) for DELETE_PERIOD.
    fn invalidate(&mut self, now: Duration, dst: Ipv4Addr, new_seq: Option<u32>, reason: &'static str, out: &mut Vec<Output>) {
        let delete_period = self.config.delete_period();
        let Some(route) = self.routes.get_mut(&dst) else { return };
        if route.state == RouteState::Invalid {
            return;
        }
        route.state = RouteState::Invalid;
        route.expires = now + delete_period;
        route.last_down_hops = Some(route.hops);
        if let Some(seq) = new_seq {
            route.seq = Some(seq);
        }
        if route.installed {
            route.installed = false;
            out.push(Output::DeleteRoute { dst });
            out.push(Output::Event(Event::RouteRemoved { dst, reason }));
        }
    }

    /// Extends a route in use by data, and the route to its next hop (6.2).
    fn refresh(&mut self, now: Duration, addr: Ipv4Addr) {
        let until = now + self.config.active_route_timeout();
        let Some(route) = self.routes.get_mut(&addr).filter(|r| r.state == RouteState::Valid) else { return };
        route.expires = route.expires.max(until);
        let next_hop = route.next_hop;
        if let Some(hop) = self.routes.get_mut(&next_hop).filter(|r| r.state == RouteState::Valid) {
            hop.expires = hop.expires.max(until);
        }
    }

    fn add_precursor(&mut self, dst: Ipv4Addr, precursor: Ipv4Addr) {
        if let Some(route) = self.routes.get_mut(&dst) {
            route.precursors.insert(precursor);
        }
    }

    // --- route discovery (6.3, 6.4) ---

    fn start_discovery(&mut self, now: Duration, dst: Ipv4Addr, repair_of_hops: Option<u8>, out: &mut Vec<Output>) {
        self.counters.discoveries_started += 1;
        out.push(Output::Event(match repair_of_hops {
            Some(_) => Event::LocalRepairStarted { dst },
            None => Event::DiscoveryStarted { dst },
        }));
        if repair_of_hops.is_some() {
            // What arrives for dst during the repair waits for its result
            // (6.12; ns-2 buffers it too) instead of failing on the old next hop.
            out.push(Output::HoldForwarded { dst });
        }
        self.discoveries.insert(
            dst,
            Discovery {
                started: now,
                ttl: 0,
                attempts_at_diameter: 0,
                attempts: 0,
                deadline: now,
                postponed: false,
                repair_of_hops,
                last_rreq_at: now,
            },
        );
        self.next_rreq(now, dst, out);
    }

    /// The TTL of the next RREQ of a discovery (expanding ring search).
    fn next_ttl(&self, dst: Ipv4Addr, discovery: &Discovery) -> u8 {
        let config = &self.config;
        if let (Some(hops), RepairRule::Rfc) = (discovery.repair_of_hops, config.local_repair_rule) {
            return hops.saturating_add(config.local_add_ttl).min(config.net_diameter);
        }
        // ns-2's repair (sendRequest from local_rt_repair) is an ordinary discovery.
        if !config.expanding_ring_search {
            return config.net_diameter;
        }
        // The ring grows from the last TTL sent or, at first, from the last known hop count.
        let grown_from = if discovery.ttl == 0 {
            // 6.4: start from the last known hop count when there is one.
            match self.routes.get(&dst) {
                // ns-2's sendRequest starts from max(last TTL, rt_last_hop_count), and
                // rt_last_hop_count is INFINITY2 until the route goes down once.
                Some(route) if discovery.repair_of_hops.is_some() => match route.last_down_hops {
                    Some(down) => route.hops.max(down),
                    None => return config.net_diameter,
                },
                Some(route) => route.hops,
                None if config.ttl_start > config.ttl_threshold => return config.net_diameter,
                None => return config.ttl_start,
            }
        } else if discovery.ttl >= config.net_diameter {
            return config.net_diameter;
        } else {
            discovery.ttl
        };
        let ttl = grown_from.saturating_add(config.ttl_increment);
        let whole_network = match config.ring_limit {
            RingLimit::Rfc => ttl > config.ttl_threshold,
            RingLimit::Ns2 => grown_from >= config.ttl_threshold,
        };
        if whole_network {
            config.net_diameter
        } else {
            ttl
        }
    }

    /// The time per hop the waits for an RREP to `dst` count (ns-2's
    /// `PerHopTime` with `measured_hop_time`). At least 1 ms: our retries
    /// run on a timer (ns-2's wait for the next packet or a 0.5 s tick), so
    /// a reply that came at once must not make them a burst.
    fn hop_time(&self, dst: Ipv4Addr) -> Duration {
        let measured = self.config.measured_hop_time.then(|| self.routes.get(&dst)).flatten();
        match measured.and_then(|route| route.hop_latency.mean()) {
            Some(per_hop) => per_hop.max(MIN_HOP_TIME),
            None => self.config.node_traversal_time(),
        }
    }

    /// Sends the next RREQ of the discovery for `dst`, or postpones it
    /// while RREQ_RATELIMIT RREQs went out in the last second.
    fn next_rreq(&mut self, now: Duration, dst: Ipv4Addr, out: &mut Vec<Output>) {
        while self.rreq_times.front().is_some_and(|&t| t + SECOND <= now) {
            self.rreq_times.pop_front();
        }
        let Some(discovery) = self.discoveries.get(&dst) else { return };
        if self.rreq_times.len() >= self.config.rreq_rate_limit as usize {
            let free_at = self.rreq_times[0] + SECOND;
            let discovery = self.discoveries.get_mut(&dst).expect("checked above");
            discovery.postponed = true;
            discovery.deadline = free_at;
            return;
        }
        let ttl = self.next_ttl(dst, discovery);
        self.rreq_times.push_back(now);
        // 6.1: a node increments its own sequence number before it originates a discovery.
        self.seq = next_seq(self.seq);
        self.rreq_id = self.rreq_id.wrapping_add(1);
        let known = self.routes.get(&dst).and_then(|r| r.seq);
        let rreq = Rreq {
            join: false,
            repair: false,
            gratuitous: self.config.gratuitous_rrep,
            destination_only: !self.config.intermediate_replies,
            unknown_seq: known.is_none(),
            hop_count: 0,
            id: self.rreq_id,
            dst,
            dst_seq: known.unwrap_or(0),
            orig: self.me,
            orig_seq: self.seq,
        };
        self.seen_rreqs.insert((self.me, self.rreq_id), now + self.config.path_discovery_time());
        let net_diameter = self.config.net_diameter;
        let hop_time = self.hop_time(dst);
        let net_traversal = self.config.net_traversal_time_at(hop_time);
        let ring_traversal = self.config.ring_traversal_time(ttl, hop_time);
        let backoff = self.config.rreq_backoff;
        let discovery = self.discoveries.get_mut(&dst).expect("checked above");
        discovery.postponed = false;
        discovery.ttl = ttl;
        discovery.last_rreq_at = now;
        discovery.attempts += 1;
        let attempt = discovery.attempts;
        discovery.deadline = if ttl >= net_diameter {
            // 6.3: binary exponential backoff once the whole network is searched
            // (ns-2: the wait grows by one NET_TRAVERSAL_TIME a time, up to 10 s).
            discovery.attempts_at_diameter += 1;
            let n = discovery.attempts_at_diameter;
            now + match backoff {
                RreqBackoff::Binary => net_traversal * (1u32 << (n - 1).min(16)),
                RreqBackoff::Linear => (net_traversal * n).min(MAX_RREQ_TIMEOUT.max(net_traversal)),
            }
        } else {
            now + ring_traversal
        };
        out.push(Output::Event(Event::RreqSent { dst, ttl, attempt }));
        self.send(now, BROADCAST, ttl, &Message::Rreq(rreq), out);
    }

    fn discovery_due(&mut self, now: Duration, dst: Ipv4Addr, out: &mut Vec<Output>) {
        let Some(discovery) = self.discoveries.get(&dst) else { return };
        // An RFC repair has one RREQ; ns-2's searches as long as a discovery does.
        let single_shot = discovery.repair_of_hops.is_some() && self.config.local_repair_rule == RepairRule::Rfc;
        let exhausted = single_shot
            || (discovery.ttl >= self.config.net_diameter
                && discovery.attempts_at_diameter > self.config.rreq_retries);
        if discovery.postponed || !exhausted {
            self.next_rreq(now, dst, out);
            return;
        }
        let discovery = self.discoveries.remove(&dst).expect("checked above");
        let elapsed_ms = (now - discovery.started).as_millis() as u64;
        self.counters.discoveries_failed += 1;
        out.push(Output::Event(Event::DiscoveryFailed { dst, elapsed_ms }));
        out.push(Output::Drop { dst });
        if discovery.repair_of_hops.is_some() {
            // 6.12: a failed local repair is a broken route after all (the
            // sequence number went up when it started).
            let seq = self.routes.get(&dst).and_then(|r| r.seq);
            self.invalidate(now, dst, seq, "repair failed", out);
            self.counters.route_breaks += 1;
            self.send_rerr(now, &[dst], RerrCause::Broken, out);
        }
    }

    // --- route errors (6.11) ---

    /// The link to `neighbor` is gone: routes through it break; RERR to
    /// their precursors, or a local repair when that is on.
    fn link_broken(&mut self, now: Duration, neighbor: Ipv4Addr, cause: &'static str, out: &mut Vec<Output>) {
        self.heard.remove(&neighbor);
        let broken: Vec<Ipv4Addr> = self
            .routes
            .iter()
            .filter(|(_, r)| r.state == RouteState::Valid && r.next_hop == neighbor)
            .map(|(&dst, _)| dst)
            .collect();
        if broken.is_empty() {
            return;
        }
        self.counters.link_breaks += 1;
        out.push(Output::Event(Event::LinkBroken { neighbor, cause }));
        let mut unreachable = Vec::new();
        for dst in broken {
            let route = &self.routes[&dst];
            let (seq, hops) = (route.seq.map(next_seq), route.hops);
            match (self.config.local_repair, self.config.local_repair_rule) {
                (true, RepairRule::Rfc)
                    if !route.precursors.is_empty() && route.hops <= self.config.max_repair_ttl() =>
                {
                    self.invalidate(now, dst, seq, "local repair", out);
                    if let Some(route) = self.routes.get_mut(&dst) {
                        route.state = RouteState::Repairing;
                    }
                    self.start_discovery(now, dst, Some(hops), out);
                    continue;
                }
                (true, RepairRule::Ns2) if self.data_hops.get(&dst).is_some_and(|&travelled| travelled > hops) => {
                    // ns-2's rt_ll_failed: the break is nearer the destination
                    // than the source. The route stays in the kernel (ns-2
                    // keeps what is queued for the old next hop and buffers
                    // the rest); nobody upstream is told. Unlike RFC 6.12,
                    // the number stays: the RREQ asks for it, so any node
                    // with a route as fresh answers and relays it no further,
                    // and only the destination's renumbered reply or a route
                    // as short replaces this one (`Route::gives_way_to`).
                    if let Some(route) = self.routes.get_mut(&dst) {
                        route.state = RouteState::Repairing;
                    }
                    self.start_discovery(now, dst, Some(hops), out);
                    continue;
                }
                _ => {}
            }
            self.invalidate(now, dst, seq, cause, out);
            self.counters.route_breaks += 1;
            unreachable.push(dst);
        }
        if self.config.flush_on_break && !unreachable.is_empty() {
            out.push(Output::Flush { neighbor });
        }
        // ns-2's handle_link_failure lists every route the link broke, precursors or not.
        self.send_rerr(now, &unreachable, RerrCause::Broken, out);
        if !unreachable.is_empty() && self.config.precursor_rule == PrecursorRule::Ns2 {
            for route in self.routes.values_mut() {
                route.precursors.remove(&neighbor);
            }
        }
    }

    /// Sends a RERR about the invalid routes in `dsts` that have precursors
    /// (a route broken here with `rerr_broadcast`: every one of them):
    /// unicast when one neighbour needs it, else (and always with
    /// `rerr_broadcast`) broadcast, TTL 1.
    fn send_rerr(&mut self, now: Duration, dsts: &[Ipv4Addr], cause: RerrCause, out: &mut Vec<Output>) {
        let all = cause == RerrCause::Broken && self.config.rerr_broadcast;
        let mut recipients = BTreeSet::new();
        let mut unreachable = Vec::new();
        for &dst in dsts {
            let Some(route) = self.routes.get(&dst) else { continue };
            if route.precursors.is_empty() && !all {
                continue;
            }
            recipients.extend(route.precursors.iter().copied());
            unreachable.push((dst, route.seq.unwrap_or(0)));
        }
        if unreachable.is_empty() {
            return;
        }
        let to = match recipients.len() {
            1 if !self.config.rerr_broadcast => *recipients.first().expect("one element"),
            _ => BROADCAST,
        };
        self.send_rerr_to(now, to, unreachable, cause, out);
    }

    fn send_rerr_to(
        &mut self,
        now: Duration,
        to: Ipv4Addr,
        unreachable: Vec<(Ipv4Addr, u32)>,
        cause: RerrCause,
        out: &mut Vec<Output>,
    ) {
        for chunk in unreachable.chunks(MAX_RERR_DESTINATIONS) {
            while self.rerr_times.front().is_some_and(|&t| t + SECOND <= now) {
                self.rerr_times.pop_front();
            }
            if self.rerr_times.len() >= self.config.rerr_rate_limit as usize {
                return; // RERR_RATELIMIT: the rest is not sent
            }
            self.rerr_times.push_back(now);
            self.counters.rerr_sent += 1;
            let listed = chunk.iter().map(|(dst, _)| *dst).collect();
            out.push(Output::Event(Event::RerrSent { to, unreachable: listed }));
            let no_delete = cause == RerrCause::Repaired;
            let rerr = Message::Rerr(Rerr { no_delete, unreachable: chunk.to_vec() });
            if cause == RerrCause::Relayed && to == BROADCAST {
                self.relay_broadcast(now, 1, &rerr, out);
            } else {
                self.send(now, to, 1, &rerr, out);
            }
        }
    }

    // --- receiving ---

    fn receive(&mut self, now: Duration, from: Ipv4Addr, ttl: u8, payload: &[u8], out: &mut Vec<Output>) {
        if from == self.me {
            self.counters.ignored += 1; // our own broadcast, looped back
            return;
        }
        let message = match Message::decode(payload) {
            Ok(message) => message,
            Err(error) => {
                self.counters.malformed += 1;
                out.push(Output::Event(Event::Malformed { from, error: error.to_string() }));
                return;
            }
        };
        self.counters.control_received.entry(message.kind(from)).or_default().add(payload.len());
        if let Some(last) = self.heard.get_mut(&from) {
            *last = now; // 6.11: any packet from a neighbour shows the link works
        }
        match message {
            Message::Rreq(rreq) => self.receive_rreq(now, from, ttl, rreq, out),
            Message::Rrep(rrep) if rrep.is_hello_from(from) => self.receive_hello(now, from, rrep, out),
            Message::Rrep(rrep) => self.receive_rrep(now, from, rrep, out),
            Message::Rerr(rerr) => self.receive_rerr(now, from, rerr, out),
            Message::RrepAck => {
                self.awaiting_ack.remove(&from);
            }
        }
    }

    /// 6.5: reverse route, then answer (6.6) or relay.
    fn receive_rreq(&mut self, now: Duration, from: Ipv4Addr, ttl: u8, rreq: Rreq, out: &mut Vec<Output>) {
        if self.blacklist.get(&from).is_some_and(|&until| until > now) {
            self.counters.ignored += 1;
            return;
        }
        self.heard_neighbor(now, from, out);
        if rreq.orig == self.me || self.seen_rreqs.contains_key(&(rreq.orig, rreq.id)) {
            self.counters.ignored += 1;
            return;
        }
        self.seen_rreqs.insert((rreq.orig, rreq.id), now + self.config.path_discovery_time());
        let hops = rreq.hop_count.saturating_add(1);
        let minimal_lifetime = (self.config.net_traversal_time() * 2)
            .saturating_sub(self.config.node_traversal_time() * 2 * u32::from(hops));
        self.update_route(now, rreq.orig, Some(rreq.orig_seq), hops, from, minimal_lifetime, Duration::ZERO, out);
        let Some((to_orig, _)) = self.route(rreq.orig) else { return };

        if rreq.dst == self.me {
            // 6.1: the destination answers with the larger of its own number and
            // the one asked for. (6.6.1 takes the asked one only when it is exactly
            // the next: but an originator raises its number at every break of a
            // route that came back without one, e.g. from a neighbour heard
            // relaying, and would then refuse every answer.)
            if !rreq.unknown_seq && seq_newer(rreq.dst_seq, self.seq) {
                self.seq = rreq.dst_seq;
            }
            if self.config.renumber_replies {
                self.seq = self.seq.wrapping_add(1);
            }
            let rrep = Rrep {
                repair: false,
                ack_required: self.config.rrep_ack,
                prefix_size: 0,
                hop_count: 0,
                dst: self.me,
                dst_seq: self.seq,
                orig: rreq.orig,
                lifetime_ms: millis(self.config.my_route_timeout()),
            };
            self.send_rrep(now, to_orig, rrep, out);
            return;
        }

        let fresh_route = self.routes.get(&rreq.dst).filter(|r| {
            r.in_use() && r.seq.is_some_and(|seq| rreq.unknown_seq || !seq_newer(rreq.dst_seq, seq))
        });
        if let (true, false, Some(route)) =
            (self.config.intermediate_replies, rreq.destination_only, fresh_route)
        {
            // 6.6.2: an intermediate node with a fresh enough route answers.
            let (to_dst, dst_hops, dst_seq) = (route.next_hop, route.hops, route.seq.unwrap_or(0));
            let lifetime_ms = millis(route.expires.saturating_sub(now));
            self.add_precursor(rreq.dst, to_orig);
            self.add_precursor(rreq.orig, to_dst);
            let rrep = Rrep {
                repair: false,
                ack_required: self.config.rrep_ack,
                prefix_size: 0,
                hop_count: dst_hops,
                dst: rreq.dst,
                dst_seq,
                orig: rreq.orig,
                lifetime_ms,
            };
            self.send_rrep(now, to_orig, rrep, out);
            if rreq.gratuitous {
                // 6.6.3: tell the destination the way back to the originator.
                let orig_route = &self.routes[&rreq.orig];
                let gratuitous = Rrep {
                    repair: false,
                    ack_required: false,
                    prefix_size: 0,
                    hop_count: orig_route.hops,
                    dst: rreq.orig,
                    dst_seq: rreq.orig_seq,
                    orig: rreq.dst,
                    lifetime_ms: millis(orig_route.expires.saturating_sub(now)),
                };
                self.send_rrep(now, to_dst, gratuitous, out);
            }
            return;
        }

        if ttl <= 1 {
            return;
        }
        let mut relayed = rreq;
        relayed.hop_count = hops;
        if let Some(known) = self.routes.get(&relayed.dst).and_then(|r| r.seq) {
            if relayed.unknown_seq || seq_newer(known, relayed.dst_seq) {
                relayed.dst_seq = known;
                relayed.unknown_seq = false;
            }
        }
        self.relay_broadcast(now, ttl - 1, &Message::Rreq(relayed), out);
    }

    fn send_rrep(&mut self, now: Duration, to: Ipv4Addr, rrep: Rrep, out: &mut Vec<Output>) {
        if rrep.ack_required {
            self.awaiting_ack.insert(to, now + self.config.next_hop_wait());
        }
        // Unicast to a neighbour, which processes it (the IP TTL only has to get it there).
        self.send(now, to, 1, &Message::Rrep(rrep), out);
    }

    /// 6.7: forward route, then relay towards the originator.
    fn receive_rrep(&mut self, now: Duration, from: Ipv4Addr, rrep: Rrep, out: &mut Vec<Output>) {
        self.heard_neighbor(now, from, out);
        if rrep.ack_required {
            self.send(now, from, 1, &Message::RrepAck, out);
        }
        let hops = rrep.hop_count.saturating_add(1);
        let lifetime = Duration::from_millis(u64::from(rrep.lifetime_ms));
        let spacing = self.config.release_spacing();
        let replaced = self.update_route(now, rrep.dst, Some(rrep.dst_seq), hops, from, lifetime, spacing, out);
        if rrep.orig == self.me {
            return;
        }
        // Relay when the reply is news or agrees with our route (a second
        // originator's reply along the same path must get through too);
        // else, if asked to, as our own route, which is at least as good.
        let agrees = self.route(rrep.dst).is_some_and(|(next_hop, h)| next_hop == from && h == hops);
        let own = self.routes.get(&rrep.dst).filter(|r| r.state == RouteState::Valid);
        let (relayed, towards_dst, as_own_route) = match own {
            _ if replaced || agrees => (Rrep { hop_count: hops, ..rrep }, from, false),
            Some(own) if self.config.relay_every_reply => {
                let lifetime_ms = millis(own.expires.saturating_sub(now));
                let described = Rrep {
                    hop_count: own.hops,
                    dst_seq: own.seq.unwrap_or(rrep.dst_seq),
                    lifetime_ms,
                    ..rrep
                };
                (described, own.next_hop, true)
            }
            _ => {
                self.counters.ignored += 1;
                return;
            }
        };
        let Some((to_orig, _)) = self.route(rrep.orig) else {
            self.counters.ignored += 1;
            return;
        };
        self.add_precursor(rrep.dst, to_orig);
        if self.config.precursor_rule == PrecursorRule::Rfc {
            self.add_precursor(towards_dst, to_orig);
            self.add_precursor(rrep.orig, towards_dst);
        }
        self.refresh(now, rrep.orig);
        let relayed = Rrep { ack_required: self.config.rrep_ack, ..relayed };
        self.send_rrep(now, to_orig, relayed, out);
        if as_own_route {
            *self.counters.protocol.entry("replies_relayed_as_own_route").or_default() += 1;
        }
    }

    /// 6.9: a HELLO keeps the one-hop route to its sender and starts
    /// watching that neighbour for silence.
    fn receive_hello(&mut self, now: Duration, from: Ipv4Addr, hello: Rrep, out: &mut Vec<Output>) {
        let Some(timeout) = self.config.hello_timeout() else {
            self.heard_neighbor(now, from, out);
            return;
        };
        self.heard.insert(from, now);
        let lifetime = Duration::from_millis(u64::from(hello.lifetime_ms)).max(timeout);
        self.update_route(now, from, Some(hello.dst_seq), 1, from, lifetime, Duration::ZERO, out);
    }

    /// 6.11 (iii): routes through the sender to the listed destinations break.
    fn receive_rerr(&mut self, now: Duration, from: Ipv4Addr, rerr: Rerr, out: &mut Vec<Output>) {
        self.counters.rerr_received += 1;
        let listed = rerr.unreachable.iter().map(|(dst, _)| *dst).collect();
        out.push(Output::Event(Event::RerrReceived { from, unreachable: listed }));
        if rerr.no_delete {
            return; // the upstream node repaired locally: the route stays
        }
        let mut propagate = Vec::new();
        for (dst, seq) in rerr.unreachable {
            // A route under ns-2's repair is still in the kernel: the RERR takes it out (ns-2's
            // recvError downs it too); the search goes on and brings it back if it succeeds.
            let through_sender = self.routes.get(&dst).is_some_and(|r| r.in_use() && r.next_hop == from);
            if !through_sender {
                continue;
            }
            self.invalidate(now, dst, (seq != 0).then_some(seq), "rerr", out);
            self.counters.route_breaks += 1;
            propagate.push(dst);
        }
        if self.config.flush_on_break && !propagate.is_empty() {
            out.push(Output::Flush { neighbor: from });
        }
        self.send_rerr(now, &propagate, RerrCause::Relayed, out);
        if self.config.precursor_rule == PrecursorRule::Ns2 {
            for dst in propagate {
                if let Some(route) = self.routes.get_mut(&dst) {
                    route.precursors.clear();
                }
            }
        }
    }

    // --- data path ---

    fn no_route(&mut self, now: Duration, dst: Ipv4Addr, local: bool, out: &mut Vec<Output>) {
        if local {
            if self.route(dst).is_some() {
                // The route came while the packet was queued.
                out.push(Output::Release { dst, spacing: Duration::ZERO });
            } else if !self.discoveries.contains_key(&dst) {
                self.start_discovery(now, dst, None, out);
            }
            return;
        }
        self.counters.forward_no_route += 1;
        if self.discoveries.contains_key(&dst) {
            return; // a local repair is under way
        }
        // 6.11 (ii): tell whoever sent it that we have no route.
        let seq = self.routes.get(&dst).and_then(|r| r.seq).unwrap_or(0);
        self.send_rerr_to(now, BROADCAST, vec![(dst, seq)], RerrCause::Broken, out);
    }

    // --- timers ---

    fn tick(&mut self, now: Duration, out: &mut Vec<Output>) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed).into_iter().partition(|d| d.0 <= now);
        self.delayed = later;
        for (_, ttl, payload) in due {
            let kind = Message::decode(&payload).map(|m| m.kind(self.me)).unwrap_or("unknown");
            self.count_sent(now, BROADCAST, kind, &payload);
            out.push(Output::Send { to: BROADCAST, ttl, payload });
        }

        if let Some(timeout) = self.config.hello_timeout() {
            let silent: Vec<Ipv4Addr> =
                self.heard.iter().filter(|(_, &last)| last + timeout <= now).map(|(&n, _)| n).collect();
            for neighbor in silent {
                self.heard.remove(&neighbor);
                self.link_broken(now, neighbor, "hello loss", out);
            }
        }

        let expired: Vec<(Ipv4Addr, RouteState)> =
            self.routes.iter().filter(|(_, r)| r.expires <= now).map(|(&d, r)| (d, r.state)).collect();
        let delete_period = self.config.delete_period();
        for (dst, state) in expired {
            if state == RouteState::Valid {
                self.invalidate(now, dst, None, "expired", out);
            } else if self.discoveries.contains_key(&dst) {
                // Keep what we know (hop count, sequence number) while it is searched for.
                if let Some(route) = self.routes.get_mut(&dst) {
                    route.expires = now + delete_period;
                }
            } else {
                self.routes.remove(&dst);
                self.data_hops.remove(&dst);
            }
        }

        let due: Vec<Ipv4Addr> =
            self.discoveries.iter().filter(|(_, d)| d.deadline <= now).map(|(&dst, _)| dst).collect();
        for dst in due {
            self.discovery_due(now, dst, out);
        }

        let unanswered: Vec<Ipv4Addr> =
            self.awaiting_ack.iter().filter(|(_, &t)| t <= now).map(|(&n, _)| n).collect();
        for neighbor in unanswered {
            self.awaiting_ack.remove(&neighbor);
            self.blacklist.insert(neighbor, now + self.config.blacklist_timeout());
        }
        self.blacklist.retain(|_, until| *until > now);
        self.seen_rreqs.retain(|_, until| *until > now);

        if let (Some(at), Some(interval)) = (self.next_hello, self.config.hello_interval()) {
            if at <= now {
                // 6.9: no HELLO needed when another broadcast went out within the interval.
                let quiet = self.last_broadcast.is_none_or(|last| last + interval <= now);
                self.next_hello = Some(match self.last_broadcast {
                    Some(last) if !quiet => last + interval,
                    _ => {
                        self.send_hello(now, out);
                        now + interval - jitter(&mut self.rng, interval / 20)
                    }
                });
            }
        }
    }

    fn send_hello(&mut self, now: Duration, out: &mut Vec<Output>) {
        let interval = self.config.hello_interval().unwrap_or_default();
        let hello = Rrep {
            repair: false,
            ack_required: false,
            prefix_size: 0,
            hop_count: 0,
            dst: self.me,
            dst_seq: self.seq,
            orig: self.me,
            lifetime_ms: millis(interval * self.config.allowed_hello_loss),
        };
        self.send(now, BROADCAST, 1, &Message::Rrep(hello), out);
    }
}

impl Protocol for Aodv {
    type Event = Event;

    fn handle(&mut self, now: Duration, input: Input<'_>, out: &mut Vec<Output>) {
        match input {
            Input::Control { from, ttl, payload } => self.receive(now, from, ttl, payload, out),
            Input::NoRoute { dst, local, .. } => self.no_route(now, dst, local, out),
            Input::RouteUsed { addr } => self.refresh(now, addr),
            Input::NeighborHeard { neighbor } => {
                if let Some(last) = self.heard.get_mut(&neighbor) {
                    *last = now; // 6.11: any packet shows the link works, not only HELLOs
                }
            }
            Input::NeighborAcked { neighbor } if self.config.acked_frames_alive => {
                // 6.10: the link layer's acknowledgement shows the link works too.
                if let Some(last) = self.heard.get_mut(&neighbor) {
                    *last = now;
                }
            }
            Input::LinkFailed { neighbor } => {
                if self.config.link_layer_feedback {
                    self.link_broken(now, neighbor, "link layer", out);
                }
            }
            // The kernel's failed ARP is link-layer news too, of a failure
            // no frame reports (the request was broadcast).
            Input::ResolutionFailed { neighbor } => {
                if self.config.link_layer_feedback {
                    self.link_broken(now, neighbor, "address resolution", out);
                }
            }
            // Without acked_frames_alive liveness is what RFC 3561 6.11 names,
            // packets from the neighbour; contention is COPAS's.
            Input::NeighborAcked { .. } | Input::MacBackoffs { .. } => {}
        }
        // Whatever input woke us, timers that are due run now, in order.
        self.tick(now, out);
    }

    fn handle_timeout(&mut self, now: Duration, out: &mut Vec<Output>) {
        self.tick(now, out);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let timeout = self.config.hello_timeout();
        let deadlines = [
            self.delayed.iter().map(|d| d.0).min(),
            timeout.and_then(|t| self.heard.values().min().map(|&last| last + t)),
            self.routes.values().map(|r| r.expires).min(),
            self.discoveries.values().map(|d| d.deadline).min(),
            self.awaiting_ack.values().min().copied(),
            self.next_hello,
        ];
        deadlines.into_iter().flatten().min()
    }

    fn data_hops(&mut self, _now: Duration, dst: Ipv4Addr, hops: u8) {
        self.data_hops.insert(dst, hops);
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
}

/// The sequence number after `seq` (0 is skipped: it means "unknown").
fn next_seq(seq: u32) -> u32 {
    match seq.wrapping_add(1) {
        0 => 1,
        next => next,
    }
}

fn millis(duration: Duration) -> u32 {
    duration.as_millis().min(u128::from(u32::MAX)) as u32
}

/// A random duration in [0, max].
fn jitter(rng: &mut ChaCha8Rng, max: Duration) -> Duration {
    Duration::from_nanos(rng.random_range(0..=max.as_nanos() as u64))
}

#[cfg(test)]
mod tests;
