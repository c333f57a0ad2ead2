//! The radio channel between the nodes: median power per pair
//! (propagation, link overrides, per-link shadowing), who a transmitter's
//! signals reach and when, cached while nobody moves.

use std::collections::HashMap;

use rand::RngExt;
use rand_distr::StandardNormal;

use super::{LinkInfo, Node};
use crate::config::{LinkOverride, Propagation, ShadowingPer};
use crate::phy;
use crate::rng::{self, Purpose};
use crate::{NodeId, Time};

/// A receiver a transmitter's signal reaches.
#[derive(Debug, Clone, Copy)]
struct Reach {
    rx: u32,
    /// Median power, link extra loss and per-link shadowing included.
    power_dbm: f64,
    power_mw: f64,
    delay: Time,
}

/// A signal of one transmission at one receiver.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    pub rx: u32,
    pub power_mw: f64,
    pub delay: Time,
}

#[derive(Debug)]
pub(super) struct Channel {
    seed: u64,
    links: HashMap<(NodeId, NodeId), LinkOverride>,
    link_shadowing: HashMap<(NodeId, NodeId), f64>,
    /// Per transmitter, who its signals reach; valid while nobody moves and
    /// no radio or link changes.
    reach: Vec<Vec<Reach>>,
    reach_valid: bool,
    scratch_reach: Vec<Reach>,
}

impl Channel {
    pub(super) fn new(seed: u64, nodes: usize, links: impl IntoIterator<Item = (NodeId, NodeId, LinkOverride)>) -> Self {
        Channel {
            seed,
            links: links.into_iter().map(|(a, b, link)| (pair_key(a, b), link)).collect(),
            link_shadowing: HashMap::new(),
            reach: vec![Vec::new(); nodes],
            reach_valid: false,
            scratch_reach: Vec::new(),
        }
    }

    /// Someone moved, or a radio or link changed.
    pub(super) fn invalidate(&mut self) {
        self.reach_valid = false;
    }

    /// Sets the override of the pair (a, b), both directions.
    pub(super) fn set_link(&mut self, a: NodeId, b: NodeId, link: LinkOverride) {
        self.links.insert(pair_key(a, b), link);
        self.reach_valid = false;
    }

    /// The pair's bit error rate, if its link overrides the radio's.
    pub(super) fn bit_error_rate(&self, a: NodeId, b: NodeId) -> Option<f64> {
        self.links.get(&pair_key(a, b)).and_then(|l| l.bit_error_rate)
    }

    /// Every ordered pair whose median received power (no random shadowing)
    /// reaches the receiver's interference floor, at `now`.
    pub(super) fn links<P>(&self, nodes: &[Node<P>], now: Time) -> Vec<LinkInfo> {
        let pos: Vec<[f64; 3]> = nodes.iter().map(|n| n.mobility.position(now)).collect();
        let mut links = Vec::new();
        for a in 0..nodes.len() {
            for b in 0..nodes.len() {
                if a == b {
                    continue;
                }
                let p = self.median_power_dbm(nodes, a, b, &pos);
                let rx = &nodes[b].radio.cfg;
                if p >= rx.interference_floor_dbm {
                    links.push(LinkInfo { a, b, rx_power_dbm: p, in_rx_range: p >= rx.rx_threshold_dbm, in_cs_range: p >= rx.cs_threshold_dbm });
                }
            }
        }
        links
    }

