//! COPAS parameters (the `[copas]` table of copasd's config file). The
//! defaults are the paper's Table 1 (T_BACKOFF 1 s, T_COLLECT 1.5 s,
//! alpha 0.75, BACKOFF_THRES 6) and what the paper leaves open, chosen here.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// T_BACKOFF: the period over which contention backoffs are counted.
    pub t_backoff_ms: u64,
    /// Weight of the newest count in mu = (1 - alpha) mu + alpha N.
    pub alpha: f64,
    /// T_COLLECT: how long the destination gathers RREQ copies after the first.
    pub t_collect_ms: u64,
    /// BACKOFF_THRES: a relay whose mu exceeds this (backoffs per T_BACKOFF) makes its path move.
    pub backoff_thres: f64,
    /// How often an end probes the path it sends on while it sends.
    pub probe_interval_ms: u64,
    /// A pair that sent nothing for this long stops probing.
    pub probe_idle_ms: u64,
    /// Routes unused for this long are removed.
    pub active_route_timeout_ms: u64,
    /// After a RREQ, how long the source waits for the forward path before it tries again.
    pub discovery_timeout_ms: u64,
    /// RREQs after the first before a discovery fails.
    pub rreq_retries: u32,
    /// IP TTL of flooded RREQs.
    pub net_diameter: u8,
    /// Relayed RREQs wait a random 0..jitter (no synchronised rebroadcasts).
    pub broadcast_jitter_ms: u64,
    /// After a reroute of one path starts, no other for that path during this time.
    pub reroute_hold_ms: u64,
    /// A path may be this many hops longer than the shortest found (discovery)
    /// or than the one it replaces (reroute): "similarly long".
    pub length_slack: u8,
    /// The destination keeps at most this many RREQ copies per discovery.
    pub max_candidates: usize,
    /// Break a link when the radio drops a frame to it at the retry limit.
    pub link_layer_feedback: bool,
    /// A ROUTE not acknowledged by the next hop this long is sent again; the
    /// wait doubles with each retransmission.
    pub route_ack_timeout_ms: u64,
    /// Retransmissions of a ROUTE to one next hop before it is abandoned.
    pub route_retries: u32,
    /// A neighbour that never acknowledged one of this node's ROUTEs is
    /// left out of its next choices this long (0: no neighbour is left out).
    pub silent_hold_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            t_backoff_ms: 1000,
            alpha: 0.75,
            t_collect_ms: 1500,
            backoff_thres: 6.0,
            probe_interval_ms: 1000,
            probe_idle_ms: 3000,
            active_route_timeout_ms: 10_000,
            discovery_timeout_ms: 3000,
            rreq_retries: 2,
            net_diameter: 35,
            broadcast_jitter_ms: 10,
            reroute_hold_ms: 5000,
            length_slack: 1,
            max_candidates: 16,
            link_layer_feedback: true,
            // Five of AODV's NODE_TRAVERSAL_TIMEs (40 ms): a ROUTE and its ack
            // queued behind a frame or two on a busy 2 Mbit/s medium, MAC retries included.
            route_ack_timeout_ms: 200,
            // 200 + 400 + 800 + 1600 ms: the last retransmissions come after
            // Linux's ARP has sent its second and third request (1 s apart).
            route_retries: 3,
            // An active route's lifetime: a newer discovery of the same pair
            // (the source asks again every 3 s) falls inside it.
            silent_hold_ms: 10_000,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
#[error("copas.{field}: {problem}")]
pub struct ConfigError {
    pub field: &'static str,
    pub problem: &'static str,
}

