//! `tfrc`: TFRC and RE-TFRC flows over UDP, in the spirit of iperf3.
//!
//! ```text
//! tfrc recv [--bind 0.0.0.0:5001] [--once] [--json FILE|-] ...
//! tfrc send HOST:PORT [--duration 10s] [--size 1000] [--mode tfrc|re-tfrc] ...
//! ```

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use meshemu_tfrc::net::{
    self, FlowInterval, FlowSummary, RecvOptions, SendOptions, SenderInterval, SenderSummary,
};
use meshemu_tfrc::re::{HopSource, PhyParams, ReConfig};
use meshemu_units::{parse_duration, parse_rate_bps};

#[derive(Parser)]
#[command(
    name = "tfrc",
    version,
    about = "TFRC (RFC 5348) and RE-TFRC flows over UDP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send one flow to a `tfrc recv`.
    Send(SendArgs),
    /// Receive flows and answer with feedback.
    Recv(RecvArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Plain TFRC (RFC 5348).
    Tfrc,
    /// TFRC with the rate estimation of Li et al.
    ReTfrc,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phy {
    /// 802.11 DSSS of the paper's Table I (1 Mbit/s basic, 2 Mbit/s data).
    Dsss,
    /// 802.11 FHSS of Table I (1 Mbit/s).
    Fhss,
}

/// Where the JSON summary goes.
#[derive(Clone, Debug)]
enum JsonOut {
    Stdout,
    File(PathBuf),
}

fn parse_json_out(s: &str) -> Result<JsonOut, String> {
    Ok(if s == "-" {
        JsonOut::Stdout
    } else {
        JsonOut::File(s.into())
    })
}

#[derive(clap::Args)]
struct Output {
    /// Write the JSON summary to FILE ('-' for standard output; interval
    /// reports then go to standard error).
    #[arg(long, value_name = "FILE", value_parser = parse_json_out)]
    json: Option<JsonOut>,
    /// Interval reports every DURATION (0s for none).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
    /// Write a JSON-lines trace of feedback and timer events to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Also trace every data packet.
    #[arg(long, requires = "trace")]
    trace_packets: bool,
    /// No interval reports on the terminal.
    #[arg(long, short)]
    quiet: bool,
}

impl Output {
    fn report_interval(&self) -> Option<Duration> {
        (!self.interval.is_zero()).then_some(self.interval)
    }

    /// Human output goes where the JSON does not.
    fn human(&self) -> Box<dyn Write> {
        match (self.quiet, &self.json) {
            (true, _) => Box::new(io::sink()),
            (false, Some(JsonOut::Stdout)) => Box::new(io::stderr()),
            (false, _) => Box::new(io::stdout()),
        }
    }

    /// Opens the JSON destination before the run, so a bad path fails at once.
    fn json_sink(&self) -> Result<Option<JsonSink>> {
        let sink: Box<dyn Write> = match &self.json {
            None => return Ok(None),
            Some(JsonOut::Stdout) => Box::new(io::BufWriter::new(io::stdout())),
            Some(JsonOut::File(path)) => {
                let file = File::create(path)
                    .with_context(|| format!("cannot create JSON output {}", path.display()))?;
                Box::new(io::BufWriter::new(file))
            }
        };
        Ok(Some(JsonSink(sink)))
    }
}

/// Where summaries go: one JSON object per line.
struct JsonSink(Box<dyn Write>);

impl JsonSink {
    fn write(&mut self, value: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.0, value)?;
        writeln!(self.0)?;
        self.0.flush().context("cannot write the JSON summary")
    }
}

