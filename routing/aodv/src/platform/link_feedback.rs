//! Link-layer feedback: neighbours the link layer failed to reach,
//! neighbours it received frames from (any frame shows the link works, RFC
//! 3561 section 6.11, also data the daemon never sees), and neighbours that
//! acknowledged its frames. Here from the per-peer `tx_failed`, `rx_frames`
//! and `tx_acked` counters of the node's radio statistics page
//! (emulator/README.md section 5); a real driver's station counters would be
//! another [`LinkLayer`].

use std::collections::HashMap;
use std::fs;
use std::net::Ipv4Addr;

use meshemu_radiostats::{NodeCounters, RadioStats, Snapshot};

/// What the link layer saw since the last look, by neighbour MAC address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkActivity {
    /// Frames to these neighbours were dropped at the retry limit.
    pub failed: Vec<[u8; 6]>,
    /// Frames from these neighbours were received.
    pub received: Vec<[u8; 6]>,
    /// Frames to these neighbours were acknowledged.
    pub acked: Vec<[u8; 6]>,
    /// The MAC's cumulative count of backoffs caused by activity in the
    /// medium (contention, COPAS), when the source has one.
    pub contention_backoffs: Option<u64>,
}

/// A source of per-neighbour link-layer counters.
pub trait LinkLayer {
    fn activity_since_last(&mut self) -> Result<LinkActivity, String>;
}

/// The medium's radio statistics page of this node.
pub struct RadioStatsLinks {
    stats: RadioStats,
    snapshot: Snapshot,
    /// (tx_failed, rx_frames, tx_acked) by peer at the last look.
    last: HashMap<[u8; 6], (u64, u64, u64)>,
}

impl RadioStatsLinks {
    pub fn new(stats: RadioStats) -> RadioStatsLinks {
        RadioStatsLinks { stats, snapshot: Snapshot::default(), last: HashMap::new() }
    }
}

impl LinkLayer for RadioStatsLinks {
    fn activity_since_last(&mut self) -> Result<LinkActivity, String> {
        self.stats.read_into(&mut self.snapshot).map_err(|e| e.to_string())?;
        let contention_backoffs = Some(contention_backoffs(&self.snapshot.counters));
        let mut activity = LinkActivity { contention_backoffs, ..LinkActivity::default() };
        for peer in &self.snapshot.peers {
            let now = (peer.tx_failed, peer.rx_frames, peer.tx_acked);
            let (failed, received, acked) = self.last.insert(peer.mac_address, now).unwrap_or(now);
            if now.0 > failed {
                activity.failed.push(peer.mac_address);
            }
            if now.1 > received {
                activity.received.push(peer.mac_address);
            }
            if now.2 > acked {
                activity.acked.push(peer.mac_address);
            }
        }
        Ok(activity)
    }
}

/// The random backoffs the DCF drew because of activity in the medium: a
/// frame came to the MAC while the medium was busy (or within DIFS/EIFS of
/// it), or an RTS or data attempt failed. That is every backoff drawn less
/// the post-transmission backoff each finished frame draws whatever the
/// medium (acknowledged, broadcast or dropped at the retry limit): that one
/// counts the node's own load, not contention (routing/copas/README.md).
fn contention_backoffs(counters: &NodeCounters) -> u64 {
    let post_transmission = counters.tx_data_frames + counters.tx_broadcast_frames + counters.retry_drops;
    counters.backoffs.saturating_sub(post_transmission)
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
    fn contention_backoffs_leave_out_the_one_after_each_frame() {
        let counters = NodeCounters { backoffs: 20, tx_data_frames: 6, tx_broadcast_frames: 2, retry_drops: 1, defers: 90, ..Default::default() };
        assert_eq!(contention_backoffs(&counters), 11);
    }

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
