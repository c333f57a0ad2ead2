//! RE-TFRC: rate estimation from a model of 802.11 saturation delay
//! (Li, Lee, Agu, Claypool, Kinicki, "Performance Enhancement of TFRC in
//! Wireless Ad Hoc Networks", Fig. 7).
//!
//! # The delay model
//!
//! The paper takes the single-hop saturation service time of Carvalho and
//! Garcia-Luna-Aceves, `T = T_B + t_s` (eq. 4), with
//!
//! ```text
//! T_B = α(W_min − 1)/(2q) + (1 − q)·t_c/q                                  (5)
//! t_s = rts + sifs + δ + cts + sifs + δ + H + E{P} + sifs + δ + ack + difs + δ (6)
//! t_c = rts + difs + δ                                                       (7)
//! ```
//!
//! The paper leaves α (the average time between two backoff counter
//! decrements) and q (the probability that a transmission succeeds) to the
//! cited work, "computable as functions of the number of nodes n". We take
//! them from Bianchi's saturation model, on which that work builds: each of
//! the n nodes transmits in a slot with probability τ, where τ and the
//! conditional collision probability p solve
//!
//! ```text
//! τ = 2 / (1 + W + p·W·Σ_{k=0}^{m−1} (2p)^k),   p = 1 − (1 − τ)^(n−1)
//! ```
//!
//! (`W = W_min`, `m = log2(W_max/W_min)`; the sum is Bianchi's
//! `(1−(2p)^m)/(1−2p)` without its removable singularity at p = ½). Then
//! `q = 1 − p`, and a backoff step lasts an idle slot when no other node
//! transmits, `t_s` when exactly one does, `t_c` when several do:
//!
//! ```text
//! α = (1−τ)^(n−1)·σ + (n−1)τ(1−τ)^(n−2)·t_s + (1 − (1−τ)^(n−1) − (n−1)τ(1−τ)^(n−2))·t_c
//! ```
//!
//! Frame times: RTS, CTS and ACK of Table I (PHY header included) at the
//! basic rate; `H` is the PHY header at the basic rate plus the MAC header at
//! the data rate; `E{P}` is the network-layer packet at the data rate (fixed
//! size, so `E{P} = P`). All competing nodes are assumed to send frames of
//! the size being modelled.
//!
//! For N hops (eq. 8): `r(N) = 2·T_data(3) + (N−2)·T_data(4) + 2·T_ack(3) +
//! (N−2)·T_ack(4)`, where 3 and 4 are the contending nodes at the ends and in
//! the middle of a chain (configurable). Eq. 8 needs N ≥ 2; one hop is one
//! two-node network: `r(1) = T_data(2) + T_ack(2)`.
//!
//! # The controller (Fig. 7), and the choices the paper leaves open
//!
//! On each feedback after slow start:
//! 1. `X` is TFRC's allowed rate (RFC 5348 §4.3 step 4, so it already
//!    includes the receive-rate limit).
//! 2. `r_opt = max(r(N), min RTT over a sliding window)`; the window holds
//!    the RTT samples of the last [`ReConfig::rtt_window`] (default 10 s).
//! 3. `p' = f̄(r_opt, R)`, R = X_recv of the feedback.
//! 4. `R' = min(X, f(r_cur, p'))`. `r_cur` is the latest RTT sample, as
//!    ns-2's `rttcur_` beside the smoothed `rtt_`: the smoothed RTT (weight
//!    0.9 on history) still shows a queue many RTTs after it has drained,
//!    and a controller reading it keeps cutting the rate — in a simulated
//!    drop-tail bottleneck that halved the throughput. Because the equation
//!    is inversely proportional to the RTT (t_RTO = 4R), `R'` is exactly
//!    `X_recv·r_opt/r_cur`: RE-TFRC scales the receive rate by how far the
//!    RTT exceeds its optimum.
//! 5. The paper writes "if rate_cur > R' decrease_rate() else
//!    increase_rate(p')", the names of ns-2's TFRC, on which it was built,
//!    and says the rate is "changed incrementally". We compare `R'` with the
//!    *receive* rate `X_recv`, less a tolerance ([`ReConfig::tolerance`],
//!    default 20 %). Since `R' ≈ X_recv·r_opt/r_cur`, this reads "the RTT is
//!    more than 25 % above the optimum". Comparing with the sending rate
//!    instead would treat every lost packet (X_recv < rate) and every RTT
//!    fluctuation as MAC overload and ratchet the rate down each RTT. On a
//!    4-hop chain 20, 30 and 40 % cost the same throughput
//!    (experiments/re-tfrc/README.md): most decreases answer RTT samples
//!    far above any of them, when the MAC stalls for a few round trips.
//! 6. A decrease moves the rate towards `R'` by at most
//!    [`ReConfig::max_cut`] of it (default a sixteenth). ns-2's
//!    `decrease_rate` goes to the target at once (`max_cut` 1): measured on
//!    4- and 7-hop chains (experiments/re-tfrc/README.md) those cuts, to
//!    0.4-0.6 of X_recv and often twice within one queue episode, left the
//!    chain idle in the troughs and cost 11-16 % of TFRC's throughput; a
//!    quarter cost 3-6 % at 4 hops, an eighth 1-5 %. With ns-2's MAC
//!    departures in the ns2-wavelan profile an eighth cost 4-6 % at 3 hops
//!    and a sixteenth 0-5 % (seeds 4-6), at a fifth of TFRC's RTT.
//! 7. One decrease per round trip: an overload signal carried by a packet
//!    sent before the last decrease reports the queue that decrease answers,
//!    so the rate holds ([`ReDecision::Hold`]).
//! 8. An increase adds `s/R` per RTT since the last change (at most 2; R the
//!    smoothed RTT), as ns-2's `increase_rate` — TCP's additive increase —
//!    and stops at `R'` (a rate already above it stays), at one packet per
//!    RTT above `X_recv` (what the chain delivers), and at `X`.
//! 9. The first feedback with p > 0 starts the RE rate at `X` (ns-2 leaves
//!    slow start at the equation rate).
//!
//! The RE rate never goes below one packet per smoothed RTT (nor above `X`):
//! RFC 5348's floor of one packet per 64 s let a small flow behind a big
//! one's queue starve — its feedback, and with it every increase, almost
//! stopped (experiments/re-tfrc/README.md, Table II).

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::equation;

