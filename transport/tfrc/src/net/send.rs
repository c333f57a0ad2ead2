//! `tfrc send`: one TFRC or RE-TFRC flow to a receiver.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::socket::{thread_cpu_time, tighten_timer_slack, wallclock_ns, Endpoint, Sent};
use super::{bps, RunError, Spread, Trace};
use crate::packet::{self, Feedback, Packet, FLAG_FINAL};
use crate::re::{HopSource, ReConfig, ReDecision};
use crate::receiver::ASSUMED_INITIAL_TTL;
use crate::sender::{FeedbackReport, Sender, SenderConfig, Transmit};

/// End-of-flow packets are repeated this often until the receiver answers.
const FIN_REPEAT: Duration = Duration::from_millis(200);

/// Larger than any feedback packet: a longer datagram is cut and then
/// rejected as malformed.
const RECEIVE_BUFFER: usize = 2048;

/// What `tfrc send` does.
#[derive(Debug, Clone)]
pub struct SendOptions {
    pub peer: SocketAddr,
    /// Local address; the unspecified address of the peer's family if `None`.
    pub bind: Option<SocketAddr>,
    /// How long to send data.
    pub duration: Duration,
    /// UDP payload of each data packet, header included.
    pub packet_size: usize,
    /// The paper's constrained rate, bit/s.
    pub max_rate_bps: Option<f64>,
    /// `Some` for RE-TFRC.
    pub re: Option<ReConfig>,
    pub session: u32,
    /// Interval reports every this long; `None` for none.
    pub report_interval: Option<Duration>,
    /// JSON-lines trace: one line per feedback and timer event.
    pub trace: Option<PathBuf>,
    /// Also one trace line per data packet.
    pub trace_packets: bool,
    /// How long to wait for the receiver's final counters after the data.
    pub linger: Duration,
}

/// Feedback the sender got, by what it did with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct FeedbackCounts {
    pub accepted: u64,
    /// Well-formed but inconsistent with what was sent (wrong session,
    /// unknown timestamp, impossible delay or sequence number).
    pub refused: u64,
    /// Reordered: older than feedback already used.
    pub stale: u64,
    /// Not a packet of ours (bad length, magic, version, flags...).
    pub malformed: u64,
    /// Well-formed packets that a sender does not expect, or from elsewhere.
    pub unexpected: u64,
}

/// RE-TFRC figures of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReSummary {
    pub hops: Option<u8>,
    /// r(N) for that hop count.
    pub r_model_ms: Option<f64>,
    pub increases: u64,
    pub decreases: u64,
    /// Overload signals within a round trip of a decrease, left alone.
    pub holds: u64,
    pub rtt_window_s: f64,
    pub tolerance: f64,
    pub max_cut: f64,
}

/// One interval report of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SenderInterval {
    pub start_s: f64,
    pub end_s: f64,
    /// What was sent in the interval.
    pub sending_rate_bps: f64,
    /// The pacing rate at the end (X, the RE rate and the cap).
    pub rate_bps: f64,
    /// TFRC's allowed rate X at the end.
    pub x_bps: f64,
    /// What the receiver reported receiving in the interval.
    pub throughput_bps: f64,
    /// Mean RTT sample of the interval.
    pub rtt_ms: Option<f64>,
    pub loss_event_rate: f64,
}

/// The JSON summary of `tfrc send`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SenderSummary {
    pub role: &'static str,
    pub mode: &'static str,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub session: u32,
    pub packet_size: usize,
    pub duration_s: f64,
    pub max_rate_bps: Option<f64>,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub sending_rate_bps: f64,
    /// Packets the kernel refused (socket buffer or device queue full).
    pub send_drops: u64,
    /// The receiver's counters: final (its answer to the end-of-flow
    /// packet) when `final_counts`, else from the latest feedback.
    pub received_packets: Option<u64>,
    pub received_bytes: Option<u64>,
    pub final_counts: bool,
    pub throughput_bps: Option<f64>,
    pub loss_fraction: Option<f64>,
    /// The latest loss event rate p.
    pub loss_event_rate: f64,
    pub jitter_ms: Option<f64>,
    /// Hops reported by the receiver from the TTL.
    pub hops: Option<u8>,
    pub rtt_ms: Option<Spread>,
    /// Every RTT sample, in order.
    pub rtt_samples_ms: Vec<f64>,
    pub feedback: FeedbackCounts,
    pub nofeedback_expiries: u64,
    pub re: Option<ReSummary>,
    /// CPU time of the sending thread.
    pub cpu_s: f64,
    pub intervals: Vec<SenderInterval>,
}

