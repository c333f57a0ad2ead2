//! aodvd: the AODV routing daemon. See the crate README for the data path,
//! the config file, the counters and the event log.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use meshemu_aodv::aodv::config::PRESETS;
use meshemu_aodv::aodv::{Aodv, Config};
use meshemu_aodv::platform::link_feedback::{LinkLayer, MediumControl, RadioStatsLinks};
use meshemu_aodv::platform::{daemon, iptables, settings, DataPath};
use meshemu_radiostats::RadioStats;
use serde::Deserialize;

#[derive(Parser)]
#[command(name = "aodvd", about = "AODV (RFC 3561) routing daemon for one IPv4 interface")]
struct Args {
    /// TOML config file with an [aodv] table (protocol) and a [daemon] table (data path).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. --set aodv.hello_interval_ms=500 --set daemon.interface=wlan1.
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

#[derive(Deserialize, serde::Serialize, Default)]
#[serde(deny_unknown_fields, default)]
struct FileConfig {
    aodv: Config,
    daemon: DataPath,
}

/// `[aodv] preset = NAME`: the preset's values, with the keys given beside it on top.
fn apply_preset(table: &mut toml::Table) -> Result<()> {
    let Some(aodv) = table.get_mut("aodv").and_then(|v| v.as_table_mut()) else { return Ok(()) };
    let Some(preset) = aodv.remove("preset") else { return Ok(()) };
    let config = preset
        .as_str()
        .and_then(Config::preset)
        .ok_or_else(|| anyhow!("aodv.preset: {preset} is not one of {}", PRESETS.join(", ")))?;
    let mut merged = toml::Table::try_from(&config).context("aodv.preset")?;
    merged.extend(std::mem::take(aodv));
    *aodv = merged;
    Ok(())
}

fn load(args: &Args) -> Result<FileConfig> {
    let mut table = settings::load_table(args.config.as_deref(), &args.overrides).map_err(|e| anyhow!(e))?;
    apply_preset(&mut table)?;
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
    config.aodv.validate()?;
    config.daemon.validate().map_err(|e| anyhow!(e))?;
    Ok(config)
}

fn main() {
    let args = Args::parse();
    if let Err(error) = run(args) {
        eprintln!("aodvd: {error:#}");
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
        bail!("aodvd changes routes and netfilter rules: run it as root");
    }
    // The radio statistics page, when there is one: link-layer feedback and
    // neighbour liveness from frames received. Without it (a real node
    // without such counters), HELLOs alone judge links.
    let page_path = config.daemon.radio_stats.clone().or_else(|| RadioStats::own_path().ok());
    let page = page_path.as_deref().map(RadioStats::open).transpose().context("daemon.radio_stats")?;
    if page.is_none() && config.aodv.link_layer_feedback {
        bail!("aodv.link_layer_feedback needs the radio statistics page (daemon.radio_stats)");
    }
    // Flushes go to the medium whose page this is.
    let control = match (&page_path, config.aodv.flush_on_break) {
        (Some(path), true) => Some(
            MediumControl::of_page(path)
                .map_err(|e| anyhow!("aodv.flush_on_break needs the medium's control socket: {e}"))?,
        ),
        (None, true) => bail!("aodv.flush_on_break needs the radio statistics page (daemon.radio_stats)"),
        (_, false) => None,
    };
    let link_layer = page
        .map(|stats| RadioStatsLinks::new(stats, control).context("watching the radio statistics page"))
        .transpose()?
        .map(|links| Box::new(links) as Box<dyn LinkLayer>);
    let seed = config.daemon.seed;
    let protocol = config.aodv.clone();
    daemon::run(config.daemon, move |address, now| Aodv::new(protocol, address, seed, now), link_layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(extra: &[&str]) -> Args {
        Args::parse_from(["aodvd"].iter().chain(extra))
    }

    #[test]
    fn overrides_take_toml_values() {
        let config = load(&args(&["--set", "aodv.hello_interval_ms=500", "--set", "aodv.local_repair=true"])).unwrap();
        assert_eq!(config.aodv.hello_interval_ms, 500);
        assert!(config.aodv.local_repair);
        assert_eq!(config.aodv.active_route_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn unknown_and_bad_settings_are_named() {
        let error = load(&args(&["--set", "aodv.hello_intervall=5"])).err().unwrap().to_string();
        assert!(error.contains("hello_intervall"), "{error}");
        let error = load(&args(&["--set", "aodv.ttl_start=300"])).err().unwrap().to_string();
        assert!(error.contains("ttl_start") || error.contains("300"), "{error}");
        let error = load(&args(&["--set", "aodv.hello_interval_ms=0"])).err().unwrap().to_string();
        assert!(error.contains("aodv.hello_interval_ms"), "{error}");
        let error = load(&args(&["--set", "nonsense"])).err().unwrap().to_string();
        assert!(error.contains("TABLE.KEY=VALUE"), "{error}");
        let error = load(&args(&["--set", "aodv.preset=ns3"])).err().unwrap().to_string();
        assert!(error.contains("aodv.preset") && error.contains("ns2"), "{error}");
    }

    #[test]
    fn a_preset_is_the_base_and_keys_beside_it_win() {
        let config = load(&args(&["--set", "aodv.preset=ns2", "--set", "aodv.local_repair=false"])).unwrap();
        assert_eq!(config.aodv, Config { local_repair: false, ..Config::ns2() });
        let config = load(&args(&["--set", "aodv.preset=default"])).unwrap();
        assert_eq!(config.aodv, Config::default());
    }
}
