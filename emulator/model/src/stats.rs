//! Per-node and per-peer radio statistics (emulator/README.md section 5; the
//! field names and order are the contract's).

use serde::Serialize;

/// Number of buckets of the attempt histograms; the last one holds 16 or more.
pub const ATTEMPT_BUCKETS: usize = 16;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Unicast frames acknowledged.
    pub tx_data_frames: u64,
    pub tx_broadcast_frames: u64,
    /// Network-layer bytes sent successfully (acknowledged or broadcast).
    pub tx_bytes: u64,
    /// Frames delivered up: unicast to us and broadcast.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_duplicates: u64,
    pub overheard_frames: u64,
    /// Data transmissions, retries included.
    pub data_attempts: u64,
    pub rts_attempts: u64,
    pub cts_sent: u64,
    pub acks_sent: u64,
    pub cts_timeouts: u64,
    pub ack_timeouts: u64,
    pub retry_drops: u64,
    pub queue_drops: u64,
    /// Receptions lost to interference (SINR under the capture threshold,
    /// taken over by a stronger frame, or cut short by our own transmission).
    pub rx_collisions: u64,
    /// Receptions lost to bit errors.
    pub rx_errors: u64,
    /// Receptions sensed but below the receive threshold.
    pub rx_weak: u64,
    /// Random backoffs drawn.
    pub backoffs: u64,
    /// Times the node had a frame to send and found, or sensed, the medium
    /// busy (the COPAS contention count).
    pub defers: u64,
    /// Time the carrier was busy (physical or virtual, own transmissions
    /// included), over completed busy periods.
    pub busy_ns: u64,
    /// Own airtime.
    pub tx_ns: u64,
    pub queue_len: u64,
    pub queue_len_max: u64,
    /// Frames finished after k+1 RTS attempts at index k.
    pub rts_attempts_hist: [u64; ATTEMPT_BUCKETS],
    /// Frames finished after k+1 data attempts at index k (drops at their
    /// final count).
    pub data_attempts_hist: [u64; ATTEMPT_BUCKETS],
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PeerStats {
    /// Unicast frames to this peer acknowledged.
    pub tx_acked: u64,
    /// Frames to this peer dropped at the retry limit.
    pub tx_failed: u64,
    /// Frames from this peer delivered up.
    pub rx_frames: u64,
    /// Power of the last frame decoded from this peer, milli-dBm.
    pub last_rx_power_mdbm: i32,
    /// SINR of the last frame decoded from this peer (its worst point), milli-dB.
    pub last_sinr_mdb: i32,
}

pub(crate) fn record_attempts(hist: &mut [u64; ATTEMPT_BUCKETS], attempts: u32) {
    if attempts > 0 {
        hist[(attempts as usize - 1).min(ATTEMPT_BUCKETS - 1)] += 1;
    }
}

pub(crate) fn to_milli(v: f64) -> i32 {
    (v * 1000.0).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32
}
