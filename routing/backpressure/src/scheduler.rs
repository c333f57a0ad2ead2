//! The queueing decisions, sans IO: packets, radio state, overheard
//! transmissions and neighbour reports go in with the time; verdicts come out,
//! and the next time anything is due.
//!
//! - `fifo`: every packet is accepted at once (the baseline).
//! - `fq`: one FIFO per flow, served round-robin, each at most `flow_limit`
//!   packets (an arrival beyond it is dropped: "dropped at the limit"); a
//!   packet is released only while fewer than `radio_depth` of the packets we
//!   released are still below us in the radio, so that this queue, not the
//!   FIFO interface queue under it, decides the order.
//! - `backpressure`: `fq` where each flow holds at most `threshold` packets and
//!   a flow's head packet waits while the next hop is believed to hold
//!   `threshold` or more of the flow (unless the next hop is the packet's
//!   destination, which never queues it).
//!
//! Every held packet ends with a verdict: released, dropped when older than
//! `max_hold` (a vanished next hop must not hold packets for ever), or handed
//! back by [`Scheduler::shutdown`].

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use serde::Serialize;

use crate::downstream::{Downstream, DownstreamCounters, Knowledge};
use crate::flow::{ClassifyBy, FlowKey};
use crate::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Fifo,
    FairQueue,
    Backpressure { threshold: u32 },
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fifo => "fifo",
            Mode::FairQueue => "fq",
            Mode::Backpressure { .. } => "backpressure",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub classify: ClassifyBy,
    /// Per-flow buffer in `fq` mode, packets (`backpressure` uses its threshold).
    pub flow_limit: u32,
    /// All flows together, packets.
    pub total_limit: u32,
    /// Release while fewer than this many released packets are still in the
    /// radio; `None`: no radio to watch, release at once.
    pub radio_depth: Option<u32>,
    /// A packet held longer than this is dropped.
    pub max_hold: Time,
    /// A flow with nothing queued for this long is forgotten.
    pub flow_idle: Time,
    pub knowledge: Knowledge,
    /// Overhearing: an outstanding packet not heard forwarded within this is
    /// forgotten (the ceiling of the adaptive timeout, see [`crate::downstream`]).
    pub overhear_timeout: Time,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("backpressure needs a flow that is the same at every hop: classify by source or destination, not {0}")]
    LocalClassification(&'static str),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Mode::Backpressure { threshold } = self.mode {
            if !self.classify.is_global() {
                return Err(ConfigError::LocalClassification(self.classify.name()));
            }
            if threshold == 0 {
                return Err(ConfigError::Zero("threshold"));
            }
        }
        let checks = [
            ("flow limit", u64::from(self.flow_limit)),
            ("total limit", u64::from(self.total_limit)),
            ("radio depth", u64::from(self.radio_depth.unwrap_or(1))),
            ("maximum hold time", self.max_hold),
            ("flow idle time", self.flow_idle),
            ("overhearing timeout", self.overhear_timeout),
        ];
        match checks.iter().find(|(_, value)| *value == 0) {
            Some((name, _)) => Err(ConfigError::Zero(name)),
            None => Ok(()),
        }
    }

    /// The per-flow buffer in force.
    pub fn per_flow_limit(&self) -> u32 {
        match self.mode {
            Mode::Backpressure { threshold } => threshold,
            Mode::Fifo | Mode::FairQueue => self.flow_limit,
        }
    }
}

/// A packet to be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub id: u32,
    pub flow: FlowKey,
    /// The neighbour the kernel's route sends it to.
    pub next_hop: Ipv4Addr,
    /// False when the next hop is the packet's destination (it never queues it).
    pub next_hop_forwards: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub id: u32,
    pub verdict: Verdict,
}

/// Per-flow counters (and, summed, the totals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounters {
    /// Packets that arrived.
    pub enqueued: u64,
    /// Packets accepted (released to the interface).
    pub released: u64,
    /// Arrivals dropped because the flow's buffer (fq limit or backpressure threshold) was full.
    pub dropped_limit: u64,
    /// Arrivals dropped because all flows together held `total_limit`.
    pub dropped_full: u64,
    /// Packets dropped after waiting `max_hold`.
    pub dropped_age: u64,
    /// Released packets that had to wait for the next hop's queue.
    pub held_packets: u64,
    /// Times the flow became blocked by backpressure.
    pub held_events: u64,
    /// Time the flow spent blocked by backpressure, ns.
    pub held_ns: u64,
}

