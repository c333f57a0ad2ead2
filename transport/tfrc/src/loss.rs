//! Loss detection and the loss interval history of the receiver
//! (RFC 5348 §5).
//!
//! [`LossDetector`] turns arriving sequence numbers into lost ranges: a packet
//! is lost once [`NDUPACK`] packets with higher sequence numbers have arrived
//! and it has not (§5.1). [`LossHistory`] groups lost packets into loss events
//! and keeps the last [`N_INTERVALS`] loss intervals, from which it computes
//! the loss event rate with the weights of §5.4 and, optionally, the history
//! discounting of §5.5.

use std::collections::VecDeque;

/// Packets with a higher sequence number that must arrive before a missing
/// packet counts as lost (RFC 5348 §5.1).
pub const NDUPACK: u32 = 3;

/// Loss intervals in the average (`n` of RFC 5348 §5.4).
pub const N_INTERVALS: usize = 8;

/// Lowest discount factor of history discounting (RFC 5348 §5.5).
const MIN_DISCOUNT: f64 = 0.5;

/// Weight `w_i` of loss interval `i` (0 = the open interval I_0):
/// 1 for `i < n/2`, then `2*(n-i)/(n+2)`, i.e. 1,1,1,1,0.8,0.6,0.4,0.2.
pub fn weight(i: usize) -> f64 {
    if i < N_INTERVALS / 2 {
        1.0
    } else {
        2.0 * (N_INTERVALS - i) as f64 / (N_INTERVALS + 2) as f64
    }
}

/// A run of consecutive lost packets, with the received packets around it
/// for interpolating their send times (RFC 5348 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostRange {
    pub first: u64,
    pub last: u64,
    /// (sequence number, send timestamp µs) of the received packet just below.
    pub before: (u64, u64),
    /// (sequence number, send timestamp µs) of the received packet just above.
    pub after: (u64, u64),
}

impl LostRange {
    /// Packets in the range (never zero).
    pub fn packets(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Interpolated send time of `seq` in µs (RFC 5348 §5.2). Send
    /// timestamps that run backwards (a sender clock step, garbage) give the
    /// earlier timestamp for the whole range.
    pub fn send_time(&self, seq: u64) -> f64 {
        let (sb, tb) = self.before;
        let (sa, ta) = self.after;
        if ta <= tb {
            return tb as f64;
        }
        tb as f64 + (ta - tb) as f64 * (seq - sb) as f64 / (sa - sb) as f64
    }

    /// The first sequence number in `from..=last` sent later than `time_us`.
    fn first_sent_after(&self, from: u64, time_us: f64) -> Option<u64> {
        let (sb, tb) = self.before;
        let (sa, ta) = self.after;
        if ta <= tb {
            return (self.send_time(from) > time_us).then_some(from);
        }
        // Solve tb + (ta-tb)*(S-sb)/(sa-sb) > time for S, then step past any
        // rounding so the answer really satisfies the inequality.
        let offset = (time_us - tb as f64) * (sa - sb) as f64 / (ta - tb) as f64;
        let mut seq = if offset < 0.0 {
            from
        } else {
            from.max(sb.saturating_add(offset.floor() as u64))
        };
        loop {
            if seq > self.last {
                return None;
            }
            if self.send_time(seq) > time_us {
                return Some(seq);
            }
            if seq == self.last {
                return None;
            }
            seq += 1;
        }
    }
}

/// What an arriving sequence number was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Not seen before.
    New,
    /// Already received.
    Duplicate,
    /// Arrived after it had been declared lost; its loss stays counted.
    Late,
}

/// A hole in the sequence not yet declared lost.
#[derive(Debug, Clone, Copy)]
struct Gap {
    range: LostRange,
    /// Packets received with a sequence number above the gap.
    higher_received: u32,
}

/// Declared-lost ranges remembered to tell a late arrival from a duplicate.
const REMEMBERED_LOSSES: usize = 64;

/// Finds lost packets in the sequence of arrivals (RFC 5348 §5.1).
#[derive(Debug, Default)]
pub struct LossDetector {
    /// (sequence number, send timestamp) of the highest packet received.
    highest: Option<(u64, u64)>,
    /// Open gaps in ascending order.
    gaps: VecDeque<Gap>,
    /// The most recently declared lost ranges (first, last).
    recent_losses: VecDeque<(u64, u64)>,
}

