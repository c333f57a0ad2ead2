//! What the receiver measures about one flow, from arrivals alone.
//!
//! - one-way delay: arrival time − send time (one clock for all namespaces);
//! - jitter: RFC 3550 §6.4.1, `J += (|D| − J)/16` with `D` the change in
//!   transit time between consecutive arrivals;
//! - loss: sequence numbers between the lowest and the highest seen that
//!   never arrived. A late packet fills its gap, so it is not lost;
//! - reordering (RFC 4737 §3): a packet is reordered when its sequence number
//!   is below the next expected one (the highest seen + 1) and it is not a
//!   duplicate;
//! - duplicates: a sequence number that arrived before.
//!
//! With a [`Window`] only packets *sent* inside it count, so a warm-up and
//! the packets still in flight at the end are excluded the same way at both
//! ends of the flow.

use std::collections::HashSet;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Gaps are remembered up to this many missing packets; beyond that a late
/// arrival of an old gap counts as a duplicate.
const MAX_TRACKED_GAPS: usize = 1 << 20;
/// Delays above this (1000 s) are recorded as this.
const MAX_DELAY_NS: u64 = 1_000_000_000_000;

/// Send times in [start_ns, end_ns) count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    pub fn contains(&self, send_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&send_ns)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DelaySummary {
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowSummary {
    pub flow_id: u32,
    /// Distinct packets received (duplicates excluded).
    pub packets: u64,
    /// Their UDP payload bytes.
    pub bytes: u64,
    /// Payload bits per second over the window (or first to last arrival).
    pub goodput_bps: f64,
    pub lost: u64,
    /// lost / (packets + lost).
    pub loss_fraction: f64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Arrivals whose send time was outside the window.
    pub outside_window: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub first_arrival_ns: Option<u64>,
    pub last_arrival_ns: Option<u64>,
    pub delay: Option<DelaySummary>,
    pub jitter_ns: f64,
}

/// Counts since the previous interval report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalStats {
    pub flow_id: u32,
    pub packets: u64,
    pub bytes: u64,
    /// Growth of the loss count (a late arrival can make it negative).
    pub lost: i64,
    pub mean_delay_ns: Option<f64>,
    pub jitter_ns: f64,
}

/// One flow's receiver-side state.
pub struct FlowStats {
    flow_id: u32,
    window: Option<Window>,
    packets: u64,
    bytes: u64,
    duplicates: u64,
    reordered: u64,
    outside_window: u64,
    min_seq: Option<u64>,
    max_seq: Option<u64>,
    /// Sequence numbers in [min_seq, max_seq] not received yet.
    missing: HashSet<u64>,
    /// Missing packets no longer tracked (gap set full).
    untracked_missing: u64,
    delays: Histogram<u64>,
    delay_sum_ns: u128,
    delay_min_ns: u64,
    delay_max_ns: u64,
    jitter_ns: f64,
    last_transit_ns: Option<i128>,
    first_arrival_ns: Option<u64>,
    last_arrival_ns: Option<u64>,
    interval: IntervalAccumulator,
}

#[derive(Default)]
struct IntervalAccumulator {
    packets: u64,
    bytes: u64,
    delay_sum_ns: u128,
    lost_at_start: u64,
}

impl FlowStats {
    pub fn new(flow_id: u32, window: Option<Window>) -> Self {
        FlowStats {
            flow_id,
            window,
            packets: 0,
            bytes: 0,
            duplicates: 0,
            reordered: 0,
            outside_window: 0,
            min_seq: None,
            max_seq: None,
            missing: HashSet::new(),
            untracked_missing: 0,
            delays: Histogram::new_with_bounds(1, MAX_DELAY_NS, 3).expect("static histogram bounds are valid"),
            delay_sum_ns: 0,
            delay_min_ns: u64::MAX,
            delay_max_ns: 0,
            jitter_ns: 0.0,
            last_transit_ns: None,
            first_arrival_ns: None,
            last_arrival_ns: None,
            interval: IntervalAccumulator::default(),
        }
    }