const MAX_ROUTE_ACK_TIMEOUT_MS: u64 = 60_000;
const MAX_ROUTE_RETRIES: u32 = 10;

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem| Err(ConfigError { field, problem });
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return bad("alpha", "must be in (0, 1]");
        }
        if !(self.backoff_thres.is_finite() && self.backoff_thres >= 0.0) {
            return bad("backoff_thres", "must be a non-negative number");
        }
        for (field, value) in [
            ("t_backoff_ms", self.t_backoff_ms),
            ("t_collect_ms", self.t_collect_ms),
            ("probe_interval_ms", self.probe_interval_ms),
            ("probe_idle_ms", self.probe_idle_ms),
            ("active_route_timeout_ms", self.active_route_timeout_ms),
            ("discovery_timeout_ms", self.discovery_timeout_ms),
        ] {
            if value == 0 {
                return bad(field, "must be positive");
            }
        }
        if self.discovery_timeout_ms <= self.t_collect_ms {
            return bad("discovery_timeout_ms", "must exceed t_collect_ms (the destination answers after collecting)");
        }
        if !(1..=MAX_ROUTE_ACK_TIMEOUT_MS).contains(&self.route_ack_timeout_ms) {
            return bad("route_ack_timeout_ms", "must be 1-60000");
        }
        if self.route_retries > MAX_ROUTE_RETRIES {
            return bad("route_retries", "must be at most 10 (the wait doubles each time)");
        }
        if self.net_diameter < 2 {
            return bad("net_diameter", "must be at least 2");
        }
        if self.max_candidates < 2 {
            return bad("max_candidates", "must be at least 2 (two paths are chosen)");
        }
        Ok(())
    }

    pub fn t_backoff(&self) -> Duration {
        ms(self.t_backoff_ms)
    }
    pub fn t_collect(&self) -> Duration {
        ms(self.t_collect_ms)
    }
    pub fn probe_interval(&self) -> Duration {
        ms(self.probe_interval_ms)
    }
    pub fn probe_idle(&self) -> Duration {
        ms(self.probe_idle_ms)
    }
    pub fn active_route_timeout(&self) -> Duration {
        ms(self.active_route_timeout_ms)
    }
    pub fn discovery_timeout(&self) -> Duration {
        ms(self.discovery_timeout_ms)
    }
    pub fn broadcast_jitter(&self) -> Duration {
        ms(self.broadcast_jitter_ms)
    }
    pub fn reroute_hold(&self) -> Duration {
        ms(self.reroute_hold_ms)
    }
    pub fn silent_hold(&self) -> Duration {
        ms(self.silent_hold_ms)
    }
    /// How long the ack of a ROUTE's transmission `attempt` (0: the first) is awaited.
    pub fn route_ack_wait(&self, attempt: u32) -> Duration {
        ms(self.route_ack_timeout_ms) * (1 << attempt)
    }
    /// From a ROUTE's first transmission to its last retransmission's deadline.
    pub fn route_ack_window(&self) -> Duration {
        (0..=self.route_retries).map(|attempt| self.route_ack_wait(attempt)).sum()
    }
    /// The threshold in the hundredths messages carry.
    pub fn backoff_thres_centi(&self) -> u32 {
        (self.backoff_thres * 100.0).round() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_valid() {
        let config = Config::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!((config.t_backoff_ms, config.t_collect_ms, config.alpha, config.backoff_thres), (1000, 1500, 0.75, 6.0));
    }

    #[test]
    fn bad_values_are_named() {
        let config = Config { alpha: 1.5, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().field, "alpha");
        let config = Config { discovery_timeout_ms: 1000, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().to_string(), "copas.discovery_timeout_ms: must exceed t_collect_ms (the destination answers after collecting)");
        let config = Config { route_ack_timeout_ms: 0, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().field, "route_ack_timeout_ms");
        let config = Config { route_retries: 11, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().field, "route_retries");
    }

    #[test]
    fn the_route_ack_wait_doubles_with_each_retransmission() {
        let config = Config::default();
        let waits: Vec<u64> = (0..=config.route_retries).map(|a| config.route_ack_wait(a).as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600]);
        assert_eq!(config.route_ack_window(), Duration::from_millis(3000));
    }
}
