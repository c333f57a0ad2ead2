//! copasd: the COPAS routing daemon. See the crate README for the paths,
//! the data path, the config file, the counters and the event log.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{Context, Result};
use meshemu_copas::{Config, Copas};
use meshemu_ondemand::link_feedback::{FailedFrames, LinkLayer, RadioStatsLinks};
use meshemu_ondemand::program::{self, Daemon};
use meshemu_ondemand::DataPath;
use meshemu_radiostats::RadioStats;

struct Copasd;

impl Daemon for Copasd {
    type Protocol = Copas;
    type Config = Config;
    const NAME: &'static str = "copasd";
    const ABOUT: &'static str = "COPAS routing daemon: disjoint forward and reverse paths chosen by MAC contention";
    const TABLE: &'static str = "copas";
    const EXAMPLE_SET: &'static str = "copas.backoff_thres=8";

    fn validate(config: &Config) -> Result<()> {
        Ok(config.validate()?)
    }

    /// Contention comes from the MAC's backoff counters and link breaks from
    /// its per-peer drops: here the medium's radio statistics page; on real
    /// hardware, another LinkLayer reading the driver's counters.
    fn link_layer(_config: &Config, data_path: &DataPath) -> Result<Option<Box<dyn LinkLayer>>> {
        let page = match &data_path.radio_stats {
            Some(path) => RadioStats::open(path).context("daemon.radio_stats")?,
            None => RadioStats::open_own()
                .context("COPAS needs the MAC's counters: no radio statistics page for this node (set daemon.radio_stats)")?,
        };
        let links = RadioStatsLinks::new(page, FailedFrames::Any, None).context("watching the radio statistics page")?;
        Ok(Some(Box::new(links)))
    }

    fn protocol(config: Config, address: Ipv4Addr, seed: u64, now: Duration) -> Copas {
        Copas::new(config, address, seed, now)
    }
}

fn main() {
    program::main::<Copasd>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshemu_ondemand::program::{Args, Settings};

    fn load(args: &Args) -> Result<Settings<Config>> {
        program::load::<Copasd>(args)
    }

    fn args(extra: &[&str]) -> Args {
        Args::parse_for::<Copasd>(["copasd"].iter().chain(extra))
    }

    #[test]
    fn overrides_take_toml_values() {
        let config = load(&args(&["--set", "copas.backoff_thres=8.5", "--set", "daemon.seed=3"])).unwrap();
        assert_eq!(config.protocol.backoff_thres, 8.5);
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