/// Physical layer parameters of the model (paper Table I).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhyParams {
    /// Initial contention window `W_min` (Bianchi's W).
    pub w_min: u32,
    /// Largest contention window; `W_max/W_min` must be a power of two.
    pub w_max: u32,
    pub mac_header_bytes: u32,
    pub phy_header_bytes: u32,
    /// ACK, CTS and RTS frames including their PHY header.
    pub ack_bytes: u32,
    pub cts_bytes: u32,
    pub rts_bytes: u32,
    pub slot: Duration,
    pub sifs: Duration,
    pub difs: Duration,
    /// Propagation delay δ.
    pub propagation_delay: Duration,
    /// Rate of PHY headers and control frames, bit/s.
    pub basic_rate_bps: f64,
    /// Rate of the MAC header and body of data frames, bit/s.
    pub data_rate_bps: f64,
}

impl PhyParams {
    /// DSSS of Table I at ns-2's default rates: 1 Mbit/s basic, 2 Mbit/s
    /// data (the paper's 2 Mbit/s channel); δ = 1 µs.
    pub fn dsss() -> Self {
        Self {
            w_min: 32,
            w_max: 1024,
            mac_header_bytes: 34,
            phy_header_bytes: 24,
            ack_bytes: 38,
            cts_bytes: 38,
            rts_bytes: 44,
            slot: Duration::from_micros(20),
            sifs: Duration::from_micros(10),
            difs: Duration::from_micros(50),
            propagation_delay: Duration::from_micros(1),
            basic_rate_bps: 1e6,
            data_rate_bps: 2e6,
        }
    }

    /// FHSS of Table I at 1 Mbit/s (Bianchi's setting); δ = 1 µs.
    pub fn fhss() -> Self {
        Self {
            w_min: 16,
            w_max: 1024,
            mac_header_bytes: 34,
            phy_header_bytes: 16,
            ack_bytes: 30,
            cts_bytes: 30,
            rts_bytes: 36,
            slot: Duration::from_micros(50),
            sifs: Duration::from_micros(28),
            difs: Duration::from_micros(128),
            propagation_delay: Duration::from_micros(1),
            basic_rate_bps: 1e6,
            data_rate_bps: 1e6,
        }
    }

    fn basic(&self, bytes: u32) -> f64 {
        f64::from(bytes) * 8.0 / self.basic_rate_bps
    }

    fn data(&self, bytes: f64) -> f64 {
        bytes * 8.0 / self.data_rate_bps
    }

    /// Backoff stages `m = log2(W_max/W_min)`.
    fn backoff_stages(&self) -> u32 {
        (self.w_max / self.w_min).trailing_zeros()
    }

    /// `t_s` of eq. 6 for a network-layer packet of `packet_bytes`, seconds.
    pub fn success_time(&self, packet_bytes: usize) -> f64 {
        let (sifs, difs, d) = (
            self.sifs.as_secs_f64(),
            self.difs.as_secs_f64(),
            self.propagation_delay.as_secs_f64(),
        );
        let header =
            self.basic(self.phy_header_bytes) + self.data(f64::from(self.mac_header_bytes));
        self.basic(self.rts_bytes)
            + sifs
            + d
            + self.basic(self.cts_bytes)
            + sifs
            + d
            + header
            + self.data(packet_bytes as f64)
            + sifs
            + d
            + self.basic(self.ack_bytes)
            + difs
            + d
    }

    /// `t_c` of eq. 7, seconds.
    pub fn collision_time(&self) -> f64 {
        self.basic(self.rts_bytes) + self.difs.as_secs_f64() + self.propagation_delay.as_secs_f64()
    }

    fn check(&self) -> Result<(), ReError> {
        let bad = |what: &'static str| Err(ReError::BadPhy(what));
        let windows_ok = self.w_min >= 2
            && self.w_max >= self.w_min
            && self.w_max.is_multiple_of(self.w_min)
            && (self.w_max / self.w_min).is_power_of_two();
        if !windows_ok {
            return bad("w_max/w_min must be a power of two and w_min at least 2");
        }
        let positive = |r: f64| r.is_finite() && r > 0.0;
        if !positive(self.basic_rate_bps) || !positive(self.data_rate_bps) {
            return bad("rates must be positive");
        }
        if self.slot.is_zero() {
            return bad("slot time must be positive");
        }
        Ok(())
    }
}