/// One flow as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    pub flow: FlowKey,
    /// Packets held now.
    pub queued: u32,
    /// Released packets still in the radio.
    pub in_radio: u32,
    /// Whether its head waits on backpressure now.
    pub blocked: bool,
    #[serde(flatten)]
    pub counters: FlowCounters,
}

/// Totals beyond the per-flow counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    #[serde(flatten)]
    pub flows: FlowCounters,
    /// Packets accepted at once without queueing (broadcast, malformed, not ours to order).
    pub bypassed: u64,
    /// Held packets given a verdict at shutdown.
    pub shutdown_accepted: u64,
    pub shutdown_dropped: u64,
    /// Flows forgotten after being idle (their counters stay in the totals).
    pub flows_expired: u64,
    /// Released packets the radio never got, forgotten after LOST_BELOW_AFTER.
    pub lost_below: u64,
}

#[derive(Debug)]
struct Held {
    id: u32,
    arrived: Time,
    next_hop: Ipv4Addr,
    next_hop_forwards: bool,
    delayed_by_backpressure: bool,
}

#[derive(Debug)]
struct Flow {
    key: FlowKey,
    queue: VecDeque<Held>,
    /// Released packets of this flow still in the radio.
    in_radio: u32,
    last_active: Time,
    blocked_since: Option<Time>,
    counters: FlowCounters,
}

/// What we know of the radio below us.
#[derive(Debug, Default)]
struct Radio {
    /// Released packets (their flow slot, None once the flow expired; when
    /// released) not yet known to have left the radio, oldest first. Frames
    /// of others that complete take our oldest entries early; the error ends
    /// when it drains.
    below: VecDeque<(Option<usize>, Time)>,
    /// The radio's count of frames that left its queue, at the last update.
    completed: Option<u64>,
    queue_len: u64,
}

impl Radio {
    fn backlog(&self) -> u64 {
        (self.below.len() as u64).max(self.queue_len)
    }
}

/// How often idle flows are looked for at most.
const EXPIRY_SCAN_EVERY: Time = 1_000_000_000;
/// A released packet that has not reached an empty radio this long after
/// its release never will: the kernel dropped it after our verdict (its
/// neighbour entry failed: three ARP requests a second apart). Without
/// this its entry would hold the radio "full" for good.
const LOST_BELOW_AFTER: Time = 5_000_000_000;

pub struct Scheduler {
    config: Config,
    flows: Vec<Option<Flow>>,
    free_slots: Vec<usize>,
    index: HashMap<FlowKey, usize>,
    /// Flows with queued packets, in round-robin order.
    active: VecDeque<usize>,
    held: u32,
    radio: Radio,
    downstream: Downstream,
    totals: Totals,
    next_expiry_scan: Time,
}