#[derive(clap::Args)]
struct SendArgs {
    /// Receiver address, HOST:PORT.
    peer: String,
    /// Local address to send from.
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// How long to send.
    #[arg(long, short = 't', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// UDP payload of each packet in bytes (36-byte header included).
    #[arg(long, short = 's', default_value_t = 1000)]
    size: usize,
    /// Never send faster than this (the paper's "constrained rate"), e.g. 300kbps.
    #[arg(long, value_name = "RATE", value_parser = parse_rate_bps)]
    max_rate: Option<f64>,
    #[arg(long, value_enum, default_value = "tfrc")]
    mode: Mode,
    /// RE-TFRC: hops of the path; by default the receiver reports them from the IP TTL.
    #[arg(long, value_name = "N")]
    hops: Option<u8>,
    /// RE-TFRC: PHY of the delay model.
    #[arg(long, value_enum, default_value = "dsss")]
    phy: Phy,
    /// RE-TFRC: contending nodes of the single-hop networks at the ends of the chain.
    #[arg(long, default_value_t = 3, value_name = "N")]
    contenders_end: u32,
    /// RE-TFRC: contending nodes of the single-hop networks in the middle.
    #[arg(long, default_value_t = 4, value_name = "N")]
    contenders_middle: u32,
    /// RE-TFRC: sliding window of the minimum RTT.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    rtt_window: Duration,
    /// RE-TFRC: how far (fraction) the RTT may exceed its optimum before the rate is cut.
    #[arg(long, default_value_t = 0.2, value_name = "FRACTION")]
    re_tolerance: f64,
    /// RE-TFRC: the largest fraction of the rate one decrease takes (1: straight to the
    /// target, as ns-2's decrease_rate).
    #[arg(long, default_value_t = 0.0625, value_name = "FRACTION")]
    re_max_cut: f64,
    /// Flow identifier carried in every packet (default: from the clock and PID).
    #[arg(long)]
    session: Option<u32>,
    /// How long to wait for the receiver's final counters after sending.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    linger: Duration,
    #[command(flatten)]
    output: Output,
}

#[derive(clap::Args)]
struct RecvArgs {
    /// Address and port to listen on.
    #[arg(long, default_value = "0.0.0.0:5001")]
    bind: SocketAddr,
    /// Exit after the first flow ends.
    #[arg(long)]
    once: bool,
    /// A flow silent this long has ended.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    idle_timeout: Duration,
    /// Stop after DURATION whatever the flows do.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    stop_after: Option<Duration>,
    /// Turn off the history discounting of RFC 5348 §5.5.
    #[arg(long)]
    no_history_discounting: bool,
    /// TEST OPTION: drop every Nth data packet of each flow (a deterministic lossy link).
    #[arg(long, value_name = "N")]
    drop_every: Option<u64>,
    /// TEST OPTION: delay each feedback packet by DURATION (path delay without netem).
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    feedback_delay: Duration,
    #[command(flatten)]
    output: Output,
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
            eprintln!("tfrc: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn resolve(peer: &str) -> Result<SocketAddr> {
    let mut addrs = peer
        .to_socket_addrs()
        .with_context(|| format!("bad receiver address '{peer}' (expected HOST:PORT)"))?;
    addrs
        .next()
        .with_context(|| format!("receiver address '{peer}' resolves to nothing"))
}

/// A session id that differs between runs: it only names the flow.
fn default_session() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}

fn send(args: SendArgs) -> Result<()> {
    let peer = resolve(&args.peer)?;
    let re = match args.mode {
        Mode::Tfrc => {
            if args.hops.is_some() {
                bail!("--hops only applies to --mode re-tfrc");
            }
            None
        }
        Mode::ReTfrc => {
            let phy = match args.phy {
                Phy::Dsss => PhyParams::dsss(),
                Phy::Fhss => PhyParams::fhss(),
            };
            let mut config = ReConfig::new(phy, args.size);
            config.model.nodes_at_ends = args.contenders_end;
            config.model.nodes_in_middle = args.contenders_middle;
            config.hops = args.hops.map_or(HopSource::FromFeedback, HopSource::Fixed);
            config.rtt_window = args.rtt_window;
            config.tolerance = args.re_tolerance;
            config.max_cut = args.re_max_cut;
            config.check().context("bad RE-TFRC settings")?;
            Some(config)
        }
    };
    let options = SendOptions {
        peer,
        bind: args.bind,
        duration: args.duration,
        packet_size: args.size,
        max_rate_bps: args.max_rate,
        re,
        session: args.session.unwrap_or_else(default_session),
        report_interval: args.output.report_interval(),
        trace: args.output.trace.clone(),
        trace_packets: args.output.trace_packets,
        linger: args.linger,
    };
    let mut json = args.output.json_sink()?;
    let mut human = args.output.human();
    let summary = net::run_sender(options, |line| print_sender_interval(&mut human, line))?;
    print_sender_summary(&mut human, &summary);
    json.as_mut().map_or(Ok(()), |sink| sink.write(&summary))
}