/// The saturation service time of one single-hop network, with its parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ServiceTime {
    /// Transmission probability per slot τ.
    pub tau: f64,
    /// Probability q that a transmission succeeds.
    pub success_probability: f64,
    /// Average backoff step α, seconds.
    pub backoff_step: f64,
    /// `T_B`, seconds.
    pub backoff: f64,
    /// `t_s`, seconds.
    pub success_time: f64,
    /// `t_c`, seconds.
    pub collision_time: f64,
    /// `T = T_B + t_s`, seconds.
    pub total: f64,
}

/// Solves Bianchi's fixed point for `n` saturated nodes: returns (τ, p).
fn bianchi(n: u32, w: f64, m: u32) -> (f64, f64) {
    let tau_of =
        |p: f64| 2.0 / (1.0 + w + p * w * (0..m).map(|k| (2.0 * p).powi(k as i32)).sum::<f64>());
    if n <= 1 {
        return (tau_of(0.0), 0.0);
    }
    let others = (n - 1) as i32;
    // g(p) = p − (1 − (1−τ(p))^(n−1)) rises from g(0) < 0 to g(1) > 0.
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid - (1.0 - (1.0 - tau_of(mid)).powi(others)) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let p = 0.5 * (lo + hi);
    (tau_of(p), p)
}

/// The delay model for one flow: PHY, packet sizes and contending nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MacModel {
    pub phy: PhyParams,
    /// Network-layer size of a data packet (UDP payload + 28 for IPv4/UDP).
    pub data_bytes: usize,
    /// Network-layer size of a feedback packet.
    pub ack_bytes: usize,
    /// Contending nodes of the single-hop networks at the two ends (paper: 3).
    pub nodes_at_ends: u32,
    /// Contending nodes of the single-hop networks in the middle (paper: 4).
    pub nodes_in_middle: u32,
}

/// IPv4 (20) and UDP (8) headers in front of our datagrams.
pub const IPV4_UDP_OVERHEAD: usize = 28;

impl MacModel {
    /// The paper's chain: `phy`, UDP payloads of `packet_size` for data and
    /// of the feedback size, 3 contending nodes at the ends and 4 between.
    pub fn chain(phy: PhyParams, packet_size: usize) -> Self {
        Self {
            phy,
            data_bytes: packet_size + IPV4_UDP_OVERHEAD,
            ack_bytes: crate::packet::FEEDBACK_LEN + IPV4_UDP_OVERHEAD,
            nodes_at_ends: 3,
            nodes_in_middle: 4,
        }
    }

    /// Saturation service time with `nodes` contending nodes sending
    /// network-layer packets of `packet_bytes` (eqs. 4–7).
    pub fn service_time(&self, nodes: u32, packet_bytes: usize) -> ServiceTime {
        let phy = &self.phy;
        let (tau, p) = bianchi(nodes, f64::from(phy.w_min), phy.backoff_stages());
        let q = 1.0 - p;
        let t_s = phy.success_time(packet_bytes);
        let t_c = phy.collision_time();
        let others = nodes.saturating_sub(1) as i32;
        let idle = (1.0 - tau).powi(others);
        let one_other = if others >= 1 {
            f64::from(others as u32) * tau * (1.0 - tau).powi(others - 1)
        } else {
            0.0
        };
        let alpha =
            idle * phy.slot.as_secs_f64() + one_other * t_s + (1.0 - idle - one_other) * t_c;
        let backoff = alpha * f64::from(phy.w_min - 1) / (2.0 * q) + (1.0 - q) * t_c / q;
        ServiceTime {
            tau,
            success_probability: q,
            backoff_step: alpha,
            backoff,
            success_time: t_s,
            collision_time: t_c,
            total: backoff + t_s,
        }
    }

    /// `r(N)` of eq. 8: the round-trip time of an N-hop chain at MAC saturation.
    pub fn rtt(&self, hops: u32) -> Result<Duration, ReError> {
        let t = |nodes, bytes| self.service_time(nodes, bytes).total;
        let seconds = match hops {
            0 => return Err(ReError::ZeroHops),
            1 => t(2, self.data_bytes) + t(2, self.ack_bytes),
            n => {
                let middle = f64::from(n - 2);
                2.0 * t(self.nodes_at_ends, self.data_bytes)
                    + middle * t(self.nodes_in_middle, self.data_bytes)
                    + 2.0 * t(self.nodes_at_ends, self.ack_bytes)
                    + middle * t(self.nodes_in_middle, self.ack_bytes)
            }
        };
        Ok(Duration::from_secs_f64(seconds))
    }

    fn check(&self) -> Result<(), ReError> {
        self.phy.check()?;
        if self.nodes_at_ends == 0 || self.nodes_in_middle == 0 {
            return Err(ReError::ZeroNodes);
        }
        Ok(())
    }
}

/// Where the hop count N comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopSource {
    /// Given by configuration.
    Fixed(u8),
    /// Reported by the receiver from the IP TTL of the data packets.
    FromFeedback,
}