    /// One arrival: `len` payload bytes of packet `seq` sent at `send_ns`,
    /// received at `arrival_ns` (both wall-clock ns).
    pub fn record(&mut self, seq: u64, send_ns: u64, arrival_ns: u64, len: u64) {
        if let Some(window) = self.window {
            if !window.contains(send_ns) {
                self.outside_window += 1;
                return;
            }
        }
        if !self.note_sequence(seq) {
            self.duplicates += 1;
            return;
        }
        self.packets += 1;
        self.bytes += len;
        self.first_arrival_ns.get_or_insert(arrival_ns);
        self.last_arrival_ns = Some(arrival_ns);

        let delay = arrival_ns.saturating_sub(send_ns).min(MAX_DELAY_NS);
        self.delays.saturating_record(delay.max(1));
        self.delay_sum_ns += u128::from(delay);
        self.delay_min_ns = self.delay_min_ns.min(delay);
        self.delay_max_ns = self.delay_max_ns.max(delay);

        let transit = i128::from(arrival_ns) - i128::from(send_ns);
        if let Some(previous) = self.last_transit_ns {
            let d = (transit - previous).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);

        self.interval.packets += 1;
        self.interval.bytes += len;
        self.interval.delay_sum_ns += u128::from(delay);
    }

    /// Updates the sequence bookkeeping; false for a duplicate.
    fn note_sequence(&mut self, seq: u64) -> bool {
        let (Some(min), Some(max)) = (self.min_seq, self.max_seq) else {
            self.min_seq = Some(seq);
            self.max_seq = Some(seq);
            return true;
        };
        if seq > max {
            self.add_missing(max + 1, seq);
            self.max_seq = Some(seq);
            true
        } else if seq < min {
            // Later than a higher number, so reordered; the gap below the old
            // lowest number becomes part of the observed range.
            self.add_missing(seq + 1, min);
            self.min_seq = Some(seq);
            self.reordered += 1;
            true
        } else if self.missing.remove(&seq) {
            self.reordered += 1;
            true
        } else {
            false
        }
    }

    /// Marks [from, to) as missing.
    fn add_missing(&mut self, from: u64, to: u64) {
        for seq in from..to {
            if self.missing.len() >= MAX_TRACKED_GAPS {
                self.untracked_missing += to - seq;
                return;
            }
            self.missing.insert(seq);
        }
    }

    pub fn lost(&self) -> u64 {
        self.missing.len() as u64 + self.untracked_missing
    }

    /// The counts since the previous call.
    pub fn take_interval(&mut self) -> IntervalStats {
        let lost = self.lost();
        let interval = std::mem::take(&mut self.interval);
        self.interval.lost_at_start = lost;
        IntervalStats {
            flow_id: self.flow_id,
            packets: interval.packets,
            bytes: interval.bytes,
            lost: lost as i64 - interval.lost_at_start as i64,
            mean_delay_ns: (interval.packets > 0).then(|| interval.delay_sum_ns as f64 / interval.packets as f64),
            jitter_ns: self.jitter_ns,
        }
    }

    pub fn summary(&self) -> FlowSummary {
        let lost = self.lost();
        let span_ns = match (self.window, self.first_arrival_ns, self.last_arrival_ns) {
            (Some(window), _, _) => window.end_ns.saturating_sub(window.start_ns),
            (None, Some(first), Some(last)) => last - first,
            _ => 0,
        };
        let delay = (self.packets > 0).then(|| DelaySummary {
            min_ns: self.delay_min_ns,
            mean_ns: self.delay_sum_ns as f64 / self.packets as f64,
            p50_ns: self.quantile(0.50),
            p95_ns: self.quantile(0.95),
            p99_ns: self.quantile(0.99),
            max_ns: self.delay_max_ns,
        });
        FlowSummary {
            flow_id: self.flow_id,
            packets: self.packets,
            bytes: self.bytes,
            goodput_bps: if span_ns > 0 { self.bytes as f64 * 8e9 / span_ns as f64 } else { 0.0 },
            lost,
            loss_fraction: if self.packets + lost > 0 { lost as f64 / (self.packets + lost) as f64 } else { 0.0 },
            reordered: self.reordered,
            duplicates: self.duplicates,
            outside_window: self.outside_window,
            first_seq: self.min_seq,
            last_seq: self.max_seq,
            first_arrival_ns: self.first_arrival_ns,
            last_arrival_ns: self.last_arrival_ns,
            delay,
            jitter_ns: self.jitter_ns,
        }
    }

