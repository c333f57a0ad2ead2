//! The medium: a discrete-event model of the radio channel and the 802.11 MAC
//! of every node, driven by the caller's time.
//!
//! Layout: this file holds the public API, the nodes and the event loop.
//! Each node is made of sub-states that own their fields and behaviour:
//! `receiver.rs` (signals, SINR, capture, decoding), `carrier.rs` (carrier
//! sense, NAV, DIFS/EIFS), `queue.rs` (the interface queue), `exchange.rs`
//! (the frame exchange shared by both MACs: RTS/CTS, DATA, ACK, retries),
//! `dcf.rs` (DCF channel access: backoff, CW) and, medium-wide, `tdma.rs`
//! (the TDMA alternative), `stats.rs` (counters and what changed),
//! `channel.rs` (who hears whom, with which power, when), `air.rs` (frames
//! on the air and their fan-out to receivers) and `events.rs` (the timeline).

mod air;
mod carrier;
mod channel;
mod dcf;
mod events;
mod exchange;
mod queue;
mod receiver;
mod stats;
mod tdma;
#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::config::{ConfigError, LinkOverride, MediumConfig, RadioConfig};
use crate::mobility::Mobility;
use crate::phy::{self, MacTimings};
use crate::rng::{self, Purpose, Stream};
use crate::stats::{NodeCounters, PeerStats};
use crate::{NodeId, Time};
use air::{Cursor, Transmissions};
use carrier::CarrierSense;
use channel::Channel;
use dcf::Dcf;
use events::{Event, Timeline};
use exchange::Exchange;
use queue::InterfaceQueue;
use receiver::Receiver;
use stats::Stats;
use tdma::Tdma;

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
    pub carries: PacketKind,
    pub payload: P,
}

/// What a frame carries, where the MAC treats packets differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// Packets forwarded for flows: only these report a link failure
    /// (`tx_failed_data`, `retry_drop_flush`), as in ns-2, whose routing
    /// agents hear of the failures of the packets they routed only.
    Data,
    /// Routing control: head of the interface queue when the radio's
    /// `queue_priority` is on.
    Routing,
    /// Address resolution.
    Arp,
}