impl LossDetector {
    pub fn highest_seq(&self) -> Option<u64> {
        self.highest.map(|(seq, _)| seq)
    }

    /// Records an arrival; returns what it was and appends newly lost ranges
    /// (in sequence order) to `lost`.
    pub fn on_arrival(
        &mut self,
        seq: u64,
        timestamp_us: u64,
        lost: &mut Vec<LostRange>,
    ) -> Arrival {
        let Some((highest, highest_ts)) = self.highest else {
            self.highest = Some((seq, timestamp_us));
            return Arrival::New;
        };
        if seq > highest {
            if seq > highest + 1 {
                self.gaps.push_back(Gap {
                    range: LostRange {
                        first: highest + 1,
                        last: seq - 1,
                        before: (highest, highest_ts),
                        after: (seq, timestamp_us),
                    },
                    higher_received: 0,
                });
            }
            for gap in &mut self.gaps {
                gap.higher_received += 1;
            }
            self.highest = Some((seq, timestamp_us));
        } else {
            let Some(index) = self
                .gaps
                .iter()
                .position(|g| g.range.first <= seq && seq <= g.range.last)
            else {
                let declared_lost = self
                    .recent_losses
                    .iter()
                    .any(|&(first, last)| first <= seq && seq <= last);
                return if declared_lost {
                    Arrival::Late
                } else {
                    Arrival::Duplicate
                };
            };
            self.fill(index, seq, timestamp_us);
        }
        while self
            .gaps
            .front()
            .is_some_and(|g| g.higher_received >= NDUPACK)
        {
            let Some(gap) = self.gaps.pop_front() else {
                break;
            };
            if self.recent_losses.len() == REMEMBERED_LOSSES {
                self.recent_losses.pop_front();
            }
            self.recent_losses
                .push_back((gap.range.first, gap.range.last));
            lost.push(gap.range);
        }
        Arrival::New
    }

    /// A reordered packet arrived inside gap `index`: split the gap around it.
    fn fill(&mut self, index: usize, seq: u64, timestamp_us: u64) {
        let gap = self.gaps[index];
        let mut replacement = Vec::with_capacity(2);
        if seq > gap.range.first {
            replacement.push(Gap {
                range: LostRange {
                    last: seq - 1,
                    after: (seq, timestamp_us),
                    ..gap.range
                },
                higher_received: gap.higher_received + 1,
            });
        }
        if seq < gap.range.last {
            replacement.push(Gap {
                range: LostRange {
                    first: seq + 1,
                    before: (seq, timestamp_us),
                    ..gap.range
                },
                higher_received: gap.higher_received,
            });
        }
        self.gaps.remove(index);
        for (offset, g) in replacement.into_iter().enumerate() {
            self.gaps.insert(index + offset, g);
        }
        // Every gap below the arrival has one more packet above it.
        for g in self.gaps.iter_mut().take(index) {
            g.higher_received += 1;
        }
    }
}

/// A closed loss interval and its history discount factor `DF_i`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClosedInterval {
    packets: f64,
    discount: f64,
}

/// The loss intervals I_0 (open) and I_1..I_n (closed), RFC 5348 §5.3–5.5.
#[derive(Debug, Clone)]
pub struct LossHistory {
    /// I_1..I_k, most recent first, k ≤ [`N_INTERVALS`].
    closed: VecDeque<ClosedInterval>,
    /// Sequence number and interpolated send time (µs) of the first lost
    /// packet of the current loss event, which starts I_0.
    current_event: Option<(u64, f64)>,
    discounting: bool,
    loss_events: u64,
}

impl LossHistory {
    /// `discounting` enables history discounting (RFC 5348 §5.5).
    pub fn new(discounting: bool) -> Self {
        Self {
            closed: VecDeque::new(),
            current_event: None,
            discounting,
            loss_events: 0,
        }
    }

    /// Loss events seen so far.
    pub fn loss_events(&self) -> u64 {
        self.loss_events
    }

