//! The absolute send schedule of a constant-rate flow.
//!
//! Packet k is due at `start + k · size·8 / rate`, computed from k each time
//! (never by adding gaps), so rounding never accumulates and a sender that
//! wakes up late catches up instead of drifting.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    start_ns: u64,
    duration_ns: u64,
    /// Bits per packet times 1e9; divided by the rate it is the gap in ns.
    bit_ns_per_packet: u128,
    rate_bps: u64,
}

impl Schedule {
    /// `packet_bytes` at `rate_bps` (both positive) for `duration_ns` from `start_ns`.
    pub fn new(start_ns: u64, duration_ns: u64, packet_bytes: u64, rate_bps: u64) -> Self {
        assert!(packet_bytes > 0 && rate_bps > 0, "packet size and rate must be positive");
        Schedule {
            start_ns,
            duration_ns,
            bit_ns_per_packet: u128::from(packet_bytes) * 8 * 1_000_000_000,
            rate_bps,
        }
    }

    /// When packet `k` is due, or None when it falls after the end.
    pub fn due(&self, k: u64) -> Option<u64> {
        let offset = u128::from(k) * self.bit_ns_per_packet / u128::from(self.rate_bps);
        (offset < u128::from(self.duration_ns)).then(|| self.start_ns + offset as u64)
    }

    /// How many packets the whole schedule sends.
    pub fn packets(&self) -> u64 {
        // The smallest k with offset(k) >= duration.
        let k = (u128::from(self.duration_ns) * u128::from(self.rate_bps)).div_ceil(self.bit_ns_per_packet);
        k as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_follow_the_rate_without_drift() {
        // 1250 bytes at 1 Mbit/s: one packet every 10 ms.
        let schedule = Schedule::new(1_000, 1_000_000_000, 1250, 1_000_000);
        assert_eq!(schedule.due(0), Some(1_000));
        assert_eq!(schedule.due(1), Some(10_001_000));
        assert_eq!(schedule.due(99), Some(990_001_000));
        assert_eq!(schedule.due(100), None);
        assert_eq!(schedule.packets(), 100);
    }

    #[test]
    fn uneven_gaps_round_per_packet_not_cumulatively() {
        // 1 byte at 3 bit/s: 8/3 s per packet.
        let schedule = Schedule::new(0, 10_000_000_000, 1, 3);
        assert_eq!(schedule.due(1), Some(2_666_666_666));
        assert_eq!(schedule.due(3), Some(8_000_000_000));
        assert_eq!(schedule.packets(), 4); // at 0, 2.67, 5.33, 8 s
        assert_eq!(schedule.due(4), None);
    }
}
