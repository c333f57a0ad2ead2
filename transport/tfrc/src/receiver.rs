//! The TFRC receiver (RFC 5348 §6), sans-IO.
//!
//! Feed it every data packet with [`Receiver::handle_data`]; ask
//! [`Receiver::poll_feedback`] whether a feedback packet is due (at once after
//! the first packet and after a new loss event, otherwise once per RTT while
//! data arrives); wake up at [`Receiver::poll_timeout`] at the latest.
//! Times are [`Duration`]s since any origin the caller picks.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::equation;
use crate::loss::{Arrival, LossDetector, LossHistory, LostRange};
use crate::packet::{DataHeader, Feedback, DATA_HEADER_LEN, FLAG_FINAL, FLAG_NEW_LOSS_EVENT};

/// The IP TTL the sender puts on data packets (the tool sets it explicitly;
/// it is also Linux's default `ip_default_ttl`). Hops = 65 − received TTL.
pub const ASSUMED_INITIAL_TTL: u8 = 64;

/// A data packet further than this beyond the highest sequence number seen is
/// taken for garbage, not for a burst of a million losses.
pub const MAX_SEQ_JUMP: u64 = 1 << 20;

/// Receiver settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// History discounting of RFC 5348 §5.5 (a MAY of the RFC; on by default).
    pub history_discounting: bool,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            history_discounting: true,
        }
    }
}

/// What became of a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataOutcome {
    /// New data, counted.
    Accepted,
    /// Received before; ignored.
    Duplicate,
    /// Arrived after it was declared lost; ignored, the loss stays counted.
    Late,
    /// Belongs to another session: the caller should start a new receiver.
    OtherSession,
    /// Sequence number implausibly far ahead ([`MAX_SEQ_JUMP`]); ignored.
    Implausible,
}

/// Counters of one flow at the receiver.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReceiverStats {
    /// New data packets received.
    pub packets: u64,
    /// Their bytes (UDP payload, header included).
    pub bytes: u64,
    pub duplicates: u64,
    pub late: u64,
    pub implausible: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    pub loss_events: u64,
    pub feedback_sent: u64,
    /// Feedback sent at once for a new loss event.
    pub expedited_feedback: u64,
}

/// The receiving end of one flow (one session).
#[derive(Debug)]
pub struct Receiver {
    session: u32,
    detector: LossDetector,
    history: LossHistory,
    lost: Vec<LostRange>,
    /// The sender's RTT from the latest data header; zero until it has one.
    rtt: Duration,
    /// Size of the latest data packet: `s` for the first loss interval.
    packet_size: usize,
    /// Arrival time and send timestamp of the latest new data packet.
    last_data: Option<(Duration, u64)>,
    /// Arrival time and size of recent packets, for `X_recv`.
    arrivals: VecDeque<(Duration, usize)>,
    first_arrival: Option<Duration>,
    last_feedback: Option<Duration>,
    feedback_timer: Option<Duration>,
    data_since_feedback: bool,
    feedback_now: bool,
    new_loss_event: bool,
    /// RFC 3550 jitter state: last transit time and the estimate, µs.
    last_transit_us: Option<f64>,
    jitter_us: f64,
    ttl: Option<u8>,
    stats: ReceiverStats,
}

impl Receiver {
    pub fn new(session: u32, config: ReceiverConfig) -> Self {
        Self {
            session,
            detector: LossDetector::default(),
            history: LossHistory::new(config.history_discounting),
            lost: Vec::new(),
            rtt: Duration::ZERO,
            packet_size: 0,
            last_data: None,
            arrivals: VecDeque::new(),
            first_arrival: None,
            last_feedback: None,
            feedback_timer: None,
            data_since_feedback: false,
            feedback_now: false,
            new_loss_event: false,
            last_transit_us: None,
            jitter_us: 0.0,
            ttl: None,
            stats: ReceiverStats::default(),
        }
    }