    /// Feeds a lost range; packets sent more than `rtt_us` after the start of
    /// the current loss event start a new one (RFC 5348 §5.2). Returns the
    /// number of new loss events. `first_interval` gives the length of the
    /// synthetic interval I_1 when the very first loss event starts (§6.3.1).
    pub fn on_lost_range(
        &mut self,
        range: &LostRange,
        rtt_us: f64,
        mut first_interval: impl FnMut() -> f64,
    ) -> u32 {
        let mut new_events = 0;
        let mut from = range.first;
        loop {
            let next = match self.current_event {
                None => Some(from),
                Some((_, start_us)) => range.first_sent_after(from, start_us + rtt_us),
            };
            let Some(seq) = next else { break };
            self.start_event(seq, range.send_time(seq), &mut first_interval);
            new_events += 1;
            if seq == range.last {
                break;
            }
            from = seq + 1;
        }
        new_events
    }

    fn start_event(
        &mut self,
        seq: u64,
        send_time_us: f64,
        first_interval: &mut impl FnMut() -> f64,
    ) {
        let closed = match self.current_event {
            None => first_interval().max(1.0),
            Some((start, _)) => seq.saturating_sub(start) as f64,
        };
        if self.discounting && self.current_event.is_some() {
            // The discount in force when the interval closes stays with the
            // older intervals (RFC 5348 §5.5), so p does not jump back up.
            let discount = self.discount_factor(closed);
            for interval in &mut self.closed {
                interval.discount *= discount;
            }
        }
        self.closed.push_front(ClosedInterval {
            packets: closed,
            discount: 1.0,
        });
        self.closed.truncate(N_INTERVALS);
        self.current_event = Some((seq, send_time_us));
        self.loss_events += 1;
    }

    /// Length of the open interval I_0 given the highest sequence number received.
    fn open_interval(&self, highest_seq: u64) -> Option<f64> {
        self.current_event
            .map(|(start, _)| (highest_seq.saturating_sub(start) + 1) as f64)
    }

    /// Mean of the closed intervals with their discounts (`I_mean` of §5.5).
    fn closed_mean(&self) -> f64 {
        let (total, weights) = self
            .closed
            .iter()
            .enumerate()
            .fold((0.0, 0.0), |(t, w), (i, c)| {
                (
                    t + c.packets * weight(i) * c.discount,
                    w + weight(i) * c.discount,
                )
            });
        total / weights
    }

    /// The general discount factor `DF` for an open interval of `open` packets.
    fn discount_factor(&self, open: f64) -> f64 {
        let mean = self.closed_mean();
        if !self.discounting || open <= 2.0 * mean {
            1.0
        } else {
            (2.0 * mean / open).max(MIN_DISCOUNT)
        }
    }

    /// The average loss interval `I_mean` (RFC 5348 §5.4, §5.5), or `None`
    /// before the first loss event.
    pub fn mean_interval(&self, highest_seq: u64) -> Option<f64> {
        let open = self.open_interval(highest_seq)?;
        let k = self.closed.len();
        let df = self.discount_factor(open);
        // With I_0: I_0..I_{k-1}, weights w_0..w_{k-1}; older ones discounted by DF_i*DF.
        let (mut total0, mut weights0) = (open * weight(0), weight(0));
        for (i, c) in self.closed.iter().enumerate().take(k - 1) {
            let w = weight(i + 1) * c.discount * df;
            total0 += c.packets * w;
            weights0 += w;
        }
        // Without I_0: I_1..I_k, weights w_0..w_{k-1}.
        let (mut total1, mut weights1) = (0.0, 0.0);
        for (i, c) in self.closed.iter().enumerate() {
            let w = weight(i) * c.discount;
            total1 += c.packets * w;
            weights1 += w;
        }
        // I_0 counts only when it raises the average (§5.4).
        Some((total0 / weights0).max(total1 / weights1))
    }

