//! `meshemu-medium`: the process that runs the meshemu medium model
//! (emulator/README.md sections 2–6).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use meshemu_medium::config::{self, LabConfig};
use meshemu_model::sim::Scenario;
use meshemu_model::{Medium, MediumConfig};

#[derive(Parser)]
#[command(name = "meshemu-medium", version, about = "The meshemu medium: the 802.11 model in virtual or real time")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Who hears whom at time 0: prints {"nodes": N, "links": [...]}.
    Links {
        /// Resolved medium configuration (JSON), `-` for stdin.
        config: PathBuf,
    },
    /// A virtual-time run with synthetic traffic; prints the results as JSON.
    Sim {
        /// Scenario (JSON), `-` for stdin.
        scenario: PathBuf,
    },
    /// Brings a lab up on TAP devices in network namespaces and runs it in
    /// real time until SIGTERM, SIGINT or a shutdown request.
    Tap {
        /// Lab configuration (JSON), `-` for stdin.
        #[arg(long)]
        config: PathBuf,
    },
}

fn links(path: &Path) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let medium_config = MediumConfig::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config::display_source(path)))?;
    let medium = Medium::<()>::new(medium_config).context("medium")?;
    let report = serde_json::json!({"nodes": medium.node_count(), "links": medium.links(0)});
    println!("{report}");
    Ok(())
}

fn sim(path: &Path) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let source = config::display_source(path);
    let scenario = Scenario::from_json(&text).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    let output = meshemu_model::sim::run(&scenario).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    println!("{}", serde_json::to_string(&output).context("serializing the results")?);
    Ok(())
}

fn tap(path: &Path) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let lab = LabConfig::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config::display_source(path)))?;
    meshemu_medium::tap::run(lab)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Links { config } => links(config),
        Command::Sim { scenario } => sim(scenario),
        Command::Tap { config } => tap(config),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meshemu-medium: {e:#}");
            ExitCode::FAILURE
        }
    }
}
