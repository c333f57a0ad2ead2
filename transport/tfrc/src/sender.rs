//! The TFRC sender (RFC 5348 §4), with RE-TFRC as an option, sans-IO.
//!
//! The application asks [`Sender::poll_transmit`] whether a data packet may
//! go now; the answer is a header to send or the time to ask again. An
//! application that has data keeps asking until it is told to wait — that is
//! how the sender knows it is not data-limited. Feedback goes to
//! [`Sender::handle_feedback`]; the no-feedback timer fires through
//! [`Sender::handle_timeout`] at [`Sender::poll_timeout`]. Times are
//! [`Duration`]s since any origin the caller picks; the data header carries
//! them as µs, so the receiver's echo comes back on the same clock.
//!
//! Not implemented: the optional oscillation prevention of RFC 5348 §4.5
//! (the RE-TFRC paper does not use it either).

use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::equation;
use crate::packet::{DataHeader, Feedback, Fin, DATA_HEADER_LEN, FLAG_NEW_LOSS_EVENT};
use crate::re::{RateEstimator, ReConfig, ReError, ReInputs, ReStep};

/// Largest UDP payload over IPv4.
pub const MAX_PACKET_SIZE: usize = 65_507;

/// Weight of the old estimate in the RTT average (`q` of RFC 5348 §4.3).
const RTT_HISTORY_WEIGHT: f64 = 0.9;

/// The no-feedback timer before the first RTT sample (RFC 5348 §4.2).
const INITIAL_NOFEEDBACK: Duration = Duration::from_secs(2);

/// RFC 5348's `t_mbi`: the rate never falls below one packet per 64 s.
pub const MAX_BACKOFF_INTERVAL: Duration = Duration::from_secs(64);

/// How far behind schedule the pacer may fall and still catch up with a
/// short burst (timers wake late; the average rate should not suffer).
const MAX_PACING_CREDIT: Duration = Duration::from_millis(1);

/// Sender settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    /// Identifies the flow in every packet.
    pub session: u32,
    /// `s`: the UDP payload of each data packet, header included, bytes.
    pub packet_size: usize,
    /// The paper's "constrained rate": never send faster, bytes/s.
    pub max_rate: Option<f64>,
    /// `Some` for RE-TFRC.
    pub re: Option<ReConfig>,
}

/// Bad sender settings.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("packet size {size} is outside {DATA_HEADER_LEN}..={MAX_PACKET_SIZE} bytes")]
    PacketSize { size: usize },
    #[error("rate cap {0} bytes/s is not a positive number")]
    MaxRate(f64),
    #[error("RE-TFRC: {0}")]
    Re(#[from] ReError),
}

/// Feedback the sender refuses; the caller counts and drops it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FeedbackError {
    #[error("feedback for session {got}, this flow is {expected}")]
    OtherSession { got: u32, expected: u32 },
    #[error(
        "feedback echoes timestamp {echo_us} µs, which this sender has not sent (now {now_us} µs)"
    )]
    UnknownEcho { echo_us: u64, now_us: u64 },
    #[error("feedback claims {elapsed_us} µs at the receiver, more than the {round_trip_us} µs since the echoed packet left")]
    ElapsedTooLong { elapsed_us: u32, round_trip_us: u64 },
    #[error("feedback reports sequence number {highest}, but only {sent} packets were sent")]
    UnsentSequence { highest: u64, sent: u64 },
    #[error("feedback echoes an older packet than feedback already used (reordered)")]
    Stale,
}

/// What [`Sender::poll_transmit`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transmit {
    /// Send a data packet with this header now.
    Send(DataHeader),
    /// Not before this time.
    Wait(Duration),
}