/// Trace lines of the sender.
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum SendEvent<'a> {
    Send {
        seq: u64,
        rate_bps: f64,
    },
    Feedback {
        rtt_sample_ms: f64,
        rtt_ms: f64,
        p: f64,
        x_recv_bps: f64,
        x_bps: f64,
        rate_bps: f64,
        slow_start: bool,
        data_limited: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        re: Option<crate::re::ReStep>,
    },
    Refused {
        reason: &'a str,
    },
    Nofeedback {
        x_bps: f64,
        rate_bps: f64,
    },
}

/// A bound sender socket, ready to run.
pub struct SenderBinding {
    endpoint: Endpoint,
    options: SendOptions,
}

impl SenderBinding {
    pub fn bind(options: SendOptions) -> Result<Self, RunError> {
        if options.duration.is_zero() {
            return Err(RunError::Option(
                "the duration must be longer than zero".into(),
            ));
        }
        if options.report_interval.is_some_and(|i| i.is_zero()) {
            return Err(RunError::Option(
                "the report interval must be longer than zero".into(),
            ));
        }
        let addr = options.bind.unwrap_or(match options.peer {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        });
        let endpoint = Endpoint::bind(addr).map_err(|source| RunError::Bind { addr, source })?;
        // The receiver counts hops from this TTL, whatever the sysctl says.
        endpoint
            .set_ttl(ASSUMED_INITIAL_TTL)
            .map_err(RunError::Socket)?;
        Ok(Self { endpoint, options })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, RunError> {
        self.endpoint.local_addr().map_err(RunError::Socket)
    }

    /// Sends for the configured duration, then closes the flow; calls
    /// `on_interval` with each interval report.
    pub fn run(self, on_interval: impl FnMut(&SenderInterval)) -> Result<SenderSummary, RunError> {
        tighten_timer_slack();
        let local = self.local_addr()?;
        let opts = &self.options;
        let config = SenderConfig {
            session: opts.session,
            packet_size: opts.packet_size,
            max_rate: opts.max_rate_bps.map(|b| b / 8.0),
            re: opts.re,
        };
        let sender = Sender::new(config, Duration::ZERO)?;
        let trace = opts.trace.as_deref().map(Trace::create).transpose()?;
        let mut flow = SendLoop {
            endpoint: &self.endpoint,
            opts,
            sender,
            start: Instant::now(),
            cpu_start: thread_cpu_time(),
            trace,
            on_interval,
            data: vec![0u8; opts.packet_size],
            send_drops: 0,
            counts: FeedbackCounts::default(),
            latest: None,
            final_feedback: None,
            rtt_samples_ms: Vec::new(),
            re_moves: (0, 0, 0),
            interval: IntervalState::default(),
            intervals: Vec::new(),
        };
        flow.send_data()?;
        flow.close()?;
        flow.summary(local)
    }
}

/// Runs one flow: bind, send, summarise.
pub fn run_sender(
    options: SendOptions,
    on_interval: impl FnMut(&SenderInterval),
) -> Result<SenderSummary, RunError> {
    SenderBinding::bind(options)?.run(on_interval)
}

#[derive(Default)]
struct IntervalState {
    start: Duration,
    packets_at_start: u64,
    received_bytes_at_start: u64,
    rtt_samples: Vec<f64>,
}

struct SendLoop<'a, F> {
    endpoint: &'a Endpoint,
    opts: &'a SendOptions,
    sender: Sender,
    start: Instant,
    cpu_start: Duration,
    trace: Option<Trace>,
    on_interval: F,
    data: Vec<u8>,
    send_drops: u64,
    counts: FeedbackCounts,
    /// The latest accepted feedback.
    latest: Option<Feedback>,
    /// The receiver's answer to the end-of-flow packet.
    final_feedback: Option<Feedback>,
    rtt_samples_ms: Vec<f64>,
    /// RE-TFRC (increases, decreases, holds).
    re_moves: (u64, u64, u64),
    interval: IntervalState,
    intervals: Vec<SenderInterval>,
}

