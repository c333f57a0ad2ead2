//! `meshemu-udp`: a constant-rate UDP sender and a measuring receiver.
//!
//! ```text
//! meshemu-udp send --dst HOST:PORT --rate 800KB/s --size 1460 --duration 60s [--json]
//! meshemu-udp recv --port 5001 [--interval 1s] [--json]
//! ```
//! With `--json` every report is one JSON object per line on stdout
//! (`"type"`: `interval`, `flow`, `receiver` or `sender`). SIGINT and SIGTERM
//! end either side cleanly, with its summary.

use std::collections::HashMap;
use std::io::{self, IoSliceMut, Write};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use nix::errno::Errno;
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage};
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};
use serde::Serialize;

use meshemu_units::{parse_duration, parse_rate_bps, parse_size_bytes, UnitError};
use meshemu_udpflow::{FlowStats, FlowSummary, Header, IntervalStats, Schedule, Window, HEADER_LEN};

#[derive(Parser)]
#[command(name = "meshemu-udp", version, about = "Constant-rate UDP flows with exact one-way delay, jitter, loss and reordering")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send one constant-rate flow.
    Send(SendArgs),
    /// Receive flows and measure them.
    Recv(RecvArgs),
}

#[derive(Args)]
struct Measure {
    /// Only packets sent at or after this wall-clock time (ns since the epoch) count in the summary.
    #[arg(long, value_name = "NS")]
    window_start: Option<u64>,
    /// Only packets sent before this wall-clock time (ns since the epoch) count in the summary.
    #[arg(long, value_name = "NS")]
    window_end: Option<u64>,
    /// Reports as JSON lines on stdout.
    #[arg(long)]
    json: bool,
}

impl Measure {
    fn window(&self) -> Result<Option<Window>> {
        let window = match (self.window_start, self.window_end) {
            (None, None) => return Ok(None),
            (start, end) => Window { start_ns: start.unwrap_or(0), end_ns: end.unwrap_or(u64::MAX) },
        };
        if window.end_ns <= window.start_ns {
            bail!("--window-end must be after --window-start");
        }
        Ok(Some(window))
    }
}

#[derive(Args)]
struct SendArgs {
    /// Receiver, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    dst: String,
    /// Payload rate: 2Mbps, 800KB/s, or bit/s.
    #[arg(long, value_parser = whole_bps)]
    rate: u64,
    /// UDP payload per packet, header included: 1460, 1460B.
    #[arg(long, value_parser = parse_size_bytes)]
    size: u64,
    /// How long to send: 60s, 500ms.
    #[arg(long, value_parser = duration_ns)]
    duration: u64,
    /// Flow identifier carried in every packet.
    #[arg(long, default_value_t = 1)]
    flow_id: u32,
    /// When the first packet is due, CLOCK_MONOTONIC ns (default: at once):
    /// a sender started ahead of its flow waits for it.
    #[arg(long, value_name = "NS")]
    start: Option<u64>,
    #[command(flatten)]
    measure: Measure,
}

