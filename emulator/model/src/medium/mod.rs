//! The medium: a discrete-event model of the radio channel and the 802.11 MAC
//! of every node, driven by the caller's time.
//!
//! Layout: this file holds the public API, the event loop and transmission
//! fan-out (who hears a transmission, with which power, when); `reception.rs`
//! the PHY receive side (signals, SINR, capture, carrier sense);
//! `dcf.rs` the DCF MAC; `tdma.rs` the TDMA alternative.

mod dcf;
mod reception;
mod tdma;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use rand::RngExt;
use rand_distr::StandardNormal;
use serde::Serialize;

use crate::config::{ConfigError, LinkOverride, MacConfig, MediumConfig, Propagation, RadioConfig, ShadowingPer};
use crate::mobility::Mobility;
use crate::phy::{self, MacTimings};
use crate::rng::{self, Purpose, Stream};
use crate::stats::{NodeCounters, PeerStats};
use crate::{NodeId, Time};

/// Destination of a frame handed down by a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    Node(NodeId),
    /// Unicast to an address no node has: sent (and retried), never ACKed.
    Unknown,
    Broadcast,
}

/// A network-layer packet handed down to a node's MAC. The model carries
/// `payload` and gives it back in actions; it never looks inside.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<P> {
    pub dst: Dest,
    /// Network-layer bytes (the MPDU adds MAC header, LLC/SNAP and FCS).
    pub len: u32,
    /// Routing control: head of the interface queue when the radio's
    /// `queue_priority` is on.
    pub priority: bool,
    pub payload: P,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TxOutcome {
    /// Unicast frame acknowledged.
    Acked { rts_attempts: u32, data_attempts: u32 },
    /// Broadcast frame sent (once, unacknowledged).
    Broadcast,
    /// Dropped at the retry limit.
    RetryDrop { rts_attempts: u32, data_attempts: u32 },
    /// The interface queue was full (or, with TDMA, the frame cannot fit in a slot).
    QueueDrop,
    /// Taken out of the interface queue because a frame to the same
    /// receiver was dropped at the retry limit (radio `retry_drop_flush`).
    LinkDrop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    Rts,
    Cts,
    Data,
    Ack,
}

/// One PHY transmission, as a capture would show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AirFrame<P> {
    pub kind: FrameKind,
    /// The transmitter.
    pub src: NodeId,
    /// The receiver address (RA).
    pub dst: Dest,
    /// Duration field, µs (rounded up).
    pub duration_us: u16,
    pub rate_bps: u64,
    pub seq: u16,
    pub retry: bool,
    /// MPDU bytes.
    pub bytes: u32,
    pub airtime_ns: Time,
    /// The carried packet: for data frames, and for the RTS announcing one.
    pub payload: Option<P>,
}

/// What the medium does, in time order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action<P> {
    /// `node` received a data frame from `from` (at the end of the frame).
    Deliver { time: Time, node: NodeId, from: NodeId, payload: P, len: u32, rx_power_dbm: f64, sinr_db: f64, overheard: bool },
    /// The MAC of `node` is done with a frame handed down.
    TxDone { time: Time, node: NodeId, payload: P, outcome: TxOutcome },
    /// A transmission started (only with air capture on).
    Air { time: Time, node: NodeId, frame: AirFrame<P> },
}

