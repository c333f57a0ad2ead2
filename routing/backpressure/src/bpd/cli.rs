//! The command line, turned into a checked configuration.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use meshemu_backpressure::beacon::DEFAULT_PORT;
use meshemu_backpressure::downstream::Knowledge;
use meshemu_backpressure::flow::ClassifyBy;
use meshemu_backpressure::scheduler::{Config, Mode, Verdict};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Fifo,
    Fq,
    Backpressure,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KnowledgeArg {
    Overhear,
    Beacon,
    Oracle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerdictArg {
    Accept,
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IptablesArg {
    /// Add the NFQUEUE rule at start, delete it at exit.
    Auto,
    /// The caller manages the rule.
    None,
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (write e.g. 200ms, 2s, 50us)"))
}

fn classify(text: &str) -> Result<ClassifyBy, String> {
    text.parse()
}

/// Per-flow fair queuing and hop-by-hop backpressure for the packets a node
/// sends on one interface (forwarded and its own), through NFQUEUE.
#[derive(Debug, Parser)]
#[command(name = "bpd", version, about)]
pub struct Args {
    /// fifo: pass through (the baseline); fq: per-flow round-robin queues;
    /// backpressure: fq, and stop sending a flow to a neighbour whose queue
    /// for it holds --threshold packets
    #[arg(long, value_enum, default_value = "fq")]
    pub mode: ModeArg,
    /// What makes a flow: source, destination, next-hop or previous-hop
    /// (backpressure needs source or destination)
    #[arg(long, value_parser = classify, default_value = "source")]
    pub classify: ClassifyBy,
    /// Backpressure threshold, packets; also each flow's buffer in this mode
    #[arg(long)]
    pub threshold: Option<u32>,
    /// Per-flow buffer of fq mode, packets
    #[arg(long)]
    pub flow_limit: Option<u32>,
    /// Packets held by all flows together
    #[arg(long, default_value_t = 4096)]
    pub total_limit: u32,
    /// How neighbours' queue lengths are known (backpressure)
    #[arg(long, value_enum, default_value = "overhear")]
    pub knowledge: KnowledgeArg,
    /// Beacon period (0 = no beacons); default 50ms with --knowledge beacon,
    /// else 0 (with overhear, beacons correct the overhearing's drift)
    #[arg(long, value_parser = duration)]
    pub beacon_period: Option<Duration>,
    /// UDP port of beacons (give it priority in the lab: LAB.json priority_udp_ports)
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub beacon_port: u16,
    /// Oracle table shared by the lab's daemons (needed by --knowledge oracle)
    #[arg(long)]
    pub oracle: Option<PathBuf>,
    /// How often held flows re-read the oracle table
    #[arg(long, value_parser = duration, default_value = "1ms")]
    pub oracle_poll: Duration,
    /// A packet sent to a neighbour and not heard forwarded within this is forgotten
    #[arg(long, value_parser = duration, default_value = "200ms")]
    pub overhear_timeout: Duration,
    /// The radio statistics page: auto (this node's, found through its
    /// network namespace), none (release at once), or a path
    #[arg(long, default_value = "auto")]
    pub radio: String,
    /// Release while fewer than this many released packets are still in the radio
    #[arg(long, default_value_t = 2)]
    pub radio_depth: u32,
    /// A packet held longer is dropped (counted as dropped_age)
    #[arg(long, value_parser = duration, default_value = "2s")]
    pub max_hold: Duration,
    /// A flow idle this long is forgotten (its counters stay in the totals)
    #[arg(long, value_parser = duration, default_value = "10s")]
    pub flow_idle: Duration,
    /// The interface whose outgoing packets are queued
    #[arg(long, default_value = "wlan0")]
    pub interface: String,
    /// This node's address (default: the interface's first IPv4 address)
    #[arg(long)]
    pub address: Option<Ipv4Addr>,
    /// NFQUEUE number
    #[arg(long, default_value_t = 0)]
    pub queue_num: u16,
    /// Packets the kernel may hold for us (default: --total-limit + 1024)
    #[arg(long)]
    pub queue_maxlen: Option<u32>,
    /// auto: add `iptables -t mangle -A POSTROUTING -o IFACE -j NFQUEUE
    /// --queue-num N --queue-bypass` at start and delete it at exit; none: the caller does
    #[arg(long, value_enum, default_value = "auto")]
    pub iptables: IptablesArg,
    /// UDP destination ports passed at once, never queued (routing control);
    /// the beacon port always is
    #[arg(long = "bypass-udp-port", default_values_t = [654u16, 698, 6696])]
    pub bypass_udp_ports: Vec<u16>,
    /// Verdict for the packets still held when the daemon stops
    #[arg(long, value_enum, default_value = "accept")]
    pub exit_verdict: VerdictArg,
    /// Counters file (JSON), rewritten every second and at exit
    #[arg(long)]
    pub counters: Option<PathBuf>,
    /// Verdicts sent per system call at most (1: one each)
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
}

/// Where the radio backlog comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RadioSource {
    OwnPage,
    Page(PathBuf),
    None,
}

pub struct Settings {
    pub scheduler: Config,
    pub radio: RadioSource,
    pub beacon_period: Option<Duration>,
    pub exit_verdict: Verdict,
    pub queue_maxlen: u32,
}

impl Args {
    /// Checks the combination of options; errors name the option.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let backpressure = self.mode == ModeArg::Backpressure;
        if self.threshold.is_some() && !backpressure {
            bail!("--threshold is for --mode backpressure (fq limits each flow with --flow-limit)");
        }
        if self.flow_limit.is_some() && backpressure {
            bail!("--flow-limit is for --mode fq: in backpressure mode each flow's buffer is --threshold");
        }
        let mode = match self.mode {
            ModeArg::Fifo => Mode::Fifo,
            ModeArg::Fq => Mode::FairQueue,
            ModeArg::Backpressure => Mode::Backpressure { threshold: self.threshold.unwrap_or(1) },
        };
        let knowledge = match self.knowledge {
            KnowledgeArg::Overhear => Knowledge::Overhear,
            KnowledgeArg::Beacon => Knowledge::Beacon,
            KnowledgeArg::Oracle => Knowledge::Oracle,
        };
        if knowledge == Knowledge::Oracle && self.oracle.is_none() && backpressure {
            bail!("--knowledge oracle needs --oracle PATH (the table the lab's daemons share)");
        }
        let default_period = if knowledge == Knowledge::Beacon { Duration::from_millis(50) } else { Duration::ZERO };
        let beacon_period = Some(self.beacon_period.unwrap_or(default_period)).filter(|p| !p.is_zero());
        if backpressure && knowledge == Knowledge::Beacon && beacon_period.is_none() {
            bail!("--knowledge beacon needs beacons: --beacon-period must not be 0");
        }
        if self.batch == 0 {
            bail!("--batch must be at least 1");
        }
        let radio = match self.radio.as_str() {
            "auto" => RadioSource::OwnPage,
            "none" => RadioSource::None,
            path => RadioSource::Page(PathBuf::from(path)),
        };
        let scheduler = Config {
            mode,
            classify: self.classify,
            flow_limit: self.flow_limit.unwrap_or(50),
            total_limit: self.total_limit,
            radio_depth: (radio != RadioSource::None).then_some(self.radio_depth),
            max_hold: self.max_hold.as_nanos() as u64,
            flow_idle: self.flow_idle.as_nanos() as u64,
            knowledge,
            overhear_timeout: self.overhear_timeout.as_nanos() as u64,
        };
        scheduler.validate().context("bad queueing options")?;
        Ok(Settings {
            scheduler,
            radio,
            beacon_period,
            exit_verdict: match self.exit_verdict {
                VerdictArg::Accept => Verdict::Accept,
                VerdictArg::Drop => Verdict::Drop,
            },
            queue_maxlen: self.queue_maxlen.unwrap_or(self.total_limit.saturating_add(1024)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> anyhow::Result<Settings> {
        let mut argv = vec!["bpd"];
        argv.extend(args);
        Args::try_parse_from(argv)?.settings()
    }

    #[test]
    fn defaults_and_modes() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.scheduler.mode, Mode::FairQueue);
        assert_eq!(s.scheduler.per_flow_limit(), 50);
        assert_eq!((s.radio, s.beacon_period, s.queue_maxlen), (RadioSource::OwnPage, None, 4096 + 1024));
        let s = settings(&["--mode", "backpressure", "--threshold", "2", "--knowledge", "beacon"]).unwrap();
        assert_eq!(s.scheduler.per_flow_limit(), 2);
        assert_eq!(s.beacon_period, Some(Duration::from_millis(50)));
        let s = settings(&["--mode", "fq", "--radio", "none", "--classify", "previous-hop"]).unwrap();
        assert_eq!(s.scheduler.radio_depth, None);
    }

    #[test]
    fn bad_combinations_name_the_option() {
        let err = |args: &[&str]| settings(args).err().map(|e| format!("{e:#}")).unwrap();
        assert!(err(&["--threshold", "3"]).contains("--threshold"));
        assert!(err(&["--mode", "backpressure", "--flow-limit", "3"]).contains("--flow-limit"));
        assert!(err(&["--mode", "backpressure", "--knowledge", "oracle"]).contains("--oracle"));
        assert!(err(&["--mode", "backpressure", "--classify", "next-hop"]).contains("next-hop"));
        assert!(err(&["--max-hold", "soon"]).contains("--max-hold"));
        assert!(err(&["--classify", "port"]).contains("unknown classification"));
        assert!(err(&["--mode", "backpressure", "--knowledge", "beacon", "--beacon-period", "0s"]).contains("--beacon-period"));
        assert!(err(&["--mode", "backpressure", "--threshold", "0"]).contains("threshold must be at least 1"));
    }
}
