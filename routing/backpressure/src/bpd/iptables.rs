//! The NFQUEUE rule that sends the interface's outgoing packets to us.
//!
//! `iptables -t mangle -A POSTROUTING -o IFACE -j NFQUEUE --queue-num N
//! --queue-bypass`: POSTROUTING sees forwarded and locally generated packets
//! after routing (so the next hop is decided); `--queue-bypass` lets packets
//! through unqueued while no daemon listens (a crashed daemon does not cut
//! the node off).

use meshemu_netutil::iptables::{self, Rule};

const IPTABLES: &str = "iptables";

pub fn rule(interface: &str, queue: u16) -> Rule {
    let queue = queue.to_string();
    Rule::new("mangle", "POSTROUTING", &["-o", interface, "-j", "NFQUEUE", "--queue-num", &queue, "--queue-bypass"])
}

/// The rule, added now and deleted when dropped.
pub struct InstalledRule(Rule);

impl InstalledRule {
    pub fn add(rule: Rule) -> anyhow::Result<InstalledRule> {
        iptables::append(IPTABLES, &rule).map_err(anyhow::Error::msg)?;
        Ok(InstalledRule(rule))
    }
}

impl Drop for InstalledRule {
    fn drop(&mut self) {
        if let Err(e) = iptables::delete(IPTABLES, &self.0) {
            eprintln!("bpd: {e}");
        }
    }
}
