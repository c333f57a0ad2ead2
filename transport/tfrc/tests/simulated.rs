//! Sender and receiver in virtual time over a simulated path: fixed delays,
//! deterministic loss patterns, optionally a drop-tail bottleneck.
//!
//! Item 2 of the issue: on a lossy path the sending rate converges to the
//! throughput equation's rate for the measured p and RTT, within 10 %.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use meshemu_tfrc::equation;
use meshemu_tfrc::packet::{DataHeader, Feedback, DATA_HEADER_LEN};
use meshemu_tfrc::re::{HopSource, PhyParams, ReConfig};
use meshemu_tfrc::receiver::{Receiver, ReceiverConfig};
use meshemu_tfrc::sender::{FeedbackReport, Sender, SenderConfig, Transmit};

const PACKET: usize = 1000;
const SESSION: u32 = 1;

/// A drop-tail bottleneck in front of the forward delay.
struct Bottleneck {
    bytes_per_second: f64,
    queue_packets: usize,
    /// Departure times of packets queued or in service.
    departures: VecDeque<Duration>,
}

impl Bottleneck {
    /// When a packet arriving at `now` leaves the bottleneck, or `None` if dropped.
    fn enqueue(&mut self, now: Duration) -> Option<Duration> {
        while self.departures.front().is_some_and(|&t| t <= now) {
            self.departures.pop_front();
        }
        if self.departures.len() >= self.queue_packets {
            return None;
        }
        let start = self.departures.back().copied().unwrap_or(now).max(now);
        let leave = start + Duration::from_secs_f64(PACKET as f64 / self.bytes_per_second);
        self.departures.push_back(leave);
        Some(leave)
    }
}

struct Path {
    one_way: Duration,
    /// Drops data packet `seq` when true.
    drop: Box<dyn Fn(u64) -> bool>,
    bottleneck: Option<Bottleneck>,
}

enum Event {
    Data(DataHeader),
    Feedback(Feedback),
}

/// What a run measured after its warm-up.
struct Run {
    sending_rate: f64,
    delivered_rate: f64,
    mean_rtt: Duration,
    receiver_p: f64,
    reports: Vec<FeedbackReport>,
}

fn run(path: Path, re: Option<ReConfig>, duration: Duration, warm_up: Duration) -> Run {
    let config = SenderConfig {
        session: SESSION,
        packet_size: PACKET,
        max_rate: None,
        re,
    };
    let mut tx = Sender::new(config, Duration::ZERO).unwrap();
    let mut rx = Receiver::new(SESSION, ReceiverConfig::default());
    let mut path = path;
    let mut events: BinaryHeap<Reverse<(Duration, u64)>> = BinaryHeap::new();
    let mut payloads: Vec<Option<Event>> = Vec::new();
    let mut now = Duration::ZERO;
    let (mut sent_after_warm_up, mut delivered_after_warm_up) = (0u64, 0u64);
    let mut reports = Vec::new();
    let mut rtts = Vec::new();
    while now < duration {
        let next_send = loop {
            match tx.poll_transmit(now) {
                Transmit::Send(header) => {
                    if now >= warm_up {
                        sent_after_warm_up += 1;
                    }
                    if (path.drop)(header.seq) {
                        continue;
                    }
                    let leave = match &mut path.bottleneck {
                        Some(b) => b.enqueue(now),
                        None => Some(now),
                    };
                    if let Some(leave) = leave {
                        events.push(Reverse((leave + path.one_way, payloads.len() as u64)));
                        payloads.push(Some(Event::Data(header)));
                    }
                }
                Transmit::Wait(t) => break t,
            }
        };
        tx.handle_timeout(now);
        if let Some(fb) = rx.poll_feedback(now) {
            events.push(Reverse((now + path.one_way, payloads.len() as u64)));
            payloads.push(Some(Event::Feedback(fb)));
        }
        let next_event = events.peek().map_or(Duration::MAX, |Reverse((t, _))| *t);
        let next_rx = rx.poll_timeout().unwrap_or(Duration::MAX);
        now = next_send
            .min(tx.poll_timeout())
            .min(next_event)
            .min(next_rx)
            .max(now);
        while events.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Reverse((_, id)) = events.pop().unwrap();
            match payloads[id as usize].take().unwrap() {
                Event::Data(header) => {
                    if now >= warm_up {
                        delivered_after_warm_up += 1;
                    }
                    rx.handle_data(now, &header, PACKET - DATA_HEADER_LEN, None);
                }
                Event::Feedback(fb) => {
                    let report = tx
                        .handle_feedback(now, &fb)
                        .expect("simulated feedback is valid");
                    if now >= warm_up {
                        rtts.push(report.rtt_sample);
                        reports.push(report);
                    }
                }
            }
        }
    }
    let measured = (duration - warm_up).as_secs_f64();
    Run {
        sending_rate: sent_after_warm_up as f64 * PACKET as f64 / measured,
        delivered_rate: delivered_after_warm_up as f64 * PACKET as f64 / measured,
        mean_rtt: Duration::from_secs_f64(rtts.iter().sum::<f64>() / rtts.len() as f64),
        receiver_p: rx.loss_event_rate(),
        reports,
    }
}