impl Scheduler {
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let downstream = Downstream::new(config.knowledge, config.overhear_timeout);
        Ok(Scheduler {
            config,
            flows: Vec::new(),
            free_slots: Vec::new(),
            index: HashMap::new(),
            active: VecDeque::new(),
            held: 0,
            radio: Radio::default(),
            downstream,
            totals: Totals::default(),
            next_expiry_scan: 0,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn flow(&self, slot: usize) -> &Flow {
        self.flows[slot].as_ref().expect("live flow slot")
    }

    fn flow_mut(&mut self, slot: usize) -> &mut Flow {
        self.flows[slot].as_mut().expect("live flow slot")
    }

    fn slot_for(&mut self, key: FlowKey, now: Time) -> usize {
        if let Some(slot) = self.index.get(&key) {
            return *slot;
        }
        let flow = Flow {
            key,
            queue: VecDeque::new(),
            in_radio: 0,
            last_active: now,
            blocked_since: None,
            counters: FlowCounters::default(),
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.flows[slot] = Some(flow);
                slot
            }
            None => {
                self.flows.push(Some(flow));
                self.flows.len() - 1
            }
        };
        self.index.insert(key, slot);
        slot
    }

    /// A packet to queue; decisions (its own, and any releases it allows) go to `out`.
    pub fn handle_arrival(&mut self, now: Time, packet: Arrival, out: &mut Vec<Decision>) {
        let slot = self.slot_for(packet.flow, now);
        let per_flow_limit = self.config.per_flow_limit();
        let fifo = self.config.mode == Mode::Fifo;
        let all_full = self.held >= self.config.total_limit;
        let flow = self.flows[slot].as_mut().expect("live flow slot");
        flow.last_active = now;
        flow.counters.enqueued += 1;
        self.totals.flows.enqueued += 1;
        if fifo {
            flow.counters.released += 1;
            self.totals.flows.released += 1;
            out.push(Decision { id: packet.id, verdict: Verdict::Accept });
            return;
        }
        if flow.queue.len() >= per_flow_limit as usize {
            flow.counters.dropped_limit += 1;
            self.totals.flows.dropped_limit += 1;
            out.push(Decision { id: packet.id, verdict: Verdict::Drop });
            return;
        }
        if all_full {
            flow.counters.dropped_full += 1;
            self.totals.flows.dropped_full += 1;
            out.push(Decision { id: packet.id, verdict: Verdict::Drop });
            return;
        }
        let was_idle = flow.queue.is_empty();
        flow.queue.push_back(Held {
            id: packet.id,
            arrived: now,
            next_hop: packet.next_hop,
            next_hop_forwards: packet.next_hop_forwards,
            delayed_by_backpressure: false,
        });
        self.held += 1;
        if was_idle {
            self.active.push_back(slot);
        }
        self.release(now, out);
    }

    /// A packet accepted at once without queueing. It is not counted as ours
    /// in the radio: a bypassed packet may never reach it (the local copy of
    /// a broadcast passes here too), and one that does shows in its queue length.
    pub fn handle_bypass(&mut self, id: u32, out: &mut Vec<Decision>) {
        self.totals.bypassed += 1;
        out.push(Decision { id, verdict: Verdict::Accept });
    }

    /// The radio's counters now: `completed` frames have left its queue since
    /// it started (sent, broadcast, dropped at the retry limit or at a full
    /// queue), `queue_len` wait in it.
    pub fn handle_radio(&mut self, now: Time, completed: u64, queue_len: u64, out: &mut Vec<Decision>) {
        self.radio.queue_len = queue_len;
        let left = match self.radio.completed {
            Some(before) if completed >= before => completed - before,
            _ => 0, // first reading, or a new radio: a new baseline
        };
        self.radio.completed = Some(completed);
        for _ in 0..left {
            if !self.pop_below() {
                break;
            }
        }
        self.release(now, out);
    }

    /// Takes the oldest released packet off the radio's account; false when
    /// none is listed.
    fn pop_below(&mut self) -> bool {
        let Some((entry, _)) = self.radio.below.pop_front() else { return false };
        if let Some(slot) = entry {
            let flow = self.flow_mut(slot);
            flow.in_radio = flow.in_radio.saturating_sub(1);
        }
        true
    }

    /// True while the radio's progress matters: packets wait for room, or
    /// released packets are still in the radio (our advertised queue lengths
    /// count them until they leave). The caller should then call
    /// [`handle_radio`](Self::handle_radio) when the radio's counters change.
    pub fn wants_radio_updates(&self) -> bool {
        self.config.radio_depth.is_some()
            && (!self.radio.below.is_empty() || (!self.active.is_empty() && !self.radio_has_room()))
    }

    fn radio_has_room(&self) -> bool {
        match self.config.radio_depth {
            Some(depth) => self.radio.backlog() < u64::from(depth),
            None => true,
        }
    }

    /// `neighbour` was heard transmitting a packet of `flow` onwards.
    pub fn handle_overheard(&mut self, now: Time, neighbour: Ipv4Addr, flow: FlowKey, fingerprint: u64, out: &mut Vec<Decision>) {
        self.downstream.overheard(now, neighbour, flow, fingerprint);
        self.release(now, out);
    }

    /// `neighbour` holds `entries` (flow, packets); with `complete`, every
    /// flow it does not list is empty there.
    pub fn handle_report(
        &mut self,
        now: Time,
        neighbour: Ipv4Addr,
        entries: &[(FlowKey, u32)],
        complete: bool,
        out: &mut Vec<Decision>,
    ) {
        let mut lengths: HashMap<FlowKey, u32> = entries.iter().copied().collect();
        if complete {
            for flow in self.downstream.flows_at(neighbour) {
                lengths.entry(flow).or_insert(0);
            }
        }
        for (flow, length) in lengths {
            let ours = self.index.get(&flow).map_or(0, |slot| self.flow(*slot).in_radio);
            self.downstream.report(now, neighbour, flow, length, ours);
        }
        self.release(now, out);
    }

    /// The (next hop, flow) pairs whose queue lengths decide the next
    /// releases: what an oracle reader should look up before [`handle_report`](Self::handle_report).
    pub fn downstream_wanted(&self) -> Vec<(Ipv4Addr, FlowKey)> {
        if !matches!(self.config.mode, Mode::Backpressure { .. }) {
            return Vec::new();
        }
        self.active
            .iter()
            .filter_map(|slot| {
                let flow = self.flow(*slot);
                let head = flow.queue.front()?;
                head.next_hop_forwards.then_some((head.next_hop, flow.key))
            })
            .collect()
    }

    /// Runs what is due at `now`: age drops, overhearing timeouts, idle flows, releases.
    pub fn handle_timeout(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.drop_old(now, out);
        self.forget_lost_below(now);
        self.downstream.expire(now);
        if now >= self.next_expiry_scan {
            self.expire_idle_flows(now);
            self.next_expiry_scan = now + EXPIRY_SCAN_EVERY.min(self.config.flow_idle);
        }
        self.release(now, out);
    }

    /// When [`handle_timeout`](Self::handle_timeout) has something to do next
    /// (None: only new input can change anything).
    pub fn poll_timeout(&self) -> Option<Time> {
        let oldest_head = self
            .active
            .iter()
            .filter_map(|slot| self.flow(*slot).queue.front())
            .map(|held| held.arrived + self.config.max_hold)
            .min();
        let scan = (self.index.len() > self.active.len()).then_some(self.next_expiry_scan);
        let lost = (self.radio.queue_len == 0)
            .then(|| self.radio.below.front().map(|(_, released)| released + LOST_BELOW_AFTER))
            .flatten();
        [oldest_head, self.downstream.next_expiry(), scan, lost].into_iter().flatten().min()
    }

    /// Gives every held packet `verdict` (at exit).
    pub fn shutdown(&mut self, now: Time, verdict: Verdict, out: &mut Vec<Decision>) {
        self.update_blocked(now, true);
        for slot in std::mem::take(&mut self.active) {
            let flow = self.flows[slot].as_mut().expect("live flow slot");
            for held in flow.queue.drain(..) {
                out.push(Decision { id: held.id, verdict });
                match verdict {
                    Verdict::Accept => self.totals.shutdown_accepted += 1,
                    Verdict::Drop => self.totals.shutdown_dropped += 1,
                }
            }
        }
        self.held = 0;
    }

    /// Packets held now.
    pub fn held(&self) -> u32 {
        self.held
    }

    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    pub fn downstream_counters(&self) -> &DownstreamCounters {
        &self.downstream.counters
    }

    /// Our own per-flow queue lengths (held + still in our radio), flows with
    /// packets only: what beacons and the oracle table advertise.
    pub fn advertisement(&self) -> Vec<(FlowKey, u32)> {
        self.flows
            .iter()
            .flatten()
            .map(|flow| (flow.key, flow.queue.len() as u32 + flow.in_radio))
            .filter(|(_, length)| *length > 0)
            .collect()
    }

    /// Every live flow, sorted by key.
    pub fn flow_reports(&self, now: Time) -> Vec<FlowReport> {
        let mut reports: Vec<FlowReport> = self
            .flows
            .iter()
            .flatten()
            .map(|flow| {
                let mut counters = flow.counters;
                if let Some(since) = flow.blocked_since {
                    counters.held_ns += now.saturating_sub(since);
                }
                FlowReport {
                    flow: flow.key,
                    queued: flow.queue.len() as u32,
                    in_radio: flow.in_radio,
                    blocked: flow.blocked_since.is_some(),
                    counters,
                }
            })
            .collect();
        reports.sort_by_key(|report| report.flow);
        reports
    }

    fn release(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.config.mode == Mode::Fifo {
            return;
        }
        while self.radio_has_room() {
            let Some(slot) = self.next_eligible() else { break };
            self.release_head(now, slot, out);
        }
        self.update_blocked(now, false);
    }

    /// The next flow in round-robin order whose head may go, taken off the rotation.
    fn next_eligible(&mut self) -> Option<usize> {
        for _ in 0..self.active.len() {
            let slot = self.active.pop_front()?;
            if !self.blocked(slot) {
                return Some(slot);
            }
            self.active.push_back(slot);
        }
        None
    }

    fn blocked(&self, slot: usize) -> bool {
        let Mode::Backpressure { threshold } = self.config.mode else { return false };
        let flow = self.flow(slot);
        flow.queue.front().is_some_and(|head| {
            head.next_hop_forwards && self.downstream.estimate(head.next_hop, flow.key) >= threshold
        })
    }

    fn release_head(&mut self, now: Time, slot: usize, out: &mut Vec<Decision>) {
        let backpressure = matches!(self.config.mode, Mode::Backpressure { .. });
        let watch_radio = self.config.radio_depth.is_some();
        let flow = self.flows[slot].as_mut().expect("live flow slot");
        let held = flow.queue.pop_front().expect("an active flow has a head");
        flow.last_active = now;
        flow.counters.released += 1;
        self.totals.flows.released += 1;
        if held.delayed_by_backpressure {
            flow.counters.held_packets += 1;
            self.totals.flows.held_packets += 1;
        }
        if watch_radio {
            flow.in_radio += 1;
            self.radio.below.push_back((Some(slot), now));
        }
        let key = flow.key;
        if !flow.queue.is_empty() {
            self.active.push_back(slot);
        }
        self.held -= 1;
        if backpressure && held.next_hop_forwards {
            self.downstream.released(now, held.next_hop, key);
        }
        out.push(Decision { id: held.id, verdict: Verdict::Accept });
    }

    /// Keeps the "held by backpressure" accounting of every flow current.
    fn update_blocked(&mut self, now: Time, ending: bool) {
        if !matches!(self.config.mode, Mode::Backpressure { .. }) {
            return;
        }
        for slot in 0..self.flows.len() {
            if self.flows[slot].is_none() {
                continue;
            }
            let blocked = !ending && self.blocked(slot);
            let Some(flow) = self.flows[slot].as_mut() else { continue };
            if blocked {
                if flow.blocked_since.is_none() {
                    flow.blocked_since = Some(now);
                    flow.counters.held_events += 1;
                    self.totals.flows.held_events += 1;
                }
                if let Some(head) = flow.queue.front_mut() {
                    head.delayed_by_backpressure = true;
                }
            } else if let Some(since) = flow.blocked_since.take() {
                let waited = now.saturating_sub(since);
                flow.counters.held_ns += waited;
                self.totals.flows.held_ns += waited;
            }
        }
    }

    fn drop_old(&mut self, now: Time, out: &mut Vec<Decision>) {
        let max_hold = self.config.max_hold;
        let mut emptied = false;
        for slot in self.active.clone() {
            let flow = self.flows[slot].as_mut().expect("live flow slot");
            while flow.queue.front().is_some_and(|held| held.arrived + max_hold <= now) {
                let held = flow.queue.pop_front().expect("checked");
                flow.counters.dropped_age += 1;
                self.totals.flows.dropped_age += 1;
                self.held -= 1;
                out.push(Decision { id: held.id, verdict: Verdict::Drop });
            }
            emptied |= flow.queue.is_empty();
        }
        if emptied {
            let flows = &self.flows;
            self.active.retain(|slot| flows[*slot].as_ref().is_some_and(|flow| !flow.queue.is_empty()));
        }
    }

    /// Forgets released packets the radio never got (LOST_BELOW_AFTER).
    fn forget_lost_below(&mut self, now: Time) {
        if self.radio.queue_len > 0 {
            return; // they may be waiting in it
        }
        while self.radio.below.front().is_some_and(|(_, released)| released + LOST_BELOW_AFTER <= now) {
            self.pop_below();
            self.totals.lost_below += 1;
        }
    }

    fn expire_idle_flows(&mut self, now: Time) {
        for slot in 0..self.flows.len() {
            let idle = self.flows[slot].as_ref().is_some_and(|flow| {
                flow.queue.is_empty() && flow.in_radio == 0 && flow.last_active + self.config.flow_idle <= now
            });
            if !idle {
                continue;
            }
            let flow = self.flows[slot].take().expect("checked");
            // Its held time is already in the totals (it is not blocked with an empty queue).
            self.index.remove(&flow.key);
            self.downstream.forget_flow(flow.key);
            self.free_slots.push(slot);
            self.totals.flows_expired += 1;
            // A released packet of this flow may still be listed below us in the radio.
            for (entry, _) in self.radio.below.iter_mut() {
                if *entry == Some(slot) {
                    *entry = None;
                }
            }
        }
    }
}
