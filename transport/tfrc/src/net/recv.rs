//! `tfrc recv`: the receiving end of any number of flows on one UDP port.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::socket::{thread_cpu_time, tighten_timer_slack, wallclock_ns, Endpoint};
use super::{bps, RunError, RunningSpread, Trace};
use crate::packet::{self, DataHeader, Feedback, Fin, Packet, FEEDBACK_LEN, FLAG_NEW_LOSS_EVENT};
use crate::receiver::{DataOutcome, Receiver, ReceiverConfig};

/// Final answers kept to repeat them when an end-of-flow packet comes again.
const REMEMBERED_FINALS: usize = 64;

/// Big enough for any UDP datagram.
const RECEIVE_BUFFER: usize = 65_536;

/// What `tfrc recv` does.
#[derive(Debug, Clone)]
pub struct RecvOptions {
    pub bind: SocketAddr,
    /// Stop after the first flow ends.
    pub once: bool,
    /// A flow that sends nothing for this long has ended.
    pub idle_timeout: Duration,
    /// RFC 5348 §5.5 history discounting.
    pub history_discounting: bool,
    /// Interval reports every this long; `None` for none.
    pub report_interval: Option<Duration>,
    /// JSON-lines trace: one line per feedback, loss and flow end.
    pub trace: Option<PathBuf>,
    /// Also one trace line per data packet.
    pub trace_packets: bool,
    /// Test option: drop every Nth data packet of each flow on arrival, as a
    /// deterministic lossy link (this kernel has no netem).
    pub drop_every: Option<u64>,
    /// Test option: hold each feedback packet this long before sending it,
    /// as path delay (it is not counted in the feedback's elapsed time).
    pub feedback_delay: Duration,
    /// Stop after this long, whatever the flows do.
    pub stop_after: Option<Duration>,
}

/// Why a flow's summary was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowEnd {
    /// The sender's end-of-flow packet.
    Fin,
    /// Nothing arrived for the idle timeout.
    Idle,
    /// The same address started a new session.
    NewSession,
    /// The receiver was told to stop.
    Stopped,
}

/// One interval report of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlowInterval {
    pub peer: SocketAddr,
    pub start_s: f64,
    pub end_s: f64,
    pub throughput_bps: f64,
    pub lost_packets: u64,
    pub loss_event_rate: f64,
    pub jitter_ms: f64,
}

/// The JSON summary of one flow at `tfrc recv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSummary {
    pub role: &'static str,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub session: u32,
    pub ended_by: FlowEnd,
    /// First arrival, seconds since the receiver started.
    pub start_s: f64,
    /// First to last arrival.
    pub duration_s: f64,
    pub packets: u64,
    pub bytes: u64,
    pub throughput_bps: Option<f64>,
    /// From the sender's end-of-flow packet.
    pub sent_packets: Option<u64>,
    /// 1 − received/sent with the sender's count, else lost/(received+lost).
    pub loss_fraction: f64,
    /// Packets declared lost (three later packets arrived).
    pub lost_packets: u64,
    pub loss_events: u64,
    pub loss_event_rate: f64,
    /// RFC 3550 interarrival jitter at the end.
    pub jitter_ms: f64,
    /// From the wall-clock send time: meaningful when both ends share a
    /// clock (as namespaces on one host do).
    pub one_way_delay_ms: Option<RunningSpread>,
    pub ttl: Option<u8>,
    /// Hops from the TTL, assuming the sender's initial TTL of 64.
    pub hops: Option<u8>,
    pub duplicates: u64,
    pub late: u64,
    pub implausible: u64,
    pub feedback_sent: u64,
    pub expedited_feedback: u64,
    /// Packets dropped by `drop_every`.
    pub test_drops: u64,
    /// Datagrams on the port that were not packets of ours, so far.
    pub malformed_packets: u64,
    /// Well-formed packets a receiver does not expect, so far.
    pub unexpected_packets: u64,
    /// CPU time of the receiving thread so far.
    pub cpu_s: f64,
    pub intervals: Vec<FlowInterval>,
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum RecvEvent {
    Data {
        peer: SocketAddr,
        seq: u64,
        bytes: usize,
        ttl: Option<u8>,
        one_way_delay_ms: Option<f64>,
        outcome: &'static str,
    },
    Feedback {
        peer: SocketAddr,
        p: f64,
        x_recv_bps: f64,
        loss_events: u64,
        expedited: bool,
    },
    FlowEnd {
        peer: SocketAddr,
        session: u32,
        ended_by: FlowEnd,
    },
}