    pub fn session(&self) -> u32 {
        self.session
    }

    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// The current loss event rate `p`.
    pub fn loss_event_rate(&self) -> f64 {
        self.detector
            .highest_seq()
            .map_or(0.0, |h| self.history.loss_event_rate(h))
    }

    /// RFC 3550 interarrival jitter.
    pub fn jitter(&self) -> Duration {
        Duration::from_secs_f64(self.jitter_us / 1e6)
    }

    pub fn highest_seq(&self) -> Option<u64> {
        self.detector.highest_seq()
    }

    /// The IP TTL of the latest data packet, if the caller passed it.
    pub fn ttl(&self) -> Option<u8> {
        self.ttl
    }

    /// Hops of the forward path from the TTL, assuming the sender used
    /// [`ASSUMED_INITIAL_TTL`]; `None` for a TTL that cannot come from it.
    pub fn hops(&self) -> Option<u8> {
        self.ttl.and_then(hops_from_ttl)
    }

    /// A data packet arrived at `now`. `payload_len` counts the bytes after
    /// the header; `ttl` is the packet's IP TTL when the socket reports it.
    pub fn handle_data(
        &mut self,
        now: Duration,
        header: &DataHeader,
        payload_len: usize,
        ttl: Option<u8>,
    ) -> DataOutcome {
        if header.session != self.session {
            return DataOutcome::OtherSession;
        }
        if self
            .detector
            .highest_seq()
            .is_some_and(|h| header.seq > h.saturating_add(MAX_SEQ_JUMP))
        {
            self.stats.implausible += 1;
            return DataOutcome::Implausible;
        }
        if header.rtt_us > 0 {
            self.rtt = Duration::from_micros(header.rtt_us.into());
        }
        if ttl.is_some() {
            self.ttl = ttl;
        }
        self.lost.clear();
        match self
            .detector
            .on_arrival(header.seq, header.timestamp_us, &mut self.lost)
        {
            Arrival::Duplicate => {
                self.stats.duplicates += 1;
                return DataOutcome::Duplicate;
            }
            Arrival::Late => {
                self.stats.late += 1;
                return DataOutcome::Late;
            }
            Arrival::New => {}
        }
        let size = DATA_HEADER_LEN + payload_len;
        self.packet_size = size;
        self.stats.packets += 1;
        self.stats.bytes += size as u64;
        self.arrivals.push_back((now, size));
        if self.first_arrival.is_none() {
            self.first_arrival = Some(now);
            // RFC 5348 §6.3: feedback right after the first data packet.
            self.feedback_now = true;
        }
        self.last_data = Some((now, header.timestamp_us));
        self.data_since_feedback = true;
        self.update_jitter(now, header.timestamp_us);
        self.account_losses(now);
        if self.rtt.is_zero() {
            // Without the sender's RTT there is no feedback period: answer
            // every packet until the sender has an RTT sample.
            self.feedback_now = true;
        } else if self.feedback_timer.is_none() {
            self.feedback_timer = Some(now + self.rtt);
        }
        DataOutcome::Accepted
    }

    fn update_jitter(&mut self, now: Duration, timestamp_us: u64) {
        let transit = now.as_secs_f64() * 1e6 - timestamp_us as f64;
        if let Some(last) = self.last_transit_us {
            self.jitter_us += ((transit - last).abs() - self.jitter_us) / 16.0;
        }
        self.last_transit_us = Some(transit);
    }

    fn account_losses(&mut self, now: Duration) {
        if self.lost.is_empty() {
            return;
        }
        let rtt_us = self.rtt.as_secs_f64() * 1e6;
        // §6.3.1: the first loss interval is the one that would give the
        // receive rate of the last RTT through the throughput equation.
        let first_interval = if self.history.loss_events() == 0 {
            let x_recv = self.rate_over(now, self.rtt);
            1.0 / equation::loss_event_rate_for(self.packet_size as f64, self.rtt, x_recv)
        } else {
            1.0
        };
        let mut new_events = 0;
        for range in &self.lost {
            self.stats.lost_packets += range.packets();
            new_events += self.history.on_lost_range(range, rtt_us, || first_interval);
        }
        if new_events > 0 {
            self.stats.loss_events = self.history.loss_events();
            self.feedback_now = true;
            self.new_loss_event = true;
        }
    }