/// What one feedback packet did, for traces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FeedbackReport {
    /// This RTT sample, seconds.
    pub rtt_sample: f64,
    /// The smoothed RTT R, seconds.
    pub rtt: f64,
    /// Loss event rate p reported by the receiver.
    pub p: f64,
    /// Receive rate reported by the receiver, bytes/s.
    pub x_recv: f64,
    /// The equation's rate X_Bps for R and p (infinite while p = 0), bytes/s.
    pub x_bps: f64,
    /// TFRC's allowed rate X, bytes/s.
    pub x: f64,
    /// The rate the sender now paces at (X, the RE rate and the cap), bytes/s.
    pub sending_rate: f64,
    pub slow_start: bool,
    /// The interval this feedback covers was data-limited (RFC 5348 §8.2.1).
    pub data_limited: bool,
    /// The RE-TFRC step, in RE mode after slow start.
    pub re: Option<ReStep>,
}

/// Counters of the sender.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SenderStats {
    pub packets: u64,
    pub bytes: u64,
    pub feedback: u64,
    pub nofeedback_expiries: u64,
}

/// `X_recv_set` of RFC 5348 §4.3: recent receive rates with their times.
/// Starts with one entry of infinity, so the first feedback does not limit.
#[derive(Debug, Clone)]
struct ReceiveRates {
    entries: Vec<(Duration, f64)>,
}

impl ReceiveRates {
    fn new() -> Self {
        Self {
            entries: vec![(Duration::ZERO, f64::INFINITY)],
        }
    }

    /// "Update X_recv_set": add, then drop entries older than two RTTs.
    fn update(&mut self, now: Duration, x_recv: f64, rtt: Duration) {
        self.entries.push((now, x_recv));
        let oldest = now.saturating_sub(rtt * 2);
        self.entries.retain(|&(t, _)| t >= oldest);
    }

    /// "Maximize X_recv_set": keep only the largest finite value, as of now.
    fn maximize(&mut self, now: Duration, x_recv: f64) {
        let largest = self
            .entries
            .iter()
            .map(|&(_, x)| x)
            .filter(|x| x.is_finite())
            .fold(x_recv, f64::max);
        self.entries = vec![(now, largest)];
    }

    fn halve(&mut self) {
        for (_, x) in &mut self.entries {
            *x /= 2.0;
        }
    }

    fn replace(&mut self, now: Duration, x: f64) {
        self.entries = vec![(now, x)];
    }

    fn max(&self) -> f64 {
        self.entries.iter().map(|&(_, x)| x).fold(0.0, f64::max)
    }
}

/// The sending end of one flow.
#[derive(Debug, Clone)]
pub struct Sender {
    config: SenderConfig,
    /// `s` as a float, bytes.
    s: f64,
    next_seq: u64,
    first_send: Option<Duration>,
    /// TFRC's allowed rate X, bytes/s.
    x: f64,
    /// The equation's last value X_Bps (infinite while p = 0).
    x_bps: f64,
    /// Time the rate was last doubled in slow start.
    tld: Duration,
    rtt: Option<Duration>,
    p: f64,
    receive_rates: ReceiveRates,
    nofeedback_deadline: Duration,
    nofeedback_set_at: Duration,
    last_send: Option<Duration>,
    /// The schedule slot of the last packet: it left at or after it.
    last_slot: Option<Duration>,
    next_send: Duration,
    /// The application was told to wait since the last feedback.
    rate_limited: bool,
    last_echo_us: Option<u64>,
    reported_hops: u8,
    re: Option<RateEstimator>,
    stats: SenderStats,
}

impl Sender {
    /// A sender starting at `now`, allowed one packet per second until the
    /// first feedback (RFC 5348 §4.2).
    pub fn new(config: SenderConfig, now: Duration) -> Result<Self, ConfigError> {
        if !(DATA_HEADER_LEN..=MAX_PACKET_SIZE).contains(&config.packet_size) {
            return Err(ConfigError::PacketSize {
                size: config.packet_size,
            });
        }
        if let Some(cap) = config.max_rate {
            if !(cap > 0.0 && cap.is_finite()) {
                return Err(ConfigError::MaxRate(cap));
            }
        }
        let re = config.re.map(RateEstimator::new).transpose()?;
        let s = config.packet_size as f64;
        Ok(Self {
            config,
            s,
            next_seq: 0,
            first_send: None,
            x: s,
            x_bps: f64::INFINITY,
            tld: Duration::ZERO,
            rtt: None,
            p: 0.0,
            receive_rates: ReceiveRates::new(),
            nofeedback_deadline: now + INITIAL_NOFEEDBACK,
            nofeedback_set_at: now,
            last_send: None,
            last_slot: None,
            next_send: now,
            rate_limited: false,
            last_echo_us: None,
            reported_hops: 0,
            re,
            stats: SenderStats::default(),
        })
    }

    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// TFRC's allowed rate X, bytes/s.
    pub fn allowed_rate(&self) -> f64 {
        self.x
    }