    /// The loss event rate `p = 1 / I_mean`; 0 before the first loss event.
    pub fn loss_event_rate(&self, highest_seq: u64) -> f64 {
        self.mean_interval(highest_seq)
            .map_or(0.0, |mean| 1.0 / mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    /// A history whose closed intervals are `closed` (most recent first) and
    /// whose open interval starts at `start`.
    fn history(closed: &[f64], start: u64, discounting: bool) -> LossHistory {
        LossHistory {
            closed: closed
                .iter()
                .map(|&packets| ClosedInterval {
                    packets,
                    discount: 1.0,
                })
                .collect(),
            current_event: Some((start, 0.0)),
            discounting,
            loss_events: closed.len() as u64,
        }
    }

    #[test]
    fn weights_are_those_of_rfc_5348() {
        let w: Vec<f64> = (0..N_INTERVALS).map(weight).collect();
        let expected = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
        for (got, want) in w.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{w:?}");
        }
    }

    #[test]
    fn mean_interval_by_hand() {
        // Closed I_1..I_8 = 100,200,100,200,100,200,100,200; I_0 = 50 (seq 1000..=1049).
        // I_tot1 = 100+200+100+200 + .8*100+.6*200+.4*100+.2*200 = 880
        // I_tot0 = 50+100+200+100 + .8*200+.6*100+.4*200+.2*100  = 770
        // W_tot = 6, I_mean = 880/6 = 146.667, p = 0.0068182
        let h = history(
            &[100.0, 200.0, 100.0, 200.0, 100.0, 200.0, 100.0, 200.0],
            1000,
            false,
        );
        let mean = h.mean_interval(1049).unwrap();
        assert!(rel(mean, 880.0 / 6.0) < 1e-12, "{mean}");
        assert!(rel(h.loss_event_rate(1049), 6.0 / 880.0) < 1e-12);

        // A long I_0 = 400 enters the average: I_tot0 = 400+100+200+100+160+60+80+20 = 1120.
        let mean = h.mean_interval(1399).unwrap();
        assert!(rel(mean, 1120.0 / 6.0) < 1e-12, "{mean}");
    }

    #[test]
    fn mean_interval_with_few_intervals() {
        // k = 2 closed: I_1 = 30, I_2 = 60; I_0 = 10.
        // I_tot0 = 10 + 30 = 40, I_tot1 = 30 + 60 = 90, W_tot = 2 → 45.
        let h = history(&[30.0, 60.0], 500, false);
        assert!(rel(h.mean_interval(509).unwrap(), 45.0) < 1e-12);
    }

    #[test]
    fn no_loss_event_means_zero_rate() {
        let h = LossHistory::new(true);
        assert_eq!(h.loss_event_rate(1_000_000), 0.0);
        assert_eq!(h.mean_interval(10), None);
    }

    #[test]
    fn history_discounting_by_hand() {
        // Eight closed intervals of 100; I_0 = 1000 > 2*I_mean = 200, so
        // DF = max(0.5, 200/1000) = 0.5 discounts I_1..I_7 in the I_0 sum:
        //   I_tot0 = 1000 + 0.5*100*(1+1+1+0.8+0.6+0.4+0.2) = 1250, W_tot0 = 1 + 0.5*5 = 3.5
        //   I_tot1 = 600, W_tot1 = 6
        //   I_mean = max(1250/3.5, 100) = 357.14 (without discounting 1500/6 = 250)
        let closed = [100.0; 8];
        let discounted = history(&closed, 0, true);
        assert!(rel(discounted.mean_interval(999).unwrap(), 1250.0 / 3.5) < 1e-12);
        let plain = history(&closed, 0, false);
        assert!(rel(plain.mean_interval(999).unwrap(), 250.0) < 1e-12);

        // DF does not fall below 0.5: I_0 = 4000 → tot0 = 4000 + 250, W 3.5.
        assert!(rel(discounted.mean_interval(3999).unwrap(), 4250.0 / 3.5) < 1e-12);
        // No discount while I_0 ≤ 2*I_mean: I_0 = 150 → plain weights.
        assert!(
            rel(
                discounted.mean_interval(149).unwrap(),
                (150.0 + 100.0 * 5.0) / 6.0
            ) < 1e-12
        );
    }

    #[test]
    fn discount_stays_with_old_intervals_after_the_next_loss() {
        // Eight intervals of 100, then the open interval closes at 1000 packets
        // while DF = 0.5: the seven older intervals keep DF_i = 0.5.
        let mut h = history(&[100.0; 8], 0, true);
        let range = LostRange {
            first: 1000,
            last: 1000,
            before: (999, 0),
            after: (1001, 2000),
        };
        assert_eq!(h.on_lost_range(&range, 0.0, || unreachable!()), 1);
        // Now I_1 = 1000 (DF 1), I_2..I_8 = 100 (DF 0.5), I_0 = 10 packets.
        //   I_tot1 = 1000 + 0.5*100*5 = 1250, W_tot1 = 1 + 2.5 = 3.5 → 357.14
        //   (I_0 = 10 < 2*357 so DF = 1 and I_tot0 = 10 + 1000 + 0.5*100*(1+1+.8+.6+.4+.2)=1210, W 1+1+0.5*4=4 → 302.5)
        let mean = h.mean_interval(1009).unwrap();
        assert!(rel(mean, 1250.0 / 3.5) < 1e-12, "{mean}");

        let mut plain = history(&[100.0; 8], 0, false);
        plain.on_lost_range(&range, 0.0, || unreachable!());
        assert!(rel(plain.mean_interval(1009).unwrap(), (1000.0 + 500.0) / 6.0) < 1e-12);
    }

    #[test]
    fn losses_within_one_rtt_are_one_event() {
        let mut h = LossHistory::new(false);
        // Packets 10..=19 lost, sent 1 ms apart from t = 10 ms; RTT 5 ms:
        // events start at 10 (t=10ms), 16 (t=16ms > 15ms); 16+5 = 21 ms is past 19.
        let range = LostRange {
            first: 10,
            last: 19,
            before: (9, 9_000),
            after: (20, 20_000),
        };
        let events = h.on_lost_range(&range, 5_000.0, || 50.0);
        assert_eq!(events, 2);
        assert_eq!(h.loss_events(), 2);
        // I_2 = synthetic 50, I_1 = 16 - 10 = 6, I_0 = 16..=40 = 25.
        // tot0 = 25 + 6 = 31, tot1 = 6 + 50 = 56, W = 2 → 28
        assert!(rel(h.mean_interval(40).unwrap(), 28.0) < 1e-12);
        // A later loss within 5 ms of 16 ms joins the current event.
        let near = LostRange {
            first: 21,
            last: 21,
            before: (20, 20_000),
            after: (22, 22_000),
        };
        assert_eq!(h.on_lost_range(&near, 5_000.0, || 50.0), 0);
        let far = LostRange {
            first: 30,
            last: 30,
            before: (29, 29_000),
            after: (31, 31_000),
        };
        assert_eq!(h.on_lost_range(&far, 5_000.0, || 50.0), 1);
    }

    #[test]
    fn ranges_at_the_end_of_the_sequence_space() {
        let top = LostRange {
            first: u64::MAX - 2,
            last: u64::MAX - 1,
            before: (u64::MAX - 3, 0),
            after: (u64::MAX, 30),
        };
        assert_eq!(top.first_sent_after(u64::MAX - 2, 1e9), None);
        assert_eq!(top.first_sent_after(u64::MAX - 2, 15.0), Some(u64::MAX - 1));
        let mut d = LossDetector::default();
        let mut lost = Vec::new();
        for seq in [
            u64::MAX - 5,
            u64::MAX - 3,
            u64::MAX - 2,
            u64::MAX - 1,
            u64::MAX,
        ] {
            d.on_arrival(seq, 0, &mut lost);
        }
        assert_eq!(lost.len(), 1);
        assert_eq!(d.on_arrival(u64::MAX, 0, &mut lost), Arrival::Duplicate);
    }

    #[test]
    fn huge_lost_range_is_handled_per_event() {
        let mut h = LossHistory::new(true);
        // A million packets lost over one second, RTT 100 ms: 10 events.
        let range = LostRange {
            first: 1,
            last: 1_000_000,
            before: (0, 0),
            after: (1_000_001, 1_000_000),
        };
        assert_eq!(h.on_lost_range(&range, 100_000.0, || 10.0), 10);
    }

    fn arrive(d: &mut LossDetector, seqs: &[u64]) -> Vec<LostRange> {
        let mut lost = Vec::new();
        for &s in seqs {
            d.on_arrival(s, s * 1000, &mut lost);
        }
        lost
    }

    #[test]
    fn loss_needs_three_later_packets() {
        let mut d = LossDetector::default();
        assert!(
            arrive(&mut d, &[0, 1, 3, 4]).is_empty(),
            "only two packets above 2"
        );
        let lost = arrive(&mut d, &[5]);
        assert_eq!(
            lost,
            vec![LostRange {
                first: 2,
                last: 2,
                before: (1, 1000),
                after: (3, 3000)
            }]
        );
    }

    #[test]
    fn reordering_within_three_packets_is_not_loss() {
        let mut d = LossDetector::default();
        assert!(arrive(&mut d, &[0, 1, 3, 4, 2, 5, 6, 7]).is_empty());
        let mut lost = Vec::new();
        assert_eq!(d.on_arrival(2, 0, &mut lost), Arrival::Duplicate);
    }

    #[test]
    fn reordered_packet_splits_a_gap() {
        let mut d = LossDetector::default();
        // 2..=6 missing; 4 arrives late: 2..=3 have 2 packets above (7, 4), 5..=6 one (7).
        assert!(arrive(&mut d, &[0, 1, 7, 4]).is_empty());
        let lost = arrive(&mut d, &[8]);
        assert_eq!(
            lost,
            vec![LostRange {
                first: 2,
                last: 3,
                before: (1, 1000),
                after: (4, 4000)
            }]
        );
        let lost = arrive(&mut d, &[9, 10]);
        assert_eq!(
            lost,
            vec![LostRange {
                first: 5,
                last: 6,
                before: (4, 4000),
                after: (7, 7000)
            }]
        );
        let mut lost = Vec::new();
        assert_eq!(
            d.on_arrival(5, 0, &mut lost),
            Arrival::Late,
            "already declared lost"
        );
        assert_eq!(d.on_arrival(4, 0, &mut lost), Arrival::Duplicate);
    }

    #[test]
    fn interpolated_send_times() {
        let r = LostRange {
            first: 11,
            last: 14,
            before: (10, 1000),
            after: (15, 1500),
        };
        assert_eq!(r.send_time(11), 1100.0);
        assert_eq!(r.send_time(14), 1400.0);
        assert_eq!(r.first_sent_after(11, 1250.0), Some(13));
        assert_eq!(r.first_sent_after(11, 1400.0), None);
        assert_eq!(r.first_sent_after(12, 0.0), Some(12));
        let backwards = LostRange {
            after: (15, 500),
            ..r
        };
        assert_eq!(backwards.send_time(13), 1000.0);
        assert_eq!(backwards.first_sent_after(11, 999.0), Some(11));
        assert_eq!(backwards.first_sent_after(11, 1000.0), None);
    }

    proptest! {
        /// Any arrival order: every sequence number below the highest is
        /// either received or reported lost exactly once, never both, once
        /// the flow has moved NDUPACK packets past it.
        #[test]
        fn every_missing_packet_is_lost_exactly_once(
            order in proptest::collection::vec(0u64..60, 1..120),
        ) {
            let mut d = LossDetector::default();
            let mut lost = Vec::new();
            let mut received = std::collections::BTreeSet::new();
            for &s in &order {
                if d.on_arrival(s, s, &mut lost) == Arrival::New {
                    received.insert(s);
                }
            }
            // Push the flow on so every hole is decided.
            let top = d.highest_seq().unwrap();
            for s in top + 1..=top + u64::from(NDUPACK) {
                d.on_arrival(s, s, &mut lost);
                received.insert(s);
            }
            let mut lost_seqs = Vec::new();
            for r in &lost {
                prop_assert!(r.before.0 < r.first && r.last < r.after.0);
                lost_seqs.extend(r.first..=r.last);
            }
            // Packets below the first arrival are never tracked.
            let first = order[0];
            let mut all: Vec<u64> = lost_seqs;
            all.extend(received.iter().copied());
            all.sort_unstable();
            let expected: Vec<u64> = (first..=top + u64::from(NDUPACK)).collect();
            prop_assert_eq!(all, expected, "each packet received or lost, exactly once");
        }

        /// The loss event rate is always a probability, with or without
        /// history discounting.
        #[test]
        fn loss_event_rate_is_a_probability(
            intervals in proptest::collection::vec(1u64..5000, 1..20),
            open in 0u64..20000,
        ) {
            let mut with = LossHistory::new(true);
            let mut without = LossHistory::new(false);
            let mut seq = 0u64;
            for len in &intervals {
                seq += len;
                // 10 µs per packet and an RTT of 0: every loss is its own event.
                let r = LostRange { first: seq, last: seq, before: (seq - 1, seq * 10 - 10), after: (seq + 1, seq * 10 + 10) };
                prop_assert_eq!(with.on_lost_range(&r, 0.0, || 100.0), 1);
                prop_assert_eq!(without.on_lost_range(&r, 0.0, || 100.0), 1);
            }
            let p_with = with.loss_event_rate(seq + open);
            let p_without = without.loss_event_rate(seq + open);
            prop_assert!(p_with > 0.0 && p_with <= 1.0);
            prop_assert!(p_without > 0.0 && p_without <= 1.0);
        }
    }
}
