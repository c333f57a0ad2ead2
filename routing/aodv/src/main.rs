//! aodvd: the AODV routing daemon. See the crate README for the data path,
//! the config file, the counters and the event log.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use meshemu_aodv::config::PRESETS;
use meshemu_aodv::{Aodv, Config};
use meshemu_ondemand::link_feedback::{LinkLayer, MediumControl, RadioStatsLinks};
use meshemu_ondemand::program::{self, Daemon};
use meshemu_ondemand::DataPath;
use meshemu_radiostats::RadioStats;

struct Aodvd;

impl Daemon for Aodvd {
    type Protocol = Aodv;
    type Config = Config;
    const NAME: &'static str = "aodvd";
    const ABOUT: &'static str = "AODV (RFC 3561) routing daemon for one IPv4 interface";
    const TABLE: &'static str = "aodv";
    const EXAMPLE_SET: &'static str = "aodv.hello_interval_ms=500";

    /// `[aodv] preset = NAME`: the preset's values, with the keys given beside it on top.
    fn expand(table: &mut toml::Table) -> Result<()> {
        let Some(preset) = table.remove("preset") else { return Ok(()) };
        let config = preset
            .as_str()
            .and_then(Config::preset)
            .ok_or_else(|| anyhow!("aodv.preset: {preset} is not one of {}", PRESETS.join(", ")))?;
        let mut merged = toml::Table::try_from(&config).context("aodv.preset")?;
        merged.extend(std::mem::take(table));
        *table = merged;
        Ok(())
    }

    fn validate(config: &Config) -> Result<()> {
        Ok(config.validate()?)
    }

    /// The radio statistics page, when there is one: link-layer feedback and
    /// neighbour liveness from frames received. Without it (a real node
    /// without such counters), HELLOs alone judge links.
    fn link_layer(config: &Config, data_path: &DataPath) -> Result<Option<Box<dyn LinkLayer>>> {
        let page_path = data_path.radio_stats.clone().or_else(|| RadioStats::own_path().ok());
        let page = page_path.as_deref().map(RadioStats::open).transpose().context("daemon.radio_stats")?;
        if page.is_none() && config.link_layer_feedback {
            bail!("aodv.link_layer_feedback needs the radio statistics page (daemon.radio_stats)");
        }
        // Flushes go to the medium whose page this is.
        let control = match (&page_path, config.flush_on_break) {
            (Some(path), true) => Some(
                MediumControl::of_page(path)
                    .map_err(|e| anyhow!("aodv.flush_on_break needs the medium's control socket: {e}"))?,
            ),
            (None, true) => bail!("aodv.flush_on_break needs the radio statistics page (daemon.radio_stats)"),
            (_, false) => None,
        };
        let links = page.map(|stats| RadioStatsLinks::new(stats, config.link_failures, control).context("watching the radio statistics page"));
        Ok(links.transpose()?.map(|links| Box::new(links) as Box<dyn LinkLayer>))
    }

    fn protocol(config: Config, address: Ipv4Addr, seed: u64, now: Duration) -> Aodv {
        Aodv::new(config, address, seed, now)
    }
}

fn main() {
    program::main::<Aodvd>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshemu_ondemand::program::{Args, Settings};

    fn load(args: &Args) -> Result<Settings<Config>> {
        program::load::<Aodvd>(args)
    }

    fn args(extra: &[&str]) -> Args {
        Args::parse_for::<Aodvd>(["aodvd"].iter().chain(extra))
    }

    #[test]
    fn overrides_take_toml_values() {
        let config = load(&args(&["--set", "aodv.hello_interval_ms=500", "--set", "aodv.local_repair=true"])).unwrap();
        assert_eq!(config.protocol.hello_interval_ms, 500);
        assert!(config.protocol.local_repair);
        assert_eq!(config.protocol.active_route_timeout(), Duration::from_secs(5));
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
        assert_eq!(config.protocol, Config { local_repair: false, ..Config::ns2() });
        let config = load(&args(&["--set", "aodv.preset=default"])).unwrap();
        assert_eq!(config.protocol, Config::default());
    }
}
