//! What an on-demand routing protocol core exchanges with the daemon that
//! runs it, independent of the protocol: AODV speaks it, and so can a sibling
//! (COPAS) with other messages and route choices.
//!
//! A core is sans-IO: it is given the time (a [`Duration`] since the daemon
//! started) with every input, never reads a clock, and answers with
//! [`Output`]s. The daemon ([`crate::platform`]) turns outputs into packets,
//! kernel routes and verdicts on held packets.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Serialize;

/// The limited broadcast address control packets go to.
pub const BROADCAST: Ipv4Addr = Ipv4Addr::BROADCAST;

/// Something that happened, for the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// A control packet from a neighbour: its IP source, the IP TTL it
    /// arrived with, the UDP payload.
    Control { from: Ipv4Addr, ttl: u8, payload: &'a [u8] },
    /// Timers may be due: process everything due at `now`.
    Tick,
    /// A packet to `dst` found no route. `local`: this node sent it and it
    /// is held until the core says [`Output::Release`] or [`Output::Drop`];
    /// otherwise it was being forwarded and is dropped already.
    NoRoute { src: Ipv4Addr, dst: Ipv4Addr, local: bool },
    /// Data traffic to or from `addr` went through this node since the last
    /// report: routes in use stay alive.
    RouteUsed { addr: Ipv4Addr },
    /// The link layer could not deliver a frame to this neighbour.
    LinkFailed { neighbor: Ipv4Addr },
    /// The link layer received frames from this neighbour (data included).
    NeighborHeard { neighbor: Ipv4Addr },
    /// The link layer's frames to this neighbour were acknowledged.
    NeighborAcked { neighbor: Ipv4Addr },
    /// The MAC's cumulative count of the backoffs activity in the medium
    /// caused (a frame found it busy, an attempt failed): the contention a
    /// node sees (COPAS).
    MacBackoffs { total: u64 },
}

/// What the core wants done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send a control packet to a neighbour or to [`BROADCAST`] with this IP TTL.
    Send { to: Ipv4Addr, ttl: u8, payload: Vec<u8> },
    /// Install (or replace) the kernel host route to `dst`.
    SetRoute { dst: Ipv4Addr, next_hop: Ipv4Addr, hops: u8 },
    /// Remove the kernel host route to `dst`.
    DeleteRoute { dst: Ipv4Addr },
    /// Install (or replace) the kernel route of packets from `src` to `dst`
    /// (policy routing: the route depends on the source too).
    SetPairRoute { src: Ipv4Addr, dst: Ipv4Addr, next_hop: Ipv4Addr },
    /// Remove the kernel route of packets from `src` to `dst`.
    DeletePairRoute { src: Ipv4Addr, dst: Ipv4Addr },
    /// Send the packets held for `dst` along the route now installed.
    Release { dst: Ipv4Addr },
    /// Drop the packets held for `dst`, telling local senders it is unreachable.
    Drop { dst: Ipv4Addr },
    /// Drop the frames the link layer still holds for this neighbour.
    Flush { neighbor: Ipv4Addr },
    /// A protocol event worth a log line (and an experiment's timeline).
    Event(Event),
}