    /// A delay quantile, within the histogram's 0.1 % and never outside the
    /// exact minimum and maximum.
    fn quantile(&self, q: f64) -> u64 {
        self.delays
            .value_at_quantile(q)
            .clamp(self.delay_min_ns, self.delay_max_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Packets sent every 10 ms with the given transit times, in `order`.
    fn feed(stats: &mut FlowStats, order: &[u64], transit_ms: &[u64]) {
        for (&seq, &transit) in order.iter().zip(transit_ms) {
            let send = 1_000 * MS + seq * 10 * MS;
            stats.record(seq, send, send + transit * MS, 100);
        }
    }

    #[test]
    fn in_order_without_loss() {
        let mut stats = FlowStats::new(1, None);
        feed(&mut stats, &[0, 1, 2, 3], &[5, 5, 5, 5]);
        let s = stats.summary();
        assert_eq!((s.packets, s.bytes, s.lost, s.reordered, s.duplicates), (4, 400, 0, 0, 0));
        assert_eq!(s.jitter_ns, 0.0);
        let delay = s.delay.unwrap();
        assert_eq!((delay.min_ns, delay.max_ns), (5 * MS, 5 * MS));
        assert_eq!(delay.mean_ns, 5e6);
        // 400 bytes from the first arrival (t=1005 ms) to the last (1035 ms).
        assert!((s.goodput_bps - 400.0 * 8.0 / 0.030).abs() < 1e-6);
    }

    #[test]
    fn jitter_follows_rfc3550_by_hand() {
        // Transit 10, 14, 12, 20 ms: |D| = 4, 2, 8 ms.
        // J1 = 4/16 = 0.25; J2 = 0.25 + (2 − 0.25)/16 = 0.359375;
        // J3 = 0.359375 + (8 − 0.359375)/16 = 0.83691406 ms.
        let mut stats = FlowStats::new(1, None);
        feed(&mut stats, &[0, 1, 2, 3], &[10, 14, 12, 20]);
        let jitter_ms = stats.summary().jitter_ns / 1e6;
        assert!((jitter_ms - 0.836_914_062_5).abs() < 1e-9, "{jitter_ms}");
    }

    #[test]
    fn gaps_are_losses_and_late_arrivals_fill_them() {
        let mut stats = FlowStats::new(1, None);
        // 0 1 _ _ 4 5, then 3 arrives late; 2 never does.
        feed(&mut stats, &[0, 1, 4, 5, 3], &[5, 5, 5, 5, 50]);
        let s = stats.summary();
        assert_eq!(s.packets, 5);
        assert_eq!(s.lost, 1);
        assert_eq!(s.reordered, 1);
        assert!((s.loss_fraction - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!((s.first_seq, s.last_seq), (Some(0), Some(5)));
    }

    #[test]
    fn reordering_counts_rfc4737_style_and_duplicates_apart() {
        let mut stats = FlowStats::new(1, None);
        // 1 2 0 4 3 3 5: 0 and 3 arrive below the next expected number; the
        // second 3 is a duplicate.
        feed(&mut stats, &[1, 2, 0, 4, 3, 3, 5], &[5; 7]);
        let s = stats.summary();
        assert_eq!((s.packets, s.reordered, s.duplicates, s.lost), (6, 2, 1, 0));
        assert_eq!(s.first_seq, Some(0));
    }

    #[test]
    fn window_counts_packets_sent_inside_it_only() {
        // Send times are 1000 + 10·seq ms; the window holds seq 2..=5.
        let window = Window { start_ns: 1_020 * MS, end_ns: 1_060 * MS };
        let mut stats = FlowStats::new(1, Some(window));
        feed(&mut stats, &[0, 1, 2, 3, 5, 6, 7], &[5; 7]);
        let s = stats.summary();
        assert_eq!((s.packets, s.outside_window, s.lost), (3, 4, 1));
        // 300 bytes over the 40 ms window.
        assert!((s.goodput_bps - 300.0 * 8.0 / 0.040).abs() < 1e-6);
    }

    #[test]
    fn quantiles_are_within_the_histogram_precision() {
        let mut stats = FlowStats::new(1, None);
        let order: Vec<u64> = (0..1000).collect();
        let transits: Vec<u64> = (1..=1000).collect(); // 1..1000 ms
        feed(&mut stats, &order, &transits);
        let delay = stats.summary().delay.unwrap();
        for (value, expected_ms) in [(delay.p50_ns, 500.0), (delay.p95_ns, 950.0), (delay.p99_ns, 990.0)] {
            assert!((value as f64 / 1e6 - expected_ms).abs() <= expected_ms * 0.002, "{value} vs {expected_ms} ms");
        }
        assert_eq!((delay.min_ns, delay.max_ns), (MS, 1000 * MS));
    }

    #[test]
    fn interval_reports_reset_and_track_loss_changes() {
        let mut stats = FlowStats::new(9, None);
        feed(&mut stats, &[0, 1, 3], &[5, 5, 5]);
        let first = stats.take_interval();
        assert_eq!((first.packets, first.bytes, first.lost), (3, 300, 1));
        feed(&mut stats, &[2], &[5]); // the gap is filled late
        let second = stats.take_interval();
        assert_eq!((second.packets, second.lost), (1, -1));
        let third = stats.take_interval();
        assert_eq!((third.packets, third.mean_delay_ns), (0, None));
    }
}