struct Flow {
    rx: Receiver,
    first_arrival: Duration,
    last_arrival: Duration,
    /// Data packets seen, dropped by the test option or not.
    arrivals: u64,
    test_drops: u64,
    one_way_delay_ms: RunningSpread,
    interval_start: Duration,
    bytes_at_interval_start: u64,
    lost_at_interval_start: u64,
    intervals: Vec<FlowInterval>,
}

impl Flow {
    fn new(session: u32, config: ReceiverConfig, now: Duration) -> Self {
        Self {
            rx: Receiver::new(session, config),
            first_arrival: now,
            last_arrival: now,
            arrivals: 0,
            test_drops: 0,
            one_way_delay_ms: RunningSpread::default(),
            interval_start: now,
            bytes_at_interval_start: 0,
            lost_at_interval_start: 0,
            intervals: Vec::new(),
        }
    }
}

/// A bound receiver socket, ready to run.
pub struct ReceiverBinding {
    endpoint: Endpoint,
    options: RecvOptions,
}

impl ReceiverBinding {
    pub fn bind(options: RecvOptions) -> Result<Self, RunError> {
        if options.drop_every.is_some_and(|n| n < 2) {
            return Err(RunError::Option(
                "drop-every must be at least 2 (1 would drop everything)".into(),
            ));
        }
        if options.report_interval.is_some_and(|i| i.is_zero()) {
            return Err(RunError::Option(
                "the report interval must be longer than zero".into(),
            ));
        }
        if options.idle_timeout.is_zero() {
            return Err(RunError::Option(
                "the idle timeout must be longer than zero".into(),
            ));
        }
        let addr = options.bind;
        let endpoint = Endpoint::bind(addr).map_err(|source| RunError::Bind { addr, source })?;
        endpoint.report_ttl().map_err(RunError::Socket)?;
        Ok(Self { endpoint, options })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, RunError> {
        self.endpoint.local_addr().map_err(RunError::Socket)
    }

    /// Serves flows until `once` ends the first one or `stop_after` passes;
    /// calls `on_interval` for each interval report and `on_flow_end` with
    /// each flow's summary, which it also returns.
    pub fn run(
        self,
        on_interval: impl FnMut(&FlowInterval),
        on_flow_end: impl FnMut(&FlowSummary),
    ) -> Result<Vec<FlowSummary>, RunError> {
        tighten_timer_slack();
        let local = self.local_addr()?;
        let trace = self
            .options
            .trace
            .as_deref()
            .map(Trace::create)
            .transpose()?;
        let mut server = RecvLoop {
            endpoint: &self.endpoint,
            opts: &self.options,
            config: ReceiverConfig {
                history_discounting: self.options.history_discounting,
            },
            local,
            start: Instant::now(),
            cpu_start: thread_cpu_time(),
            trace,
            on_interval,
            on_flow_end,
            flows: HashMap::new(),
            delayed: VecDeque::new(),
            finals: VecDeque::new(),
            malformed: 0,
            unexpected: 0,
            finished: Vec::new(),
        };
        server.serve()?;
        if let Some(trace) = server.trace.take() {
            trace.finish()?;
        }
        Ok(server.finished)
    }
}

/// Runs a receiver: bind, serve, return the flows' summaries.
pub fn run_receiver(
    options: RecvOptions,
    on_interval: impl FnMut(&FlowInterval),
    on_flow_end: impl FnMut(&FlowSummary),
) -> Result<Vec<FlowSummary>, RunError> {
    ReceiverBinding::bind(options)?.run(on_interval, on_flow_end)
}

struct RecvLoop<'a, I, E> {
    endpoint: &'a Endpoint,
    opts: &'a RecvOptions,
    config: ReceiverConfig,
    local: SocketAddr,
    start: Instant,
    cpu_start: Duration,
    trace: Option<Trace>,
    on_interval: I,
    on_flow_end: E,
    flows: HashMap<SocketAddr, Flow>,
    /// Feedback held back by `feedback_delay`: (due, bytes, to).
    delayed: VecDeque<(Duration, [u8; FEEDBACK_LEN], SocketAddr)>,
    /// Recent final answers: (peer, session, bytes).
    finals: VecDeque<(SocketAddr, u32, [u8; FEEDBACK_LEN])>,
    malformed: u64,
    unexpected: u64,
    finished: Vec<FlowSummary>,
}