fn lossy(one_way_ms: u64, drop: impl Fn(u64) -> bool + 'static) -> Path {
    Path {
        one_way: Duration::from_millis(one_way_ms),
        drop: Box::new(drop),
        bottleneck: None,
    }
}

fn assert_converges(name: &str, one_way_ms: u64, drop: impl Fn(u64) -> bool + 'static) {
    let r = run(
        lossy(one_way_ms, drop),
        None,
        Duration::from_secs(120),
        Duration::from_secs(30),
    );
    let expected = equation::throughput(PACKET as f64, r.mean_rtt, r.receiver_p);
    let error = (r.sending_rate - expected) / expected;
    println!(
        "{name}: sending {:.0} B/s, equation {:.0} B/s for p = {:.5}, RTT = {:.1} ms ({:+.2} %)",
        r.sending_rate,
        expected,
        r.receiver_p,
        r.mean_rtt.as_secs_f64() * 1e3,
        100.0 * error
    );
    assert!(
        error.abs() < 0.10,
        "{name}: {:+.1} % off the equation",
        100.0 * error
    );
}

#[test]
fn converges_to_the_equation_with_periodic_loss() {
    assert_converges("1 % loss, RTT 20 ms", 10, |seq| seq % 100 == 99);
    assert_converges("5 % loss, RTT 100 ms", 50, |seq| seq % 20 == 19);
    assert_converges("0.1 % loss, RTT 200 ms", 100, |seq| seq % 1000 == 999);
}

#[test]
fn a_burst_within_one_rtt_is_one_loss_event() {
    // Three consecutive packets lost every 300: one loss event per 300 packets.
    let drop = |seq: u64| seq % 300 >= 297;
    let r = run(
        lossy(20, drop),
        None,
        Duration::from_secs(120),
        Duration::from_secs(30),
    );
    assert!(
        (r.receiver_p - 1.0 / 300.0).abs() < 1e-4,
        "p = {}",
        r.receiver_p
    );
    let expected = equation::throughput(PACKET as f64, r.mean_rtt, r.receiver_p);
    assert!(((r.sending_rate - expected) / expected).abs() < 0.10);
}

#[test]
fn the_sender_reports_the_receivers_loss_event_rate() {
    let r = run(
        lossy(10, |seq| seq % 50 == 49),
        None,
        Duration::from_secs(60),
        Duration::from_secs(20),
    );
    assert!(
        r.reports.iter().all(|rep| (rep.p - 0.02).abs() < 1e-6),
        "p drifted"
    );
    assert!(r.reports.iter().all(|rep| !rep.slow_start));
}

/// A 1 Mbit/s bottleneck with a 50-packet drop-tail queue and 40 ms of base
/// RTT. TFRC fills the queue until it drops (RTT ≈ 40 + 400 ms); RE-TFRC
/// holds the RTT near its minimum and gives up little throughput.
#[test]
fn re_tfrc_keeps_the_queue_short_where_tfrc_fills_it() {
    let bottleneck = || Bottleneck {
        bytes_per_second: 125_000.0,
        queue_packets: 50,
        departures: VecDeque::new(),
    };
    let path = || Path {
        one_way: Duration::from_millis(20),
        drop: Box::new(|_| false),
        bottleneck: Some(bottleneck()),
    };
    let duration = Duration::from_secs(300);
    let warm_up = Duration::from_secs(60);
    let tfrc = run(path(), None, duration, warm_up);
    // One hop: r(1) ≈ 15 ms is below the path's 40 ms, so the window minimum rules.
    let re_config = ReConfig {
        hops: HopSource::Fixed(1),
        ..ReConfig::new(PhyParams::dsss(), PACKET)
    };
    let re = run(path(), Some(re_config), duration, warm_up);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "TFRC: RTT {:.0} ms, delivered {:.0} B/s; RE-TFRC: RTT {:.0} ms, delivered {:.0} B/s",
        ms(tfrc.mean_rtt),
        tfrc.delivered_rate,
        ms(re.mean_rtt),
        re.delivered_rate
    );
    assert!(ms(tfrc.mean_rtt) > 200.0, "TFRC should fill the queue");
    assert!(
        ms(re.mean_rtt) < 0.5 * ms(tfrc.mean_rtt),
        "RE-TFRC should keep the RTT low"
    );
    assert!(
        re.delivered_rate > 0.8 * tfrc.delivered_rate,
        "RE-TFRC should keep most of the throughput"
    );
    assert!(
        re.reports.iter().any(|r| r.re.is_some()),
        "RE-TFRC never left slow start"
    );
}