#[derive(Args)]
struct RecvArgs {
    /// UDP port to listen on (all addresses).
    #[arg(long)]
    port: u16,
    /// Interval reports every DURATION (0s: none).
    #[arg(long, default_value = "1s", value_parser = duration_ns)]
    interval: u64,
    /// Stop after DURATION (default: at SIGINT or SIGTERM).
    #[arg(long, value_parser = duration_ns)]
    duration: Option<u64>,
    #[command(flatten)]
    measure: Measure,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Send(args) => send(args),
        Command::Recv(args) => recv(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("meshemu-udp: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Set by SIGINT or SIGTERM.
fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install a signal handler")?;
    }
    Ok(stop)
}

fn now_ns(clock: ClockId) -> u64 {
    let time = clock_gettime(clock).expect("CLOCK_REALTIME and CLOCK_MONOTONIC always exist");
    timespec_ns(&time)
}

fn timespec_ns(time: &TimeSpec) -> u64 {
    (time.tv_sec() as u64).saturating_mul(1_000_000_000) + time.tv_nsec() as u64
}

fn emit(json: bool, value: &impl Serialize, human: impl FnOnce() -> String) {
    let line = if json { serde_json::to_string(value).expect("reports serialize") } else { human() };
    // A closed stdout must not stop a flow: reports are best effort.
    let _ = writeln!(io::stdout().lock(), "{line}");
}

// --- sender -----------------------------------------------------------------------

#[derive(Serialize)]
struct SenderSummary {
    r#type: &'static str,
    flow_id: u32,
    dst: SocketAddr,
    size: u64,
    rate_bps: u64,
    packets_sent: u64,
    bytes_sent: u64,
    /// Sends the kernel refused (ENOBUFS, ECONNREFUSED, ...): not on the wire.
    send_errors: u64,
    window_packets: u64,
    window_bytes: u64,
    /// How far behind the schedule the worst packet went out.
    max_late_ns: u64,
    interrupted: bool,
}

/// The largest UDP payload of one IPv4 datagram.
const MAX_PAYLOAD: u64 = 65_507;

/// Whole bit/s, as the schedule counts them.
fn whole_bps(text: &str) -> Result<u64, UnitError> {
    parse_rate_bps(text).map(|bps| bps.round() as u64)
}

fn duration_ns(text: &str) -> Result<u64, UnitError> {
    parse_duration(text).map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn send(args: SendArgs) -> Result<()> {
    if (args.size as usize) < HEADER_LEN || args.size > MAX_PAYLOAD {
        bail!("--size {} is not between the {HEADER_LEN}-byte header and {MAX_PAYLOAD} bytes (the largest UDP payload)",
              args.size);
    }
    let window = args.measure.window()?;
    let dst = args
        .dst
        .to_socket_addrs()
        .with_context(|| format!("bad --dst '{}' (expected HOST:PORT)", args.dst))?
        .find(SocketAddr::is_ipv4)
        .with_context(|| format!("--dst '{}' has no IPv4 address", args.dst))?;
    let socket = UdpSocket::bind("0.0.0.0:0").context("cannot open a UDP socket")?;
    socket.connect(dst).with_context(|| format!("cannot address {dst}"))?;
    let stop = stop_flag()?;
    // Normal threads carry 50 us of timer slack: the pacing wants less.
    let _ = nix::sys::prctl::set_timerslack(1);

    let mut buf = vec![0u8; args.size as usize];
    let now = now_ns(ClockId::CLOCK_MONOTONIC);
    let schedule = Schedule::new(args.start.map_or(now, |start| start.max(now)), args.duration, args.size, args.rate);
    let mut summary = SenderSummary {
        r#type: "sender",
        flow_id: args.flow_id,
        dst,
        size: args.size,
        rate_bps: args.rate,
        packets_sent: 0,
        bytes_sent: 0,
        send_errors: 0,
        window_packets: 0,
        window_bytes: 0,
        max_late_ns: 0,
        interrupted: false,
    };
    let mut seq = 0u64;
    while let Some(due) = schedule.due(seq) {
        if stop.load(Ordering::Relaxed) {
            summary.interrupted = true;
            break;
        }
        let request = TimeSpec::from(Duration::from_nanos(due));
        match clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &request) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue, // a signal: check the flag, sleep again
            Err(error) => return Err(error).context("clock_nanosleep"),
        }
        summary.max_late_ns = summary.max_late_ns.max(now_ns(ClockId::CLOCK_MONOTONIC).saturating_sub(due));
        let send_ns = now_ns(ClockId::CLOCK_REALTIME);
        Header { flow_id: args.flow_id, seq, send_ns }.write(&mut buf);
        seq += 1;
        match socket.send(&buf) {
            Ok(_) => {
                summary.packets_sent += 1;
                summary.bytes_sent += args.size;
                if window.is_none_or(|w| w.contains(send_ns)) {
                    summary.window_packets += 1;
                    summary.window_bytes += args.size;
                }
            }
            Err(_) => summary.send_errors += 1,
        }
    }
    emit(args.measure.json, &summary, || {
        format!(
            "sent {} packets ({} bytes) to {} at {} bit/s; {} send errors; at most {:.3} ms behind schedule",
            summary.packets_sent,
            summary.bytes_sent,
            summary.dst,
            summary.rate_bps,
            summary.send_errors,
            summary.max_late_ns as f64 / 1e6
        )
    });
    Ok(())
}

// --- receiver ---------------------------------------------------------------------

#[derive(Serialize)]
struct IntervalReport<'a> {
    r#type: &'static str,
    /// Seconds since the receiver started, at the end of the interval.
    t_s: f64,
    /// Wall-clock time at the end of the interval.
    time_ns: u64,
    src: SocketAddr,
    #[serde(flatten)]
    stats: &'a IntervalStats,
}

#[derive(Serialize)]
struct FlowReport<'a> {
    r#type: &'static str,
    src: SocketAddr,
    #[serde(flatten)]
    summary: &'a FlowSummary,
}

#[derive(Serialize)]
struct ReceiverReport {
    r#type: &'static str,
    port: u16,
    flows: usize,
    /// Datagrams that were not ours (too short, bad magic or version): dropped.
    garbage: u64,
    window: Option<Window>,
}

