//! AODV's events, for the structured log and the event file.

use std::net::Ipv4Addr;

use serde::Serialize;

/// Something the AODV core did worth a line of the event log.
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
}
