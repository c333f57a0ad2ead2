//! COPAS's events, for the structured log and the event file. The ones a
//! discovery shares with AODV keep AODV's names and fields, so one reader
//! takes both logs.

use std::net::Ipv4Addr;

use serde::Serialize;

/// Something the COPAS core did worth a line of the event log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    DiscoveryStarted { dst: Ipv4Addr },
    RreqSent { dst: Ipv4Addr, ttl: u8, attempt: u32 },
    DiscoverySucceeded { dst: Ipv4Addr, hops: u8, elapsed_ms: u64 },
    DiscoveryFailed { dst: Ipv4Addr, elapsed_ms: u64 },
    RouteRemoved { dst: Ipv4Addr, reason: &'static str },
    LinkBroken { neighbor: Ipv4Addr, cause: &'static str },
    RerrSent { to: Ipv4Addr, unreachable: Vec<Ipv4Addr> },
    RerrReceived { from: Ipv4Addr, unreachable: Vec<Ipv4Addr> },
    Malformed { from: Ipv4Addr, error: String },
    /// A path of the pair (src, dst) chosen for a role (forward: src to
    /// dst; reverse: dst to src), listed from src to dst; `cause`:
    /// discovery, contention, rerr; contention in hundredths of a backoff.
    PathSelected { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, path: Vec<Ipv4Addr>, contention_centi: u32, cause: &'static str },
    /// This end sends the role's traffic over the pair's other path now.
    PathSwitched { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, cause: &'static str },
    /// A probe showed a relay above the threshold; a reroute starts.
    ContentionHigh { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, max_centi: u32, sum_centi: u32 },
    /// No candidate path was disjoint, similarly long and less contended.
    RerouteDeclined { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, candidates: usize },
    /// A ROUTE for the pair's path (listed from src to dst) was never
    /// acknowledged by `next_hop`, after `transmissions` tries: it died here.
    RouteAbandoned { src: Ipv4Addr, dst: Ipv4Addr, role: &'static str, next_hop: Ipv4Addr, path: Vec<Ipv4Addr>, transmissions: u32 },
}