impl<F: FnMut(&SenderInterval)> SendLoop<'_, F> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn trace(&mut self, now: Duration, event: &SendEvent) -> Result<(), RunError> {
        match &mut self.trace {
            Some(trace) => trace.write(now.as_secs_f64(), event),
            None => Ok(()),
        }
    }

    fn send_data(&mut self) -> Result<(), RunError> {
        let mut next_report = self.opts.report_interval;
        loop {
            let now = self.now();
            if now >= self.opts.duration {
                break;
            }
            // Feedback and timers first: they change the rate, and the wait
            // below must use the send time of the rate now in force.
            self.receive(false)?;
            let now = self.now();
            if now >= self.sender.poll_timeout() {
                self.sender.handle_timeout(now);
                let event = SendEvent::Nofeedback {
                    x_bps: bps(self.sender.allowed_rate()),
                    rate_bps: bps(self.sender.sending_rate()),
                };
                self.trace(now, &event)?;
            }
            let next_send = self.transmit(now)?;
            if let Some(at) = next_report.filter(|&at| now >= at) {
                self.report(at);
                next_report = self.opts.report_interval.map(|i| at + i);
            }
            let deadline = next_send
                .min(self.sender.poll_timeout())
                .min(next_report.unwrap_or(Duration::MAX))
                .min(self.opts.duration);
            let now = self.now();
            if deadline > now {
                self.endpoint
                    .wait(deadline - now)
                    .map_err(RunError::Receive)?;
            }
        }
        let end = self.opts.duration;
        if self.opts.report_interval.is_some() && end > self.interval.start {
            self.report(end);
        }
        Ok(())
    }

    /// Sends every packet allowed at `now`; returns when the next may go.
    fn transmit(&mut self, now: Duration) -> Result<Duration, RunError> {
        loop {
            match self.sender.poll_transmit(now) {
                Transmit::Wait(at) => return Ok(at),
                Transmit::Send(mut header) => {
                    header.wallclock_ns = wallclock_ns();
                    header.write(&mut self.data);
                    let peer = self.opts.peer;
                    match self
                        .endpoint
                        .send_to(&self.data, peer)
                        .map_err(|source| RunError::Send { peer, source })?
                    {
                        Sent::Sent => {}
                        Sent::Dropped => self.send_drops += 1,
                    }
                    if self.opts.trace_packets {
                        let event = SendEvent::Send {
                            seq: header.seq,
                            rate_bps: bps(self.sender.sending_rate()),
                        };
                        self.trace(now, &event)?;
                    }
                }
            }
        }
    }

    /// Handles every waiting datagram. While `closing`, only the final
    /// answer matters and rate control is over.
    fn receive(&mut self, closing: bool) -> Result<(), RunError> {
        let mut buf = [0u8; RECEIVE_BUFFER];
        while let Some(datagram) = self.endpoint.recv(&mut buf).map_err(RunError::Receive)? {
            let now = self.now();
            let feedback = match packet::parse(&buf[..datagram.len]) {
                Ok(Packet::Feedback(fb)) if datagram.from == self.opts.peer => fb,
                Ok(_) => {
                    self.counts.unexpected += 1;
                    continue;
                }
                Err(_) => {
                    self.counts.malformed += 1;
                    continue;
                }
            };
            if feedback.flags & FLAG_FINAL != 0 {
                if feedback.session == self.opts.session {
                    self.final_feedback = Some(feedback);
                } else {
                    self.counts.refused += 1;
                }
                continue;
            }
            if closing {
                continue;
            }
            match self.sender.handle_feedback(now, &feedback) {
                Ok(report) => self.accept(now, feedback, &report)?,
                Err(error) => {
                    if error == crate::sender::FeedbackError::Stale {
                        self.counts.stale += 1;
                    } else {
                        self.counts.refused += 1;
                    }
                    let reason = error.to_string();
                    self.trace(now, &SendEvent::Refused { reason: &reason })?;
                }
            }
        }
        Ok(())
    }

    fn accept(
        &mut self,
        now: Duration,
        feedback: Feedback,
        report: &FeedbackReport,
    ) -> Result<(), RunError> {
        self.counts.accepted += 1;
        self.latest = Some(feedback);
        let sample_ms = report.rtt_sample * 1e3;
        self.rtt_samples_ms.push(sample_ms);
        self.interval.rtt_samples.push(sample_ms);
        match report.re.map(|step| step.decision) {
            Some(ReDecision::Increase) => self.re_moves.0 += 1,
            Some(ReDecision::Decrease) => self.re_moves.1 += 1,
            Some(ReDecision::Hold) => self.re_moves.2 += 1,
            _ => {}
        }
        let event = SendEvent::Feedback {
            rtt_sample_ms: sample_ms,
            rtt_ms: report.rtt * 1e3,
            p: report.p,
            x_recv_bps: bps(report.x_recv),
            x_bps: bps(report.x),
            rate_bps: bps(report.sending_rate),
            slow_start: report.slow_start,
            data_limited: report.data_limited,
            re: report.re,
        };
        self.trace(now, &event)
    }

    fn received_bytes(&self) -> u64 {
        self.latest.map_or(0, |fb| fb.received_bytes)
    }

    fn report(&mut self, end: Duration) {
        let length = end
            .saturating_sub(self.interval.start)
            .as_secs_f64()
            .max(1e-9);
        let packets = self.sender.stats().packets - self.interval.packets_at_start;
        let received = self
            .received_bytes()
            .saturating_sub(self.interval.received_bytes_at_start);
        let samples = &self.interval.rtt_samples;
        let line = SenderInterval {
            start_s: self.interval.start.as_secs_f64(),
            end_s: end.as_secs_f64(),
            sending_rate_bps: bps(packets as f64 * self.opts.packet_size as f64 / length),
            rate_bps: bps(self.sender.sending_rate()),
            x_bps: bps(self.sender.allowed_rate()),
            throughput_bps: bps(received as f64 / length),
            rtt_ms: (!samples.is_empty())
                .then(|| samples.iter().sum::<f64>() / samples.len() as f64),
            loss_event_rate: self.sender.loss_event_rate(),
        };
        (self.on_interval)(&line);
        self.intervals.push(line);
        self.interval = IntervalState {
            start: end,
            packets_at_start: self.sender.stats().packets,
            received_bytes_at_start: self.received_bytes(),
            rtt_samples: Vec::new(),
        };
    }

    /// Sends the end-of-flow packet until the receiver answers or `linger` passes.
    fn close(&mut self) -> Result<(), RunError> {
        let fin = self.sender.fin().to_bytes();
        let give_up = self.now() + self.opts.linger;
        while self.final_feedback.is_none() {
            let now = self.now();
            if now >= give_up {
                break;
            }
            let peer = self.opts.peer;
            self.endpoint
                .send_to(&fin, peer)
                .map_err(|source| RunError::Send { peer, source })?;
            let until = (now + FIN_REPEAT).min(give_up);
            while self.final_feedback.is_none() && self.now() < until {
                self.endpoint
                    .wait(until - self.now())
                    .map_err(RunError::Receive)?;
                self.receive(true)?;
            }
        }
        Ok(())
    }

    fn summary(mut self, local: SocketAddr) -> Result<SenderSummary, RunError> {
        if let Some(trace) = self.trace.take() {
            trace.finish()?;
        }
        let opts = self.opts;
        let stats = self.sender.stats().clone();
        let seconds = opts.duration.as_secs_f64();
        let counters = self.final_feedback.or(self.latest);
        let loss_fraction = counters.map(|fb| {
            // With final counts every packet sent is accounted for; else only
            // those up to the highest the receiver had seen.
            let expected = if self.final_feedback.is_some() {
                stats.packets
            } else {
                fb.highest_seq + 1
            };
            1.0 - fb.received_packets as f64 / expected.max(1) as f64
        });
        let re = opts.re.map(|config| {
            let hops = match config.hops {
                HopSource::Fixed(n) => Some(n),
                HopSource::FromFeedback => counters.map(|fb| fb.hops).filter(|&h| h > 0),
            };
            ReSummary {
                hops,
                r_model_ms: hops
                    .and_then(|n| config.model.rtt(n.into()).ok())
                    .map(|r| r.as_secs_f64() * 1e3),
                increases: self.re_moves.0,
                decreases: self.re_moves.1,
                holds: self.re_moves.2,
                rtt_window_s: config.rtt_window.as_secs_f64(),
                tolerance: config.tolerance,
                max_cut: config.max_cut,
            }
        });
        Ok(SenderSummary {
            role: "sender",
            mode: if opts.re.is_some() { "re-tfrc" } else { "tfrc" },
            peer: opts.peer,
            local,
            session: opts.session,
            packet_size: opts.packet_size,
            duration_s: seconds,
            max_rate_bps: opts.max_rate_bps,
            sent_packets: stats.packets,
            sent_bytes: stats.bytes,
            sending_rate_bps: bps(stats.bytes as f64 / seconds),
            send_drops: self.send_drops,
            received_packets: counters.map(|fb| fb.received_packets),
            received_bytes: counters.map(|fb| fb.received_bytes),
            final_counts: self.final_feedback.is_some(),
            throughput_bps: counters.map(|fb| bps(fb.received_bytes as f64 / seconds)),
            loss_fraction,
            loss_event_rate: self.sender.loss_event_rate(),
            jitter_ms: counters.map(|fb| f64::from(fb.jitter_us) / 1e3),
            hops: counters.map(|fb| fb.hops).filter(|&h| h > 0),
            rtt_ms: Spread::of(&self.rtt_samples_ms),
            rtt_samples_ms: self.rtt_samples_ms,
            feedback: self.counts,
            nofeedback_expiries: stats.nofeedback_expiries,
            re,
            cpu_s: thread_cpu_time()
                .saturating_sub(self.cpu_start)
                .as_secs_f64(),
            intervals: self.intervals,
        })
    }
}
