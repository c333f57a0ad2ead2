//! Link-layer feedback: neighbours the link layer failed to reach,
//! neighbours it received frames from (any frame shows the link works, RFC
//! 3561 section 6.11, also data the daemon never sees), and neighbours that
//! acknowledged its frames. Here from the per-peer `tx_failed`, `rx_frames`
//! and `tx_acked` counters of the node's radio statistics page
//! (emulator/README.md section 5), and the medium's control socket for the
//! one thing a daemon asks of the link layer (dropping what it holds for a
//! neighbour); a real driver's station counters would be another
//! [`LinkLayer`].

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use meshemu_radiostats::{NodeCounters, PageWatcher, PeerEntry, RadioStats, Snapshot};
use serde::{Deserialize, Serialize};

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
    /// A descriptor that becomes readable when the counters changed after
    /// the last [`activity_since_last`](Self::activity_since_last) (None:
    /// the daemon reads them periodically).
    fn changes(&self) -> Option<BorrowedFd<'_>>;
    /// Drops the frames still queued for `neighbor`; how many.
    fn flush(&mut self, neighbor: [u8; 6]) -> Result<u64, String>;
}

/// Which frames dropped at the retry limit tell of a failed link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailedFrames {
    /// Any unicast frame (RFC 3561 6.11: a delivery failed), the daemon's
    /// own replies and errors and the kernel's ARP probes included.
    #[default]
    Any,
    /// Frames that carried data only (the page's `tx_failed_data`), as in
    /// ns-2, whose routing agents hear of the failures of the packets they
    /// routed and of no other.
    Data,
}

impl FailedFrames {
    fn count(self, peer: &PeerEntry) -> u64 {
        match self {
            FailedFrames::Any => peer.tx_failed,
            FailedFrames::Data => peer.tx_failed_data,
        }
    }
}

/// The medium's radio statistics page of this node (watched for changes by
/// a helper thread, so an idle node is never read), and its control socket
/// when the daemon asks for flushes.
pub struct RadioStatsLinks {
    watcher: PageWatcher,
    snapshot: Snapshot,
    failures: FailedFrames,
    /// (failed, rx_frames, tx_acked) by peer at the last look.
    last: HashMap<[u8; 6], (u64, u64, u64)>,
    control: Option<MediumControl>,
}

impl RadioStatsLinks {
    pub fn new(stats: RadioStats, failures: FailedFrames, control: Option<MediumControl>) -> std::io::Result<RadioStatsLinks> {
        let watcher = PageWatcher::spawn(stats, |page| Ok(page.seq()))?;
        Ok(RadioStatsLinks { watcher, snapshot: Snapshot::default(), failures, last: HashMap::new(), control })
    }
}

/// The medium's control socket (emulator/README.md section 6), as the
/// daemon of one node uses it.
#[derive(Debug)]
pub struct MediumControl {
    socket: PathBuf,
    node: String,
}

/// How long a request may wait for the medium's reply: it answers within
/// its event loop, in microseconds when it keeps real time.
const CONTROL_TIMEOUT: Duration = Duration::from_millis(200);

impl MediumControl {
    /// The socket of the lab whose radio statistics page is `page`: the
    /// page is `run_dir/nodes/<node>/radio` (reached through a by-netns
    /// link), the socket `run_dir/control.sock`.
    pub fn of_page(page: &Path) -> Result<MediumControl, String> {
        let real = page.canonicalize().map_err(|e| format!("{}: {e}", page.display()))?;
        let node_dir = real.parent().ok_or_else(|| format!("{}: not in a node directory", real.display()))?;
        let node = node_dir.file_name().and_then(|n| n.to_str()).map(str::to_owned);
        let run_dir = node_dir.parent().and_then(Path::parent);
        let (Some(node), Some(run_dir)) = (node, run_dir) else {
            return Err(format!("{}: not in a lab's run_dir/nodes/<node>/", real.display()));
        };
        let socket = run_dir.join("control.sock");
        if !socket.exists() {
            return Err(format!("{}: no control socket beside the page {}", socket.display(), real.display()));
        }
        Ok(MediumControl { socket, node })
    }

    /// The medium's `flush` request: this node's frames queued for `neighbor` are dropped.
    pub fn flush(&self, neighbor: [u8; 6]) -> Result<u64, String> {
        let to = neighbor.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        let reply = self.request(&serde_json::json!({"op": "flush", "node": self.node, "to": to}))?;
        reply["dropped"].as_u64().ok_or_else(|| format!("{}: reply without a count: {reply}", self.socket.display()))
    }

    fn request(&self, request: &serde_json::Value) -> Result<serde_json::Value, String> {
        let failed = |e: std::io::Error| format!("{}: {e}", self.socket.display());
        let mut stream = UnixStream::connect(&self.socket).map_err(failed)?;
        stream.set_read_timeout(Some(CONTROL_TIMEOUT)).map_err(failed)?;
        stream.set_write_timeout(Some(CONTROL_TIMEOUT)).map_err(failed)?;
        writeln!(stream, "{request}").map_err(failed)?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).map_err(failed)?;
        let reply: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("{}: reply {line:?}: {e}", self.socket.display()))?;
        if reply["ok"] != true {
            return Err(format!("{}: {}", self.socket.display(), reply["error"]));
        }
        Ok(reply)
    }
}

