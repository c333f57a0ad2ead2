//! DCF channel access (802.11-2012 §9.3, with the choices of the project's
//! issue 2): DIFS/EIFS and a slotted backoff that freezes while the medium
//! is busy, the contention window, and post-backoff. The frame exchange
//! that follows access (RTS/CTS, DATA, ACK, retries) is `exchange.rs`.

use rand::RngExt;

use super::{Action, Event, Medium};
use crate::config::RadioConfig;
use crate::rng::Stream;
use crate::stats::NodeCounters;
use crate::{NodeId, Time};

#[derive(Debug)]
pub(super) struct Dcf {
    pub cw: u32,
    /// Slots of the pending backoff.
    backoff: Option<u32>,
    /// Start of the running countdown (after DIFS/EIFS).
    countdown_from: Option<Time>,
    generation: u32,
    rng: Stream,
}

impl Dcf {
    pub(super) fn new(radio: &RadioConfig, rng: Stream) -> Self {
        Dcf { cw: radio.cw_min, backoff: None, countdown_from: None, generation: 0, rng }
    }

    /// Draws a random backoff in [0, CW] slots.
    fn draw_backoff(&mut self, counters: &mut NodeCounters) -> u32 {
        let slots = self.rng.random_range(0..=self.cw);
        self.backoff = Some(slots);
        counters.backoffs += 1;
        slots
    }

    pub(super) fn double_cw(&mut self, radio: &RadioConfig) {
        self.cw = (2 * self.cw + 1).min(radio.cw_max);
    }

    pub(super) fn reset_cw(&mut self, radio: &RadioConfig) {
        self.cw = radio.cw_min;
    }

    /// Keeps CW within a new radio's bounds.
    pub(super) fn clamp_cw(&mut self, radio: &RadioConfig) {
        self.cw = self.cw.clamp(radio.cw_min, radio.cw_max);
    }

    /// Whether an Access event of this generation is the running countdown's.
    pub(super) fn is_countdown(&self, generation: u32) -> bool {
        self.generation == generation
    }

    /// Starts the countdown at `from`; returns its generation.
    fn start_countdown(&mut self, from: Time) -> u32 {
        self.countdown_from = Some(from);
        self.generation = self.generation.wrapping_add(1);
        self.generation
    }

    /// Stops a running countdown at `now`, keeping the whole idle slots
    /// counted so far; returns whether one was running.
    fn freeze(&mut self, now: Time, slot: Time) -> bool {
        let Some(from) = self.countdown_from.take() else { return false };
        self.generation = self.generation.wrapping_add(1);
        let elapsed = now.saturating_sub(from) / slot;
        self.backoff = self.backoff.map(|k| k.saturating_sub(elapsed.min(u32::MAX as u64) as u32));
        true
    }

    /// The countdown reached zero.
    fn countdown_done(&mut self) {
        self.countdown_from = None;
        self.backoff = None;
    }
}

impl<P: Clone> Medium<P> {
    /// A frame reached a MAC that had nothing to send.
    pub(super) fn dcf_frame_arrived(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &self.nodes[n];
        if node.carrier.is_busy() {
            // Access starts on a busy medium: defer and back off.
            self.stats.node_mut(n).defers += 1;
            if self.nodes[n].dcf.backoff.is_none() {
                self.draw_backoff(n);
            }
        }
        self.kick(n, out);
    }

    pub(super) fn draw_backoff(&mut self, n: NodeId) -> u32 {
        let slots = self.nodes[n].dcf.draw_backoff(self.stats.node_mut(n));
        self.stats.touch(n);
        slots
    }

    /// Starts channel access if the node has something to do and nothing
    /// stops it: sends at once (no backoff pending, idle for DIFS/EIFS
    /// already) or schedules the end of the IFS + backoff countdown.
    pub(super) fn kick(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        if self.tdma.is_some() {
            return;
        }
        let now = self.now;
        let node = &self.nodes[n];
        if node.carrier.is_busy() || node.dcf.countdown_from.is_some() || !node.exchange.is_idle() {
            return;
        }
        let start = node.carrier.ifs_end();
        let slots = match node.dcf.backoff {
            Some(k) => k,
            None if !node.has_frame() => return,
            None if now >= start => {
                self.start_exchange(n, out);
                return;
            }
            None => self.draw_backoff(n),
        };
        let node = &mut self.nodes[n];
        let from = start.max(now);
        let generation = node.dcf.start_countdown(from);
        self.timeline.schedule(from + slots as u64 * node.radio.timings.slot, Event::Access { node: n as u32, generation });
    }

    /// The medium went busy: keep the whole idle slots counted so far.
    pub(super) fn freeze_countdown(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        if node.dcf.freeze(self.now, node.radio.timings.slot) && node.has_frame() {
            self.stats.node_mut(n).defers += 1;
            self.stats.touch(n);
        }
    }

    /// The countdown reached zero.
    pub(super) fn access(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        node.dcf.countdown_done();
        if node.has_frame() {
            self.start_exchange(n, out);
        }
    }

    /// Doubles CW and backs off again: after a failed attempt, or a DATA
    /// withheld after its CTS.
    pub(super) fn back_off_again(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        node.dcf.double_cw(&node.radio.cfg);
        self.draw_backoff(n);
    }

    /// Draws the post-backoff after a frame is done.
    pub(super) fn post_backoff(&mut self, n: NodeId) {
        self.draw_backoff(n);
        let node = &self.nodes[n];
        if node.carrier.is_busy() && node.has_frame() {
            self.stats.node_mut(n).defers += 1;
        }
    }
}
