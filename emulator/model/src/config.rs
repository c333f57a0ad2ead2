//! The resolved medium configuration (emulator/README.md section 1) and its
//! validation. Every value is in SI units and explicit; the control plane
//! resolves profiles and units before the model sees them.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::phy::{self, Phy};
use crate::NodeId;

/// A configuration value that is wrong, with the dotted path of the field
/// (`nodes[3].radio.cw_min`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediumConfig {
    /// Root of every random stream of the run.
    pub seed: u64,
    pub mac: MacConfig,
    pub nodes: Vec<NodeConfig>,
    #[serde(default)]
    pub links: Vec<LinkConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MacConfig {
    Dcf,
    /// Fixed slots, one frame per slot, round-robin over the nodes.
    /// `slot_ns` 0 = derived: the longest [`crate::phy::tdma_exchange_ns`] of a full frame over the nodes.
    Tdma { slot_ns: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub name: String,
    pub mac_address: MacAddr,
    pub position: [f64; 3],
    #[serde(default)]
    pub promiscuous: bool,
    pub mobility: MobilityConfig,
    pub radio: RadioConfig,
}

/// A 48-bit MAC address, written `02:00:00:00:00:01` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl std::str::FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a MAC address like 02:00:00:00:00:01");
        let mut bytes = [0u8; 6];
        let mut parts = s.split(':');
        for b in bytes.iter_mut() {
            let part = parts.next().ok_or_else(bad)?;
            if part.len() != 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(bytes))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MobilityConfig {
    Static,
    /// Straight lines between consecutive points; the first point is held
    /// before its time, the last after.
    Waypoints { points: Vec<Waypoint> },
    /// ns-2 `setdest`: at `t_ns` start moving from wherever the node is toward
    /// `target` at `speed_mps`, stop there; a later move replaces the current.
    Setdest { moves: Vec<SetdestMove> },
    RandomWaypoint {
        area: Area,
        speed_mps: Range,
        pause_ns: Range,
        /// Draw the initial state from the stationary distribution.
        steady_state: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waypoint {
    pub t_ns: u64,
    pub position: [f64; 3],
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetdestMove {
    pub t_ns: u64,
    pub target: [f64; 3],
    pub speed_mps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Area {
    pub min: [f64; 2],
    pub max: [f64; 2],
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preamble {
    Long,
    Short,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RadioConfig {
    pub phy: Phy,
    pub data_rate_bps: u64,
    pub basic_rate_bps: u64,
    pub preamble: Preamble,
    pub signal_extension_ns: u64,
    pub frequency_hz: f64,
    pub tx_power_dbm: f64,
    pub antenna_gain_dbi: f64,
    pub antenna_height_m: f64,
    pub system_loss_db: f64,
    pub propagation: Propagation,
    pub rx_threshold_dbm: f64,
    pub cs_threshold_dbm: f64,
    pub capture_threshold_db: f64,
    pub capture_restart: bool,
    pub noise_floor_dbm: f64,
    pub interference_floor_dbm: f64,
    pub bit_error_rate: f64,
    pub slot_ns: u64,
    pub sifs_ns: u64,
    pub cw_min: u32,
    pub cw_max: u32,
    pub rts_threshold_bytes: u32,
    pub short_retry_limit: u32,
    pub long_retry_limit: u32,
    pub queue_len: u32,
    pub queue_priority: bool,
    /// ns-2: a frame that starts arriving while the node transmits still
    /// takes its receiver (it is lost, and the node is receiving until it
    /// ends), and a reception cut by the node's own transmission keeps the
    /// receiver until its end.
    #[serde(default)]
    pub receive_during_tx: bool,
    /// ns-2: a failed reception sets the NAV to EIFS (the countdown then
    /// waits DIFS more), and a sensed frame that arrives during a reception
    /// and is captured sets it to its own end plus EIFS.
    #[serde(default)]
    pub eifs_nav: bool,
    /// ns-2: SIFS after an RTS the CTS goes out, and SIFS after a CTS the
    /// DATA, only if the node is neither receiving nor under NAV; otherwise
    /// the CTS is not sent, and the DATA waits for a new RTS (CW doubled,
    /// no retry counted).
    #[serde(default)]
    pub responses_need_idle: bool,
    /// A unicast frame dropped at the retry limit takes with it every
    /// queued frame to the same receiver (ns-2 AODV's link-failure handling).
    #[serde(default)]
    pub retry_drop_flush: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum Propagation {
    FreeSpace,
    /// Friis below the crossover distance 4·π·ht·hr/λ, two-ray ground above.
    TwoRayGround,
    /// Free space up to `reference_distance_m`, then `exponent`·10 dB/decade.
    LogDistance { exponent: f64, reference_distance_m: f64 },
    /// Log-distance plus a normal draw of `sigma_db`.
    Shadowing { exponent: f64, reference_distance_m: f64, sigma_db: f64, per: ShadowingPer },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShadowingPer {
    /// A new draw for every frame and receiver (ns-2's Shadowing).
    Frame,
    /// One draw per node pair, symmetric, fixed for the run.
    Link,
}

/// Per-pair override, symmetric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub a: NodeId,
    pub b: NodeId,
    /// Replaces the radios' bit error rate for this pair.
    #[serde(default)]
    pub bit_error_rate: Option<f64>,
    /// Added path loss (a wall), dB.
    #[serde(default)]
    pub extra_loss_db: f64,
}

impl LinkConfig {
    pub fn link(&self) -> LinkOverride {
        LinkOverride { bit_error_rate: self.bit_error_rate, extra_loss_db: self.extra_loss_db }
    }
}

/// What [`crate::Medium::set_link`] changes for a pair.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkOverride {
    /// Replaces the radios' bit error rate for this pair.
    #[serde(default)]
    pub bit_error_rate: Option<f64>,
    /// Added path loss (a wall), dB.
    #[serde(default)]
    pub extra_loss_db: f64,
}

impl MediumConfig {
    /// Parses the JSON of section 1; errors name the offending field.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let cfg: MediumConfig = parse_json(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks every value that serde's types cannot; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes.is_empty() {
            return Err(ConfigError::new("nodes", "must have at least one node"));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let at = |field: &str| format!("nodes[{i}].{field}");
            if node.name.is_empty() {
                return Err(ConfigError::new(at("name"), "must not be empty"));
            }
            if let Some(j) = self.nodes[..i].iter().position(|n| n.name == node.name) {
                return Err(ConfigError::new(at("name"), format!("{:?} is also the name of nodes[{j}]", node.name)));
            }
            if let Some(j) = self.nodes[..i].iter().position(|n| n.mac_address == node.mac_address) {
                return Err(ConfigError::new(at("mac_address"), format!("{} is also the address of nodes[{j}]", node.mac_address)));
            }
            check_point(&at("position"), &node.position)?;
            validate_mobility(&at("mobility"), &node.mobility)?;
            node.radio.validate(&at("radio"))?;
        }
        for (k, link) in self.links.iter().enumerate() {
            let at = |field: &str| format!("links[{k}].{field}");
            for (name, v) in [("a", link.a), ("b", link.b)] {
                if v >= self.nodes.len() {
                    return Err(ConfigError::new(at(name), format!("node index {v} out of range (there are {} nodes)", self.nodes.len())));
                }
            }
            if link.a == link.b {
                return Err(ConfigError::new(at("b"), "must differ from a"));
            }
            link.link().validate(&format!("links[{k}]"))?;
        }
        if let MacConfig::Tdma { slot_ns } = self.mac {
            let needed = self.nodes.iter().map(|n| phy::tdma_exchange_ns(&n.radio, phy::TDMA_MAX_PACKET_BYTES)).max().unwrap_or(0);
            if slot_ns != 0 && slot_ns < needed {
                return Err(ConfigError::new(
                    "mac.slot_ns",
                    format!("{slot_ns} ns is too short for a {}-byte packet, SIFS and ACK ({needed} ns); use 0 for the default", phy::TDMA_MAX_PACKET_BYTES),
                ));
            }
        }
        Ok(())
    }
}

/// Deserializes JSON so that errors carry the path of the field.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { "(top level)".to_string() } else { path };
        ConfigError::new(path, e.into_inner().to_string())
    })
}

fn check_finite(path: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(ConfigError::new(path, format!("must be a finite number, not {v}")))
    }
}

fn check_point(path: &str, p: &[f64]) -> Result<(), ConfigError> {
    for (k, v) in p.iter().enumerate() {
        check_finite(&format!("{path}[{k}]"), *v)?;
    }
    Ok(())
}

fn check_range(path: &str, r: &Range, min_allowed: f64, strict: bool) -> Result<(), ConfigError> {
    check_finite(&format!("{path}.min"), r.min)?;
    check_finite(&format!("{path}.max"), r.max)?;
    let ok = if strict { r.min > min_allowed } else { r.min >= min_allowed };
    if !ok {
        let op = if strict { ">" } else { ">=" };
        return Err(ConfigError::new(format!("{path}.min"), format!("must be {op} {min_allowed}")));
    }
    if r.max < r.min {
        return Err(ConfigError::new(format!("{path}.max"), format!("must be >= min ({})", r.min)));
    }
    Ok(())
}

fn validate_mobility(path: &str, m: &MobilityConfig) -> Result<(), ConfigError> {
    match m {
        MobilityConfig::Static => {}
        MobilityConfig::Waypoints { points } => {
            if points.is_empty() {
                return Err(ConfigError::new(format!("{path}.points"), "must have at least one point"));
            }
            for (k, p) in points.iter().enumerate() {
                check_point(&format!("{path}.points[{k}].position"), &p.position)?;
                if k > 0 && p.t_ns < points[k - 1].t_ns {
                    return Err(ConfigError::new(format!("{path}.points[{k}].t_ns"), "times must not decrease"));
                }
            }
        }
        MobilityConfig::Setdest { moves } => {
            for (k, mv) in moves.iter().enumerate() {
                check_point(&format!("{path}.moves[{k}].target"), &mv.target)?;
                let sp = format!("{path}.moves[{k}].speed_mps");
                check_finite(&sp, mv.speed_mps)?;
                if mv.speed_mps <= 0.0 {
                    return Err(ConfigError::new(sp, "must be > 0"));
                }
                if k > 0 && mv.t_ns < moves[k - 1].t_ns {
                    return Err(ConfigError::new(format!("{path}.moves[{k}].t_ns"), "times must not decrease"));
                }
            }
        }
        MobilityConfig::RandomWaypoint { area, speed_mps, pause_ns, .. } => {
            check_point(&format!("{path}.area.min"), &area.min)?;
            check_point(&format!("{path}.area.max"), &area.max)?;
            for k in 0..2 {
                if area.max[k] < area.min[k] {
                    return Err(ConfigError::new(format!("{path}.area.max[{k}]"), format!("must be >= area.min[{k}] ({})", area.min[k])));
                }
            }
            check_range(&format!("{path}.speed_mps"), speed_mps, 0.0, true)?;
            check_range(&format!("{path}.pause_ns"), pause_ns, 0.0, false)?;
        }
    }
    Ok(())
}

impl RadioConfig {
    /// Validates every field; `path` is where this radio sits (`nodes[2].radio`).
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let at = |field: &str| format!("{path}.{field}");
        let rates = phy::rates_bps(self.phy);
        for (name, rate) in [("data_rate_bps", self.data_rate_bps), ("basic_rate_bps", self.basic_rate_bps)] {
            if !rates.contains(&rate) {
                let mbps = |bps: u64| bps as f64 / 1e6;
                let listed: Vec<String> = rates.iter().map(|&r| format!("{}Mbps", mbps(r))).collect();
                let phy = self.phy.name();
                return Err(ConfigError::new(at(name), format!("{} Mbit/s is not a {phy} rate (use {}, or another phy)", mbps(rate), listed.join(", "))));
            }
        }
        for (name, v) in [
            ("frequency_hz", self.frequency_hz),
            ("tx_power_dbm", self.tx_power_dbm),
            ("antenna_gain_dbi", self.antenna_gain_dbi),
            ("antenna_height_m", self.antenna_height_m),
            ("system_loss_db", self.system_loss_db),
            ("rx_threshold_dbm", self.rx_threshold_dbm),
            ("cs_threshold_dbm", self.cs_threshold_dbm),
            ("capture_threshold_db", self.capture_threshold_db),
            ("noise_floor_dbm", self.noise_floor_dbm),
            ("interference_floor_dbm", self.interference_floor_dbm),
            ("bit_error_rate", self.bit_error_rate),
        ] {
            check_finite(&at(name), v)?;
        }
        if self.frequency_hz <= 0.0 {
            return Err(ConfigError::new(at("frequency_hz"), "must be > 0"));
        }
        for (name, v) in [("antenna_height_m", self.antenna_height_m), ("system_loss_db", self.system_loss_db), ("capture_threshold_db", self.capture_threshold_db)] {
            if v < 0.0 {
                return Err(ConfigError::new(at(name), "must be >= 0"));
            }
        }
        if self.cs_threshold_dbm > self.rx_threshold_dbm {
            return Err(ConfigError::new(
                at("cs_threshold_dbm"),
                format!(
                    "cs_threshold_dbm ({:.2} dBm) is above rx_threshold_dbm ({:.2} dBm): every frame that can be received must also be sensed",
                    self.cs_threshold_dbm, self.rx_threshold_dbm
                ),
            ));
        }
        if self.interference_floor_dbm > self.cs_threshold_dbm {
            return Err(ConfigError::new(
                at("interference_floor_dbm"),
                format!(
                    "interference_floor_dbm ({:.2} dBm) is above cs_threshold_dbm ({:.2} dBm): signals that are sensed must be tracked",
                    self.interference_floor_dbm, self.cs_threshold_dbm
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.bit_error_rate) {
            return Err(ConfigError::new(at("bit_error_rate"), "must be in [0, 1]"));
        }
        for (name, v) in [("slot_ns", self.slot_ns), ("sifs_ns", self.sifs_ns)] {
            if v == 0 {
                return Err(ConfigError::new(at(name), "must be >= 1"));
            }
        }
        for (name, v) in [("cw_min", self.cw_min), ("short_retry_limit", self.short_retry_limit), ("long_retry_limit", self.long_retry_limit), ("queue_len", self.queue_len)] {
            if v == 0 {
                return Err(ConfigError::new(at(name), "must be >= 1"));
            }
        }
        if self.cw_min > self.cw_max {
            return Err(ConfigError::new(at("cw_min"), format!("cw_min ({}) is above cw_max ({})", self.cw_min, self.cw_max)));
        }
        match self.propagation {
            Propagation::FreeSpace | Propagation::TwoRayGround => {}
            Propagation::LogDistance { exponent, reference_distance_m } | Propagation::Shadowing { exponent, reference_distance_m, .. } => {
                let pp = at("propagation");
                check_finite(&format!("{pp}.exponent"), exponent)?;
                check_finite(&format!("{pp}.reference_distance_m"), reference_distance_m)?;
                if exponent <= 0.0 {
                    return Err(ConfigError::new(format!("{pp}.exponent"), "must be > 0"));
                }
                if reference_distance_m <= 0.0 {
                    return Err(ConfigError::new(format!("{pp}.reference_distance_m"), "must be > 0"));
                }
                if let Propagation::Shadowing { sigma_db, .. } = self.propagation {
                    check_finite(&format!("{pp}.sigma_db"), sigma_db)?;
                    if sigma_db < 0.0 {
                        return Err(ConfigError::new(format!("{pp}.sigma_db"), "must be >= 0"));
                    }
                }
            }
        }
        Ok(())
    }
}

impl LinkOverride {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(ber) = self.bit_error_rate {
            if !(0.0..=1.0).contains(&ber) {
                return Err(ConfigError::new(format!("{path}.bit_error_rate"), "must be in [0, 1]"));
            }
        }
        check_finite(&format!("{path}.extra_loss_db"), self.extra_loss_db)?;
        if self.extra_loss_db < 0.0 {
            return Err(ConfigError::new(format!("{path}.extra_loss_db"), "must be >= 0"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phy::tests::wavelan;

    fn one_node_json(radio_patch: &str) -> String {
        let mut radio = serde_json::to_value(wavelan()).unwrap();
        let patch: serde_json::Value = serde_json::from_str(radio_patch).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            radio[k] = v.clone();
        }
        serde_json::json!({
            "seed": 1,
            "mac": {"kind": "dcf"},
            "nodes": [
                {"name": "n0", "mac_address": "02:00:00:00:00:01", "position": [0.0, 0.0, 0.0], "mobility": {"kind": "static"}, "radio": wavelan()},
                {"name": "n1", "mac_address": "02:00:00:00:00:02", "position": [10.0, 0.0, 0.0], "mobility": {"kind": "static"}, "radio": radio},
            ]
        })
        .to_string()
    }

    fn error_of(text: &str) -> String {
        MediumConfig::from_json(text).expect_err("must be rejected").to_string()
    }

    #[test]
    fn valid_config_round_trips() {
        let cfg = MediumConfig::from_json(&one_node_json("{}")).unwrap();
        assert_eq!(cfg.nodes[1].mac_address, MacAddr([2, 0, 0, 0, 0, 2]));
        let again = MediumConfig::from_json(&serde_json::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(cfg, again);
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(error_of(&one_node_json(r#"{"cw_min": 0}"#)), "nodes[1].radio.cw_min: must be >= 1");
        let unknown = error_of(&one_node_json(r#"{"cw_mni": 3}"#));
        assert!(unknown.starts_with("nodes[1].radio.cw_mni: unknown field `cw_mni`"), "{unknown}");
        assert_eq!(
            error_of(&one_node_json(r#"{"data_rate_bps": 5500000, "basic_rate_bps": 3000000}"#)),
            "nodes[1].radio.basic_rate_bps: 3 Mbit/s is not a dsss rate (use 1Mbps, 2Mbps, 5.5Mbps, 11Mbps, or another phy)"
        );
        assert_eq!(
            error_of(&one_node_json(r#"{"cs_threshold_dbm": -50.0}"#)),
            "nodes[1].radio.cs_threshold_dbm: cs_threshold_dbm (-50.00 dBm) is above rx_threshold_dbm (-64.37 dBm): every frame that can be received must also be sensed"
        );
        assert!(error_of(&one_node_json(r#"{"interference_floor_dbm": -70.0}"#))
            .starts_with("nodes[1].radio.interference_floor_dbm: interference_floor_dbm (-70.00 dBm) is above cs_threshold_dbm (-78.07 dBm)"));
        assert_eq!(error_of(&one_node_json(r#"{"cw_min": 63, "cw_max": 31}"#)), "nodes[1].radio.cw_min: cw_min (63) is above cw_max (31)");
        assert!(error_of(&one_node_json(r#"{"antenna_height_m": -1.0}"#)).starts_with("nodes[1].radio.antenna_height_m: must be >= 0"));
        assert!(error_of(&one_node_json(r#"{"cw_max": "big"}"#)).starts_with("nodes[1].radio.cw_max: invalid type"));
        let bad_mac = one_node_json("{}").replace("02:00:00:00:00:02", "02:00:00:00:00");
        assert!(error_of(&bad_mac).starts_with("nodes[1].mac_address: \"02:00:00:00:00\" is not a MAC address"));
        let same_name = one_node_json("{}").replace("\"n1\"", "\"n0\"");
        assert_eq!(error_of(&same_name), "nodes[1].name: \"n0\" is also the name of nodes[0]");
    }

    #[test]
    fn mobility_and_links_are_checked() {
        let mut v: serde_json::Value = serde_json::from_str(&one_node_json("{}")).unwrap();
        v["nodes"][0]["mobility"] = serde_json::json!({"kind": "random_waypoint", "area": {"min": [0, 0], "max": [100, 100]},
            "speed_mps": {"min": 0.0, "max": 5.0}, "pause_ns": {"min": 0, "max": 0}, "steady_state": true});
        assert_eq!(error_of(&v.to_string()), "nodes[0].mobility.speed_mps.min: must be > 0");
        let mut v: serde_json::Value = serde_json::from_str(&one_node_json("{}")).unwrap();
        v["links"] = serde_json::json!([{"a": 0, "b": 5, "extra_loss_db": 3.0}]);
        assert!(error_of(&v.to_string()).starts_with("links[0].b: node index 5 out of range"));
        v["links"] = serde_json::json!([{"a": 0, "b": 1, "extra_loss_db": -3.0}]);
        assert_eq!(error_of(&v.to_string()), "links[0].extra_loss_db: must be >= 0");
    }

    #[test]
    fn tdma_slot_must_hold_a_full_frame_exchange() {
        let mut v: serde_json::Value = serde_json::from_str(&one_node_json("{}")).unwrap();
        v["mac"] = serde_json::json!({"kind": "tdma", "slot_ns": 1000000});
        assert!(error_of(&v.to_string()).starts_with("mac.slot_ns: 1000000 ns is too short"));
    }
}
