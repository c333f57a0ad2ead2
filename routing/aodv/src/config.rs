//! AODV parameters: RFC 3561 section 10, with the defaults of the
//! TCP-variants paper's Table I where it differs (active route timeout 5 s,
//! TTL start 2; expanding ring on, local repair, link-layer feedback and
//! gratuitous RREPs off, HELLO interval 1 s) and its text (only the
//! destination answers an RREQ). [`Config::ns2`] is the preset that behaves
//! like ns-2.35's AODV as Debian builds it (routing/aodv/NS2.md).

use std::time::Duration;

use meshemu_ondemand::link_feedback::FailedFrames;
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
    /// Which failed frames break a link (with `link_layer_feedback`): any
    /// unicast frame, or data only, as in ns-2 (a failed RREP breaks nothing).
    pub link_failures: FailedFrames,
    pub local_repair: bool,
    /// Which broken routes are repaired locally, and how (with `local_repair`).
    pub local_repair_rule: RepairRule,
    /// Set the G flag: an intermediate node that answers also tells the destination.
    pub gratuitous_rrep: bool,
    /// Let intermediate nodes with a fresh route answer (else the D flag is set).
    pub intermediate_replies: bool,
    pub expanding_ring_search: bool,
    pub ttl_start: u8,
    pub ttl_increment: u8,
    pub ttl_threshold: u8,
    /// When the expanding ring gives way to the whole network.
    pub ring_limit: RingLimit,
    pub net_diameter: u8,
    pub node_traversal_time_ms: u64,
    /// The waits for an RREP count, per hop, the mean of the last three
    /// discoveries' measured latency per hop to that destination (ns-2's
    /// `PerHopTime`); NODE_TRAVERSAL_TIME until one has been measured. Off:
    /// always NODE_TRAVERSAL_TIME (RFC 3561).
    pub measured_hop_time: bool,
    pub rreq_retries: u32,
    /// How the wait grows after each network-wide RREQ.
    pub rreq_backoff: RreqBackoff,
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
    /// Every RERR is a broadcast (IP TTL 1), as in ns-2, even when a single
    /// neighbour needs it; a broken link's RERR lists every route it broke,
    /// with or without precursors. Off: RFC 3561 6.11, unicast to a single
    /// precursor, only routes that have precursors.
    pub rerr_broadcast: bool,
    /// A neighbour that acknowledged a frame of this node (the radio's
    /// per-peer `tx_acked`) counts as heard for HELLO loss, as frames
    /// received from it do. Off: only frames received count (on a one-way
    /// flow a next hop sends nothing but HELLOs back).
    pub acked_frames_alive: bool,
    /// When a link failure or a neighbour's RERR takes routes down (a
    /// repair alone does not), the link layer drops the frames it still
    /// holds for that neighbour, as ns-2's AODV empties its interface queue
    /// (`ifqueue->filter` in `rt_ll_failed` and `recvError`). Needs a link
    /// layer that can (the medium's `flush` request).
    pub flush_on_break: bool,
    /// A node on a reply's way back relays it even when it is not news
    /// there (its own route to the destination is as fresh, with as few
    /// hops, through another neighbour), describing that own route: the
    /// reply is the originator's only one. Off (RFC 3561 6.7's letter, ns-2):
    /// only a reply that made or changed the route goes on, so a node that
    /// already knew the destination drops it; where only the destination
    /// answers (D flag) and replies carry no new number, discoveries fail.
    pub relay_every_reply: bool,
    /// The destination answers with the larger of its own number and the
    /// one asked for plus one, as ns-2 does (`recvRequest`), so every reply
    /// is news at every hop. Off: the larger of the two (RFC 3561 6.1).
    pub renumber_replies: bool,
    /// Which routes list which neighbours as precursors, the nodes a RERR
    /// about the route is for.
    pub precursor_rule: PrecursorRule,
    /// When a reply brings a route, the packets held for its destination
    /// leave this far apart, as ns-2's `recvReply` sends them (ARP_DELAY,
    /// 10 ms): packets sent meanwhile overtake them, and those still
    /// waiting when the route goes are lost. 0: all at once. A route that
    /// comes any other way (a RREQ's way back, a neighbour heard) releases
    /// them at once, in ns-2 too.
    pub release_spacing_ms: u64,
}

/// The wait for an RREP after the n-th network-wide RREQ of a discovery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RreqBackoff {
    /// RFC 3561 6.3: NET_TRAVERSAL_TIME x 2^(n-1).
    #[default]
    Binary,
    /// ns-2.35 (`sendRequest`): NET_TRAVERSAL_TIME x n, at most 10 s (MAX_RREQ_TIMEOUT).
    Linear,
}

/// When an expanding ring search sends its RREQ to the whole network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RingLimit {
    /// RFC 3561 6.4: once the next ring's TTL would pass TTL_THRESHOLD.
    #[default]
    Rfc,
    /// ns-2.35 (`sendRequest`): once the last ring's TTL (or the hop count
    /// the route had when it went down) reached TTL_THRESHOLD, so the last
    /// ring may pass it (a route that went down at 6 hops: TTL 8).
    Ns2,
}

