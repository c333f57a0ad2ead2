//! `LAB.json`, the input of `meshemu-medium tap` (emulator/README.md section 4),
//! and reading JSON inputs from a file or stdin.

use std::collections::HashSet;
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use meshemu_model::{ConfigError, MediumConfig};
use serde::de::DeserializeOwned;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabConfig {
    /// The lab's name (for messages).
    pub lab: String,
    /// Where the control socket and the statistics pages go.
    pub run_dir: PathBuf,
    pub medium: MediumConfig,
    /// `nodes[i]` is the namespace side of `medium.nodes[i]`.
    pub nodes: Vec<LabNode>,
    pub routing: Routing,
    /// UDP destination ports of routing control traffic (priority in the queue).
    #[serde(default)]
    pub priority_udp_ports: Vec<u16>,
    #[serde(default)]
    pub realtime: Realtime,
    /// Leave IPv6 on for wlan0 (link-local address only, no DAD), for
    /// daemons that speak over it (babeld).
    #[serde(default)]
    pub ipv6_link_local: bool,
    /// How the nodes' kernels keep their neighbours' link addresses.
    #[serde(default)]
    pub arp: Arp,
    /// Nodes stand at their time-0 positions until a `mobility` request
    /// resumes them: the experiment runner's time 0, so that its traffic
    /// meets the motion a simulator of the same scenario shows.
    #[serde(default)]
    pub hold_mobility: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabNode {
    pub netns: String,
    pub ipv4: Ipv4Addr,
    pub prefix_len: u8,
    pub mtu: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Minimum-hop host routes computed at start.
    Static,
    /// Only the subnet route: a routing daemon's job.
    None,
}

/// How a node's kernel keeps its neighbours' link addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arp {
    /// Linux's neighbour table as it comes: an entry goes stale 15-45 s
    /// after its last confirmation and is probed by unicast when next used.
    #[default]
    Kernel,
    /// An entry, once resolved, is not probed again in a lab's life, as in
    /// ns-2, whose ARP entries never expire.
    ResolveOnce,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Realtime {
    #[serde(default)]
    pub sched_fifo: SchedFifo,
    /// Wake this long before each deadline and spin until it.
    #[serde(default)]
    pub spin_ns: u64,
}

/// Whether the event loop runs under SCHED_FIFO (priority 50): without it,
/// the nodes' programs on the same cores delay its wake-ups by milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedFifo {
    #[default]
    Off,
    /// SCHED_FIFO if the kernel allows it, else normal scheduling and a warning.
    Auto,
    /// SCHED_FIFO or the lab does not start.
    On,
}

/// Longest spin we accept: spinning is for the last microseconds only.
const MAX_SPIN_NS: u64 = 1_000_000;
/// The TAP backend's MTU range.
const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=65521;

/// The text of `path`, `-` for stdin.
pub fn read_input(path: &Path) -> Result<String, anyhow::Error> {
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text).map_err(|e| anyhow::anyhow!("reading stdin: {e}"))?;
    } else {
        text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    }
    Ok(text)
}

pub fn display_source(path: &Path) -> String {
    if path == Path::new("-") {
        "stdin".into()
    } else {
        path.display().to_string()
    }
}

/// Parses JSON so that the error names the field (`nodes[2].mtu`).
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { "(top level)".to_string() } else { path };
        ConfigError::new(path, e.into_inner().to_string())
    })
}

/// A name that is safe as one path component and as a namespace name.
fn check_name(path: &str, name: &str) -> Result<(), ConfigError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > 200 || name == "." || name == ".." || !name.chars().all(ok_char) {
        return Err(ConfigError::new(
            path,
            format!("{name:?} is not a usable name (1-200 characters of A-Z a-z 0-9 - _ .)"),
        ));
    }
    Ok(())
}

