//! Route use from the kernel's xt_recent lists (`/proc/net/xt_recent/NAME`,
//! per network namespace): every data packet updates its address's
//! `last_seen` in the kernel, and the daemon reads the lists a few times
//! per second. An address whose `last_seen` moved was used since.

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

    /// Addresses seen since the last call.
    pub fn used_since_last(&mut self) -> io::Result<Vec<Ipv4Addr>> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut used = Vec::new();
        for (addr, seen) in parse(&text) {
            if self.last_seen.insert(addr, seen) != Some(seen) {
                used.push(addr);
            }
        }
        Ok(used)
    }
}

/// `src=10.0.0.5 ttl: 64 last_seen: 4295885444 oldest_pkt: 1 4295885444` lines.
fn parse(text: &str) -> Vec<(Ipv4Addr, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let addr = words.next()?.strip_prefix("src=")?.parse().ok()?;
            let seen = words.skip_while(|w| *w != "last_seen:").nth(1)?.parse().ok()?;
            Some((addr, seen))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_the_proc_file_are_parsed_and_junk_skipped() {
        let text = "src=10.0.0.5 ttl: 64 last_seen: 4295885444 oldest_pkt: 1 4295885444\nnonsense\n\
                    src=10.0.0.7 ttl: 63 last_seen: 12 oldest_pkt: 2 10, 12\n";
        assert_eq!(parse(text), vec![(Ipv4Addr::new(10, 0, 0, 5), 4295885444), (Ipv4Addr::new(10, 0, 0, 7), 12)]);
    }
}