/// How a node keeps its routes' precursor lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecursorRule {
    /// RFC 3561 6.7: relaying a reply lists the next hop towards the
    /// originator on the route to the destination and on the route to the
    /// next hop towards it, and the next hop towards the destination on the
    /// route back to the originator; a list lasts as long as its route
    /// entry. A break on either way is passed on towards every node that
    /// sends along it.
    #[default]
    Rfc,
    /// ns-2.35 (aodv.cc): relaying a reply lists a precursor on the route to
    /// the destination only (`recvReply`); a broken link takes its neighbour
    /// out of every list (`handle_link_failure`); a RERR passed on empties
    /// the lists of the routes it names (`recvError`). A RERR about the way
    /// back to an originator stops at the first node it takes a route from,
    /// and that node drops the next packet sent along it, with a RERR of its
    /// own (`rt_resolve`).
    Ns2,
}

/// ns-2.35's MAX_RREQ_TIMEOUT: the longest wait of [`RreqBackoff::Linear`].
pub const MAX_RREQ_TIMEOUT: Duration = Duration::from_secs(10);

/// How a node whose link to a next hop broke chooses the routes it repairs
/// locally (6.12) and how it repairs them; applies with `local_repair` on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RepairRule {
    /// RFC 3561 6.12: a route with precursors whose destination is at most
    /// MAX_REPAIR_TTL hops away. The route leaves the kernel while one RREQ
    /// (TTL: the old hop count + LOCAL_ADD_TTL) searches; forwarded packets
    /// meanwhile are dropped; a longer new route is announced by a RERR with
    /// the N flag; no answer within the ring's wait: RERR upstream.
    #[default]
    Rfc,
    /// ns-2.35 (aodv.cc, `rt_ll_failed` with `AODV_LOCAL_REPAIR`): a route
    /// whose data travelled more hops to reach this node than remain to the
    /// destination (from the IP TTL of the last data packet to it). The
    /// kernel route stays while the search runs (ns-2 buffers the packets
    /// and keeps those already queued for the old next hop); the search is
    /// a whole discovery (retries included) whose first RREQ covers the
    /// whole network unless the route went down here before (then the old
    /// hop count + TTL_INCREMENT, below TTL_THRESHOLD), as ns-2's
    /// `rt_last_hop_count` makes it; no RERR unless it fails.
    Ns2,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            active_route_timeout_ms: 5000,
            hello_interval_ms: 1000,
            allowed_hello_loss: 2,
            link_layer_feedback: false,
            link_failures: FailedFrames::Any,
            local_repair: false,
            local_repair_rule: RepairRule::Rfc,
            gratuitous_rrep: false,
            intermediate_replies: false,
            expanding_ring_search: true,
            ttl_start: 2,
            ttl_increment: 2,
            ttl_threshold: 7,
            ring_limit: RingLimit::Rfc,
            net_diameter: 35,
            node_traversal_time_ms: 40,
            measured_hop_time: false,
            rreq_retries: 2,
            rreq_backoff: RreqBackoff::Binary,
            rreq_rate_limit: 10,
            rerr_rate_limit: 10,
            timeout_buffer: 2,
            local_add_ttl: 2,
            rrep_ack: false,
            broadcast_jitter_ms: 10,
            rerr_broadcast: false,
            acked_frames_alive: false,
            flush_on_break: false,
            relay_every_reply: true,
            renumber_replies: false,
            precursor_rule: PrecursorRule::Rfc,
            release_spacing_ms: 0,
        }
    }
}

/// The presets `[aodv] preset = NAME` starts from (keys given beside it override).
pub const PRESETS: &[&str] = &["default", "ns2"];

impl Config {
    /// ns-2.35's AODV as Debian builds it (aodv.h, aodv.cc; routing/aodv/NS2.md):
    /// link-layer detection of failed data packets and no HELLOs, local repair by ns-2's rule,
    /// intermediate nodes answer, TTL_INCREMENT 2, TTL_THRESHOLD 7,
    /// NETWORK_DIAMETER 30, NODE_TRAVERSAL_TIME 30 ms, RREQ_RETRIES 3, a ring
    /// waits 2 x TTL x NODE_TRAVERSAL_TIME (no TIMEOUT_BUFFER) and the
    /// network-wide waits grow linearly, ACTIVE_ROUTE_TIMEOUT 10 s, no RREQ
    /// or RERR rate limit (10000 per second here), every RERR broadcast,
    /// 10 ms jitter, the frames queued for a neighbour dropped when its
    /// link breaks routes, replies relayed only where they are news and
    /// renumbered by the destination, precursors kept as ns-2 keeps them,
    /// held packets released 10 ms apart after a reply.
    /// The first RREQ for a destination never reached before
    /// covers the whole network: aodv.h's TTL_START (5) is never used,
    /// because `sendRequest` starts from max(last TTL, `rt_last_hop_count`)
    /// and a new entry's `rt_last_hop_count` is INFINITY2 (255).
    pub fn ns2() -> Config {
        Config {
            active_route_timeout_ms: 10_000,
            hello_interval_ms: 0,
            link_layer_feedback: true,
            link_failures: FailedFrames::Data,
            local_repair: true,
            local_repair_rule: RepairRule::Ns2,
            gratuitous_rrep: false,
            intermediate_replies: true,
            expanding_ring_search: true,
            ttl_start: 30,
            ttl_increment: 2,
            ttl_threshold: 7,
            ring_limit: RingLimit::Ns2,
            net_diameter: 30,
            node_traversal_time_ms: 30,
            measured_hop_time: true,
            rreq_retries: 3,
            rreq_backoff: RreqBackoff::Linear,
            rreq_rate_limit: 10_000,
            rerr_rate_limit: 10_000,
            timeout_buffer: 0,
            local_add_ttl: 2,
            rrep_ack: false,
            broadcast_jitter_ms: 10,
            rerr_broadcast: true,
            flush_on_break: true,
            relay_every_reply: false,
            renumber_replies: true,
            precursor_rule: PrecursorRule::Ns2,
            release_spacing_ms: 10,
            ..Config::default()
        }
    }