    /// Bytes/s received over the `window` before `now`, not reaching back
    /// before the first arrival; 0 when that span is empty.
    fn rate_over(&self, now: Duration, window: Duration) -> f64 {
        let Some(first) = self.first_arrival else {
            return 0.0;
        };
        let start = now.saturating_sub(window).max(first);
        let span = now.saturating_sub(start);
        if span.is_zero() {
            return 0.0;
        }
        let bytes: usize = self
            .arrivals
            .iter()
            .rev()
            .take_while(|(t, _)| *t > start)
            .map(|(_, b)| b)
            .sum();
        bytes as f64 / span.as_secs_f64()
    }

    /// The next time [`Receiver::poll_feedback`] may have something to send.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.feedback_now {
            return self.last_data.map(|(t, _)| t);
        }
        self.feedback_timer
    }

    /// A feedback packet, if one is due at `now`.
    pub fn poll_feedback(&mut self, now: Duration) -> Option<Feedback> {
        let timer_due = self.feedback_timer.is_some_and(|t| now >= t);
        if !self.feedback_now && !timer_due {
            return None;
        }
        if !self.data_since_feedback {
            // §6.2: no data since the last feedback, no feedback; the timer
            // restarts with the next data packet.
            self.feedback_timer = None;
            self.feedback_now = false;
            return None;
        }
        Some(self.make_feedback(now, 0))
    }

    /// The answer to the sender's end-of-flow packet: the final counters.
    pub fn final_feedback(&mut self, now: Duration) -> Feedback {
        self.make_feedback(now, FLAG_FINAL)
    }

    fn make_feedback(&mut self, now: Duration, extra_flags: u8) -> Feedback {
        let (arrival, echo) = self.last_data.unwrap_or((now, 0));
        // X_recv covers the time since the last feedback, but at least one
        // RTT, so expedited feedback does not report a rate over a sliver.
        let window = self
            .last_feedback
            .map_or(self.rtt, |t| self.rtt.max(now.saturating_sub(t)));
        let window = if window.is_zero() {
            now.saturating_sub(self.first_arrival.unwrap_or(now))
        } else {
            window
        };
        let x_recv = self.rate_over(now, window);
        let mut flags = extra_flags;
        if self.new_loss_event {
            flags |= FLAG_NEW_LOSS_EVENT;
            self.stats.expedited_feedback += 1;
        }
        let feedback = Feedback {
            session: self.session,
            echo_timestamp_us: echo,
            elapsed_us: u32::try_from(now.saturating_sub(arrival).as_micros()).unwrap_or(u32::MAX),
            x_recv: x_recv.round() as u64,
            loss_event_rate: self.loss_event_rate(),
            highest_seq: self.detector.highest_seq().unwrap_or(0),
            received_packets: self.stats.packets,
            received_bytes: self.stats.bytes,
            jitter_us: self.jitter_us.round() as u32,
            hops: self.hops().unwrap_or(0),
            flags,
        };
        self.stats.feedback_sent += 1;
        self.last_feedback = Some(now);
        self.data_since_feedback = false;
        self.feedback_now = false;
        self.new_loss_event = false;
        self.feedback_timer = (!self.rtt.is_zero()).then(|| now + self.rtt);
        // Later windows start after now − RTT (see the window above).
        let keep_from = now.saturating_sub(self.rtt);
        while self.arrivals.front().is_some_and(|(t, _)| *t < keep_from) {
            self.arrivals.pop_front();
        }
        feedback
    }
}