/// Protocol events for the structured log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    DiscoveryStarted { dst: Ipv4Addr },
    RreqSent { dst: Ipv4Addr, ttl: u8, attempt: u32 },
    DiscoverySucceeded { dst: Ipv4Addr, hops: u8, elapsed_ms: u64 },
    DiscoveryFailed { dst: Ipv4Addr, elapsed_ms: u64 },
    RouteAdded { dst: Ipv4Addr, next_hop: Ipv4Addr, hops: u8 },
    RouteRemoved { dst: Ipv4Addr, reason: &'static str },
    LinkBroken { neighbor: Ipv4Addr, cause: &'static str },
    RerrSent { to: Ipv4Addr, unreachable: Vec<Ipv4Addr> },
    RerrReceived { from: Ipv4Addr, unreachable: Vec<Ipv4Addr> },
    LocalRepairStarted { dst: Ipv4Addr },
    Malformed { from: Ipv4Addr, error: String },
    /// COPAS: a path of the pair (src, dst) chosen for a role (forward:
    /// src to dst; reverse: dst to src), listed from src to dst; `cause`:
    /// discovery, contention, rerr; contention in hundredths of a backoff.
    PathSelected { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, path: Vec<Ipv4Addr>, contention_centi: u32, cause: &'static str },
    /// COPAS: this end sends the role's traffic over the pair's other path now.
    PathSwitched { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, cause: &'static str },
    /// COPAS: a probe showed a relay above the threshold; a reroute starts.
    ContentionHigh { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, max_centi: u32, sum_centi: u32 },
    /// COPAS: no candidate path was disjoint, similarly long and less contended.
    RerouteDeclined { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, candidates: usize },
    /// COPAS: a ROUTE for the pair's path (listed from src to dst) was never
    /// acknowledged by `next_hop`, after `transmissions` tries: it died here.
    RouteAbandoned { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, next_hop: Ipv4Addr, path: Vec<Ipv4Addr>, transmissions: u32 },
}

/// Packets and bytes of one kind. Bytes are IP packet bytes: the control
/// message plus the 8-byte UDP and 20-byte IP headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Traffic {
    pub packets: u64,
    pub bytes: u64,
}

/// IP and UDP header bytes around a control message.
pub const IP_UDP_HEADER_BYTES: u64 = 28;

impl Traffic {
    pub fn add(&mut self, payload_len: usize) {
        self.packets += 1;
        self.bytes += payload_len as u64 + IP_UDP_HEADER_BYTES;
    }
}

/// The counters experiments read (written as JSON by the daemon). The core
/// fills the protocol part, the daemon the data-path part.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Control packets sent, by kind (rreq, rrep, hello, rerr, rrep_ack).
    pub control_sent: BTreeMap<&'static str, Traffic>,
    /// Control packets received and decoded, by kind.
    pub control_received: BTreeMap<&'static str, Traffic>,
    /// Received packets that were not valid control messages (dropped).
    pub malformed: u64,
    /// Valid control messages ignored: duplicates, own echoes, blacklisted senders.
    pub ignored: u64,
    pub discoveries_started: u64,
    pub discoveries_succeeded: u64,
    pub discoveries_failed: u64,
    /// Links declared broken (HELLO loss or link-layer feedback).
    pub link_breaks: u64,
    /// Routes invalidated for any reason but expiry (link break, RERR).
    pub route_breaks: u64,
    pub rerr_sent: u64,
    pub rerr_received: u64,
    /// Data packets held while a route was searched, then released or dropped.
    pub packets_held: u64,
    pub packets_released: u64,
    pub packets_dropped: u64,
    /// Forwarded data packets that found no route (dropped, RERR sent).
    pub forward_no_route: u64,
    /// Counters of one protocol only (none for AODV), written beside the others.
    #[serde(flatten)]
    pub protocol: BTreeMap<&'static str, u64>,
}

impl Counters {
    /// Routing overhead: every control packet sent, (bytes, packets).
    pub fn overhead(&self) -> (u64, u64) {
        self.control_sent.values().fold((0, 0), |(b, p), t| (b + t.bytes, p + t.packets))
    }
}

/// A protocol core the daemon can run.
pub trait Protocol {
    /// Process one input at `now`; outputs are appended to `out` in the
    /// order they must be carried out.
    fn handle(&mut self, now: Duration, input: Input<'_>, out: &mut Vec<Output>);
    /// When the core next needs an [`Input::Tick`] (None: no timer pending).
    fn poll_at(&self) -> Option<Duration>;
    /// The last data packet to `dst` that left this node had travelled
    /// `hops` hops from its source, read from its IP TTL (the daemon reports
    /// it with route use). A node's own packets read as 1, like its first
    /// relay's. Protocols that have no use for it ignore it (the default).
    fn data_hops(&mut self, _now: Duration, _dst: Ipv4Addr, _hops: u8) {}
    fn counters(&self) -> &Counters;
    fn counters_mut(&mut self) -> &mut Counters;
}

/// Sequence number `a` is newer than `b` (RFC 3561 section 6.1: signed
/// 32-bit difference, so the comparison survives wrap-around).
pub fn seq_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_compare_across_wrap_around() {
        assert!(seq_newer(2, 1));
        assert!(!seq_newer(1, 2));
        assert!(!seq_newer(5, 5));
        assert!(seq_newer(3, u32::MAX - 2));
    }

    #[test]
    fn overhead_sums_every_kind() {
        let mut counters = Counters::default();
        counters.control_sent.entry("rreq").or_default().add(24);
        counters.control_sent.entry("hello").or_default().add(20);
        counters.control_sent.entry("hello").or_default().add(20);
        assert_eq!(counters.overhead(), (24 + 40 + 3 * IP_UDP_HEADER_BYTES, 3));
    }
}