/// RE-TFRC settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReConfig {
    pub model: MacModel,
    pub hops: HopSource,
    /// Length of the sliding window of the minimum RTT.
    pub rtt_window: Duration,
    /// Relative margin by which `R'` must fall below `X_recv` to count as
    /// MAC overload (0 compares them directly).
    pub tolerance: f64,
    /// The largest fraction of the rate one decrease takes (default 0.0625):
    /// 0.5 is at most a halving (TCP's), 1 goes straight to `R'` (ns-2's
    /// `decrease_rate`).
    pub max_cut: f64,
}

impl ReConfig {
    /// The paper's setting for `phy` and `packet_size`: chain model, hop
    /// count from the TTL, 10 s window; ours where the paper leaves it open:
    /// a 20 % tolerance and decreases of at most a sixteenth of the rate.
    pub fn new(phy: PhyParams, packet_size: usize) -> Self {
        Self {
            model: MacModel::chain(phy, packet_size),
            hops: HopSource::FromFeedback,
            rtt_window: Duration::from_secs(10),
            tolerance: 0.2,
            max_cut: 0.0625,
        }
    }

    pub fn check(&self) -> Result<(), ReError> {
        self.model.check()?;
        if self.hops == HopSource::Fixed(0) {
            return Err(ReError::ZeroHops);
        }
        if self.rtt_window.is_zero() {
            return Err(ReError::ZeroWindow);
        }
        if !(0.0..1.0).contains(&self.tolerance) {
            return Err(ReError::BadTolerance(self.tolerance));
        }
        if !(self.max_cut > 0.0 && self.max_cut <= 1.0) {
            return Err(ReError::BadMaxCut(self.max_cut));
        }
        Ok(())
    }
}

/// Bad RE-TFRC settings.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ReError {
    #[error("hop count must be at least 1")]
    ZeroHops,
    #[error("the number of contending nodes must be at least 1")]
    ZeroNodes,
    #[error("the RTT window must be longer than zero")]
    ZeroWindow,
    #[error("tolerance {0} is outside 0..1")]
    BadTolerance(f64),
    #[error("the largest cut {0} is outside (0, 1]")]
    BadMaxCut(f64),
    #[error("bad PHY parameters: {0}")]
    BadPhy(&'static str),
}

/// Which way Fig. 7 moved the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReDecision {
    /// First feedback after slow start: the rate starts at TFRC's X.
    Enter,
    Increase,
    Decrease,
    /// Overload again within a round trip of the last decrease: the packets
    /// that report it were sent before that decrease, so the rate stays.
    Hold,
}

/// One step of the controller, for traces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReStep {
    pub hops: Option<u8>,
    /// `r(N)` in seconds, when the hop count is known.
    pub r_model: Option<f64>,
    /// Minimum smoothed RTT over the window, seconds.
    pub r_window_min: f64,
    /// `r_opt`, seconds.
    pub r_opt: f64,
    /// `p'`.
    pub p_prime: f64,
    /// `R' = min(X, f(r_cur, p'))`, bytes/s.
    pub target: f64,
    pub decision: ReDecision,
    /// The RE rate after this step, bytes/s.
    pub rate: f64,
}

/// What the sender knows when a feedback packet arrives.
#[derive(Debug, Clone, Copy)]
pub struct ReInputs {
    pub now: Duration,
    /// Segment size `s`, bytes.
    pub segment_size: f64,
    /// `r_cur`: the RTT sample of this feedback.
    pub rtt_sample: Duration,
    /// When the data packet this feedback echoes was sent.
    pub echoed_sent_at: Duration,
    /// The sender's smoothed RTT R (paces the additive increase).
    pub rtt: Duration,
    /// TFRC's allowed rate X, bytes/s.
    pub x: f64,
    /// `X_recv` from the feedback, bytes/s.
    pub x_recv: f64,
    /// Hop count from the feedback (0 = unknown).
    pub reported_hops: u8,
}

/// Minimum over a sliding time window, O(1) amortised per sample.
#[derive(Debug, Clone)]
struct WindowMin {
    window: Duration,
    /// (time, value), values strictly increasing from front to back.
    samples: VecDeque<(Duration, Duration)>,
}

impl WindowMin {
    fn push(&mut self, now: Duration, value: Duration) {
        while self.samples.back().is_some_and(|&(_, v)| v >= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, value));
        let oldest = now.saturating_sub(self.window);
        while self.samples.front().is_some_and(|&(t, _)| t < oldest) {
            self.samples.pop_front();
        }
    }

    fn min(&self) -> Option<Duration> {
        self.samples.front().map(|&(_, v)| v)
    }
}

/// The RE-TFRC rate controller of one sender.
#[derive(Debug, Clone)]
pub struct RateEstimator {
    config: ReConfig,
    window: WindowMin,
    rate: Option<f64>,
    last_change: Duration,
    /// When the rate was last decreased.
    last_decrease: Option<Duration>,
    /// r(N) for the last hop count asked, so it is solved once per route.
    model_rtt: Option<(u8, Duration)>,
}

impl RateEstimator {
    pub fn new(config: ReConfig) -> Result<Self, ReError> {
        config.check()?;
        Ok(Self {
            config,
            window: WindowMin {
                window: config.rtt_window,
                samples: VecDeque::new(),
            },
            rate: None,
            last_change: Duration::ZERO,
            last_decrease: None,
            model_rtt: None,
        })
    }

    /// The RE rate limit in bytes/s, once slow start is over.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Records the RTT sample of every feedback, in slow start too.
    pub fn observe_rtt(&mut self, now: Duration, sample: Duration) {
        self.window.push(now, sample);
    }

