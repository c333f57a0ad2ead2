//! The netfilter rules of the on-demand data path.
//!
//! filter OUTPUT:  packets marked "reject" (a held packet given up) get an
//!                 ICMP host unreachable; control packets pass; packets that
//!                 took the catch-all route (realm) go to the queue, held.
//! filter FORWARD: forwarded packets that took the catch-all route go to the
//!                 queue too (dropped there; the protocol sends a RERR).
//! mangle PREROUTING, while a local repair searches a route to DST: packets
//!                 arriving for DST go to the queue, held ([`hold`]); once
//!                 released they are routed, along the new route.
//! mangle POSTROUTING / PREROUTING: the destination of every data packet
//!                 leaving and the source of every data packet arriving are
//!                 recorded in xt_recent lists ([`crate::route_use`]), so
//!                 route use is seen without a packet going to userspace.

use std::net::Ipv4Addr;

use meshemu_netutil::iptables::Rule;

use crate::{DataPath, CONTROL_PORT};

/// xt_recent list of destinations of data leaving through the interface.
pub const RECENT_DESTINATIONS: &str = "aodv_dst";
/// xt_recent list of sources of data arriving on the interface.
pub const RECENT_SOURCES: &str = "aodv_src";

/// The rules for `data_path`, in the order they are appended.
pub fn rules(data_path: &DataPath, interface: &str) -> Vec<Rule> {
    let realm = data_path.realm.to_string();
    let queue = data_path.queue.to_string();
    let reject = format!("{:#x}/{:#x}", data_path.reject_mark, data_path.reject_mark);
    let port = CONTROL_PORT.to_string();
    let mut rules = vec![
        Rule::new("filter", "OUTPUT", &["-m", "mark", "--mark", &reject, "-j", "REJECT", "--reject-with", "icmp-host-unreachable"]),
        Rule::new("filter", "OUTPUT", &["-m", "realm", "--realm", &realm, "-p", "udp", "--sport", &port, "-j", "ACCEPT"]),
        Rule::new("filter", "OUTPUT", &["-m", "realm", "--realm", &realm, "-j", "NFQUEUE", "--queue-num", &queue]),
        Rule::new("filter", "FORWARD", &["-m", "realm", "--realm", &realm, "-j", "NFQUEUE", "--queue-num", &queue]),
    ];
    // Control packets are not data: they must not keep routes alive.
    for (chain, side, direction, list) in [
        ("POSTROUTING", "--rdest", "-o", RECENT_DESTINATIONS),
        ("PREROUTING", "--rsource", "-i", RECENT_SOURCES),
    ] {
        let recent = ["-m", "recent", "--name", list, side, "--set"];
        let mut not_udp = vec![direction, interface, "!", "-p", "udp"];
        not_udp.extend_from_slice(&recent);
        let mut udp = vec![direction, interface, "-p", "udp", "!", "--dport", &port];
        udp.extend_from_slice(&recent);
        rules.push(Rule::new("mangle", chain, &not_udp));
        rules.push(Rule::new("mangle", chain, &udp));
    }
    rules
}

/// The rule that holds the packets arriving for `dst` (before routing, so
/// that a released packet takes the route the repair found).
pub fn hold(data_path: &DataPath, dst: Ipv4Addr) -> Rule {
    let queue = data_path.queue.to_string();
    let dst = format!("{dst}/32");
    Rule::new("mangle", "PREROUTING", &["-i", &data_path.interface, "-d", &dst, "-j", "NFQUEUE", "--queue-num", &queue])
}
