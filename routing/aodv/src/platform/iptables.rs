//! The netfilter rules of the data path, as argument lists (never a shell).
//!
//! filter OUTPUT:  packets marked "reject" (a held packet given up) get an
//!                 ICMP host unreachable; control packets pass; packets that
//!                 took the catch-all route (realm) go to the queue, held.
//! filter FORWARD: forwarded packets that took the catch-all route go to the
//!                 queue too (dropped there; the protocol sends a RERR).
//! mangle POSTROUTING / PREROUTING: the destination of every data packet
//!                 leaving and the source of every data packet arriving are
//!                 recorded in xt_recent lists ([`super::route_use`]), so
//!                 route use is seen without a packet going to userspace.

use std::process::Command;

use serde::Serialize;

use super::DataPath;
use crate::aodv::packet::AODV_PORT;

/// xt_recent list of destinations of data leaving through the interface.
pub const RECENT_DESTINATIONS: &str = "aodv_dst";
/// xt_recent list of sources of data arriving on the interface.
pub const RECENT_SOURCES: &str = "aodv_src";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub table: &'static str,
    pub chain: &'static str,
    /// Match and target arguments, as given to -A / -D.
    pub rule: Vec<String>,
}

fn rule(table: &'static str, chain: &'static str, args: &[&str]) -> Rule {
    Rule { table, chain, rule: args.iter().map(|a| a.to_string()).collect() }
}

/// The rules for `data_path`, in the order they are appended.
pub fn rules(data_path: &DataPath, interface: &str) -> Vec<Rule> {
    let realm = data_path.realm.to_string();
    let queue = data_path.queue.to_string();
    let reject = format!("{:#x}/{:#x}", data_path.reject_mark, data_path.reject_mark);
    let port = AODV_PORT.to_string();
    let mut rules = vec![
        rule("filter", "OUTPUT", &["-m", "mark", "--mark", &reject, "-j", "REJECT", "--reject-with", "icmp-host-unreachable"]),
        rule("filter", "OUTPUT", &["-m", "realm", "--realm", &realm, "-p", "udp", "--sport", &port, "-j", "ACCEPT"]),
        rule("filter", "OUTPUT", &["-m", "realm", "--realm", &realm, "-j", "NFQUEUE", "--queue-num", &queue]),
        rule("filter", "FORWARD", &["-m", "realm", "--realm", &realm, "-j", "NFQUEUE", "--queue-num", &queue]),
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
        rules.push(rule("mangle", chain, &not_udp));
        rules.push(rule("mangle", chain, &udp));
    }
    rules
}

fn run(binary: &str, rule: &Rule, action: &str) -> std::io::Result<std::process::Output> {
    Command::new(binary).args(["-w", "-t", rule.table, action, rule.chain]).args(&rule.rule).output()
}

/// Appends the rules; a copy left by an earlier run is deleted first.
pub fn add(binary: &str, rules: &[Rule]) -> Result<(), String> {
    remove(binary, rules);
    for rule in rules {
        let output = run(binary, rule, "-A").map_err(|e| format!("running {binary}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "{binary} -t {} -A {} {}: {}",
                rule.table,
                rule.chain,
                rule.rule.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Deletes every copy of the rules (errors mean there is none left).
pub fn remove(binary: &str, rules: &[Rule]) {
    for rule in rules {
        while run(binary, rule, "-D").is_ok_and(|output| output.status.success()) {}
    }
}