impl LinkLayer for RadioStatsLinks {
    fn activity_since_last(&mut self) -> Result<LinkActivity, String> {
        self.watcher.acknowledge();
        // The sequence number before the copy: a change during it wakes us again.
        let seen = self.watcher.page().seq();
        self.watcher.arm(seen);
        self.watcher.page().read_into(&mut self.snapshot).map_err(|e| e.to_string())?;
        let contention_backoffs = Some(contention_backoffs(&self.snapshot.counters));
        let mut activity = LinkActivity { contention_backoffs, ..LinkActivity::default() };
        for peer in &self.snapshot.peers {
            let now = (self.failures.count(peer), peer.rx_frames, peer.tx_acked);
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

    fn flush(&mut self, neighbor: [u8; 6]) -> Result<u64, String> {
        self.control.as_ref().ok_or("no control socket of the medium to ask")?.flush(neighbor)
    }

    fn changes(&self) -> Option<BorrowedFd<'_>> {
        Some(self.watcher.wake_fd())
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

/// IPv4 neighbours on `interface` by MAC address, from the kernel's ARP
/// table: resolved entries only.
pub fn arp_table(interface: &str) -> HashMap<[u8; 6], Ipv4Addr> {
    fs::read_to_string("/proc/net/arp").map(|text| parse_arp(&text, interface)).unwrap_or_default()
}

/// linux/if_arp.h's ATF_COM: the entry holds a link-layer address
/// (unresolved and failed entries show an all-zero one).
const ATF_COM: u32 = 0x2;

/// `IP address  HW type  Flags  HW address  Mask  Device` lines.
fn parse_arp(text: &str, interface: &str) -> HashMap<[u8; 6], Ipv4Addr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 6 || fields[5] != interface {
                return None;
            }
            let flags = u32::from_str_radix(fields[2].trim_start_matches("0x"), 16).ok()?;
            if flags & ATF_COM == 0 {
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
                    10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        wlan0\n\
                    bogus\n";
        let table = parse_arp(text, "wlan0");
        assert_eq!(table.len(), 1);
        assert_eq!(table[&[2, 0, 0, 0, 0, 2]], Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn a_flush_names_the_node_and_neighbour_to_the_lab_of_the_page() {
        let run_dir = std::env::temp_dir().join(format!("aodvd-flush-test-{}", std::process::id()));
        let node_dir = run_dir.join("nodes").join("n3");
        fs::create_dir_all(&node_dir).unwrap();
        fs::write(node_dir.join("radio"), b"").unwrap();
        let page = node_dir.join("radio");
        assert!(MediumControl::of_page(&page).unwrap_err().contains("no control socket"));
        let listener = std::os::unix::net::UnixListener::bind(run_dir.join("control.sock")).unwrap();
        let medium = std::thread::spawn(move || {
            let replies = [r#"{"ok": true, "dropped": 4}"#, r#"{"ok": false, "error": "no node has address 02:00:00:00:00:07"}"#];
            replies.map(|reply| {
                let (stream, _) = listener.accept().unwrap();
                let mut request = String::new();
                BufReader::new(&stream).read_line(&mut request).unwrap();
                writeln!(&stream, "{reply}").unwrap();
                serde_json::from_str::<serde_json::Value>(&request).unwrap()
            })
        });
        let control = MediumControl::of_page(&page).unwrap();
        assert_eq!(control.flush([2, 0, 0, 0, 0, 0x0a]), Ok(4));
        assert!(control.flush([2, 0, 0, 0, 0, 7]).unwrap_err().contains("no node has address"));
        let requests = medium.join().unwrap();
        assert_eq!(requests[0], serde_json::json!({"op": "flush", "node": "n3", "to": "02:00:00:00:00:0a"}));
        fs::remove_dir_all(&run_dir).unwrap();
    }

    #[test]
    fn data_failures_leave_out_control_and_arp() {
        let dir = std::env::temp_dir().join(format!("ondemand-failures-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("radio");
        let mut writer = meshemu_radiostats::Writer::create(&path, 0, 2).unwrap();
        let peer = [2, 0, 0, 0, 0, 1];
        let table = |failed, failed_data| {
            [PeerEntry::default(), PeerEntry { mac_address: peer, tx_failed: failed, tx_failed_data: failed_data, ..PeerEntry::default() }]
        };
        let mut any = RadioStatsLinks::new(RadioStats::open(&path).unwrap(), FailedFrames::Any, None).unwrap();
        let mut data = RadioStatsLinks::new(RadioStats::open(&path).unwrap(), FailedFrames::Data, None).unwrap();
        writer.update(1, &NodeCounters::default(), &table(0, 0));
        for links in [&mut any, &mut data] {
            assert!(links.activity_since_last().unwrap().failed.is_empty());
        }
        // A failed RREP (or ARP probe): no data lost.
        writer.update(2, &NodeCounters::default(), &table(1, 0));
        assert_eq!(any.activity_since_last().unwrap().failed, vec![peer]);
        assert!(data.activity_since_last().unwrap().failed.is_empty());
        writer.update(3, &NodeCounters::default(), &table(2, 1));
        assert_eq!(any.activity_since_last().unwrap().failed, vec![peer]);
        assert_eq!(data.activity_since_last().unwrap().failed, vec![peer]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