    /// The configuration a preset names ([`PRESETS`]).
    pub fn preset(name: &str) -> Option<Config> {
        match name {
            "default" => Some(Config::default()),
            "ns2" => Some(Config::ns2()),
            _ => None,
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
        self.net_traversal_time_at(self.node_traversal_time())
    }

    /// NET_TRAVERSAL_TIME with `hop_time` in place of NODE_TRAVERSAL_TIME.
    pub fn net_traversal_time_at(&self, hop_time: Duration) -> Duration {
        hop_time * 2 * u32::from(self.net_diameter)
    }

    pub fn path_discovery_time(&self) -> Duration {
        self.net_traversal_time() * 2
    }

    /// How long to wait for an RREP to an RREQ sent with this TTL, `hop_time` per hop.
    pub fn ring_traversal_time(&self, ttl: u8, hop_time: Duration) -> Duration {
        hop_time * 2 * (u32::from(ttl) + u32::from(self.timeout_buffer))
    }

    pub fn release_spacing(&self) -> Duration {
        Duration::from_millis(self.release_spacing_ms)
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
        assert_eq!(config.ring_traversal_time(2, config.node_traversal_time()), Duration::from_millis(320));
        assert_eq!(config.delete_period(), Duration::from_secs(25));
        assert!(!config.rerr_broadcast && !config.acked_frames_alive);
        assert_eq!(config.local_repair_rule, RepairRule::Rfc);
        assert_eq!(config.link_failures, FailedFrames::Any);
        assert_eq!(config.precursor_rule, PrecursorRule::Rfc);
        assert_eq!(config.release_spacing(), Duration::ZERO);
    }

    #[test]
    fn ns2_preset_has_aodv_h_values_and_is_valid() {
        let config = Config::preset("ns2").unwrap();
        assert!(config.validate().is_ok());
        assert_eq!(config.hello_interval(), None);
        assert!(config.link_layer_feedback && config.local_repair && config.intermediate_replies);
        assert_eq!(config.local_repair_rule, RepairRule::Ns2);
        assert_eq!((config.ttl_start, config.ttl_increment, config.ttl_threshold, config.net_diameter), (30, 2, 7, 30));
        assert_eq!(config.rreq_backoff, RreqBackoff::Linear);
        assert!(!config.relay_every_reply && config.renumber_replies);
        assert_eq!(config.precursor_rule, PrecursorRule::Ns2);
        assert_eq!(config.release_spacing(), Duration::from_millis(10));
        assert_eq!(config.link_failures, FailedFrames::Data);
        // ns-2's sendRequest waits 2 x TTL x NODE_TRAVERSAL_TIME: 300 ms at TTL 5, 1.8 s at the diameter.
        assert_eq!(config.ring_traversal_time(5, config.node_traversal_time()), Duration::from_millis(300));
        assert_eq!(config.net_traversal_time(), Duration::from_millis(1800));
        assert_eq!(config.active_route_timeout(), Duration::from_secs(10));
        assert_eq!(Config::preset("default"), Some(Config::default()));
        assert_eq!(Config::preset("ns-2"), None);
    }

    #[test]
    fn repair_rule_reads_as_lowercase() {
        #[derive(Deserialize)]
        struct T {
            rule: RepairRule,
        }
        let t: T = toml::from_str("rule = \"ns2\"").unwrap();
        assert_eq!(t.rule, RepairRule::Ns2);
        assert!(toml::from_str::<T>("rule = \"Ns2\"").is_err());
    }

    #[test]
    fn no_hellos_without_feedback_is_refused() {
        let config = Config { hello_interval_ms: 0, ..Config::default() };
        assert_eq!(config.validate().unwrap_err().field, "hello_interval_ms");
        let config = Config { hello_interval_ms: 0, link_layer_feedback: true, ..Config::default() };
        assert!(config.validate().is_ok());
    }
}