impl LabConfig {
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let config: LabConfig = parse_json(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde's types cannot; errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("lab", &self.lab)?;
        if !self.run_dir.is_absolute() {
            return Err(ConfigError::new("run_dir", format!("{} is not an absolute path", self.run_dir.display())));
        }
        self.medium.validate().map_err(|e| ConfigError::new(format!("medium.{}", e.path), e.message))?;
        for (i, node) in self.medium.nodes.iter().enumerate() {
            check_name(&format!("medium.nodes[{i}].name"), &node.name)?;
            let mac = node.mac_address.0;
            if mac[0] & 1 == 1 || mac == [0; 6] {
                return Err(ConfigError::new(
                    format!("medium.nodes[{i}].mac_address"),
                    format!("{} is not a unicast address", node.mac_address),
                ));
            }
        }
        if self.nodes.len() != self.medium.nodes.len() {
            return Err(ConfigError::new(
                "nodes",
                format!("has {} entries but medium.nodes has {}", self.nodes.len(), self.medium.nodes.len()),
            ));
        }
        let mut namespaces = HashSet::new();
        let mut addresses = HashSet::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let at = |field: &str| format!("nodes[{i}].{field}");
            check_name(&at("netns"), &node.netns)?;
            if !namespaces.insert(node.netns.as_str()) {
                return Err(ConfigError::new(at("netns"), format!("{:?} is used by another node", node.netns)));
            }
            if !(1..=32).contains(&node.prefix_len) {
                return Err(ConfigError::new(at("prefix_len"), format!("{} is not in 1..=32", node.prefix_len)));
            }
            if node.ipv4.is_unspecified() || node.ipv4.is_multicast() || node.ipv4.is_broadcast() || node.ipv4.is_loopback() {
                return Err(ConfigError::new(at("ipv4"), format!("{} is not a usable host address", node.ipv4)));
            }
            if !addresses.insert(node.ipv4) {
                return Err(ConfigError::new(at("ipv4"), format!("{} is used by another node", node.ipv4)));
            }
            if !MTU_RANGE.contains(&node.mtu) {
                return Err(ConfigError::new(at("mtu"), format!("{} is not in {MTU_RANGE:?}", node.mtu)));
            }
        }
        if self.realtime.spin_ns > MAX_SPIN_NS {
            return Err(ConfigError::new(
                "realtime.spin_ns",
                format!("{} is more than {MAX_SPIN_NS} (1 ms)", self.realtime.spin_ns),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A valid two-node lab, ns2-wavelan-like radio.
    pub fn lab_json() -> Value {
        let radio = json!({
            "phy": "dsss", "data_rate_bps": 2000000, "basic_rate_bps": 1000000,
            "preamble": "long", "signal_extension_ns": 0, "frequency_hz": 914000000.0,
            "tx_power_dbm": 24.5, "antenna_gain_dbi": 0.0, "antenna_height_m": 1.5,
            "system_loss_db": 0.0, "propagation": {"model": "two_ray_ground"},
            "rx_threshold_dbm": -64.37, "cs_threshold_dbm": -78.07,
            "capture_threshold_db": 10.0, "capture_restart": false,
            "noise_floor_dbm": -101.0, "interference_floor_dbm": -88.0,
            "bit_error_rate": 0.0, "slot_ns": 20000, "sifs_ns": 10000,
            "cw_min": 31, "cw_max": 1023, "rts_threshold_bytes": 0,
            "short_retry_limit": 7, "long_retry_limit": 4,
            "queue_len": 50, "queue_priority": true
        });
        let node = |i: u32, x: f64| json!({
            "name": format!("n{i}"), "mac_address": format!("02:00:00:00:00:0{}", i + 1),
            "position": [x, 0.0, 0.0], "mobility": {"kind": "static"}, "radio": radio.clone()
        });
        json!({
            "lab": "t", "run_dir": "/run/meshemu/t",
            "medium": {"seed": 1, "mac": {"kind": "dcf"}, "nodes": [node(0, 0.0), node(1, 200.0)]},
            "nodes": [
                {"netns": "t-n0", "ipv4": "10.0.0.1", "prefix_len": 16, "mtu": 1500},
                {"netns": "t-n1", "ipv4": "10.0.0.2", "prefix_len": 16, "mtu": 1500}
            ],
            "routing": "static", "priority_udp_ports": [654],
            "realtime": {"sched_fifo": "off", "spin_ns": 0}
        })
    }

    fn error_of(config: Value) -> String {
        LabConfig::from_json(&config.to_string()).expect_err("config should be refused").to_string()
    }

    #[test]
    fn a_valid_lab_parses() {
        let config = LabConfig::from_json(&lab_json().to_string()).unwrap();
        assert_eq!(config.nodes[1].ipv4, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(config.routing, Routing::Static);
        assert_eq!(config.priority_udp_ports, vec![654]);
        assert!(!config.ipv6_link_local);
        assert_eq!(config.arp, Arp::Kernel);
    }

    #[test]
    fn arp_is_one_of_its_words() {
        let mut c = lab_json();
        c["arp"] = json!("resolve_once");
        assert_eq!(LabConfig::from_json(&c.to_string()).unwrap().arp, Arp::ResolveOnce);
        c["arp"] = json!("never");
        let e = error_of(c);
        assert!(e.starts_with("arp: unknown variant `never`"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let mut c = lab_json();
        c["nodes"][1]["mtu"] = json!(40);
        assert!(error_of(c).starts_with("nodes[1].mtu: 40 is not in"));

        let mut c = lab_json();
        c["nodes"][0]["colour"] = json!("red");
        let e = error_of(c);
        assert!(e.starts_with("nodes[0]") && e.contains("unknown field `colour`"), "{e}");

        let mut c = lab_json();
        c["nodes"][1]["netns"] = json!("t-n0");
        assert!(error_of(c).starts_with("nodes[1].netns: \"t-n0\" is used by another node"));

        let mut c = lab_json();
        c["nodes"][1]["netns"] = json!("../etc");
        assert!(error_of(c).starts_with("nodes[1].netns: \"../etc\" is not a usable name"));

        let mut c = lab_json();
        c["nodes"][1]["ipv4"] = json!("10.0.0.1");
        assert!(error_of(c).starts_with("nodes[1].ipv4: 10.0.0.1 is used by another node"));

        let mut c = lab_json();
        c["nodes"][1]["ipv4"] = json!("10.0.0");
        assert!(error_of(c).starts_with("nodes[1].ipv4"));

        let mut c = lab_json();
        c["nodes"].as_array_mut().unwrap().pop();
        assert_eq!(error_of(c), "nodes: has 1 entries but medium.nodes has 2");

        let mut c = lab_json();
        c["medium"]["nodes"][0]["radio"]["cw_min"] = json!(-1);
        assert!(error_of(c).starts_with("medium.nodes[0].radio.cw_min"));

        let mut c = lab_json();
        c["medium"]["nodes"][0]["mac_address"] = json!("01:00:5e:00:00:01");
        assert!(error_of(c).starts_with("medium.nodes[0].mac_address: 01:00:5e:00:00:01 is not a unicast"));

        let mut c = lab_json();
        c["routing"] = json!("ospf");
        assert!(error_of(c).starts_with("routing: unknown variant `ospf`"));

        let mut c = lab_json();
        c["run_dir"] = json!("relative/dir");
        assert!(error_of(c).starts_with("run_dir: relative/dir is not an absolute path"));

        let mut c = lab_json();
        c["realtime"]["spin_ns"] = json!(5_000_000);
        assert!(error_of(c).starts_with("realtime.spin_ns"));

        assert!(LabConfig::from_json("{").err().unwrap().to_string().contains("EOF"));
    }
}