    /// Fills `arrivals` with the signals of a transmission `src` starts
    /// now, in order of arrival; per-frame shadowing draws from the
    /// transmitter's stream, one draw per node in reach.
    pub(super) fn arrivals<P>(&mut self, nodes: &mut [Node<P>], src: NodeId, now: Time, arrivals: &mut Vec<Arrival>) {
        let mut computed = std::mem::take(&mut self.scratch_reach);
        let cached = self.refresh_reach(nodes, now);
        if !cached {
            let pos: Vec<[f64; 3]> = nodes.iter().map(|n| n.mobility.position(now)).collect();
            self.compute_reach(nodes, src, &pos, &mut computed);
        }
        let reach = if cached { &self.reach[src] } else { &computed };
        match nodes[src].radio.cfg.propagation {
            Propagation::Shadowing { sigma_db, per: ShadowingPer::Frame, .. } => {
                for r in reach {
                    let z: f64 = nodes[src].shadowing_rng.sample(StandardNormal);
                    arrivals.push(Arrival { rx: r.rx, power_mw: phy::dbm_to_mw(r.power_dbm + sigma_db * z), delay: r.delay });
                }
                arrivals.retain(|a| a.power_mw >= nodes[a.rx as usize].radio.floor_mw);
            }
            _ => arrivals.extend(reach.iter().map(|r| Arrival { rx: r.rx, power_mw: r.power_mw, delay: r.delay })),
        }
        self.scratch_reach = computed;
    }

    /// Median power from `a` at `b`: propagation and the link's extra loss.
    fn median_power_dbm<P>(&self, nodes: &[Node<P>], a: NodeId, b: NodeId, pos: &[[f64; 3]]) -> f64 {
        let (ta, tb) = (&nodes[a].radio.cfg, &nodes[b].radio.cfg);
        let d = phy::distance(pos[a], pos[b]);
        let extra = self.links.get(&pair_key(a, b)).map_or(0.0, |l| l.extra_loss_db);
        phy::median_rx_power_dbm(ta, pos[a][2], tb, pos[b][2], d) - extra
    }

    /// The fixed per-pair shadowing draw (standard normal), symmetric.
    fn link_shadowing_draw(&mut self, a: NodeId, b: NodeId) -> f64 {
        let key = pair_key(a, b);
        let seed = self.seed;
        *self.link_shadowing.entry(key).or_insert_with(|| rng::stream(seed, Purpose::ShadowingLink, key.0 as u64, key.1 as u64).sample(StandardNormal))
    }

    /// Fills `out` with the receivers of `src`'s signals at the current time.
    fn compute_reach<P>(&mut self, nodes: &[Node<P>], src: NodeId, pos: &[[f64; 3]], out: &mut Vec<Reach>) {
        out.clear();
        let tx_prop = nodes[src].radio.cfg.propagation;
        let per_frame = matches!(tx_prop, Propagation::Shadowing { per: ShadowingPer::Frame, .. });
        for rx in 0..nodes.len() {
            if rx == src {
                continue;
            }
            let mut p = self.median_power_dbm(nodes, src, rx, pos);
            if let Propagation::Shadowing { sigma_db, per: ShadowingPer::Link, .. } = tx_prop {
                p += sigma_db * self.link_shadowing_draw(src, rx);
            }
            // With a new draw per frame, anyone may be reached: keep them all.
            if per_frame || p >= nodes[rx].radio.cfg.interference_floor_dbm {
                let delay = phy::propagation_delay_ns(phy::distance(pos[src], pos[rx]));
                out.push(Reach { rx: rx as u32, power_dbm: p, power_mw: phy::dbm_to_mw(p), delay });
            }
        }
        out.sort_by_key(|r| (r.delay, r.rx));
    }

    /// Brings mobility up to now; rebuilds the reach cache when everybody
    /// stands still. Returns whether the cache is valid.
    fn refresh_reach<P>(&mut self, nodes: &mut [Node<P>], now: Time) -> bool {
        if self.reach_valid {
            return true;
        }
        let mut moving = false;
        for n in nodes.iter_mut() {
            n.mobility.advance_to(now);
            moving |= !n.mobility.is_stationary();
        }
        if moving {
            return false;
        }
        let pos: Vec<[f64; 3]> = nodes.iter().map(|n| n.mobility.position(now)).collect();
        for src in 0..nodes.len() {
            let mut list = std::mem::take(&mut self.reach[src]);
            self.compute_reach(nodes, src, &pos, &mut list);
            self.reach[src] = list;
        }
        self.reach_valid = true;
        true
    }
}

fn pair_key(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}