fn recv(args: RecvArgs) -> Result<()> {
    let options = RecvOptions {
        bind: args.bind,
        once: args.once,
        idle_timeout: args.idle_timeout,
        history_discounting: !args.no_history_discounting,
        report_interval: args.output.report_interval(),
        trace: args.output.trace.clone(),
        trace_packets: args.output.trace_packets,
        drop_every: args.drop_every,
        feedback_delay: args.feedback_delay,
        stop_after: args.stop_after,
    };
    let mut json = args.output.json_sink()?;
    let binding = net::ReceiverBinding::bind(options)?;
    let human = RefCell::new(args.output.human());
    let _ = writeln!(
        human.borrow_mut(),
        "tfrc: listening on {}",
        binding.local_addr()?
    );
    // Summaries are written as flows end; the first write error is reported
    // when the receiver stops.
    let mut json_error = None;
    binding.run(
        |line| print_flow_interval(&mut *human.borrow_mut(), line),
        |summary| {
            print_flow_summary(&mut *human.borrow_mut(), summary);
            if let (Some(sink), None) = (json.as_mut(), &json_error) {
                json_error = sink.write(summary).err();
            }
        },
    )?;
    json_error.map_or(Ok(()), Err)
}

fn mbps(bits_per_second: f64) -> f64 {
    bits_per_second / 1e6
}

// Terminal output is best effort: a closed pipe must not stop a flow.

fn print_sender_interval(out: &mut dyn Write, line: &SenderInterval) {
    let rtt = line.rtt_ms.map_or("-".to_owned(), |r| format!("{r:.1} ms"));
    let _ = writeln!(
        out,
        "[{:6.1}-{:6.1} s]  send {:8.3} Mbit/s  rate {:8.3} Mbit/s  recv {:8.3} Mbit/s  rtt {rtt:>9}  p {:.5}",
        line.start_s,
        line.end_s,
        mbps(line.sending_rate_bps),
        mbps(line.rate_bps),
        mbps(line.throughput_bps),
        line.loss_event_rate
    );
}

fn print_sender_summary(out: &mut dyn Write, s: &SenderSummary) {
    let recv = s
        .throughput_bps
        .map_or("-".to_owned(), |t| format!("{:.3} Mbit/s", mbps(t)));
    let loss = s
        .loss_fraction
        .map_or("-".to_owned(), |l| format!("{:.2} %", 100.0 * l));
    let rtt = s.rtt_ms.map_or("-".to_owned(), |r| {
        format!("{:.1}/{:.1}/{:.1} ms", r.min, r.median, r.max)
    });
    let _ = writeln!(
        out,
        "{} to {}: sent {} packets ({:.3} Mbit/s), received {recv}, loss {loss}, p {:.5}, rtt min/median/max {rtt}",
        s.mode,
        s.peer,
        s.sent_packets,
        mbps(s.sending_rate_bps),
        s.loss_event_rate
    );
}

fn print_flow_interval(out: &mut dyn Write, line: &FlowInterval) {
    let _ = writeln!(
        out,
        "[{} {:6.1}-{:6.1} s]  recv {:8.3} Mbit/s  lost {:5}  p {:.5}  jitter {:.3} ms",
        line.peer,
        line.start_s,
        line.end_s,
        mbps(line.throughput_bps),
        line.lost_packets,
        line.loss_event_rate,
        line.jitter_ms
    );
}

fn print_flow_summary(out: &mut dyn Write, s: &FlowSummary) {
    let throughput = s
        .throughput_bps
        .map_or("-".to_owned(), |t| format!("{:.3} Mbit/s", mbps(t)));
    let _ = writeln!(
        out,
        "flow from {} ended ({:?}): {} packets, {throughput}, loss {:.2} %, p {:.5}, jitter {:.3} ms",
        s.peer,
        s.ended_by,
        s.packets,
        100.0 * s.loss_fraction,
        s.loss_event_rate,
        s.jitter_ms
    );
}
