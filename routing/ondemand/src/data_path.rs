//! The `[daemon]` table of a daemon's config file: the data path's settings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Settings of the data path and the daemon (the `[daemon]` table of the config file).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataPath {
    pub interface: String,
    /// NFQUEUE number of packets without a route.
    pub queue: u16,
    /// Realm of the catch-all subnet route.
    pub realm: u16,
    /// Mark bit set on a held packet that is given up (its sender gets ICMP host unreachable).
    pub reject_mark: u32,
    /// Mark bit set on a held packet that is released (the kernel routes it again).
    pub release_mark: u32,
    /// Packets held per destination during a discovery; more are rejected.
    pub max_held_per_destination: usize,
    /// How often route use is read while routes are installed.
    pub route_use_poll_ms: u64,
    /// The most often the link layer is read after its counters changed.
    pub link_feedback_poll_ms: u64,
    /// The most often the counters file is rewritten after they changed.
    pub counters_interval_ms: u64,
    /// Where the counters JSON is rewritten (when changed, on SIGUSR1, at exit).
    pub counters: Option<PathBuf>,
    /// Where protocol events are appended as JSON lines.
    pub events: Option<PathBuf>,
    /// The radio statistics page for link-layer feedback (default: this node's own).
    pub radio_stats: Option<PathBuf>,
    /// Seed of every random choice of the protocol (jitter).
    pub seed: u64,
    pub iptables: String,
    /// Every route the daemon installs gets `quickack 1` (delayed ACKs off
    /// for TCP receivers using it, as far as Linux allows).
    pub quickack: bool,
}

impl Default for DataPath {
    fn default() -> Self {
        DataPath {
            interface: "wlan0".into(),
            queue: 654,
            realm: 654,
            reject_mark: 0x4000_0000,
            release_mark: 0x2000_0000,
            max_held_per_destination: 64,
            route_use_poll_ms: 500,
            link_feedback_poll_ms: 50,
            counters_interval_ms: 1000,
            counters: None,
            events: None,
            radio_stats: None,
            seed: 0,
            iptables: "iptables".into(),
            quickack: false,
        }
    }
}

impl DataPath {
    pub fn validate(&self) -> Result<(), String> {
        let bad = |field: &str, problem: &str| Err(format!("daemon.{field}: {problem}"));
        if self.interface.is_empty() || self.interface.len() > 15 || self.interface.contains('/') {
            return bad("interface", "an interface name of 1-15 characters");
        }
        if self.reject_mark == 0 || self.release_mark == 0 || self.reject_mark & self.release_mark != 0 {
            return bad("reject_mark", "reject_mark and release_mark must be non-zero and share no bit");
        }
        if self.max_held_per_destination == 0 {
            return bad("max_held_per_destination", "must be positive");
        }
        for (field, value) in [
            ("route_use_poll_ms", self.route_use_poll_ms),
            ("link_feedback_poll_ms", self.link_feedback_poll_ms),
            ("counters_interval_ms", self.counters_interval_ms),
        ] {
            if value == 0 {
                return bad(field, "must be positive");
            }
        }
        Ok(())
    }
}
