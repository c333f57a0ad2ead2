//! The contract between a protocol core and the daemon that runs it (see
//! the crate documentation).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Serialize;

/// The limited broadcast address control packets go to.
pub const BROADCAST: Ipv4Addr = Ipv4Addr::BROADCAST;

/// The UDP port of control packets: AODV's (RFC 3561 section 4), which its
/// siblings share so the data path's rules stay the same.
pub const CONTROL_PORT: u16 = 654;

/// Something that happened, for the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// A control packet from a neighbour: its IP source, the IP TTL it
    /// arrived with, the UDP payload.
    Control { from: Ipv4Addr, ttl: u8, payload: &'a [u8] },
    /// A packet to `dst` found no route. `local`: this node sent it and it
    /// is held until the core says [`Output::Release`] or [`Output::Drop`];
    /// otherwise it was being forwarded and is dropped already.
    NoRoute { src: Ipv4Addr, dst: Ipv4Addr, local: bool },
    /// Data traffic to or from `addr` went through this node since the last
    /// report: routes in use stay alive.
    RouteUsed { addr: Ipv4Addr },
    /// The link layer could not deliver a frame to this neighbour.
    LinkFailed { neighbor: Ipv4Addr },
    /// The kernel could not resolve this neighbour's link-layer address
    /// (its neighbour entry went FAILED): no frame failed, but nothing
    /// reaches it either ([`crate::resolution`]).
    ResolutionFailed { neighbor: Ipv4Addr },
    /// The link layer received frames from this neighbour (data included).
    NeighborHeard { neighbor: Ipv4Addr },
    /// The link layer's frames to this neighbour were acknowledged.
    NeighborAcked { neighbor: Ipv4Addr },
    /// The MAC's cumulative count of the backoffs activity in the medium
    /// caused (a frame found it busy, an attempt failed): the contention a
    /// node sees (COPAS).
    MacBackoffs { total: u64 },
}

/// What the core wants done; `E` is the protocol's event type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<E> {
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
    /// Hold the packets this node forwards to `dst` too (a local repair
    /// searches for a new route), until [`Output::Release`] or [`Output::Drop`].
    HoldForwarded { dst: Ipv4Addr },
    /// Send the packets held for `dst` along the route now installed, one
    /// every `spacing` (zero: all at once; [`crate::pacing`]). Those still
    /// waiting when the route to `dst` is deleted are dropped.
    Release { dst: Ipv4Addr, spacing: Duration },
    /// Drop the packets held for `dst`, telling local senders it is unreachable.
    Drop { dst: Ipv4Addr },
    /// Drop the frames the link layer still holds for this neighbour.
    Flush { neighbor: Ipv4Addr },
    /// A protocol event worth a log line (and an experiment's timeline).
    Event(E),
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
    /// Counters of one protocol only, written beside the others.
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
    /// The protocol's events: each serialises to a JSON object tagged by
    /// its `event` field (`#[serde(tag = "event")]`), a line of the event file.
    type Event: Serialize + Debug;
    /// Process one input at `now`, then the timers due by then; outputs are
    /// appended to `out` in the order they must be carried out.
    fn handle(&mut self, now: Duration, input: Input<'_>, out: &mut Vec<Output<Self::Event>>);
    /// Run the timers due at or before `now` (none: nothing happens), with
    /// outputs as [`handle`](Self::handle)'s.
    fn handle_timeout(&mut self, now: Duration, out: &mut Vec<Output<Self::Event>>);
    /// When [`handle_timeout`](Self::handle_timeout) next has something to do
    /// (None: no timer pending).
    fn poll_timeout(&self) -> Option<Duration>;
    /// The last data packet to `dst` that left this node had travelled
    /// `hops` hops from its source, read from its IP TTL (the daemon reports
    /// it with route use). A node's own packets read as 1, like its first
    /// relay's. Protocols that have no use for it ignore it (the default).
    fn data_hops(&mut self, _now: Duration, _dst: Ipv4Addr, _hops: u8) {}
    fn counters(&self) -> &Counters;
    fn counters_mut(&mut self) -> &mut Counters;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_sums_every_kind() {
        let mut counters = Counters::default();
        counters.control_sent.entry("rreq").or_default().add(24);
        counters.control_sent.entry("hello").or_default().add(20);
        counters.control_sent.entry("hello").or_default().add(20);
        assert_eq!(counters.overhead(), (24 + 40 + 3 * IP_UDP_HEADER_BYTES, 3));
    }
}