    /// The rate the sender paces at: X, limited by the RE rate and the cap.
    pub fn sending_rate(&self) -> f64 {
        let re = self
            .re
            .as_ref()
            .and_then(RateEstimator::rate)
            .unwrap_or(f64::INFINITY);
        let cap = self.config.max_rate.unwrap_or(f64::INFINITY);
        self.x.min(re).min(cap)
    }

    /// The smoothed RTT, once there is a sample.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// The loss event rate from the latest feedback.
    pub fn loss_event_rate(&self) -> f64 {
        self.p
    }

    pub fn in_slow_start(&self) -> bool {
        self.p == 0.0
    }

    /// The end-of-flow packet for what was sent so far.
    pub fn fin(&self) -> Fin {
        Fin {
            session: self.config.session,
            sent_packets: self.stats.packets,
            sent_bytes: self.stats.bytes,
        }
    }

    fn inter_packet_interval(&self) -> Duration {
        Duration::from_secs_f64(self.s / self.sending_rate())
    }

    /// After a rate change the next packet is due one new interval after
    /// the last (RFC 5348 §4.6). Counting from the last packet's slot, not
    /// from when it actually left, keeps timer lateness from adding up when
    /// feedback comes as often as packets do.
    fn reschedule(&mut self) {
        if let Some(slot) = self.last_slot {
            self.next_send = slot + self.inter_packet_interval();
        }
    }

    /// May a data packet go at `now`? If so, the header to put on it.
    pub fn poll_transmit(&mut self, now: Duration) -> Transmit {
        if now < self.next_send {
            self.rate_limited = true;
            return Transmit::Wait(self.next_send);
        }
        let header = DataHeader {
            session: self.config.session,
            seq: self.next_seq,
            timestamp_us: micros(now),
            rtt_us: self.rtt.map_or(0, |r| {
                u32::try_from(r.as_micros()).unwrap_or(u32::MAX).max(1)
            }),
            wallclock_ns: 0,
        };
        self.next_seq += 1;
        self.stats.packets += 1;
        self.stats.bytes += self.config.packet_size as u64;
        self.first_send.get_or_insert(now);
        self.last_send = Some(now);
        let slot = self.next_send.max(now.saturating_sub(MAX_PACING_CREDIT));
        self.last_slot = Some(slot);
        self.next_send = slot + self.inter_packet_interval();
        Transmit::Send(header)
    }

    /// When [`Sender::handle_timeout`] must run next: the no-feedback timer.
    pub fn poll_timeout(&self) -> Duration {
        self.nofeedback_deadline
    }

    fn check_feedback(&self, now: Duration, fb: &Feedback) -> Result<(), FeedbackError> {
        if fb.session != self.config.session {
            return Err(FeedbackError::OtherSession {
                got: fb.session,
                expected: self.config.session,
            });
        }
        let now_us = micros(now);
        let sent_any = self
            .first_send
            .is_some_and(|t| micros(t) <= fb.echo_timestamp_us);
        if !sent_any || fb.echo_timestamp_us > now_us {
            return Err(FeedbackError::UnknownEcho {
                echo_us: fb.echo_timestamp_us,
                now_us,
            });
        }
        let round_trip_us = now_us - fb.echo_timestamp_us;
        if u64::from(fb.elapsed_us) > round_trip_us {
            return Err(FeedbackError::ElapsedTooLong {
                elapsed_us: fb.elapsed_us,
                round_trip_us,
            });
        }
        if fb.highest_seq >= self.next_seq {
            return Err(FeedbackError::UnsentSequence {
                highest: fb.highest_seq,
                sent: self.next_seq,
            });
        }
        if self
            .last_echo_us
            .is_some_and(|last| fb.echo_timestamp_us < last)
        {
            return Err(FeedbackError::Stale);
        }
        Ok(())
    }

