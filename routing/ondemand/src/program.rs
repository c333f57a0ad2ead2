//! The daemon program every on-demand protocol shares: the command line, the
//! config file (the protocol's table and `[daemon]`, `--set` overrides on
//! top), `--print-rules`, `--print-config`, logging, and then
//! [`daemon::run`]. A protocol's binary says what is its own in a
//! [`Daemon`] and calls [`main`].

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{CommandFactory, FromArgMatches, Parser};
use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use crate::link_feedback::LinkLayer;
use crate::{daemon, iptables, settings, DataPath, Protocol};

/// What is a protocol's own in its daemon program.
pub trait Daemon {
    type Protocol: Protocol;
    /// The protocol's table of the config file.
    type Config: Serialize + DeserializeOwned + Default;
    /// The program's name (`aodvd`): its help and its error messages say it.
    const NAME: &'static str;
    /// What the program is, in one line of help.
    const ABOUT: &'static str;
    /// The name of the protocol's table (`aodv`: `[aodv]`, `--set aodv.KEY=VALUE`).
    const TABLE: &'static str;
    /// An override the help gives as an example (`aodv.hello_interval_ms=500`).
    const EXAMPLE_SET: &'static str;

    /// Rewrites the protocol's table as given before it is read (a preset
    /// expanded, say); errors name the key.
    fn expand(_table: &mut toml::Table) -> Result<()> {
        Ok(())
    }
    /// Errors name the setting (`aodv.hello_interval_ms: ...`).
    fn validate(config: &Self::Config) -> Result<()>;
    /// The link layer the protocol learns from, set up for this node (None: none).
    fn link_layer(config: &Self::Config, data_path: &DataPath) -> Result<Option<Box<dyn LinkLayer>>>;
    /// The core of the node with `address`, started at `now`.
    fn protocol(config: Self::Config, address: Ipv4Addr, seed: u64, now: Duration) -> Self::Protocol;
}

#[derive(Parser)]
pub struct Args {
    /// TOML config file with the protocol's table and a [daemon] table (data path).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting (TABLE.KEY=VALUE).
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

impl Args {
    /// The command line of `D`'s program, from `argv` (its first item the
    /// program); a bad one ends the process with clap's message.
    pub fn parse_for<D: Daemon>(argv: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>) -> Args {
        let table = D::TABLE;
        let command = Args::command()
            .name(D::NAME)
            .about(D::ABOUT)
            .mut_arg("config", |arg| {
                arg.help(format!("TOML config file with the [{table}] table (protocol) and the [daemon] table (data path)"))
            })
            .mut_arg("overrides", |arg| {
                arg.help(format!("Override one setting, e.g. --set {} --set daemon.interface=wlan1", D::EXAMPLE_SET))
            });
        Args::from_arg_matches(&command.get_matches_from(argv)).unwrap_or_else(|error| error.exit())
    }
}

/// The resolved configuration: the protocol's table and `[daemon]`.
pub struct Settings<C> {
    pub protocol: C,
    pub daemon: DataPath,
}

impl<C: Serialize> Settings<C> {
    /// The configuration as a config file would give it, fields in the
    /// order the structs declare them.
    fn to_toml(&self, table: &'static str) -> Result<String> {
        struct File<'a, C>(&'static str, &'a Settings<C>);
        impl<C: Serialize> Serialize for File<'_, C> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry(self.0, &self.1.protocol)?;
                map.serialize_entry("daemon", &self.1.daemon)?;
                map.end()
            }
        }
        Ok(toml::to_string(&File(table, self))?)
    }
}

/// The config file with the overrides and the command line's own options
/// on top, checked. Errors name the file or option and the key.
pub fn load<D: Daemon>(args: &Args) -> Result<Settings<D::Config>> {
    let mut table = settings::load_table(args.config.as_deref(), &args.overrides).map_err(|e| anyhow!(e))?;
    let source = args.config.as_ref().map_or("configuration".to_string(), |p| p.display().to_string());
    let invalid = |e: toml::de::Error| anyhow!("{source}: {}", e.message());
    if let Some(unknown) = table.keys().find(|key| *key != D::TABLE && *key != "daemon") {
        bail!("{source}: unknown field `{unknown}`, expected `{}` or `daemon`", D::TABLE);
    }
    if let Some(protocol) = table.get_mut(D::TABLE).and_then(toml::Value::as_table_mut) {
        D::expand(protocol)?;
    }
    let protocol = table.remove(D::TABLE).map(D::Config::deserialize).transpose().map_err(invalid)?;
    let daemon = table.remove("daemon").map(DataPath::deserialize).transpose().map_err(invalid)?;
    let mut settings = Settings { protocol: protocol.unwrap_or_default(), daemon: daemon.unwrap_or_default() };
    if let Some(interface) = &args.interface {
        settings.daemon.interface = interface.clone();
    }
    if let Some(path) = &args.counters {
        settings.daemon.counters = Some(path.clone());
    }
    if let Some(path) = &args.events {
        settings.daemon.events = Some(path.clone());
    }
    D::validate(&settings.protocol)?;
    settings.daemon.validate().map_err(|e| anyhow!(e))?;
    Ok(settings)
}

/// The whole program of `D`: exits 1 with `NAME: error` on stderr when it fails.
pub fn main<D: Daemon>() {
    let args = Args::parse_for::<D>(std::env::args_os());
    if let Err(error) = run::<D>(args) {
        eprintln!("{}: {error:#}", D::NAME);
        std::process::exit(1);
    }
}

fn run<D: Daemon>(args: Args) -> Result<()> {
    let settings = load::<D>(&args)?;
    if args.print_rules {
        let rules = iptables::rules(&settings.daemon, &settings.daemon.interface);
        println!("{}", serde_json::to_string_pretty(&rules)?);
        return Ok(());
    }
    if args.print_config {
        print!("{}", settings.to_toml(D::TABLE)?);
        return Ok(());
    }
    match args.log_format {
        LogFormat::Json => tracing_subscriber::fmt().json().with_writer(std::io::stderr).init(),
        LogFormat::Text => tracing_subscriber::fmt().with_writer(std::io::stderr).init(),
    }
    if nix::unistd::geteuid().as_raw() != 0 {
        bail!("{} changes routes, policy rules and netfilter rules: run it as root", D::NAME);
    }
    let link_layer = D::link_layer(&settings.protocol, &settings.daemon)?;
    let seed = settings.daemon.seed;
    let protocol = settings.protocol;
    daemon::run(settings.daemon, move |address, now| D::protocol(protocol, address, seed, now), link_layer)
}