impl<I: FnMut(&FlowInterval), E: FnMut(&FlowSummary)> RecvLoop<'_, I, E> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn trace(&mut self, now: Duration, event: &RecvEvent) -> Result<(), RunError> {
        match &mut self.trace {
            Some(trace) => trace.write(now.as_secs_f64(), event),
            None => Ok(()),
        }
    }

    fn serve(&mut self) -> Result<(), RunError> {
        let mut next_report = self.opts.report_interval;
        let mut buf = vec![0u8; RECEIVE_BUFFER];
        loop {
            while let Some(datagram) = self.endpoint.recv(&mut buf).map_err(RunError::Receive)? {
                let now = self.now();
                let ttl = datagram.ttl;
                match packet::parse(&buf[..datagram.len]) {
                    Ok(Packet::Data {
                        header,
                        payload_len,
                    }) => self.on_data(now, datagram.from, &header, payload_len, ttl)?,
                    Ok(Packet::Fin(fin)) => self.on_fin(now, datagram.from, &fin)?,
                    Ok(Packet::Feedback(_)) => self.unexpected += 1,
                    Err(_) => self.malformed += 1,
                }
            }
            let now = self.now();
            self.poll_feedback(now)?;
            self.flush_delayed(now)?;
            if let Some(at) = next_report.filter(|&at| now >= at) {
                self.report(at);
                next_report = self.opts.report_interval.map(|i| at + i);
            }
            let idle: Vec<SocketAddr> = self
                .flows
                .iter()
                .filter(|(_, f)| now >= f.last_arrival + self.opts.idle_timeout)
                .map(|(&peer, _)| peer)
                .collect();
            for peer in idle {
                self.finish(now, peer, FlowEnd::Idle, None)?;
            }
            let stop = self.opts.stop_after.is_some_and(|t| now >= t);
            if stop || (self.opts.once && !self.finished.is_empty()) {
                let open: Vec<SocketAddr> = self.flows.keys().copied().collect();
                for peer in open {
                    self.finish(now, peer, FlowEnd::Stopped, None)?;
                }
                return self.drain_delayed();
            }
            let deadline = self.next_deadline(next_report);
            let now = self.now();
            if deadline > now {
                self.endpoint
                    .wait(deadline - now)
                    .map_err(RunError::Receive)?;
            }
        }
    }

    fn next_deadline(&self, next_report: Option<Duration>) -> Duration {
        let flows = self.flows.values().map(|f| {
            let feedback = f.rx.poll_timeout().unwrap_or(Duration::MAX);
            feedback.min(f.last_arrival + self.opts.idle_timeout)
        });
        flows
            .chain(self.delayed.front().map(|&(due, _, _)| due))
            .chain(next_report)
            .chain(self.opts.stop_after)
            .min()
            .unwrap_or(Duration::MAX)
    }

    fn on_data(
        &mut self,
        now: Duration,
        peer: SocketAddr,
        header: &DataHeader,
        payload_len: usize,
        ttl: Option<u8>,
    ) -> Result<(), RunError> {
        if self
            .flows
            .get(&peer)
            .is_some_and(|f| f.rx.session() != header.session)
        {
            self.finish(now, peer, FlowEnd::NewSession, None)?;
        }
        let config = self.config;
        let flow = self
            .flows
            .entry(peer)
            .or_insert_with(|| Flow::new(header.session, config, now));
        flow.arrivals += 1;
        if self
            .opts
            .drop_every
            .is_some_and(|n| flow.arrivals.is_multiple_of(n))
        {
            flow.test_drops += 1;
            return Ok(());
        }
        flow.last_arrival = now;
        let one_way_delay_ms = (header.wallclock_ns != 0)
            .then(|| (wallclock_ns() as f64 - header.wallclock_ns as f64) / 1e6);
        let outcome = flow.rx.handle_data(now, header, payload_len, ttl);
        if outcome == DataOutcome::Accepted {
            if let Some(owd) = one_way_delay_ms {
                flow.one_way_delay_ms.add(owd);
            }
        }
        if self.opts.trace_packets {
            let outcome = match outcome {
                DataOutcome::Accepted => "accepted",
                DataOutcome::Duplicate => "duplicate",
                DataOutcome::Late => "late",
                DataOutcome::OtherSession => "other_session",
                DataOutcome::Implausible => "implausible",
            };
            let event = RecvEvent::Data {
                peer,
                seq: header.seq,
                bytes: payload_len + packet::DATA_HEADER_LEN,
                ttl,
                one_way_delay_ms,
                outcome,
            };
            self.trace(now, &event)?;
        }
        Ok(())
    }

    fn on_fin(&mut self, now: Duration, peer: SocketAddr, fin: &Fin) -> Result<(), RunError> {
        match self.flows.get_mut(&peer) {
            Some(flow) if flow.rx.session() == fin.session => {
                let answer = flow.rx.final_feedback(now).to_bytes();
                self.queue_feedback(now, answer, peer)?;
                if self.finals.len() == REMEMBERED_FINALS {
                    self.finals.pop_front();
                }
                self.finals.push_back((peer, fin.session, answer));
                self.finish(now, peer, FlowEnd::Fin, Some(fin))
            }
            _ => {
                // A repeated end-of-flow packet: repeat the answer if we have it.
                let answer = self
                    .finals
                    .iter()
                    .find(|(p, s, _)| *p == peer && *s == fin.session)
                    .map(|(_, _, a)| *a);
                match answer {
                    Some(answer) => self.queue_feedback(now, answer, peer),
                    None => {
                        self.unexpected += 1;
                        Ok(())
                    }
                }
            }
        }
    }

    fn poll_feedback(&mut self, now: Duration) -> Result<(), RunError> {
        let mut due = Vec::new();
        for (&peer, flow) in &mut self.flows {
            if let Some(fb) = flow.rx.poll_feedback(now) {
                due.push((peer, fb, flow.rx.stats().loss_events));
            }
        }
        for (peer, fb, loss_events) in due {
            self.queue_feedback(now, fb.to_bytes(), peer)?;
            self.trace_feedback(now, peer, &fb, loss_events)?;
        }
        Ok(())
    }

    fn trace_feedback(
        &mut self,
        now: Duration,
        peer: SocketAddr,
        fb: &Feedback,
        loss_events: u64,
    ) -> Result<(), RunError> {
        let event = RecvEvent::Feedback {
            peer,
            p: fb.loss_event_rate,
            x_recv_bps: bps(fb.x_recv as f64),
            loss_events,
            expedited: fb.flags & FLAG_NEW_LOSS_EVENT != 0,
        };
        self.trace(now, &event)
    }

    fn queue_feedback(
        &mut self,
        now: Duration,
        bytes: [u8; FEEDBACK_LEN],
        to: SocketAddr,
    ) -> Result<(), RunError> {
        self.delayed
            .push_back((now + self.opts.feedback_delay, bytes, to));
        self.flush_delayed(now)
    }

    fn flush_delayed(&mut self, now: Duration) -> Result<(), RunError> {
        while let Some(&(due, bytes, to)) = self.delayed.front() {
            if due > now {
                break;
            }
            self.delayed.pop_front();
            // A full socket buffer loses the feedback like a lossy path would.
            self.endpoint
                .send_to(&bytes, to)
                .map_err(|source| RunError::Send { peer: to, source })?;
        }
        Ok(())
    }

    /// Sends what is still held back, waiting for it to fall due.
    fn drain_delayed(&mut self) -> Result<(), RunError> {
        while let Some(&(due, _, _)) = self.delayed.front() {
            let now = self.now();
            if due > now {
                std::thread::sleep(due - now);
            }
            self.flush_delayed(self.now())?;
        }
        Ok(())
    }

    fn report(&mut self, end: Duration) {
        for (&peer, flow) in &mut self.flows {
            let start = flow.interval_start.max(flow.first_arrival);
            let length = end.saturating_sub(start).as_secs_f64().max(1e-9);
            let stats = flow.rx.stats();
            let line = FlowInterval {
                peer,
                start_s: start.as_secs_f64(),
                end_s: end.as_secs_f64(),
                throughput_bps: bps((stats.bytes - flow.bytes_at_interval_start) as f64 / length),
                lost_packets: stats.lost_packets - flow.lost_at_interval_start,
                loss_event_rate: flow.rx.loss_event_rate(),
                jitter_ms: flow.rx.jitter().as_secs_f64() * 1e3,
            };
            flow.interval_start = end;
            flow.bytes_at_interval_start = stats.bytes;
            flow.lost_at_interval_start = stats.lost_packets;
            flow.intervals.push(line);
            (self.on_interval)(&line);
        }
    }

    fn finish(
        &mut self,
        now: Duration,
        peer: SocketAddr,
        ended_by: FlowEnd,
        fin: Option<&Fin>,
    ) -> Result<(), RunError> {
        let Some(flow) = self.flows.remove(&peer) else {
            return Ok(());
        };
        let stats = flow.rx.stats().clone();
        let duration = flow
            .last_arrival
            .saturating_sub(flow.first_arrival)
            .as_secs_f64();
        let loss_fraction = match fin {
            Some(fin) if fin.sent_packets > 0 => {
                1.0 - stats.packets as f64 / fin.sent_packets as f64
            }
            _ => stats.lost_packets as f64 / (stats.packets + stats.lost_packets).max(1) as f64,
        };
        let summary = FlowSummary {
            role: "receiver",
            peer,
            local: self.local,
            session: flow.rx.session(),
            ended_by,
            start_s: flow.first_arrival.as_secs_f64(),
            duration_s: duration,
            packets: stats.packets,
            bytes: stats.bytes,
            throughput_bps: (duration > 0.0).then(|| bps(stats.bytes as f64 / duration)),
            sent_packets: fin.map(|f| f.sent_packets),
            loss_fraction,
            lost_packets: stats.lost_packets,
            loss_events: stats.loss_events,
            loss_event_rate: flow.rx.loss_event_rate(),
            jitter_ms: flow.rx.jitter().as_secs_f64() * 1e3,
            one_way_delay_ms: (flow.one_way_delay_ms.count > 0).then_some(flow.one_way_delay_ms),
            ttl: flow.rx.ttl(),
            hops: flow.rx.hops(),
            duplicates: stats.duplicates,
            late: stats.late,
            implausible: stats.implausible,
            feedback_sent: stats.feedback_sent,
            expedited_feedback: stats.expedited_feedback,
            test_drops: flow.test_drops,
            malformed_packets: self.malformed,
            unexpected_packets: self.unexpected,
            cpu_s: thread_cpu_time()
                .saturating_sub(self.cpu_start)
                .as_secs_f64(),
            intervals: flow.intervals,
        };
        self.trace(
            now,
            &RecvEvent::FlowEnd {
                peer,
                session: summary.session,
                ended_by,
            },
        )?;
        (self.on_flow_end)(&summary);
        self.finished.push(summary);
        Ok(())
    }
}
