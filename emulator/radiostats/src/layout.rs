//! The page's layout: header, node counters and peer entries as `#[repr(C)]`
//! types with checked sizes (no I/O).

use bytemuck::{Pod, Zeroable};
use serde::{Serialize, Serializer};

/// `b"MESHSTAT"`, the first 8 bytes of every page.
pub const MAGIC: [u8; 8] = *b"MESHSTAT";
/// The layout version this crate writes and reads.
pub const VERSION: u32 = 4;
/// Buckets of the attempt histograms; the last one counts 16 or more attempts.
pub const HISTOGRAM_BUCKETS: usize = 16;


/// The page header (offsets 0..48).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    pub magic: [u8; 8],
    pub version: u32,
    pub header_size: u32,
    pub seq: u64,
    pub time_ns: u64,
    pub node_index: u32,
    pub peer_count: u32,
    /// Threads blocked waiting for a change of `seq`.
    pub waiters: u64,
}

/// The node's counters, in page order. The model counts in this type
/// directly (its per-node statistics). All count since the lab started.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, Serialize)]
pub struct NodeCounters {
    /// Unicast data frames acknowledged.
    pub tx_data_frames: u64,
    /// Broadcast frames sent.
    pub tx_broadcast_frames: u64,
    /// Network-layer bytes sent successfully.
    pub tx_bytes: u64,
    /// Frames delivered up (unicast to this node and broadcast).
    pub rx_frames: u64,
    /// Network-layer bytes delivered up.
    pub rx_bytes: u64,
    /// Retransmitted frames received again and discarded.
    pub rx_duplicates: u64,
    /// Unicast frames for other nodes overheard (promiscuous nodes).
    pub overheard_frames: u64,
    /// Data transmissions, retries included.
    pub data_attempts: u64,
    /// RTS transmissions, retries included.
    pub rts_attempts: u64,
    pub cts_sent: u64,
    pub acks_sent: u64,
    pub cts_timeouts: u64,
    pub ack_timeouts: u64,
    /// Frames dropped at the retry limit.
    pub retry_drops: u64,
    /// Frames dropped because the interface queue was full.
    pub queue_drops: u64,
    /// Queued frames dropped with a frame that failed at the retry limit,
    /// because they were bound for the same receiver (`retry_drop_flush`).
    pub link_drops: u64,
    /// Receptions lost to interference (SINR under the capture threshold,
    /// taken over by a stronger frame, or cut short by our own transmission).
    pub rx_collisions: u64,
    /// Receptions lost to bit errors.
    pub rx_errors: u64,
    /// Frames sensed below the receive threshold.
    pub rx_weak: u64,
    /// Random backoffs drawn.
    pub backoffs: u64,
    /// Times the node wanted to send and found the medium busy (COPAS's contention count).
    pub defers: u64,
    /// Time the physical or virtual carrier was busy, own transmissions included,
    /// over completed busy periods, ns.
    pub busy_ns: u64,
    /// Own airtime, ns.
    pub tx_ns: u64,
    /// Frames in the interface queue now.
    pub queue_len: u64,
    /// Highest `queue_len` seen.
    pub queue_len_max: u64,
    /// Frames that needed k+1 RTS attempts at index k (dropped ones at their last count).
    pub rts_attempts_hist: [u64; HISTOGRAM_BUCKETS],
    /// Frames that needed k+1 data attempts at index k (dropped ones at their last count).
    pub data_attempts_hist: [u64; HISTOGRAM_BUCKETS],
}

/// What this node knows about one other node.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, Serialize)]
pub struct PeerEntry {
    #[serde(serialize_with = "serialize_mac")]
    pub mac_address: [u8; 6],
    #[serde(skip)]
    pub reserved: [u8; 2],
    /// Unicast frames to this peer that were acknowledged.
    pub tx_acked: u64,
    /// Unicast frames to this peer dropped at the retry limit.
    pub tx_failed: u64,
    /// Of those, frames that carried data: neither routing control nor ARP.
    pub tx_failed_data: u64,
    /// Frames received from this peer.
    pub rx_frames: u64,
    /// Power of the last frame decoded from this peer, milli-dBm (0 before the first).
    pub last_rx_power_mdbm: i32,
    /// SINR of the last frame decoded from this peer, milli-dB (0 before the first).
    pub last_sinr_mdb: i32,
}

fn serialize_mac<S: Serializer>(mac: &[u8; 6], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_mac(mac))
}

/// `02:00:00:00:00:01` form of a MAC address.
pub fn format_mac(mac: &[u8; 6]) -> String {
    let parts: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
    parts.join(":")
}

pub(crate) const HEADER_SIZE: usize = std::mem::size_of::<Header>();
pub(crate) const COUNTERS_SIZE: usize = std::mem::size_of::<NodeCounters>();
pub(crate) const PEER_SIZE: usize = std::mem::size_of::<PeerEntry>();
const _: () = assert!(HEADER_SIZE == 48 && COUNTERS_SIZE == 456 && PEER_SIZE == 48);

/// Size in bytes of a version-4 page with `peer_count` peer entries.
pub fn page_size(peer_count: u32) -> usize {
    HEADER_SIZE + COUNTERS_SIZE + peer_count as usize * PEER_SIZE
}
