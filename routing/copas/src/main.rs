//! copasd: the COPAS routing daemon. See the crate README for the paths,
//! the data path, the config file, the counters and the event log.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use meshemu_aodv::platform::link_feedback::{LinkLayer, RadioStatsLinks};
use meshemu_aodv::platform::{daemon, iptables, settings, DataPath};
use meshemu_copas::{Config, Copas};
use meshemu_radiostats::RadioStats;
use serde::{Deserialize, Serialize};

#[derive(Parser)]
#[command(name = "copasd", about = "COPAS routing daemon: disjoint forward and reverse paths chosen by MAC contention")]
struct Args {
    /// TOML config file with a [copas] table (protocol) and a [daemon] table (data path).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. --set copas.backoff_thres=8 --set daemon.interface=wlan1.
    #[arg(long = "set", value_name = "TABLE.KEY=VALUE")]
    overrides: Vec<String>,
    /// The interface to route on (daemon.interface).
    #[arg(long)]
    interface: Option<String>,
    /// Where to rewrite the counters JSON (daemon.counters).
    #[arg(long)]
    counters: Option<PathBuf>,
    /// Where to append protocol events as JSON lines (daemon.events).
    #[arg(long)]
    events: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
    /// Print the iptables rules the daemon adds (JSON) and exit.
    #[arg(long)]
    print_rules: bool,
    /// Print the resolved configuration (TOML) and exit.
    #[arg(long)]
    print_config: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
struct FileConfig {
    copas: Config,
    daemon: DataPath,
}

fn load(args: &Args) -> Result<FileConfig> {
    let table = settings::load_table(args.config.as_deref(), &args.overrides).map_err(|e| anyhow!(e))?;
    let mut config: FileConfig = table.try_into().map_err(|e: toml::de::Error| {
        let source = args.config.as_ref().map_or("configuration".to_string(), |p| p.display().to_string());
        anyhow!("{source}: {}", e.message())
    })?;
    if let Some(interface) = &args.interface {
        config.daemon.interface = interface.clone();
    }
    if let Some(path) = &args.counters {
        config.daemon.counters = Some(path.clone());
    }
    if let Some(path) = &args.events {
        config.daemon.events = Some(path.clone());
    }
    config.copas.validate()?;
    config.daemon.validate().map_err(|e| anyhow!(e))?;
    Ok(config)
}

fn main() {
    let args = Args::parse();
    if let Err(error) = run(args) {
        eprintln!("copasd: {error:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    let config = load(&args)?;
    if args.print_rules {
        println!("{}", serde_json::to_string_pretty(&iptables::rules(&config.daemon, &config.daemon.interface))?);
        return Ok(());
    }
    if args.print_config {
        print!("{}", toml::to_string(&config)?);
        return Ok(());
    }
    match args.log_format {
        LogFormat::Json => tracing_subscriber::fmt().json().with_writer(std::io::stderr).init(),
        LogFormat::Text => tracing_subscriber::fmt().with_writer(std::io::stderr).init(),
    }
    if nix::unistd::geteuid().as_raw() != 0 {
        bail!("copasd changes routes, policy rules and netfilter rules: run it as root");
    }
    // Contention comes from the MAC's backoff counters and link breaks from
    // its per-peer drops: here the medium's radio statistics page; on real
    // hardware, another LinkLayer reading the driver's counters.
    let page = match &config.daemon.radio_stats {
        Some(path) => RadioStats::open(path).context("daemon.radio_stats")?,
        None => RadioStats::open_own()
            .context("COPAS needs the MAC's counters: no radio statistics page for this node (set daemon.radio_stats)")?,
    };
    let links = RadioStatsLinks::new(page, None).context("watching the radio statistics page")?;
    let link_layer = Some(Box::new(links) as Box<dyn LinkLayer>);
    let seed = config.daemon.seed;
    let protocol = config.copas.clone();
    daemon::run(config.daemon, move |address, now| Copas::new(protocol, address, seed, now), link_layer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        Args::parse_from(["copasd"].iter().chain(extra))
    }

    #[test]
    fn overrides_take_toml_values() {
        let config = load(&args(&["--set", "copas.backoff_thres=8.5", "--set", "daemon.seed=3"])).unwrap();
        assert_eq!(config.copas.backoff_thres, 8.5);
        assert_eq!(config.daemon.seed, 3);
    }

    #[test]
    fn unknown_and_bad_settings_are_named() {
        let error = load(&args(&["--set", "copas.t_colect_ms=5"])).err().unwrap().to_string();
        assert!(error.contains("t_colect_ms"), "{error}");
        let error = load(&args(&["--set", "copas.alpha=2"])).err().unwrap().to_string();
        assert!(error.contains("copas.alpha"), "{error}");
        let error = load(&args(&["--set", "aodv.hello_interval_ms=5"])).err().unwrap().to_string();
        assert!(error.contains("aodv"), "{error}");
    }
}