/// Who hears whom (emulator/README.md section 2), median power.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkInfo {
    pub a: NodeId,
    pub b: NodeId,
    pub rx_power_dbm: f64,
    pub in_rx_range: bool,
    pub in_cs_range: bool,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// The node's own transmission ends.
    TxEnd { node: u32 },
    /// A transmission starts arriving at its next receiver (in arrival order).
    Arrive { tx: u32 },
    /// A transmission stops arriving at its next receiver.
    Depart { tx: u32 },
    /// Backoff countdown (or IFS) done: transmit.
    Access { node: u32, generation: u32 },
    /// CTS or ACK timeout.
    Timeout { node: u32, generation: u32 },
    /// SIFS after a reception: send the CTS, ACK or DATA due.
    Respond { node: u32 },
    NavEnd { node: u32, generation: u32 },
    TdmaSlot { slot: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Scheduled {
    time: Time,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// A transmission on the air, shared by its receivers until the last
/// signal of it has ended. Its arrivals are walked by two cursors, so the
/// event queue holds one arrival and one departure per transmission, not one
/// per receiver. Slots are reused (with their arrival lists).
#[derive(Debug)]
struct Transmission<P> {
    src: NodeId,
    kind: FrameKind,
    dst: Dest,
    seq: u16,
    retry: bool,
    /// NAV the frame sets (duration field), ns.
    duration: Time,
    /// MPDU bytes.
    bytes: u32,
    /// Network-layer bytes (data frames).
    len: u32,
    payload: Option<P>,
    start: Time,
    airtime: Time,
    /// Receivers in order of arrival.
    arrivals: Vec<Arrival>,
    next_arrival: usize,
    next_departure: usize,
    /// The transmitter's TxEnd, plus one while departures are to come.
    refs: u32,
}

#[derive(Debug, Clone, Copy)]
struct Arrival {
    rx: u32,
    power_mw: f64,
    delay: Time,
}

/// A receiver a transmitter's signal reaches.
#[derive(Debug, Clone, Copy)]
struct Reach {
    rx: u32,
    /// Median power, link extra loss and per-link shadowing included.
    power_dbm: f64,
    power_mw: f64,
    delay: Time,
}

/// A frame in a node's interface queue, with the size it has on the air.
#[derive(Debug)]
struct Queued<P> {
    frame: Frame<P>,
    mpdu_bytes: u32,
}

/// The frame a node's MAC is working on (head of line).
#[derive(Debug)]
struct Outgoing<P> {
    frame: Frame<P>,
    mpdu_bytes: u32,
    seq: u16,
    short_retries: u32,
    long_retries: u32,
    rts_attempts: u32,
    data_attempts: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exchange {
    Idle,
    /// Sending our RTS.
    Rts,
    AwaitCts,
    /// CTS received; DATA goes out after SIFS.
    DataDue,
    /// Sending our DATA.
    Data,
    AwaitAck,
}

/// A response due SIFS after a reception.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Response {
    Cts { to: NodeId, duration: Time },
    Ack { to: NodeId },
    /// Our DATA after the CTS.
    Data,
}

/// The frame a receiver is locked on.
#[derive(Debug, Clone, Copy)]
struct Lock {
    tx: u32,
    power_mw: f64,
    min_sinr: f64,
    /// The SINR fell under the capture threshold at some point.
    collided: bool,
}

/// Derived radio values, in linear units where the model computes.
#[derive(Debug, Clone)]
struct RadioState {
    cfg: RadioConfig,
    timings: MacTimings,
    rx_threshold_mw: f64,
    cs_threshold_mw: f64,
    floor_mw: f64,
    noise_mw: f64,
    capture_ratio: f64,
}

impl RadioState {
    fn new(cfg: RadioConfig) -> Self {
        RadioState {
            timings: MacTimings::new(&cfg),
            rx_threshold_mw: phy::dbm_to_mw(cfg.rx_threshold_dbm),
            cs_threshold_mw: phy::dbm_to_mw(cfg.cs_threshold_dbm),
            floor_mw: phy::dbm_to_mw(cfg.interference_floor_dbm),
            noise_mw: phy::dbm_to_mw(cfg.noise_floor_dbm),
            capture_ratio: phy::dbm_to_mw(cfg.capture_threshold_db),
            cfg,
        }
    }
}

#[derive(Debug)]
struct Node<P> {
    radio: RadioState,
    mobility: Mobility,
    promiscuous: bool,
    // PHY receive side.
    /// Signals arriving now: (transmission, power).
    signals: Vec<(u32, f64)>,
    signal_mw: f64,
    lock: Option<Lock>,
    /// Our own transmission on the air: its kind and id.
    sending: Option<(FrameKind, u32)>,
    // Carrier sense.
    busy: bool,
    busy_since: Time,
    nav_until: Time,
    nav_generation: u32,
    /// IFS counting starts here (end of the last busy period or timeout).
    ifs_from: Time,
    /// DIFS or EIFS.
    ifs: Time,
    /// The last reception failed: the next idle period starts with EIFS.
    eifs_pending: bool,
    // MAC.
    queue: VecDeque<Queued<P>>,
    current: Option<Outgoing<P>>,
    cw: u32,
    /// Slots of the pending backoff.
    backoff: Option<u32>,
    /// Start of the running countdown (after DIFS/EIFS).
    countdown_from: Option<Time>,
    access_generation: u32,
    exchange: Exchange,
    timeout_generation: u32,
    /// The CTS/ACK timeout expired during a reception: decide at its end.
    timeout_expired: bool,
    response: Option<Response>,
    next_seq: u16,
    backoff_rng: Stream,
    bit_error_rng: Stream,
    shadowing_rng: Stream,
    stats: NodeCounters,
}

/// The emulated medium: every node's PHY and MAC, and the channel between.
pub struct Medium<P: Clone> {
    nodes: Vec<Node<P>>,
    seed: u64,
    mac: MacConfig,
    /// Resolved TDMA slot (0 with DCF).
    tdma_slot_ns: Time,
    now: Time,
    events: BinaryHeap<Reverse<Scheduled>>,
    next_seq: u64,
    events_processed: u64,
    transmissions: Vec<Transmission<P>>,
    free_transmissions: Vec<u32>,
    /// Per transmitter, who its signals reach; valid while nobody moves and
    /// no radio or link changes.
    reach: Vec<Vec<Reach>>,
    reach_valid: bool,
    scratch_reach: Vec<Reach>,
    links: HashMap<(NodeId, NodeId), LinkOverride>,
    link_shadowing: HashMap<(NodeId, NodeId), f64>,
    /// `peer_stats[node * n + peer]`.
    peer_stats: Vec<PeerStats>,
    /// Last sequence number received from a sender, `last_seq[rx * n + tx]`.
    last_seq: Vec<u16>,
    touched: Vec<bool>,
    touched_list: Vec<NodeId>,
    air_capture: bool,
}

const NO_SEQ: u16 = u16::MAX;

impl<P: Clone> Medium<P> {
    pub fn new(cfg: MediumConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let n = cfg.nodes.len();
        let seed = cfg.seed;
        let nodes = cfg
            .nodes
            .iter()
            .enumerate()
            .map(|(i, nc)| {
                let radio = RadioState::new(nc.radio.clone());
                Node {
                    mobility: Mobility::new(&nc.mobility, nc.position, seed, i),
                    promiscuous: nc.promiscuous,
                    signals: Vec::new(),
                    signal_mw: 0.0,
                    lock: None,
                    sending: None,
                    busy: false,
                    busy_since: 0,
                    nav_until: 0,
                    nav_generation: 0,
                    ifs_from: 0,
                    ifs: radio.timings.difs,
                    eifs_pending: false,
                    queue: VecDeque::with_capacity(radio.cfg.queue_len as usize),
                    current: None,
                    cw: radio.cfg.cw_min,
                    backoff: None,
                    countdown_from: None,
                    access_generation: 0,
                    exchange: Exchange::Idle,
                    timeout_generation: 0,
                    timeout_expired: false,
                    response: None,
                    next_seq: 0,
                    backoff_rng: rng::stream(seed, Purpose::Backoff, i as u64, 0),
                    bit_error_rng: rng::stream(seed, Purpose::BitErrors, i as u64, 0),
                    shadowing_rng: rng::stream(seed, Purpose::ShadowingFrame, i as u64, 0),
                    stats: NodeCounters::default(),
                    radio,
                }
            })
            .collect();
        let tdma_slot_ns = match cfg.mac {
            MacConfig::Dcf => 0,
            MacConfig::Tdma { slot_ns: 0 } => {
                cfg.nodes.iter().map(|nc| phy::tdma_exchange_ns(&nc.radio, phy::TDMA_MAX_PACKET_BYTES)).max().unwrap_or(1)
            }
            MacConfig::Tdma { slot_ns } => slot_ns,
        };
        let mut medium = Medium {
            nodes,
            seed,
            mac: cfg.mac,
            tdma_slot_ns,
            now: 0,
            events: BinaryHeap::with_capacity(1024),
            next_seq: 0,
            events_processed: 0,
            transmissions: Vec::new(),
            free_transmissions: Vec::new(),
            reach: vec![Vec::new(); n],
            reach_valid: false,
            scratch_reach: Vec::new(),
            links: cfg.links.iter().map(|l| (pair_key(l.a, l.b), l.link())).collect(),
            link_shadowing: HashMap::new(),
            peer_stats: vec![PeerStats::default(); n * n],
            last_seq: vec![NO_SEQ; n * n],
            touched: vec![false; n],
            touched_list: Vec::new(),
            air_capture: false,
        };
        if medium.is_tdma() {
            medium.schedule(0, Event::TdmaSlot { slot: 0 });
        }
        Ok(medium)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The TDMA slot length in use (0 with DCF).
    pub fn tdma_slot_ns(&self) -> Time {
        self.tdma_slot_ns
    }

    /// Events handled so far (stale timers included).
    pub fn events_processed(&self) -> u64 {
        self.events_processed
    }

    /// A node's network layer hands a frame down at `now` (`now` at or after
    /// the last time seen; events due by `now` run first). A full queue is not
    /// an error: it is counted and reported as a `TxDone` with outcome
    /// `QueueDrop`. A unicast to the sender itself is treated as `Unknown`.
    ///
    /// Panics if `src` is not a node index.
    pub fn send(&mut self, now: Time, src: NodeId, frame: Frame<P>, out: &mut Vec<Action<P>>) {
        let mpdu_bytes = phy::data_mpdu_bytes(frame.len);
        self.send_mpdu(now, src, frame, mpdu_bytes, out);
    }

    /// [`Medium::send`] for a frame whose MPDU (MAC header, body and FCS) is
    /// `mpdu_bytes` on the air, whatever `frame.len` says: a driver that gets
    /// real 802.11 frames (management frames, QoS or mesh headers) passes
    /// their size. `frame.len` still counts in `tx_bytes`/`rx_bytes`; the RTS
    /// threshold and the retry limit that applies compare against `mpdu_bytes`.
    pub fn send_mpdu(&mut self, now: Time, src: NodeId, mut frame: Frame<P>, mpdu_bytes: u32, out: &mut Vec<Action<P>>) {
        self.advance(now, out);
        if let Dest::Node(d) = frame.dst {
            if d == src || d >= self.nodes.len() {
                frame.dst = Dest::Unknown;
            }
        }
        if self.is_tdma() && phy::tdma_mpdu_exchange_ns(&self.nodes[src].radio.cfg, mpdu_bytes) > self.tdma_slot_ns {
            self.queue_drop(src, frame, out);
            return;
        }
        let node = &mut self.nodes[src];
        let priority = frame.priority && node.radio.cfg.queue_priority;
        let full = node.queue.len() >= node.radio.cfg.queue_len as usize;
        if full && (!priority || node.queue.iter().all(|q| q.frame.priority)) {
            self.queue_drop(src, frame, out);
            return;
        }
        let starts_access = node.current.is_none() && node.queue.is_empty();
        let queued = Queued { frame, mpdu_bytes };
        if priority {
            let at = node.queue.iter().position(|q| !q.frame.priority).unwrap_or(node.queue.len());
            node.queue.insert(at, queued);
        } else {
            node.queue.push_back(queued);
        }
        if full {
            // ns-2's PriQueue: a routing packet is always taken; the last
            // packet of the queue makes room.
            let last = node.queue.pop_back().expect("the queue was full");
            self.queue_drop(src, last.frame, out);
        }
        let node = &mut self.nodes[src];
        node.stats.queue_len = node.queue.len() as u64;
        node.stats.queue_len_max = node.stats.queue_len_max.max(node.stats.queue_len);
        self.touch(src);
        if starts_access && !self.is_tdma() {
            self.dcf_frame_arrived(src, out);
        }
    }

    fn queue_drop(&mut self, src: NodeId, frame: Frame<P>, out: &mut Vec<Action<P>>) {
        self.nodes[src].stats.queue_drops += 1;
        self.touch(src);
        out.push(Action::TxDone { time: self.now, node: src, payload: frame.payload, outcome: TxOutcome::QueueDrop });
    }

    /// Time of the next event, if any.
    pub fn next_event_time(&self) -> Option<Time> {
        self.events.peek().map(|Reverse(s)| s.time)
    }

    /// Runs every event due at or before `until`, in time order, pushing
    /// actions; the medium's time is then `until` (or later, if it was).
    pub fn advance(&mut self, until: Time, out: &mut Vec<Action<P>>) {
        while let Some(Reverse(next)) = self.events.peek() {
            if next.time > until {
                break;
            }
            let Reverse(s) = self.events.pop().expect("peeked");
            self.now = s.time;
            self.events_processed += 1;
            self.handle(s.event, until, out);
        }
        self.now = self.now.max(until);
    }

    fn handle(&mut self, event: Event, until: Time, out: &mut Vec<Action<P>>) {
        match event {
            Event::TxEnd { node } => self.tx_end(node as NodeId, out),
            Event::Arrive { tx } => self.walk_receivers(tx, Cursor::Arrival, until, out),
            Event::Depart { tx } => self.walk_receivers(tx, Cursor::Departure, until, out),
            Event::Access { node, generation } => {
                if self.nodes[node as usize].access_generation == generation {
                    self.access(node as NodeId, out);
                }
            }
            Event::Timeout { node, generation } => {
                if self.nodes[node as usize].timeout_generation == generation {
                    self.timeout(node as NodeId, out);
                }
            }
            Event::Respond { node } => self.respond(node as NodeId, out),
            Event::NavEnd { node, generation } => {
                if self.nodes[node as usize].nav_generation == generation {
                    self.update_carrier(node as NodeId, out);
                }
            }
            Event::TdmaSlot { slot } => self.tdma_slot(slot, out),
        }
    }

    fn schedule(&mut self, time: Time, event: Event) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push(Reverse(Scheduled { time, seq, event }));
    }

    fn is_tdma(&self) -> bool {
        matches!(self.mac, MacConfig::Tdma { .. })
    }

    fn touch(&mut self, node: NodeId) {
        if !self.touched[node] {
            self.touched[node] = true;
            self.touched_list.push(node);
        }
    }

    pub fn stats(&self, node: NodeId) -> &NodeCounters {
        &self.nodes[node].stats
    }

    pub fn peer_stats(&self, node: NodeId, peer: NodeId) -> &PeerStats {
        &self.peer_stats[node * self.nodes.len() + peer]
    }

    /// Appends the nodes whose statistics changed since the last call.
    pub fn take_touched(&mut self, out: &mut Vec<NodeId>) {
        for &n in &self.touched_list {
            self.touched[n] = false;
        }
        out.append(&mut self.touched_list);
    }

    pub fn position(&self, node: NodeId, now: Time) -> [f64; 3] {
        self.nodes[node].mobility.position(now)
    }

    /// Teleports a node; its mobility stops.
    pub fn set_position(&mut self, now: Time, node: NodeId, pos: [f64; 3]) {
        self.now = self.now.max(now);
        self.nodes[node].mobility.teleport(pos);
        self.reach_valid = false;
    }

    /// Pauses or resumes a node's own movement.
    pub fn set_mobility_running(&mut self, now: Time, node: NodeId, running: bool) {
        self.now = self.now.max(now);
        self.nodes[node].mobility.set_running(now, running);
        self.reach_valid = false;
    }

    /// Replaces a node's radio parameters from the next transmission on.
    pub fn set_radio(&mut self, now: Time, node: NodeId, radio: RadioConfig) -> Result<(), ConfigError> {
        radio.validate("radio")?;
        self.now = self.now.max(now);
        let n = &mut self.nodes[node];
        n.cw = n.cw.clamp(radio.cw_min, radio.cw_max);
        n.radio = RadioState::new(radio);
        self.reach_valid = false;
        Ok(())
    }

    /// Drops every frame queued at `node` for `receiver` (not one already
    /// being sent): each leaves as a `TxDone` with outcome `LinkDrop` and
    /// counts in `link_drops`. What a routing daemon asks when it gives up a
    /// neighbour (ns-2 AODV's `ifqueue->filter`); returns how many left.
    pub fn flush_queue(&mut self, now: Time, node: NodeId, receiver: NodeId, out: &mut Vec<Action<P>>) -> u64 {
        self.advance(now, out);
        let before = self.nodes[node].stats.link_drops;
        self.flush_queue_to(node, Dest::Node(receiver), out);
        self.nodes[node].stats.link_drops - before
    }

    /// Sets the override of the pair (a, b), both directions.
    pub fn set_link(&mut self, a: NodeId, b: NodeId, link: LinkOverride) -> Result<(), ConfigError> {
        link.validate("link")?;
        self.links.insert(pair_key(a, b), link);
        self.reach_valid = false;
        Ok(())
    }

    /// Emits `Action::Air` for every transmission while on.
    pub fn set_air_capture(&mut self, on: bool) {
        self.air_capture = on;
    }

    /// Every ordered pair whose median received power (no random shadowing)
    /// reaches the receiver's interference floor, at `now`.
    pub fn links(&self, now: Time) -> Vec<LinkInfo> {
        let pos: Vec<[f64; 3]> = self.nodes.iter().map(|n| n.mobility.position(now)).collect();
        let mut links = Vec::new();
        for a in 0..self.nodes.len() {
            for b in 0..self.nodes.len() {
                if a == b {
                    continue;
                }
                let p = self.median_power_dbm(a, b, &pos);
                let rx = &self.nodes[b].radio.cfg;
                if p >= rx.interference_floor_dbm {
                    links.push(LinkInfo { a, b, rx_power_dbm: p, in_rx_range: p >= rx.rx_threshold_dbm, in_cs_range: p >= rx.cs_threshold_dbm });
                }
            }
        }
        links
    }

    /// Median power from `a` at `b`: propagation and the link's extra loss.
    fn median_power_dbm(&self, a: NodeId, b: NodeId, pos: &[[f64; 3]]) -> f64 {
        let (ta, tb) = (&self.nodes[a].radio.cfg, &self.nodes[b].radio.cfg);
        let d = phy::distance(pos[a], pos[b]);
        let extra = self.links.get(&pair_key(a, b)).map_or(0.0, |l| l.extra_loss_db);
        phy::median_rx_power_dbm(ta, pos[a][2], tb, pos[b][2], d) - extra
    }

    /// The fixed per-pair shadowing draw (standard normal), symmetric.
    fn link_shadowing_draw(&mut self, a: NodeId, b: NodeId) -> f64 {
        let key = pair_key(a, b);
        let seed = self.seed;
        *self.link_shadowing.entry(key).or_insert_with(|| rng::stream(seed, Purpose::ShadowingLink, key.0 as u64, key.1 as u64).sample(StandardNormal))
    }

    /// Fills `out` with the receivers of `src`'s signals at the current time.
    fn compute_reach(&mut self, src: NodeId, pos: &[[f64; 3]], out: &mut Vec<Reach>) {
        out.clear();
        let tx_prop = self.nodes[src].radio.cfg.propagation;
        let per_frame = matches!(tx_prop, Propagation::Shadowing { per: ShadowingPer::Frame, .. });
        for rx in 0..self.nodes.len() {
            if rx == src {
                continue;
            }
            let mut p = self.median_power_dbm(src, rx, pos);
            if let Propagation::Shadowing { sigma_db, per: ShadowingPer::Link, .. } = tx_prop {
                p += sigma_db * self.link_shadowing_draw(src, rx);
            }
            // With a new draw per frame, anyone may be reached: keep them all.
            if per_frame || p >= self.nodes[rx].radio.cfg.interference_floor_dbm {
                let delay = phy::propagation_delay_ns(phy::distance(pos[src], pos[rx]));
                out.push(Reach { rx: rx as u32, power_dbm: p, power_mw: phy::dbm_to_mw(p), delay });
            }
        }
        out.sort_by_key(|r| (r.delay, r.rx));
    }

    /// Brings mobility up to now; rebuilds the reach cache when everybody
    /// stands still. Returns whether the cache is valid.
    fn refresh_reach(&mut self) -> bool {
        if self.reach_valid {
            return true;
        }
        let now = self.now;
        let mut moving = false;
        for n in &mut self.nodes {
            n.mobility.advance_to(now);
            moving |= !n.mobility.is_stationary();
        }
        if moving {
            return false;
        }
        let pos: Vec<[f64; 3]> = self.nodes.iter().map(|n| n.mobility.position(now)).collect();
        for src in 0..self.nodes.len() {
            let mut list = std::mem::take(&mut self.reach[src]);
            self.compute_reach(src, &pos, &mut list);
            self.reach[src] = list;
        }
        self.reach_valid = true;
        true
    }

    /// Puts a frame on the air from `src` now and schedules its arrival at
    /// every receiver it reaches.
    #[allow(clippy::too_many_arguments)]
    fn transmit(&mut self, src: NodeId, kind: FrameKind, dst: Dest, bytes: u32, rate_bps: u64, duration: Time, seq: u16, retry: bool, len: u32, payload: Option<P>, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let airtime = phy::airtime_ns(&self.nodes[src].radio.cfg, bytes, rate_bps);
        if self.air_capture {
            let frame = AirFrame {
                kind,
                src,
                dst,
                duration_us: duration.div_ceil(1000).min(32_767) as u16,
                rate_bps,
                seq,
                retry,
                bytes,
                airtime_ns: airtime,
                payload: payload.clone(),
            };
            out.push(Action::Air { time: now, node: src, frame });
        }
        let id = match self.free_transmissions.pop() {
            Some(id) => id,
            None => {
                self.transmissions.push(Transmission {
                    src,
                    kind,
                    dst,
                    seq,
                    retry,
                    duration,
                    bytes,
                    len,
                    payload: None,
                    start: now,
                    airtime,
                    arrivals: Vec::new(),
                    next_arrival: 0,
                    next_departure: 0,
                    refs: 0,
                });
                (self.transmissions.len() - 1) as u32
            }
        };
        // Half duplex: a reception in progress is lost (with
        // `receive_during_tx`, as ns-2, it keeps the receiver until its end).
        let node = &mut self.nodes[src];
        if node.radio.cfg.receive_during_tx {
            if let Some(lock) = node.lock.as_mut() {
                lock.collided = true;
            }
        } else if node.lock.take().is_some() {
            node.stats.rx_collisions += 1;
        }
        node.sending = Some((kind, id));
        node.stats.tx_ns += airtime;
        self.touch(src);
        self.schedule(now + airtime, Event::TxEnd { node: src as u32 });
        self.update_carrier(src, out);

        let mut arrivals = std::mem::take(&mut self.transmissions[id as usize].arrivals);
        arrivals.clear();
        let mut computed = std::mem::take(&mut self.scratch_reach);
        let cached = self.refresh_reach();
        if !cached {
            let pos: Vec<[f64; 3]> = self.nodes.iter().map(|n| n.mobility.position(now)).collect();
            self.compute_reach(src, &pos, &mut computed);
        }
        let reach = if cached { &self.reach[src] } else { &computed };
        match self.nodes[src].radio.cfg.propagation {
            Propagation::Shadowing { sigma_db, per: ShadowingPer::Frame, .. } => {
                for r in reach {
                    let z: f64 = self.nodes[src].shadowing_rng.sample(StandardNormal);
                    arrivals.push(Arrival { rx: r.rx, power_mw: phy::dbm_to_mw(r.power_dbm + sigma_db * z), delay: r.delay });
                }
                let nodes = &self.nodes;
                arrivals.retain(|a| a.power_mw >= nodes[a.rx as usize].radio.floor_mw);
            }
            _ => arrivals.extend(reach.iter().map(|r| Arrival { rx: r.rx, power_mw: r.power_mw, delay: r.delay })),
        }
        self.scratch_reach = computed;
        if let Some(first) = arrivals.first() {
            self.schedule(now + first.delay, Event::Arrive { tx: id });
            self.schedule(now + first.delay + airtime, Event::Depart { tx: id });
        }
        let refs = if arrivals.is_empty() { 1 } else { 2 };
        self.transmissions[id as usize] = Transmission {
            src,
            kind,
            dst,
            seq,
            retry,
            duration,
            bytes,
            len,
            payload,
            start: now,
            airtime,
            arrivals,
            next_arrival: 0,
            next_departure: 0,
            refs,
        };
    }

    /// Starts or ends the signal of transmission `tx` at its next receivers:
    /// one, then more while the next one is due before any other event (and
    /// by `until`); otherwise the cursor's event is scheduled again.
    fn walk_receivers(&mut self, tx: u32, cursor: Cursor, until: Time, out: &mut Vec<Action<P>>) {
        loop {
            let t = &mut self.transmissions[tx as usize];
            let (index, offset) = match cursor {
                Cursor::Arrival => (&mut t.next_arrival, t.start),
                Cursor::Departure => (&mut t.next_departure, t.start + t.airtime),
            };
            let a = t.arrivals[*index];
            *index += 1;
            let next = t.arrivals.get(*index).map(|b| offset + b.delay);
            match cursor {
                Cursor::Arrival => self.signal_start(a.rx as NodeId, tx, a.power_mw, out),
                Cursor::Departure => self.signal_end(a.rx as NodeId, tx, out),
            }
            let Some(at) = next else {
                if cursor == Cursor::Departure {
                    self.release(tx);
                }
                return;
            };
            let first = self.events.peek().is_none_or(|Reverse(s)| at < s.time);
            if at <= until && first {
                self.now = at;
                self.events_processed += 1;
            } else {
                let event = match cursor {
                    Cursor::Arrival => Event::Arrive { tx },
                    Cursor::Departure => Event::Depart { tx },
                };
                self.schedule(at, event);
                return;
            }
        }
    }

    /// Drops one reference to a transmission; frees its slot after the last.
    fn release(&mut self, id: u32) {
        let t = &mut self.transmissions[id as usize];
        t.refs -= 1;
        if t.refs == 0 {
            t.payload = None;
            self.free_transmissions.push(id);
        }
    }

    fn tx_end(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let Some((kind, id)) = self.nodes[n].sending.take() else { return };
        self.release(id);
        if matches!(kind, FrameKind::Rts | FrameKind::Data) {
            self.exchange_tx_end(n, out);
        }
        self.update_carrier(n, out);
        self.kick(n, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    Arrival,
    Departure,
}

fn pair_key(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}
