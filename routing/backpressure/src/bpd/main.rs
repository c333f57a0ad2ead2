//! `bpd`: per-flow fair queuing and hop-by-hop backpressure for the packets a
//! node sends on its radio interface. See routing/backpressure/README.md.

mod cli;
mod daemon;
mod iptables;
mod oracle;
mod overhear;
mod radio;
mod routes;

use anyhow::Context;
use clap::Parser;

fn main() {
    let args = cli::Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("bpd: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &cli::Args) -> anyhow::Result<()> {
    // Blocked before the radio helper thread exists, so only the signalfd sees them.
    daemon::exit_signals().thread_block().context("blocking signals")?;
    let mut daemon = daemon::Daemon::new(args)?;
    daemon.run()
}