impl<P> Frame<P> {
    /// Whether the frame goes ahead of data in the interface queue.
    pub fn priority(&self) -> bool {
        self.carries == PacketKind::Routing
    }
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

/// A node whose statistics changed (`Medium::take_touched`), and whether its
/// figures per peer did too: most changes are counters only (carrier sensed,
/// a backoff), and a reader's copy of the peer table is large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touched {
    pub node: NodeId,
    pub peers: bool,
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

/// One node: its radio and place, and the sub-states of its PHY and MAC.
#[derive(Debug)]
struct Node<P> {
    radio: RadioState,
    mobility: Mobility,
    /// Our own transmission on the air: its kind and id.
    sending: Option<(FrameKind, u32)>,
    /// Per-frame shadowing of our transmissions.
    shadowing_rng: Stream,
    receiver: Receiver,
    carrier: CarrierSense,
    queue: InterfaceQueue<P>,
    exchange: Exchange<P>,
    dcf: Dcf,
}

impl<P> Node<P> {
    /// A frame to work on: in hand or queued.
    fn has_frame(&self) -> bool {
        self.exchange.current.is_some() || !self.queue.is_empty()
    }
}

/// The emulated medium: every node's PHY and MAC, and the channel between.
pub struct Medium<P: Clone> {
    nodes: Vec<Node<P>>,
    channel: Channel,
    transmissions: Transmissions<P>,
    /// `None` with DCF.
    tdma: Option<Tdma>,
    now: Time,
    timeline: Timeline,
    stats: Stats,
    air_capture: bool,
}

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
                    sending: None,
                    shadowing_rng: rng::stream(seed, Purpose::ShadowingFrame, i as u64, 0),
                    receiver: Receiver::new(nc.promiscuous, rng::stream(seed, Purpose::BitErrors, i as u64, 0)),
                    carrier: CarrierSense::new(&radio.timings),
                    queue: InterfaceQueue::new(&radio.cfg),
                    exchange: Exchange::new(n),
                    dcf: Dcf::new(&radio.cfg, rng::stream(seed, Purpose::Backoff, i as u64, 0)),
                    radio,
                }
            })
            .collect();
        let mut medium = Medium {
            nodes,
            channel: Channel::new(seed, n, cfg.links.iter().map(|l| (l.a, l.b, l.link()))),
            transmissions: Transmissions::new(),
            tdma: Tdma::new(cfg.mac, &cfg.nodes),
            now: 0,
            timeline: Timeline::new(),
            stats: Stats::new(n),
            air_capture: false,
        };
        if medium.tdma.is_some() {
            medium.timeline.schedule(0, Event::TdmaSlot { slot: 0 });
        }
        Ok(medium)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The TDMA slot length in use (0 with DCF).
    pub fn tdma_slot_ns(&self) -> Time {
        self.tdma.map_or(0, |t| t.slot_ns)
    }

    /// Events handled so far (stale timers included).
    pub fn events_processed(&self) -> u64 {
        self.timeline.processed()
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
        self.handle_timeout(now, out);
        if let Dest::Node(d) = frame.dst {
            if d == src || d >= self.nodes.len() {
                frame.dst = Dest::Unknown;
            }
        }
        let node = &mut self.nodes[src];
        if self.tdma.is_some_and(|t| !t.fits(&node.radio.cfg, mpdu_bytes)) {
            self.queue_drop(src, frame, out);
            return;
        }
        let starts_access = !node.has_frame();
        match node.queue.offer(frame, mpdu_bytes, &node.radio.cfg) {
            Err(refused) => {
                self.queue_drop(src, refused, out);
                return;
            }
            Ok(Some(pushed_out)) => self.queue_drop(src, pushed_out, out),
            Ok(None) => {}
        }
        let queue_len = self.nodes[src].queue.len() as u64;
        let counters = self.stats.node_mut(src);
        counters.queue_len = queue_len;
        counters.queue_len_max = counters.queue_len_max.max(queue_len);
        self.stats.touch(src);
        if starts_access && self.tdma.is_none() {
            self.dcf_frame_arrived(src, out);
        }
    }

    fn queue_drop(&mut self, src: NodeId, frame: Frame<P>, out: &mut Vec<Action<P>>) {
        self.stats.node_mut(src).queue_drops += 1;
        self.stats.touch(src);
        out.push(Action::TxDone { time: self.now, node: src, payload: frame.payload, outcome: TxOutcome::QueueDrop });
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has something to
    /// do: the time of the next event, if any.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timeline.next_time()
    }

    /// Runs every event due at or before `until`, in time order, pushing
    /// actions; the medium's time is then `until` (or later, if it was).
    pub fn handle_timeout(&mut self, until: Time, out: &mut Vec<Action<P>>) {
        while let Some((time, event)) = self.timeline.pop_due(until) {
            self.now = time;
            self.handle(event, until, out);
        }
        self.now = self.now.max(until);
    }

    fn handle(&mut self, event: Event, until: Time, out: &mut Vec<Action<P>>) {
        match event {
            Event::TxEnd { node } => self.tx_end(node as NodeId, out),
            Event::Arrive { tx } => self.walk_receivers(tx, Cursor::Arrival, until, out),
            Event::Depart { tx } => self.walk_receivers(tx, Cursor::Departure, until, out),
            Event::Access { node, generation } => {
                if self.nodes[node as usize].dcf.is_countdown(generation) {
                    self.access(node as NodeId, out);
                }
            }
            Event::Timeout { node, generation } => {
                if self.nodes[node as usize].exchange.is_timeout(generation) {
                    self.timeout(node as NodeId, out);
                }
            }
            Event::Respond { node } => self.respond(node as NodeId, out),
            Event::NavEnd { node, generation } => {
                if self.nodes[node as usize].carrier.is_nav_end(generation) {
                    self.update_carrier(node as NodeId, out);
                }
            }
            Event::TdmaSlot { slot } => self.tdma_slot(slot, out),
        }
    }

    pub fn stats(&self, node: NodeId) -> &NodeCounters {
        self.stats.node(node)
    }

    pub fn peer_stats(&self, node: NodeId, peer: NodeId) -> &PeerStats {
        self.stats.peer(node, peer)
    }

    /// Appends the nodes whose statistics changed since the last call.
    pub fn take_touched(&mut self, out: &mut Vec<Touched>) {
        self.stats.take_touched(out);
    }

    pub fn position(&self, node: NodeId, now: Time) -> [f64; 3] {
        self.nodes[node].mobility.position(now)
    }

    /// Teleports a node; its mobility stops.
    pub fn set_position(&mut self, now: Time, node: NodeId, pos: [f64; 3]) {
        self.now = self.now.max(now);
        self.nodes[node].mobility.teleport(pos);
        self.channel.invalidate();
    }

    /// Stops a node's own movement where it is.
    pub fn pause_mobility(&mut self, now: Time, node: NodeId) {
        self.now = self.now.max(now);
        self.nodes[node].mobility.pause(now);
        self.channel.invalidate();
    }

    /// Resumes a paused node's movement from model time `from` (or now, if
    /// later): it stands until then and goes on from where it stopped.
    pub fn resume_mobility(&mut self, now: Time, node: NodeId, from: Time) {
        self.now = self.now.max(now);
        self.nodes[node].mobility.resume(now, from);
        self.channel.invalidate();
    }

    /// Replaces a node's radio parameters from the next transmission on.
    pub fn set_radio(&mut self, now: Time, node: NodeId, radio: RadioConfig) -> Result<(), ConfigError> {
        radio.validate("radio")?;
        self.now = self.now.max(now);
        let n = &mut self.nodes[node];
        n.dcf.clamp_cw(&radio);
        n.radio = RadioState::new(radio);
        self.channel.invalidate();
        Ok(())
    }

    /// Drops every frame queued at `node` for `receiver` (not one already
    /// being sent): each leaves as a `TxDone` with outcome `LinkDrop` and
    /// counts in `link_drops`. What a routing daemon asks when it gives up a
    /// neighbour (ns-2 AODV's `ifqueue->filter`); returns how many left.
    pub fn flush_queue(&mut self, now: Time, node: NodeId, receiver: NodeId, out: &mut Vec<Action<P>>) -> u64 {
        self.handle_timeout(now, out);
        let before = self.stats.node(node).link_drops;
        self.flush_queue_to(node, Dest::Node(receiver), out);
        self.stats.node(node).link_drops - before
    }

    /// Sets the override of the pair (a, b), both directions.
    pub fn set_link(&mut self, a: NodeId, b: NodeId, link: LinkOverride) -> Result<(), ConfigError> {
        link.validate("link")?;
        self.channel.set_link(a, b, link);
        Ok(())
    }

    /// Emits `Action::Air` for every transmission while on.
    pub fn set_air_capture(&mut self, on: bool) {
        self.air_capture = on;
    }

    /// Every ordered pair whose median received power (no random shadowing)
    /// reaches the receiver's interference floor, at `now`.
    pub fn links(&self, now: Time) -> Vec<LinkInfo> {
        self.channel.links(&self.nodes, now)
    }
}