    fn hops(&self, reported: u8) -> Option<u8> {
        match self.config.hops {
            HopSource::Fixed(n) => Some(n),
            HopSource::FromFeedback => (reported > 0).then_some(reported),
        }
    }

    fn model_rtt(&mut self, hops: u8) -> Duration {
        match self.model_rtt {
            Some((n, r)) if n == hops => r,
            _ => {
                // Hops ≥ 1 and the model were checked in `new`.
                let r = self.config.model.rtt(hops.into()).unwrap_or(Duration::ZERO);
                self.model_rtt = Some((hops, r));
                r
            }
        }
    }

    /// Fig. 7 for one feedback packet with p > 0. Call
    /// [`RateEstimator::observe_rtt`] for the same feedback first.
    pub fn on_feedback(&mut self, input: ReInputs) -> ReStep {
        let s = input.segment_size;
        let hops = self.hops(input.reported_hops);
        let r_model = hops.map(|n| self.model_rtt(n));
        let r_window_min = self.window.min().unwrap_or(input.rtt_sample);
        let r_opt = r_model.map_or(r_window_min, |r| r.max(r_window_min));
        let p_prime = equation::loss_event_rate_for(s, r_opt, input.x_recv);
        let target = equation::throughput(s, input.rtt_sample, p_prime).min(input.x);
        let r = input.rtt.as_secs_f64().max(1e-6);
        let overload = target < (1.0 - self.config.tolerance) * input.x_recv;
        let (decision, rate) = match self.rate {
            None => (ReDecision::Enter, input.x),
            Some(rate) if overload && self.last_decrease.is_some_and(|t| input.echoed_sent_at < t) => {
                (ReDecision::Hold, rate.min(input.x))
            }
            Some(rate) if overload => {
                self.last_decrease = Some(input.now);
                // Towards R', by at most `max_cut` of the rate.
                (ReDecision::Decrease, target.max(rate * (1.0 - self.config.max_cut)).min(rate))
            }
            Some(rate) => {
                let rtts_since_change =
                    (input.now.saturating_sub(self.last_change).as_secs_f64() / r).min(2.0);
                (
                    ReDecision::Increase,
                    (rate + s / r * rtts_since_change)
                        .min(target.max(rate))
                        .min((input.x_recv + s / r).max(rate))
                        .min(input.x),
                )
            }
        };
        // One packet per round trip keeps the feedback, and with it the
        // increase, going (never above TFRC's own X).
        let rate = rate.max((s / r).min(input.x));
        self.rate = Some(rate);
        if decision != ReDecision::Hold {
            self.last_change = input.now;
        }
        ReStep {
            hops,
            r_model: r_model.map(|r| r.as_secs_f64()),
            r_window_min: r_window_min.as_secs_f64(),
            r_opt: r_opt.as_secs_f64(),
            p_prime,
            target,
            decision,
            rate,
        }
    }

