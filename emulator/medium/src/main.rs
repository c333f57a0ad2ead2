//! `meshemu-medium`: the process that runs the meshemu medium model
//! (emulator/README.md sections 2–6).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use meshemu_medium::backend::{self, hwsim, Hwsim, Tap};
use meshemu_medium::config::{self, LabConfig};
use meshemu_model::sim::Scenario;
use meshemu_model::{routing, Medium, MediumConfig};
use serde::Deserialize;

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
    /// The first of several candidate placements in which every node
    /// reaches every other at time 0 over links that work both ways: reads
    /// {"medium": CONFIG, "candidates": [[position per node], ...]}, prints
    /// {"first_connected": index or null, "largest_components": [size per
    /// candidate examined]} (it stops at the first connected one).
    Connected {
        /// The input (JSON), `-` for stdin.
        input: PathBuf,
    },
    /// Every node's path from time 0 until at least UNTIL_NS, as the model
    /// moves it (random waypoint legs from the seed): prints
    /// {"nodes": [{"name", "trajectory": [{"t_ns", "position"}, ...]}]}.
    Mobility {
        /// Resolved medium configuration (JSON), `-` for stdin.
        config: PathBuf,
        /// Model time (ns) the paths must reach.
        #[arg(long)]
        until_ns: u64,
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
    /// As `tap`, with a mac80211_hwsim radio per node: the kernel's 802.11
    /// stack runs in the nodes, the model decides every frame's delivery.
    Hwsim {
        /// Lab configuration (JSON), `-` for stdin.
        #[arg(long)]
        config: PathBuf,
        /// How the radios join each other.
        #[arg(long, value_enum, default_value = "ibss")]
        mode: hwsim::Mode,
        /// IBSS SSID or mesh ID.
        #[arg(long, default_value = "meshemu")]
        ssid: String,
        /// Channel centre frequency in MHz (2.4 or 5 GHz band).
        #[arg(long, default_value_t = 2412)]
        frequency_mhz: u32,
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

/// Input of `connected`: a configuration and positions to try in it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Candidates {
    medium: MediumConfig,
    candidates: Vec<Vec<[f64; 3]>>,
}

fn connected(path: &Path) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let source = config::display_source(path);
    let input: Candidates = config::parse_json(&text).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    let seed = input.medium.seed;
    let nodes = input.medium.nodes.clone();
    // One medium for every candidate: each node is put where its mobility
    // starts from the candidate's position, as a medium made from that
    // placement would start it.
    let mut medium = Medium::<()>::new(input.medium).map_err(|e| anyhow::anyhow!("{source}: medium.{e}"))?;
    let mut first_connected = None;
    let mut largest_components = Vec::new();
    for (index, positions) in input.candidates.iter().enumerate() {
        if positions.len() != nodes.len() {
            anyhow::bail!("{source}: candidates[{index}]: {} positions for {} nodes", positions.len(), nodes.len());
        }
        for (node, (config, position)) in nodes.iter().zip(positions).enumerate() {
            if !position.iter().all(|v| v.is_finite()) {
                anyhow::bail!("{source}: candidates[{index}][{node}]: {position:?} is not a finite position");
            }
            let start = meshemu_model::mobility::start_position(&config.mobility, *position, seed, node);
            medium.set_position(0, node, start);
        }
        let largest = routing::largest_component(nodes.len(), &medium.links(0));
        largest_components.push(largest);
        if largest == nodes.len() {
            first_connected = Some(index);
            break;
        }
    }
    println!("{}", serde_json::json!({"first_connected": first_connected, "largest_components": largest_components}));
    Ok(())
}

fn mobility(path: &Path, until_ns: u64) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let medium_config = MediumConfig::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config::display_source(path)))?;
    // Validation only: the paths come from the configuration, as the medium's own.
    Medium::<()>::new(medium_config.clone()).context("medium")?;
    let nodes: Vec<_> = medium_config
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let points = meshemu_model::mobility::trajectory(&node.mobility, node.position, medium_config.seed, index, until_ns);
            serde_json::json!({"name": node.name, "trajectory": points})
        })
        .collect();
    println!("{}", serde_json::json!({"nodes": nodes}));
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
    backend::run(lab, &Tap)
}

fn hwsim(path: &Path, options: hwsim::Options) -> anyhow::Result<()> {
    let text = config::read_input(path)?;
    let lab = LabConfig::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config::display_source(path)))?;
    if options.ssid.is_empty() || options.ssid.len() > 32 {
        anyhow::bail!("--ssid: {:?} is not 1 to 32 bytes long", options.ssid);
    }
    backend::run(lab, &Hwsim(options))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Links { config } => links(config),
        Command::Connected { input } => connected(input),
        Command::Mobility { config, until_ns } => mobility(config, *until_ns),
        Command::Sim { scenario } => sim(scenario),
        Command::Tap { config } => tap(config),
        Command::Hwsim { config, mode, ssid, frequency_mhz } => hwsim(
            config,
            hwsim::Options { mode: *mode, ssid: ssid.clone(), frequency_mhz: *frequency_mhz },
        ),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meshemu-medium: {e:#}");
            ExitCode::FAILURE
        }
    }
}