/// Hops from a received TTL, assuming [`ASSUMED_INITIAL_TTL`]: a packet that
/// crossed N links passed N−1 routers, each taking one off the TTL.
pub fn hops_from_ttl(ttl: u8) -> Option<u8> {
    (1..=ASSUMED_INITIAL_TTL)
        .contains(&ttl)
        .then(|| ASSUMED_INITIAL_TTL + 1 - ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: u32 = 7;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn data(seq: u64, sent: Duration, rtt: Duration) -> DataHeader {
        DataHeader {
            session: SESSION,
            seq,
            timestamp_us: sent.as_micros() as u64,
            rtt_us: rtt.as_micros() as u32,
            wallclock_ns: 0,
        }
    }

    /// 1000-byte packets (964 bytes of payload) every `gap`, arriving `delay` later.
    fn feed(
        rx: &mut Receiver,
        seqs: impl IntoIterator<Item = u64>,
        gap: Duration,
        delay: Duration,
        rtt: Duration,
    ) {
        for seq in seqs {
            let sent = gap * seq as u32;
            rx.handle_data(
                sent + delay,
                &data(seq, sent, rtt),
                1000 - DATA_HEADER_LEN,
                Some(62),
            );
        }
    }

    #[test]
    fn first_packet_gets_immediate_feedback() {
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        assert_eq!(rx.poll_feedback(ms(0)), None);
        rx.handle_data(ms(5), &data(0, ms(0), Duration::ZERO), 100, Some(64));
        let fb = rx
            .poll_feedback(ms(6))
            .expect("feedback after the first packet");
        assert_eq!(fb.echo_timestamp_us, 0);
        assert_eq!(fb.elapsed_us, 1000);
        assert_eq!(fb.loss_event_rate, 0.0);
        assert_eq!(fb.received_packets, 1);
        assert_eq!(fb.hops, 1);
        assert_eq!(rx.poll_feedback(ms(7)), None);
    }

    #[test]
    fn feedback_once_per_rtt_while_data_arrives() {
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        let rtt = ms(50);
        // 10 ms apart: 100 packets over one second, 1000 bytes each.
        let mut sent = 0;
        for seq in 0..100u64 {
            let now = ms(10 * seq + 20);
            rx.handle_data(
                now,
                &data(seq, ms(10 * seq), rtt),
                1000 - DATA_HEADER_LEN,
                None,
            );
            if let Some(fb) = rx.poll_feedback(now) {
                sent += 1;
                if seq > 10 {
                    // 1000 bytes per 10 ms.
                    assert!(
                        (fb.x_recv as f64 - 100_000.0).abs() < 25_000.0,
                        "x_recv {}",
                        fb.x_recv
                    );
                }
            }
        }
        // About one per 50 ms over 990 ms, plus the first.
        assert!((18..=22).contains(&sent), "{sent} feedback packets");
        // After the data stops, the timer reports the last packets once
        // (feedback went out at seq 0, 5, ..., 95) and then stays quiet.
        let last = ms(10 * 99 + 20);
        assert_eq!(
            rx.poll_feedback(last + rtt * 2).map(|fb| fb.highest_seq),
            Some(99)
        );
        assert_eq!(rx.poll_feedback(last + rtt * 4), None);
        assert_eq!(rx.poll_timeout(), None);
    }

    #[test]
    fn loss_triggers_expedited_feedback_with_a_positive_rate() {
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        let rtt = ms(40);
        feed(&mut rx, 0..50, ms(4), ms(10), rtt);
        while rx.poll_feedback(ms(4 * 49 + 10)).is_some() {}
        // 50 is lost; 51, 52 are not enough, 53 declares the loss.
        feed(&mut rx, 51..53, ms(4), ms(10), rtt);
        assert_eq!(rx.poll_feedback(ms(4 * 52 + 10)), None);
        feed(&mut rx, 53..54, ms(4), ms(10), rtt);
        let fb = rx
            .poll_feedback(ms(4 * 53 + 10))
            .expect("expedited feedback");
        assert_eq!(fb.flags & FLAG_NEW_LOSS_EVENT, FLAG_NEW_LOSS_EVENT);
        assert!(fb.loss_event_rate > 0.0);
        assert_eq!(rx.stats().lost_packets, 1);
        assert_eq!(rx.stats().loss_events, 1);
        assert_eq!(rx.stats().expedited_feedback, 1);
    }

    #[test]
    fn first_loss_interval_comes_from_the_receive_rate() {
        // 1000-byte packets every 4 ms, RTT 40 ms; packet 100 lost. When 103
        // declares the loss (at 4*103+10 ms), the last RTT held 94..=103 less
        // 100: 9000 B / 40 ms = 225 000 B/s. The first interval is 1/p0 with
        // X(1000 B, 40 ms, p0) = 225 000 B/s; with I_0 still short, p = p0.
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        let rtt = ms(40);
        feed(&mut rx, (0..105).filter(|&s| s != 100), ms(4), ms(10), rtt);
        let p0 = equation::loss_event_rate_for(1000.0, rtt, 225_000.0);
        let p = rx.loss_event_rate();
        assert!(((p - p0) / p0).abs() < 1e-9, "p {p}, expected {p0}");
        // Once I_0 (from 100) outgrows 1/p0 ≈ 54 packets, it sets the average.
        feed(&mut rx, 105..200, ms(4), ms(10), rtt);
        assert!((rx.loss_event_rate() - 1.0 / 100.0).abs() < 1e-12);
    }

    #[test]
    fn periodic_loss_gives_its_rate() {
        // Every 50th packet lost, losses far more than an RTT apart: p = 1/50
        // once the synthetic first interval has left the 8-interval history.
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        feed(
            &mut rx,
            (0..2000).filter(|s| s % 50 != 49),
            ms(2),
            ms(5),
            ms(20),
        );
        let p = rx.loss_event_rate();
        assert!((p - 0.02).abs() < 1e-3, "p {p}");
        assert_eq!(rx.stats().loss_events, 40 - 1);
    }

    #[test]
    fn duplicates_and_other_sessions_are_not_counted() {
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        feed(&mut rx, [0, 1, 2, 1], ms(1), ms(1), ms(10));
        assert_eq!(rx.stats().packets, 3);
        assert_eq!(rx.stats().duplicates, 1);
        let other = DataHeader {
            session: SESSION + 1,
            ..data(3, ms(3), ms(10))
        };
        assert_eq!(
            rx.handle_data(ms(4), &other, 10, None),
            DataOutcome::OtherSession
        );
        let far = data(5 + MAX_SEQ_JUMP, ms(3), ms(10));
        assert_eq!(rx.handle_data(ms(4), &far, 10, None), DataOutcome::Implausible);
        assert_eq!(rx.stats().packets, 3);
        assert_eq!(rx.stats().lost_packets, 0);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
        // Transit alternates 10 ms and 12 ms: |D| = 2 ms each time after the
        // first; J converges toward 2 ms: J_n = 2 ms * (1 - (15/16)^n).
        for seq in 0..200u64 {
            let sent = ms(10 * seq);
            let transit = if seq % 2 == 0 { ms(10) } else { ms(12) };
            rx.handle_data(sent + transit, &data(seq, sent, ms(30)), 100, None);
        }
        let j = rx.jitter().as_secs_f64() * 1e3;
        assert!((j - 2.0).abs() < 0.01, "jitter {j} ms");
    }

    #[test]
    fn hops_from_ttl_assume_64() {
        assert_eq!(hops_from_ttl(64), Some(1));
        assert_eq!(hops_from_ttl(58), Some(7));
        assert_eq!(hops_from_ttl(1), Some(64));
        assert_eq!(hops_from_ttl(0), None);
        assert_eq!(hops_from_ttl(128), None);
    }
}