    /// The no-feedback timer cut TFRC's X: the RE rate follows it down.
    pub fn on_nofeedback(&mut self, x: f64) {
        if let Some(rate) = &mut self.rate {
            *rate = rate.min(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    const MS: f64 = 1e-3;
    const US: f64 = 1e-6;

    #[test]
    fn dsss_frame_times_by_hand() {
        // 1000-byte UDP payload → P = 1028 bytes at the network layer.
        // rts 44 B @1 Mbit/s = 352 µs; cts = ack = 38 B = 304 µs;
        // H = 24 B @1 Mbit/s + 34 B @2 Mbit/s = 192 + 136 = 328 µs;
        // E{P} = 1028 B @2 Mbit/s = 4112 µs.
        // t_s = 352+10+1 + 304+10+1 + 328 + 4112 + 10+1 + 304 + 50+1 = 5484 µs
        // t_c = 352 + 50 + 1 = 403 µs
        let phy = PhyParams::dsss();
        assert!(rel(phy.success_time(1028), 5484.0 * US) < 1e-12);
        assert!(rel(phy.collision_time(), 403.0 * US) < 1e-12);
        // Feedback: 64 + 28 = 92 B → E{P} = 368 µs, t_s = 1372 + 368 = 1740 µs.
        assert!(rel(phy.success_time(92), 1740.0 * US) < 1e-12);
    }

    #[test]
    fn one_node_has_no_contention() {
        // n = 1: τ = 2/(W+1), q = 1, α = σ, T_B = σ(W−1)/2 = 20 µs·31/2 = 310 µs.
        let model = MacModel::chain(PhyParams::dsss(), 1000);
        let t = model.service_time(1, 1028);
        assert!(rel(t.tau, 2.0 / 33.0) < 1e-12);
        assert_eq!(t.success_probability, 1.0);
        assert!(rel(t.backoff_step, 20.0 * US) < 1e-12);
        assert!(rel(t.backoff, 310.0 * US) < 1e-12);
        assert!(rel(t.total, (310.0 + 5484.0) * US) < 1e-12);
    }

    #[test]
    fn bianchi_fixed_point_holds() {
        for n in 2..=10 {
            let (tau, p) = bianchi(n, 32.0, 5);
            assert!(
                (p - (1.0 - (1.0 - tau).powi(n as i32 - 1))).abs() < 1e-12,
                "n={n}"
            );
            // Bianchi's original form (away from p = 1/2).
            let w = 32.0;
            let original = 2.0 * (1.0 - 2.0 * p)
                / ((1.0 - 2.0 * p) * (w + 1.0) + p * w * (1.0 - (2.0 * p).powi(5)));
            assert!(rel(tau, original) < 1e-9, "n={n}");
        }
    }

    /// Values worked out by hand from eqs. 5–8 and Bianchi's fixed point (the
    /// fixed point solved separately by bisection, then each line below by
    /// hand), DSSS, 1000-byte payloads, 92-byte feedback.
    #[test]
    fn dsss_service_times_and_chain_rtt_by_hand() {
        let model = MacModel::chain(PhyParams::dsss(), 1000);
        // n = 3: τ = 0.0537218, p = 1 − (1−τ)² = 0.1045576, q = 0.8954424
        //   P_idle = (1−τ)² = 0.8954424, P_one = 2τ(1−τ) = 0.1016729, P_coll = τ² = 0.0028860
        //   α = 0.8954424·20 µs + 0.1016729·5484 µs + 0.0028860·403 µs = 576.64 µs
        //   T_B = 576.64·31/(2·0.8954424) + 0.1045576·403/0.8954424 = 9981.55 + 47.06 = 10028.6 µs
        //   T = 10028.6 + 5484 = 15512.6 µs
        let t3 = model.service_time(3, 1028);
        assert!(rel(t3.tau, 0.0537218) < 1e-5);
        assert!(rel(t3.success_probability, 0.8954424) < 1e-6);
        assert!(rel(t3.backoff_step, 576.64 * US) < 1e-4);
        assert!(rel(t3.total, 15512.6 * US) < 1e-5);
        // n = 4: τ = 0.0506538, q = (1−τ)³ = 0.8556062, α = 771.18 µs,
        //   T_B = 771.18·31/(2·0.8556062) + 0.1443938·403/0.8556062 = 13970.5 + 68.0, T = 19522.5 µs
        let t4 = model.service_time(4, 1028);
        assert!(rel(t4.total, 19522.5 * US) < 1e-5);
        // Feedback frames: T_ack(3) = 5179.5 µs, T_ack(4) = 6489.4 µs.
        assert!(rel(model.service_time(3, 92).total, 5179.5 * US) < 1e-4);
        assert!(rel(model.service_time(4, 92).total, 6489.4 * US) < 1e-4);
        // r(7) = 2·15512.6 + 5·19522.5 + 2·5179.5 + 5·6489.4 = 171443.7 µs
        let r7 = model.rtt(7).unwrap().as_secs_f64();
        assert!(rel(r7, 171.4437 * MS) < 1e-5, "{r7}");
        // r(2) = 2·15512.6 + 2·5179.5 = 41384.1 µs
        assert!(rel(model.rtt(2).unwrap().as_secs_f64(), 41.3841 * MS) < 1e-5);
        // r(1) = T_data(2) + T_ack(2) = 10960.6 + 3705.9 = 14666.5 µs
        assert!(rel(model.rtt(1).unwrap().as_secs_f64(), 14.6665 * MS) < 1e-4);
        assert_eq!(model.rtt(0), Err(ReError::ZeroHops));
    }

    #[test]
    fn chain_rtt_grows_linearly_with_hops() {
        let model = MacModel::chain(PhyParams::dsss(), 1000);
        let r = |n| model.rtt(n).unwrap().as_secs_f64();
        let step = r(5) - r(4);
        for n in 3..15 {
            // Equal steps, up to the nanosecond rounding of Duration.
            assert!((r(n + 1) - r(n) - step).abs() < 3e-9);
        }
        // FHSS at 1 Mbit/s is slower than DSSS at 2 Mbit/s.
        let fhss = MacModel::chain(PhyParams::fhss(), 1000);
        assert!(fhss.rtt(7).unwrap() > model.rtt(7).unwrap());
    }

    #[test]
    fn bad_configs_are_rejected() {
        let good = ReConfig::new(PhyParams::dsss(), 1000);
        assert!(RateEstimator::new(good).is_ok());
        let bad = |c: ReConfig| RateEstimator::new(c).unwrap_err();
        assert_eq!(
            bad(ReConfig {
                hops: HopSource::Fixed(0),
                ..good
            }),
            ReError::ZeroHops
        );
        assert_eq!(
            bad(ReConfig {
                rtt_window: Duration::ZERO,
                ..good
            }),
            ReError::ZeroWindow
        );
        assert_eq!(
            bad(ReConfig {
                tolerance: 1.5,
                ..good
            }),
            ReError::BadTolerance(1.5)
        );
        for max_cut in [0.0, 1.5, f64::NAN] {
            let found = bad(ReConfig { max_cut, ..good });
            assert!(matches!(found, ReError::BadMaxCut(_)), "{max_cut}: {found}");
        }
        let mut model = good.model;
        model.nodes_in_middle = 0;
        assert_eq!(bad(ReConfig { model, ..good }), ReError::ZeroNodes);
        let mut model = good.model;
        model.phy.w_max = 1000;
        assert!(matches!(
            bad(ReConfig { model, ..good }),
            ReError::BadPhy(_)
        ));
    }

    fn inputs(now_ms: u64, rtt_ms: u64, x: f64, x_recv: f64) -> ReInputs {
        ReInputs {
            now: Duration::from_millis(now_ms),
            segment_size: 1000.0,
            rtt_sample: Duration::from_millis(rtt_ms),
            echoed_sent_at: Duration::from_millis(now_ms.saturating_sub(rtt_ms)),
            rtt: Duration::from_millis(rtt_ms),
            x,
            x_recv,
            reported_hops: 0,
        }
    }

    fn seven_hops(max_cut: f64) -> RateEstimator {
        RateEstimator::new(ReConfig {
            hops: HopSource::Fixed(7),
            max_cut,
            ..ReConfig::new(PhyParams::dsss(), 1000)
        })
        .unwrap()
    }

    /// A 7-hop controller (`max_cut` 0.5) whose RE rate started at `x` with
    /// the first feedback at 0 ms (window minimum 100 ms).
    fn seven_hops_entered(rtt_ms: u64, x: f64, x_recv: f64) -> RateEstimator {
        let mut re = seven_hops(0.5);
        re.observe_rtt(Duration::ZERO, Duration::from_millis(100));
        assert_eq!(re.on_feedback(inputs(0, rtt_ms, x, x_recv)).decision, ReDecision::Enter);
        re
    }

    #[test]
    fn controller_enters_at_x_then_decreases_when_rtt_exceeds_the_optimum() {
        let r_model = MacModel::chain(PhyParams::dsss(), 1000).rtt(7).unwrap();
        // RTT 400 ms, far above r(7) = 171 ms: R' = f(400 ms, p') ≈ X_recv · 171/400.
        let p_prime = equation::loss_event_rate_for(1000.0, r_model, 40_000.0);
        let target = equation::throughput(1000.0, Duration::from_millis(400), p_prime);
        assert!(target < 40_000.0 * 0.5, "{target}");
        for (max_cut, expected) in [(1.0, target), (0.5, 30_000.0)] {
            let mut re = seven_hops(max_cut);
            re.observe_rtt(Duration::from_millis(100), Duration::from_millis(100));
            let step = re.on_feedback(inputs(100, 100, 60_000.0, 40_000.0));
            assert_eq!(step.decision, ReDecision::Enter);
            assert_eq!(step.rate, 60_000.0);
            // r_opt = max(r(7) = 171 ms, window min 100 ms) = r(7).
            assert!(rel(step.r_opt, r_model.as_secs_f64()) < 1e-12);

            re.observe_rtt(Duration::from_millis(500), Duration::from_millis(400));
            let step = re.on_feedback(inputs(500, 400, 60_000.0, 40_000.0));
            assert_eq!(step.decision, ReDecision::Decrease);
            assert!(rel(step.target, target) < 1e-12);
            // Straight to R' (ns-2), or at most half of the 60 kB/s rate.
            assert!(rel(step.rate, expected) < 1e-12, "max_cut {max_cut}: {}", step.rate);
        }
    }

    #[test]
    fn one_decrease_per_round_trip() {
        // RTT 800 ms against r(7) = 171 ms: R' ≈ X_recv/4.7, so each cut halves.
        let mut re = seven_hops_entered(800, 60_000.0, 40_000.0);
        let step = re.on_feedback(inputs(100, 800, 60_000.0, 40_000.0));
        assert_eq!((step.decision, step.rate), (ReDecision::Decrease, 30_000.0));
        // Within the 800 ms after that cut the RTT still shows the queue the
        // cut answers: the rate stays.
        let step = re.on_feedback(inputs(850, 800, 60_000.0, 40_000.0));
        assert_eq!((step.decision, step.rate), (ReDecision::Hold, 30_000.0));
        // A round trip later it is a new overload: another halving at most.
        let step = re.on_feedback(inputs(900, 800, 60_000.0, 40_000.0));
        assert_eq!((step.decision, step.rate), (ReDecision::Decrease, 15_000.0));
    }

    #[test]
    fn the_rate_keeps_one_packet_per_round_trip() {
        // RTT 3 s against r(7) = 171 ms: R' ≈ X_recv/17.5 and each cut halves,
        // but the rate stops at one 1000-byte packet per 3 s, which keeps the
        // feedback coming.
        let mut re = seven_hops_entered(3000, 4_000.0, 4_000.0);
        let mut rate = 4_000.0;
        for round in 1..=4 {
            let step = re.on_feedback(inputs(round * 3000, 3000, 4_000.0, 4_000.0));
            assert_eq!(step.decision, ReDecision::Decrease);
            rate = (rate / 2.0_f64).max(1000.0 / 3.0);
            assert!(rel(step.rate, rate) < 1e-12, "round {round}: {}", step.rate);
        }
        assert!(rel(rate, 1000.0 / 3.0) < 1e-12);
        // Never above TFRC's own X.
        let step = re.on_feedback(inputs(15_000, 3000, 200.0, 4_000.0));
        assert_eq!(step.rate, 200.0);
    }

    #[test]
    fn controller_increases_additively_below_the_optimum() {
        let mut re = seven_hops(0.5);
        re.observe_rtt(Duration::from_millis(100), Duration::from_millis(100));
        re.on_feedback(inputs(100, 100, 60_000.0, 60_000.0));
        // RTT 100 ms below r(7): increase by s/R per RTT since the last change.
        let step = re.on_feedback(inputs(200, 100, 100_000.0, 65_000.0));
        assert_eq!(step.decision, ReDecision::Increase);
        assert!(rel(step.rate, 60_000.0 + 10_000.0) < 1e-9);
        // At most two RTTs' worth after a long gap, and never above X.
        let step = re.on_feedback(inputs(1200, 100, 80_000.0, 75_000.0));
        assert!(
            rel(step.rate, 80_000.0) < 1e-9,
            "capped by X: {}",
            step.rate
        );
    }

    #[test]
    fn an_increase_stays_within_a_packet_per_round_trip_of_the_receive_rate() {
        let mut re = seven_hops_entered(100, 60_000.0, 60_000.0);
        // The chain delivers 40 kB/s of the 60: no increase, and no cut either.
        let step = re.on_feedback(inputs(100, 100, 200_000.0, 40_000.0));
        assert_eq!((step.decision, step.rate), (ReDecision::Increase, 60_000.0));
        // It delivers 55 kB/s: at most one packet per RTT (10 kB/s) more.
        let step = re.on_feedback(inputs(200, 100, 200_000.0, 55_000.0));
        assert!(rel(step.rate, 65_000.0) < 1e-12, "{}", step.rate);
    }

    #[test]
    fn an_increase_stops_at_r_prime() {
        // RTT 180 ms, within 10 % of r(7) = 171 ms: no overload, but
        // R' = X_recv · 171/180 ≈ 95 kB/s is where the increase stops.
        for (entry, expected) in [(90_000.0, None), (120_000.0, Some(120_000.0))] {
            let mut re = seven_hops_entered(180, entry, entry);
            // Two RTTs' increase would reach 90 + 11.1 kB/s.
            let step = re.on_feedback(inputs(360, 180, 200_000.0, 100_000.0));
            assert_eq!(step.decision, ReDecision::Increase);
            assert!(step.target < 96_000.0, "{}", step.target);
            // Up to R'; a rate already above it is no reason to cut.
            let expected = expected.unwrap_or(step.target);
            assert!(rel(step.rate, expected) < 1e-12, "{}", step.rate);
        }
    }

    #[test]
    fn the_tolerance_is_how_far_the_rtt_may_pass_the_optimum() {
        // R' = X_recv · r_opt/r_cur falls below (1 − tolerance) · X_recv
        // once r_cur passes r_opt/(1 − tolerance): 1.25 · r(7) by default.
        let r_model = MacModel::chain(PhyParams::dsss(), 1000).rtt(7).unwrap();
        let ms = |factor: f64| (r_model.as_secs_f64() * factor * 1000.0).round() as u64;
        for (tolerance, rtt_ms, expected) in [
            (None, ms(1.2), ReDecision::Increase),
            (None, ms(1.3), ReDecision::Decrease),
            (Some(0.1), ms(1.2), ReDecision::Decrease),
        ] {
            let defaults = ReConfig::new(PhyParams::dsss(), 1000);
            let mut re = RateEstimator::new(ReConfig {
                hops: HopSource::Fixed(7),
                tolerance: tolerance.unwrap_or(defaults.tolerance),
                ..defaults
            })
            .unwrap();
            re.observe_rtt(Duration::ZERO, Duration::from_millis(100));
            re.on_feedback(inputs(0, rtt_ms, 60_000.0, 40_000.0));
            let step = re.on_feedback(inputs(rtt_ms, rtt_ms, 60_000.0, 40_000.0));
            assert_eq!(step.decision, expected, "tolerance {tolerance:?}, RTT {rtt_ms} ms");
        }
    }

    #[test]
    fn window_minimum_takes_over_when_the_model_is_too_low() {
        // One hop: r(1) ≈ 14.7 ms, but the path's RTT is 80 ms.
        let config = ReConfig {
            hops: HopSource::Fixed(1),
            ..ReConfig::new(PhyParams::dsss(), 1000)
        };
        let mut re = RateEstimator::new(config).unwrap();
        re.observe_rtt(Duration::from_millis(0), Duration::from_millis(80));
        re.observe_rtt(Duration::from_millis(100), Duration::from_millis(85));
        let step = re.on_feedback(inputs(100, 85, 50_000.0, 30_000.0));
        assert!(rel(step.r_opt, 0.080) < 1e-12);
        // 85 ms is within 10 % of 80 ms: not an overload.
        let step = re.on_feedback(inputs(200, 85, 50_000.0, 30_000.0));
        assert_eq!(step.decision, ReDecision::Increase);
        // Samples older than the window leave it.
        re.observe_rtt(Duration::from_secs(20), Duration::from_millis(90));
        let step = re.on_feedback(inputs(20_000, 90, 50_000.0, 30_000.0));
        assert!(rel(step.r_window_min, 0.090) < 1e-12);
    }

    #[test]
    fn hop_count_from_feedback() {
        let mut re = RateEstimator::new(ReConfig::new(PhyParams::dsss(), 1000)).unwrap();
        re.observe_rtt(Duration::ZERO, Duration::from_millis(50));
        let step = re.on_feedback(inputs(0, 50, 1e5, 1e5));
        assert_eq!(step.hops, None);
        assert_eq!(step.r_model, None);
        let step = re.on_feedback(ReInputs {
            reported_hops: 4,
            ..inputs(50, 50, 1e5, 1e5)
        });
        assert_eq!(step.hops, Some(4));
        assert!(step.r_model.is_some_and(|r| r > 0.09));
    }
}
