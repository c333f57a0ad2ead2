//! `meshemu-tcpprobe`: samples `tcp_info` of the TCP sockets on a port.
//!
//! ```text
//! meshemu-tcpprobe --port 5201 [--interval 100ms] [--duration 60s]
//! ```
//! One JSON object per socket and sample on stdout (see `Sample`), until
//! SIGINT, SIGTERM or the duration. Listening sockets are left out.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nix::time::{clock_gettime, ClockId};

use meshemu_tcpprobe::{diag::Diag, sample, uses_port};
use meshemu_units::parse_duration;

/// TCP_LISTEN in the kernel's tcp_states.h.
const TCP_LISTEN: u8 = 10;

#[derive(Parser)]
#[command(name = "meshemu-tcpprobe", version, about = "Samples tcp_info of the TCP sockets on a port, as JSON lines")]
struct Cli {
    /// Local or remote port of the sockets to sample.
    #[arg(long)]
    port: u16,
    /// Time between samples: 100ms, 1s, 500us.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    interval: Duration,
    /// Stop after this long (default: at SIGINT or SIGTERM).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("meshemu-tcpprobe: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    if cli.port == 0 {
        bail!("--port must be a port number from 1 to 65535");
    }
    if cli.interval.is_zero() {
        bail!("--interval must be longer than 0s");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install a signal handler")?;
    }
    let mut diag = Diag::open().context("cannot open a sock_diag netlink socket")?;
    let mut out = BufWriter::new(io::stdout().lock());
    let started = Instant::now();
    let mut next = started;
    while !stop.load(Ordering::Relaxed) && cli.duration.is_none_or(|d| started.elapsed() < d) {
        let now = clock_gettime(ClockId::CLOCK_REALTIME).context("clock_gettime")?;
        let time_ns = now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64;
        for socket in diag.dump().context("sock_diag dump")? {
            if socket.header.state == TCP_LISTEN || !uses_port(&socket, cli.port) {
                continue;
            }
            if let Some(sample) = sample(time_ns, &socket) {
                serde_json::to_writer(&mut out, &sample)?;
                out.write_all(b"\n")?;
            }
        }
        out.flush().context("writing samples")?;
        // An absolute schedule: samples stay on the grid; a late one is not made up.
        next += cli.interval;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        std::thread::sleep(next - now);
    }
    Ok(())
}