    /// A feedback packet arrived at `now` (RFC 5348 §4.3, then RE-TFRC).
    pub fn handle_feedback(
        &mut self,
        now: Duration,
        fb: &Feedback,
    ) -> Result<FeedbackReport, FeedbackError> {
        self.check_feedback(now, fb)?;
        self.last_echo_us = Some(fb.echo_timestamp_us);
        self.stats.feedback += 1;
        if fb.hops > 0 {
            self.reported_hops = fb.hops;
        }

        // Steps 1–2: RTT sample and smoothed RTT.
        let sample_us = (micros(now) - fb.echo_timestamp_us - u64::from(fb.elapsed_us)).max(1);
        let sample = Duration::from_micros(sample_us);
        let first_feedback = self.rtt.is_none();
        let rtt = match self.rtt {
            None => sample,
            Some(r) => r.mul_f64(RTT_HISTORY_WEIGHT) + sample.mul_f64(1.0 - RTT_HISTORY_WEIGHT),
        };
        self.rtt = Some(rtt);

        // Step 4: the allowed rate.
        let p_before = self.p;
        self.p = fb.loss_event_rate;
        let x_recv = fb.x_recv as f64;
        let data_limited = !first_feedback && !self.rate_limited;
        let recv_limit = if data_limited {
            let loss_grew = fb.flags & FLAG_NEW_LOSS_EVENT != 0 || self.p > p_before;
            if loss_grew {
                self.receive_rates.halve();
                self.receive_rates.maximize(now, 0.85 * x_recv);
                self.receive_rates.max()
            } else {
                self.receive_rates.maximize(now, x_recv);
                2.0 * self.receive_rates.max()
            }
        } else {
            self.receive_rates.update(now, x_recv, rtt);
            2.0 * self.receive_rates.max()
        };
        self.set_allowed_rate(now, rtt, recv_limit);

        let re = match &mut self.re {
            Some(re) => {
                re.observe_rtt(now, sample);
                (self.p > 0.0).then(|| {
                    re.on_feedback(ReInputs {
                        now,
                        segment_size: self.s,
                        rtt_sample: sample,
                        echoed_sent_at: Duration::from_micros(fb.echo_timestamp_us),
                        rtt,
                        x: self.x,
                        x_recv,
                        reported_hops: self.reported_hops,
                    })
                })
            }
            None => None,
        };

        // Steps 3 and 6: RTO and the no-feedback timer.
        self.arm_nofeedback(now);
        self.rate_limited = false;
        self.reschedule();
        Ok(FeedbackReport {
            rtt_sample: sample.as_secs_f64(),
            rtt: rtt.as_secs_f64(),
            p: self.p,
            x_recv,
            x_bps: self.x_bps,
            x: self.x,
            sending_rate: self.sending_rate(),
            slow_start: self.p == 0.0,
            data_limited,
            re,
        })
    }

    fn min_rate(&self) -> f64 {
        self.s / MAX_BACKOFF_INTERVAL.as_secs_f64()
    }

    /// `W_init/R` (RFC 5348 §4.2), also the `recover_rate` of §4.4.
    fn initial_rate(&self, rtt: Duration) -> f64 {
        let window = (4.0 * self.s).min((2.0 * self.s).max(4380.0));
        window / rtt.as_secs_f64()
    }

    /// Step 4's rate update given the receive limit.
    fn set_allowed_rate(&mut self, now: Duration, rtt: Duration, recv_limit: f64) {
        if self.p > 0.0 {
            self.x_bps = equation::throughput(self.s, rtt, self.p);
            self.x = self.x_bps.min(recv_limit).max(self.min_rate());
        } else if now.saturating_sub(self.tld) >= rtt {
            self.x_bps = f64::INFINITY;
            self.x = (2.0 * self.x).min(recv_limit).max(self.initial_rate(rtt));
            self.tld = now;
        }
    }

