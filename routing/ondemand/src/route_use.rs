//! Route use from the kernel's xt_recent lists (`/proc/net/xt_recent/NAME`,
//! per network namespace): every data packet updates its address's
//! `last_seen` in the kernel, and the daemon reads the lists a few times
//! per second. An address whose `last_seen` moved was used since.
//!
//! Each entry also keeps the IP TTL of the last packet that updated it; in
//! POSTROUTING xt_recent counts a forwarded packet's TTL as it was before
//! this node decremented it (`ttl++` for packets without a local socket), a
//! packet of this node's own with the TTL it was sent with. So for the list
//! of destinations, with sources that send with the default TTL `D`, a
//! packet forwarded by the k-th node of its path reads `D + 1 - k` and the
//! source's own reads `D`: [`hops_travelled`] gives k, and 1 for the source.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;

pub struct RecentList {
    path: PathBuf,
    last_seen: HashMap<Ipv4Addr, u64>,
}

impl RecentList {
    pub fn new(name: &str) -> RecentList {
        RecentList { path: PathBuf::from("/proc/net/xt_recent").join(name), last_seen: HashMap::new() }
    }

    /// Addresses seen since the last call, with the IP TTL of the last packet.
    pub fn used_since_last(&mut self) -> io::Result<Vec<(Ipv4Addr, Option<u8>)>> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut used = Vec::new();
        for entry in parse(&text) {
            if self.last_seen.insert(entry.addr, entry.last_seen) != Some(entry.last_seen) {
                used.push((entry.addr, entry.ttl));
            }
        }
        Ok(used)
    }
}

/// The TTL sources send with (`net.ipv4.ip_default_ttl` of this namespace; 64 if unreadable).
pub fn default_ttl() -> u8 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(64)
}

/// The hops a packet had travelled when it left this node, from the TTL the
/// destinations list recorded (see the module doc): at least 1.
pub fn hops_travelled(default_ttl: u8, recorded_ttl: u8) -> u8 {
    default_ttl.saturating_add(1).saturating_sub(recorded_ttl).max(1)
}

struct Entry {
    addr: Ipv4Addr,
    ttl: Option<u8>,
    last_seen: u64,
}

/// `src=10.0.0.5 ttl: 64 last_seen: 4295885444 oldest_pkt: 1 4295885444` lines.
fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let addr = words.first()?.strip_prefix("src=")?.parse().ok()?;
            let after = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1));
            let last_seen = after("last_seen:")?.parse().ok()?;
            let ttl = after("ttl:").and_then(|w| w.parse().ok());
            Some(Entry { addr, ttl, last_seen })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_the_proc_file_are_parsed_and_junk_skipped() {
        let text = "src=10.0.0.5 ttl: 64 last_seen: 4295885444 oldest_pkt: 1 4295885444\nnonsense\n\
                    src=10.0.0.7 ttl: 63 last_seen: 12 oldest_pkt: 2 10, 12\n\
                    src=10.0.0.9 last_seen: 13 oldest_pkt: 1 13\n";
        let entries: Vec<_> = parse(text).into_iter().map(|e| (e.addr, e.ttl, e.last_seen)).collect();
        assert_eq!(
            entries,
            vec![
                (Ipv4Addr::new(10, 0, 0, 5), Some(64), 4295885444),
                (Ipv4Addr::new(10, 0, 0, 7), Some(63), 12),
                (Ipv4Addr::new(10, 0, 0, 9), None, 13)
            ]
        );
    }

    #[test]
    fn hops_travelled_from_the_recorded_ttl() {
        // Sent with 64: the source records 64, the 1st relay 64 (TTL before its decrement), the 3rd 62.
        assert_eq!(hops_travelled(64, 64), 1);
        assert_eq!(hops_travelled(64, 62), 3);
        assert_eq!(hops_travelled(64, 200), 1);
        assert_eq!(hops_travelled(255, 0), 255);
    }
}