fn recv(args: RecvArgs) -> Result<()> {
    let window = args.measure.window()?;
    let socket = UdpSocket::bind(("0.0.0.0", args.port)).with_context(|| format!("cannot listen on UDP port {}", args.port))?;
    // Kernel arrival times: exact whatever this process's scheduling.
    setsockopt(&socket, sockopt::ReceiveTimestampns, &true).context("cannot enable SO_TIMESTAMPNS")?;
    socket.set_read_timeout(Some(Duration::from_millis(50))).context("cannot set a receive timeout")?;
    let stop = stop_flag()?;
    let json = args.measure.json;

    let started = now_ns(ClockId::CLOCK_MONOTONIC);
    let deadline = args.duration.map(|d| started + d);
    let mut next_report = (args.interval > 0).then_some(started + args.interval);
    let mut flows: HashMap<(SocketAddr, u32), FlowStats> = HashMap::new();
    let mut order: Vec<(SocketAddr, u32)> = Vec::new();
    let mut garbage = 0u64;
    let mut buf = vec![0u8; 65_536];
    let mut cmsg = nix::cmsg_space!(TimeSpec);

    while !stop.load(Ordering::Relaxed) {
        let now = now_ns(ClockId::CLOCK_MONOTONIC);
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(at) = next_report.filter(|&at| now >= at) {
            let time_ns = now_ns(ClockId::CLOCK_REALTIME);
            for key in &order {
                let stats = flows.get_mut(key).expect("every ordered key is a flow").take_interval();
                let report = IntervalReport { r#type: "interval", t_s: (now - started) as f64 / 1e9, time_ns, src: key.0, stats: &stats };
                emit(json, &report, || {
                    format!(
                        "[{:7.1} s] {} flow {}: {:9.3} Mbit/s  {} packets  {} lost  jitter {:.3} ms",
                        report.t_s,
                        key.0,
                        key.1,
                        stats.bytes as f64 * 8e9 / args.interval as f64 / 1e6,
                        stats.packets,
                        stats.lost,
                        stats.jitter_ns / 1e6
                    )
                });
            }
            next_report = Some(at + args.interval);
        }

        let mut iov = [IoSliceMut::new(&mut buf)];
        let message = match recvmsg::<SockaddrStorage>(socket.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()) {
            Ok(message) => message,
            Err(Errno::EAGAIN | Errno::EINTR) => continue,
            Err(error) => return Err(error).context("receiving"),
        };
        let arrival_ns = message
            .cmsgs()
            .ok()
            .into_iter()
            .flatten()
            .find_map(|c| match c {
                ControlMessageOwned::ScmTimestampns(ts) => Some(timespec_ns(&ts)),
                _ => None,
            })
            .unwrap_or_else(|| now_ns(ClockId::CLOCK_REALTIME));
        let len = message.bytes;
        let Some(src) = message.address.and_then(|a| a.as_sockaddr_in().map(|v4| SocketAddr::V4((*v4).into()))) else {
            garbage += 1;
            continue;
        };
        let Ok(header) = Header::read(&buf[..len]) else {
            garbage += 1;
            continue;
        };
        let key = (src, header.flow_id);
        let stats = flows.entry(key).or_insert_with(|| {
            order.push(key);
            FlowStats::new(header.flow_id, window)
        });
        stats.record(header.seq, header.send_ns, arrival_ns, len as u64);
    }

    for key in &order {
        let summary = flows[key].summary();
        let report = FlowReport { r#type: "flow", src: key.0, summary: &summary };
        emit(json, &report, || human_flow_summary(key.0, &summary));
    }
    let receiver = ReceiverReport { r#type: "receiver", port: args.port, flows: order.len(), garbage, window };
    emit(json, &receiver, || format!("{} flows, {} garbage datagrams dropped", receiver.flows, receiver.garbage));
    Ok(())
}

fn human_flow_summary(src: SocketAddr, s: &FlowSummary) -> String {
    let delay = s.delay.as_ref().map_or("-".to_owned(), |d| {
        format!(
            "{:.3}/{:.3}/{:.3}/{:.3} ms",
            d.min_ns as f64 / 1e6,
            d.p50_ns as f64 / 1e6,
            d.p95_ns as f64 / 1e6,
            d.max_ns as f64 / 1e6
        )
    });
    format!(
        "flow {} from {src}: {} packets, {:.3} Mbit/s, lost {} ({:.2} %), reordered {}, duplicates {}, \
         delay min/p50/p95/max {delay}, jitter {:.3} ms",
        s.flow_id,
        s.packets,
        s.goodput_bps / 1e6,
        s.lost,
        100.0 * s.loss_fraction,
        s.reordered,
        s.duplicates,
        s.jitter_ns / 1e6
    )
}