    /// RTO = max(4R, 2s/X) (RFC 5348 §4.3 step 3), with X the rate the
    /// sender paces at: under a cap or the RE rate, packets — and so
    /// feedback — come less often than X alone would have them.
    fn arm_nofeedback(&mut self, now: Duration) {
        let two_packets = Duration::from_secs_f64(2.0 * self.s / self.sending_rate());
        let timeout = match self.rtt {
            Some(r) => (r * 4).max(two_packets),
            None => INITIAL_NOFEEDBACK.max(two_packets),
        };
        self.nofeedback_set_at = now;
        self.nofeedback_deadline = now + timeout;
    }

    /// Runs the no-feedback timer if it is due (RFC 5348 §4.4).
    pub fn handle_timeout(&mut self, now: Duration) {
        if now < self.nofeedback_deadline {
            return;
        }
        self.stats.nofeedback_expiries += 1;
        let idle = self.last_send.is_none_or(|t| t < self.nofeedback_set_at);
        let x_recv = self.receive_rates.max();
        let recover_rate = self.rtt.map_or(self.s, |r| self.initial_rate(r));
        let halved = (self.x / 2.0).max(self.min_rate());
        if self.rtt.is_none() && !idle {
            self.x = halved;
        } else if ((self.p > 0.0 && x_recv < recover_rate)
            || (self.p == 0.0 && self.x < 2.0 * recover_rate))
            && idle
        {
            // Idle and already slow: keep the rate for when data comes.
        } else if self.p == 0.0 {
            self.x = halved;
        } else if self.x_bps > 2.0 * x_recv {
            self.update_limits(now, x_recv);
        } else {
            self.update_limits(now, self.x_bps / 2.0);
        }
        if let Some(re) = &mut self.re {
            re.on_nofeedback(self.x);
        }
        self.arm_nofeedback(now);
        self.reschedule();
    }

    /// "Update_Limits" of RFC 5348 §4.4.
    fn update_limits(&mut self, now: Duration, limit: f64) {
        let limit = limit.max(self.min_rate());
        self.receive_rates.replace(now, limit / 2.0);
        if let Some(rtt) = self.rtt {
            self.set_allowed_rate(now, rtt, 2.0 * self.receive_rates.max());
        }
    }
}

