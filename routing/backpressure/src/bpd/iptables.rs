//! The NFQUEUE rule that sends the interface's outgoing packets to us.
//!
//! `iptables -t mangle -A POSTROUTING -o IFACE -j NFQUEUE --queue-num N
//! --queue-bypass`: POSTROUTING sees forwarded and locally generated packets
//! after routing (so the next hop is decided); `--queue-bypass` lets packets
//! through unqueued while no daemon listens (a crashed daemon does not cut
//! the node off). Run as argument lists, never through a shell.

use std::process::Command;

use anyhow::{bail, Context};

pub const TABLE: &str = "mangle";
pub const CHAIN: &str = "POSTROUTING";

/// The match and target arguments (what follows `-A POSTROUTING`).
pub fn rule(interface: &str, queue: u16) -> Vec<String> {
    ["-o", interface, "-j", "NFQUEUE", "--queue-num", &queue.to_string(), "--queue-bypass"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn iptables(action: &str, rule: &[String]) -> anyhow::Result<()> {
    let output = Command::new("iptables")
        .args(["-w", "-t", TABLE, action, CHAIN])
        .args(rule)
        .output()
        .context("running iptables")?;
    if !output.status.success() {
        bail!(
            "iptables -t {TABLE} {action} {CHAIN} {}: {}",
            rule.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The rule, added now and deleted when dropped.
pub struct InstalledRule(Vec<String>);

impl InstalledRule {
    pub fn add(rule: Vec<String>) -> anyhow::Result<InstalledRule> {
        iptables("-A", &rule)?;
        Ok(InstalledRule(rule))
    }
}

impl Drop for InstalledRule {
    fn drop(&mut self) {
        if let Err(e) = iptables("-D", &self.0) {
            eprintln!("bpd: {e:#}");
        }
    }
}
