//! AODV parameters: RFC 3561 section 10, with the defaults of the
//! TCP-variants paper's Table I where it differs (active route timeout 5 s,
//! TTL start 2; expanding ring on, local repair, link-layer feedback and
//! gratuitous RREPs off, HELLO interval 1 s) and its text (only the
//! destination answers an RREQ).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub active_route_timeout_ms: u64,
    /// 0: no HELLOs (links are then judged by link-layer feedback only).
    pub hello_interval_ms: u64,
    pub allowed_hello_loss: u32,
    /// React to the link layer's failed transmissions to a neighbour.
    pub link_layer_feedback: bool,
    pub local_repair: bool,
    /// Set the G flag: an intermediate node that answers also tells the destination.
    pub gratuitous_rrep: bool,
    /// Let intermediate nodes with a fresh route answer (else the D flag is set).
    pub intermediate_replies: bool,
    pub expanding_ring_search: bool,
    pub ttl_start: u8,
    pub ttl_increment: u8,
    pub ttl_threshold: u8,
    pub net_diameter: u8,
    pub node_traversal_time_ms: u64,
    pub rreq_retries: u32,
    /// RREQs this node originates per second, at most.
    pub rreq_rate_limit: u32,
    /// RERRs this node sends per second, at most.
    pub rerr_rate_limit: u32,
    pub timeout_buffer: u8,
    pub local_add_ttl: u8,
    /// Ask for RREP-ACKs and blacklist neighbours that do not answer.
    pub rrep_ack: bool,
    /// Broadcasts this node relays (RREQ, RERR) wait a random 0..this long,
    /// so that neighbours relaying the same packet do not collide.
    pub broadcast_jitter_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            active_route_timeout_ms: 5000,
            hello_interval_ms: 1000,
            allowed_hello_loss: 2,
            link_layer_feedback: false,
            local_repair: false,
            gratuitous_rrep: false,
            intermediate_replies: false,
            expanding_ring_search: true,
            ttl_start: 2,
            ttl_increment: 2,
            ttl_threshold: 7,
            net_diameter: 35,
            node_traversal_time_ms: 40,
            rreq_retries: 2,
            rreq_rate_limit: 10,
            rerr_rate_limit: 10,
            timeout_buffer: 2,
            local_add_ttl: 2,
            rrep_ack: false,
            broadcast_jitter_ms: 10,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("aodv.{field}: {problem}")]
pub struct ConfigError {
    pub field: &'static str,
    pub problem: String,
}

/// Slack on top of ALLOWED_HELLO_LOSS × HELLO_INTERVAL before a silent
/// neighbour is declared lost, so that HELLO jitter alone never breaks a link.
pub const HELLO_TIMEOUT_SLACK: Duration = Duration::from_millis(100);

/// DELETE_PERIOD's K (RFC 3561 section 10).
const DELETE_PERIOD_K: u32 = 5;

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem: &str| Err(ConfigError { field, problem: problem.to_string() });
        if self.active_route_timeout_ms == 0 {
            return bad("active_route_timeout_ms", "must be positive");
        }
        if self.hello_interval_ms > 0 && self.allowed_hello_loss == 0 {
            return bad("allowed_hello_loss", "must be at least 1 when HELLOs are sent");
        }
        if self.hello_interval_ms == 0 && !self.link_layer_feedback {
            return bad(
                "hello_interval_ms",
                "0 turns HELLOs off; then link_layer_feedback must be on, or broken links go unnoticed",
            );
        }
        if self.net_diameter == 0 || self.ttl_start == 0 {
            return bad(if self.net_diameter == 0 { "net_diameter" } else { "ttl_start" }, "must be positive");
        }
        if self.expanding_ring_search && self.ttl_increment == 0 {
            return bad("ttl_increment", "must be positive with expanding_ring_search");
        }
        if self.node_traversal_time_ms == 0 {
            return bad("node_traversal_time_ms", "must be positive");
        }
        if self.rreq_rate_limit == 0 || self.rerr_rate_limit == 0 {
            let field = if self.rreq_rate_limit == 0 { "rreq_rate_limit" } else { "rerr_rate_limit" };
            return bad(field, "must be positive");
        }
        Ok(())
    }

    pub fn active_route_timeout(&self) -> Duration {
        Duration::from_millis(self.active_route_timeout_ms)
    }

    pub fn hello_interval(&self) -> Option<Duration> {
        (self.hello_interval_ms > 0).then(|| Duration::from_millis(self.hello_interval_ms))
    }

    /// How long a neighbour may stay silent before its link counts as lost.
    pub fn hello_timeout(&self) -> Option<Duration> {
        self.hello_interval().map(|interval| interval * self.allowed_hello_loss + HELLO_TIMEOUT_SLACK)
    }

    pub fn node_traversal_time(&self) -> Duration {
        Duration::from_millis(self.node_traversal_time_ms)
    }

    pub fn net_traversal_time(&self) -> Duration {
        self.node_traversal_time() * 2 * u32::from(self.net_diameter)
    }

    pub fn path_discovery_time(&self) -> Duration {
        self.net_traversal_time() * 2
    }

    /// How long to wait for an RREP to an RREQ sent with this TTL.
    pub fn ring_traversal_time(&self, ttl: u8) -> Duration {
        self.node_traversal_time() * 2 * (u32::from(ttl) + u32::from(self.timeout_buffer))
    }

    pub fn my_route_timeout(&self) -> Duration {
        self.active_route_timeout() * 2
    }

    pub fn delete_period(&self) -> Duration {
        let hello = self.hello_interval().unwrap_or_default();
        self.active_route_timeout().max(hello) * DELETE_PERIOD_K
    }

    pub fn next_hop_wait(&self) -> Duration {
        self.node_traversal_time() + Duration::from_millis(10)
    }

    pub fn blacklist_timeout(&self) -> Duration {
        self.net_traversal_time() * self.rreq_retries.max(1)
    }

    pub fn max_repair_ttl(&self) -> u8 {
        (u32::from(self.net_diameter) * 3 / 10) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_table_one_and_valid() {
        let config = Config::default();
        assert!(config.validate().is_ok());
        assert_eq!(config.active_route_timeout(), Duration::from_secs(5));
        assert_eq!((config.ttl_start, config.ttl_increment), (2, 2));
        assert!(config.expanding_ring_search && !config.local_repair && !config.link_layer_feedback);
        assert_eq!(config.net_traversal_time(), Duration::from_millis(2800));
        assert_eq!(config.ring_traversal_time(2), Duration::from_millis(320));
        assert_eq!(config.delete_period(), Duration::from_secs(25));
    }

    #[test]
    fn no_hellos_without_feedback_is_refused() {
        let config = Config { hello_interval_ms: 0, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().field, "hello_interval_ms");
        let config = Config { hello_interval_ms: 0, link_layer_feedback: true, ..Config::default() };
        assert!(config.validate().is_ok());
    }
}
