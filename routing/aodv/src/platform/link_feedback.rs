//! Link-layer feedback: neighbours the link layer failed to reach. Here
//! from the per-peer `tx_failed` counters of the node's radio statistics
//! page (emulator/README.md section 5); a real driver's counters would be
//! another [`FailureSource`].

use std::collections::HashMap;
use std::fs;
use std::net::Ipv4Addr;

use meshemu_radiostats::{RadioStats, Snapshot};

/// Something that tells which neighbours' frames were dropped at the retry limit.
pub trait FailureSource {
    /// MAC addresses whose failure count grew since the last call.
    fn failed_since_last(&mut self) -> Result<Vec<[u8; 6]>, String>;
}

/// The medium's radio statistics page of this node.
pub struct RadioStatsFailures {
    stats: RadioStats,
    snapshot: Snapshot,
    failed: HashMap<[u8; 6], u64>,
}

impl RadioStatsFailures {
    pub fn new(stats: RadioStats) -> RadioStatsFailures {
        RadioStatsFailures { stats, snapshot: Snapshot::default(), failed: HashMap::new() }
    }
}

impl FailureSource for RadioStatsFailures {
    fn failed_since_last(&mut self) -> Result<Vec<[u8; 6]>, String> {
        self.stats.read_into(&mut self.snapshot).map_err(|e| e.to_string())?;
        let mut grew = Vec::new();
        for peer in &self.snapshot.peers {
            let before = self.failed.insert(peer.mac_address, peer.tx_failed).unwrap_or(peer.tx_failed);
            if peer.tx_failed > before {
                grew.push(peer.mac_address);
            }
        }
        Ok(grew)
    }
}

/// IPv4 neighbours on `interface` by MAC address, from the kernel's ARP table.
pub fn arp_table(interface: &str) -> HashMap<[u8; 6], Ipv4Addr> {
    fs::read_to_string("/proc/net/arp").map(|text| parse_arp(&text, interface)).unwrap_or_default()
}

/// `IP address  HW type  Flags  HW address  Mask  Device` lines.
fn parse_arp(text: &str, interface: &str) -> HashMap<[u8; 6], Ipv4Addr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 6 || fields[5] != interface {
                return None;
            }
            let ip = fields[0].parse().ok()?;
            let mut mac = [0u8; 6];
            let mut parts = fields[3].split(':');
            for byte in &mut mac {
                *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
            }
            Some((mac, ip))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arp_lines_of_the_interface_are_parsed() {
        let text = "IP address       HW type     Flags       HW address            Mask     Device\n\
                    10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        wlan0\n\
                    10.9.9.9         0x1         0x2         02:00:00:00:00:09     *        eth0\n\
                    bogus\n";
        let table = parse_arp(text, "wlan0");
        assert_eq!(table.len(), 1);
        assert_eq!(table[&[2, 0, 0, 0, 0, 2]], Ipv4Addr::new(10, 0, 0, 2));
    }
}
