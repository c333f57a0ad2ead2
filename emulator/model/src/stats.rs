//! Per-node and per-peer radio statistics (emulator/README.md section 5; the
//! field names and order are the contract's).

use serde::Serialize;

/// The node's counters are the statistics page's own type: the medium
/// publishes them as they are.
pub use meshemu_radiostats::{NodeCounters, HISTOGRAM_BUCKETS};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PeerStats {
    /// Unicast frames to this peer acknowledged.
    pub tx_acked: u64,
    /// Frames to this peer dropped at the retry limit.
    pub tx_failed: u64,
    /// Of those, frames that carried data (not routing control or ARP).
    pub tx_failed_data: u64,
    /// Frames from this peer delivered up.
    pub rx_frames: u64,
    /// Power of the last frame decoded from this peer, milli-dBm.
    pub last_rx_power_mdbm: i32,
    /// SINR of the last frame decoded from this peer (its worst point), milli-dB.
    pub last_sinr_mdb: i32,
}

pub(crate) fn record_attempts(hist: &mut [u64; HISTOGRAM_BUCKETS], attempts: u32) {
    if attempts > 0 {
        hist[(attempts as usize - 1).min(HISTOGRAM_BUCKETS - 1)] += 1;
    }
}

pub(crate) fn to_milli(v: f64) -> i32 {
    (v * 1000.0).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32
}