fn micros(t: Duration) -> u64 {
    u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: u32 = 3;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    fn sender(now: Duration) -> Sender {
        let config = SenderConfig {
            session: SESSION,
            packet_size: 1000,
            max_rate: None,
            re: None,
        };
        Sender::new(config, now).unwrap()
    }

    /// Sends everything allowed up to `now`; returns the headers.
    fn drain(tx: &mut Sender, now: Duration) -> Vec<DataHeader> {
        let mut sent = Vec::new();
        while let Transmit::Send(h) = tx.poll_transmit(now) {
            sent.push(h);
        }
        sent
    }

    /// Feedback echoing `echo` that spent `elapsed` at the receiver.
    fn feedback(echo: &DataHeader, elapsed: Duration, x_recv: f64, p: f64) -> Feedback {
        Feedback {
            session: SESSION,
            echo_timestamp_us: echo.timestamp_us,
            elapsed_us: elapsed.as_micros() as u32,
            x_recv: x_recv as u64,
            loss_event_rate: p,
            highest_seq: echo.seq,
            received_packets: echo.seq + 1,
            received_bytes: (echo.seq + 1) * 1000,
            jitter_us: 0,
            hops: 0,
            flags: 0,
        }
    }

    #[test]
    fn one_packet_per_second_before_feedback() {
        let mut tx = sender(ms(0));
        assert_eq!(drain(&mut tx, ms(0)).len(), 1);
        assert_eq!(tx.poll_transmit(ms(500)), Transmit::Wait(ms(1000)));
        assert_eq!(drain(&mut tx, ms(1000)).len(), 1);
        assert_eq!(tx.allowed_rate(), 1000.0);
    }

    #[test]
    fn first_feedback_sets_rtt_and_initial_rate() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        // Back after 100 ms, 2 ms of which at the receiver: R = 98 ms.
        let report = tx
            .handle_feedback(ms(100), &feedback(&first, ms(2), 0.0, 0.0))
            .unwrap();
        assert!(rel(report.rtt, 0.098) < 1e-9);
        // W_init = min(4s, max(2s, 4380)) = 4000 B → X = 4000 B / 98 ms.
        assert!(rel(tx.allowed_rate(), 4000.0 / 0.098) < 1e-9);
        assert!(report.slow_start);
        // The next packet leaves one new interval (1000 B at X = 24.5 ms)
        // after the last one, not a second after it.
        assert_eq!(
            tx.poll_transmit(ms(10)),
            Transmit::Wait(Duration::from_secs_f64(1000.0 / (4000.0 / 0.098)))
        );
    }

    #[test]
    fn slow_start_doubles_once_per_rtt_up_to_twice_the_receive_rate() {
        let mut tx = sender(ms(0));
        let mut last = drain(&mut tx, ms(0))[0];
        let mut now = ms(100);
        tx.handle_feedback(now, &feedback(&last, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        let initial = tx.allowed_rate();
        assert!(
            rel(initial, 40_000.0) < 1e-9,
            "W_init = 4000 B over R = 100 ms"
        );
        // Each feedback comes back 100 ms after the packet it echoes and
        // reports the rate we sent at.
        let mut rates = vec![initial];
        for _ in 0..4 {
            last = *drain(&mut tx, now).last().unwrap();
            let x_recv = tx.allowed_rate();
            now += ms(100);
            tx.handle_feedback(now, &feedback(&last, Duration::ZERO, x_recv, 0.0))
                .unwrap();
            rates.push(tx.allowed_rate());
        }
        for pair in rates.windows(2) {
            assert!(rel(pair[1], 2.0 * pair[0]) < 1e-9, "{rates:?}");
        }
        // Feedback less than an RTT after the last doubling: no change.
        let x = tx.allowed_rate();
        last = *drain(&mut tx, now).last().unwrap();
        now += ms(30);
        tx.handle_feedback(now, &feedback(&last, Duration::ZERO, x, 0.0))
            .unwrap();
        assert_eq!(tx.allowed_rate(), x);
        // A receive rate that lags limits X to twice the receive rate once
        // the X_recv_set (the last two RTTs) holds only the low reports; slow
        // start never goes below the initial rate W_init/R.
        for _ in 0..4 {
            last = *drain(&mut tx, now).last().unwrap();
            now += ms(100);
            tx.handle_feedback(now, &feedback(&last, Duration::ZERO, 10_000.0, 0.0))
                .unwrap();
        }
        let rtt = tx.rtt().unwrap().as_secs_f64();
        let expected = (4000.0 / rtt).max(20_000.0);
        assert!(
            rel(tx.allowed_rate(), expected) < 1e-9,
            "{} vs {expected}",
            tx.allowed_rate()
        );
    }

    #[test]
    fn loss_switches_to_the_equation() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        let now = ms(200);
        let last = *drain(&mut tx, now).last().unwrap();
        let report = tx
            .handle_feedback(now, &feedback(&last, Duration::ZERO, 1e9, 0.01))
            .unwrap();
        assert!(!report.slow_start);
        // R = 0.9*100 + 0.1*(200 - sent time of last) ms.
        let rtt = Duration::from_secs_f64(report.rtt);
        let expected = equation::throughput(1000.0, rtt, 0.01);
        assert!(rel(tx.allowed_rate(), expected) < 1e-9);
        assert!(rel(report.x_bps, expected) < 1e-9);
        // Limited by twice the receive rate when that is lower.
        let now = ms(300);
        let last = *drain(&mut tx, now).last().unwrap();
        tx.handle_feedback(now, &feedback(&last, Duration::ZERO, 1000.0, 0.01))
            .unwrap();
        // The X_recv_set still holds 1e9 from 100 ms ago (within 2 RTTs).
        assert!(tx.allowed_rate() > 2000.0);
        let mut last = last;
        for i in 0..3 {
            let now = ms(400 + 100 * i);
            // At 2000 B/s, a packet leaves only every 500 ms.
            last = drain(&mut tx, now).pop().unwrap_or(last);
            tx.handle_feedback(now, &feedback(&last, Duration::ZERO, 1000.0, 0.01))
                .unwrap();
        }
        assert!(
            rel(tx.allowed_rate(), 2000.0) < 1e-9,
            "{}",
            tx.allowed_rate()
        );
    }

    #[test]
    fn rate_cap_limits_the_sending_rate_not_x() {
        let config = SenderConfig {
            session: SESSION,
            packet_size: 1000,
            max_rate: Some(10_000.0),
            re: None,
        };
        let mut tx = Sender::new(config, ms(0)).unwrap();
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        assert!(tx.allowed_rate() > 10_000.0);
        assert_eq!(tx.sending_rate(), 10_000.0);
        // 10 packets per second of 1000 B: over 2 s, about 20 packets.
        let mut count = 0;
        for t in (100..2100).step_by(5) {
            count += drain(&mut tx, ms(t)).len();
        }
        assert!((19..=21).contains(&count), "{count}");
    }

    #[test]
    fn nofeedback_timer_waits_for_two_packets_at_the_capped_rate() {
        // R = 100 µs but the cap allows a packet only every 100 ms: the timer
        // must not fire between packets (4R would be 400 µs).
        let config = SenderConfig {
            session: SESSION,
            packet_size: 1000,
            max_rate: Some(10_000.0),
            re: None,
        };
        let mut tx = Sender::new(config, ms(0)).unwrap();
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(
            Duration::from_micros(100),
            &feedback(&first, Duration::ZERO, 0.0, 0.0),
        )
        .unwrap();
        assert_eq!(tx.poll_timeout(), Duration::from_micros(100) + ms(200));
    }

    #[test]
    fn late_wakeups_do_not_slow_the_pacing_down() {
        // Packets every 10 ms; the application always wakes 0.5 ms late (less
        // than the catch-up credit) and feedback arrives after every packet.
        // Over 10 s: 1000 packets (restarting the schedule from the late
        // send times would give 10/10.5 of that, 952).
        let config = SenderConfig {
            session: SESSION,
            packet_size: 1000,
            max_rate: Some(100_000.0),
            re: None,
        };
        let mut tx = Sender::new(config, ms(0)).unwrap();
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(1), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        let mut now = ms(1);
        let mut sent = 0;
        while now < ms(10_001) {
            match tx.poll_transmit(now) {
                Transmit::Send(h) => {
                    sent += 1;
                    tx.handle_feedback(now, &feedback(&h, Duration::ZERO, 100_000.0, 0.0))
                        .unwrap();
                }
                Transmit::Wait(at) => now = at + Duration::from_micros(500),
            }
        }
        assert!((999..=1001).contains(&sent), "{sent} packets");
    }

    #[test]
    fn nofeedback_before_any_feedback_halves_after_two_seconds() {
        let mut tx = sender(ms(0));
        drain(&mut tx, ms(0));
        assert_eq!(tx.poll_timeout(), ms(2000));
        tx.handle_timeout(ms(1999));
        assert_eq!(tx.allowed_rate(), 1000.0);
        drain(&mut tx, ms(1000));
        tx.handle_timeout(ms(2000));
        assert_eq!(tx.allowed_rate(), 500.0);
        assert_eq!(tx.stats().nofeedback_expiries, 1);
        // Rearmed for max(2 s, 2s/X = 4 s).
        assert_eq!(tx.poll_timeout(), ms(6000));
    }

    #[test]
    fn nofeedback_in_slow_start_halves_the_rate() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        let x = tx.allowed_rate();
        // RTO = max(4R, 2s/X) = 400 ms.
        assert_eq!(tx.poll_timeout(), ms(500));
        drain(&mut tx, ms(300));
        tx.handle_timeout(ms(500));
        assert!(rel(tx.allowed_rate(), x / 2.0) < 1e-12);
    }

    #[test]
    fn nofeedback_after_loss_halves_the_equation_rate() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        let last = *drain(&mut tx, ms(200)).last().unwrap();
        // A receive rate far above the equation: X = X_Bps.
        let report = tx
            .handle_feedback(ms(200), &feedback(&last, Duration::ZERO, 1e9, 0.05))
            .unwrap();
        let x_bps = report.x_bps;
        assert!(rel(tx.allowed_rate(), x_bps) < 1e-12);
        let deadline = tx.poll_timeout();
        drain(&mut tx, deadline - ms(1));
        tx.handle_timeout(deadline);
        // Update_Limits(X_Bps/2): X_recv_set = {X_Bps/4}, X = min(X_Bps, X_Bps/2).
        assert!(
            rel(tx.allowed_rate(), x_bps / 2.0) < 1e-12,
            "{} vs {}",
            tx.allowed_rate(),
            x_bps
        );
        // Again: X_Bps > 2 X_recv (X_Bps/4) → Update_Limits(X_recv): X = X_Bps/4.
        let deadline = tx.poll_timeout();
        drain(&mut tx, deadline - ms(1));
        tx.handle_timeout(deadline);
        assert!(rel(tx.allowed_rate(), x_bps / 4.0) < 1e-12);
    }

    #[test]
    fn idle_sender_keeps_a_low_rate_on_nofeedback() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        // X = initial rate < 2 * recover rate and nothing sent since: kept.
        let x = tx.allowed_rate();
        tx.handle_timeout(tx.poll_timeout());
        assert_eq!(tx.allowed_rate(), x);
    }

    #[test]
    fn bad_feedback_is_refused_without_effect() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        let good = feedback(&first, Duration::ZERO, 0.0, 0.0);
        let cases = [
            (
                Feedback {
                    session: 99,
                    ..good
                },
                "session",
            ),
            (
                Feedback {
                    echo_timestamp_us: 5_000_000,
                    ..good
                },
                "future",
            ),
            (
                Feedback {
                    elapsed_us: 200_000,
                    ..good
                },
                "elapsed",
            ),
            (
                Feedback {
                    highest_seq: 10,
                    ..good
                },
                "unsent",
            ),
        ];
        for (fb, what) in cases {
            assert!(tx.handle_feedback(ms(100), &fb).is_err(), "{what}");
        }
        assert_eq!(tx.rtt(), None);
        assert_eq!(tx.stats().feedback, 0);
        tx.handle_feedback(ms(100), &good).unwrap();
        let second = drain(&mut tx, ms(200)).pop().unwrap();
        tx.handle_feedback(ms(300), &feedback(&second, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        assert_eq!(tx.handle_feedback(ms(310), &good), Err(FeedbackError::Stale));
    }

    #[test]
    fn data_limited_sender_is_limited_by_what_it_sent() {
        let mut tx = sender(ms(0));
        let first = drain(&mut tx, ms(0))[0];
        tx.handle_feedback(ms(100), &feedback(&first, Duration::ZERO, 0.0, 0.0))
            .unwrap();
        // The application sends one packet per RTT and is never told to wait.
        let mut now = ms(100);
        let mut report = None;
        for _ in 0..5 {
            let Transmit::Send(h) = tx.poll_transmit(now) else {
                panic!("should be allowed")
            };
            now += ms(100);
            report = Some(
                tx.handle_feedback(now, &feedback(&h, Duration::ZERO, 10_000.0, 0.0))
                    .unwrap(),
            );
        }
        let report = report.unwrap();
        assert!(report.data_limited);
        // recv_limit = 2 * max(X_recv_set) = 20 000, but slow start never
        // drops X below the initial rate (40 000).
        assert!(
            rel(tx.allowed_rate(), 40_000.0) < 1e-9,
            "{}",
            tx.allowed_rate()
        );
    }
}
