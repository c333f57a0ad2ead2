//! Carrier sense, physical and virtual (the NAV), and the interframe space
//! (DIFS or EIFS) that starts when the medium goes idle.

use super::{Action, Event, Medium, RadioState};
use crate::phy::MacTimings;
use crate::stats::NodeCounters;
use crate::{NodeId, Time};

/// How the medium changed for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sensed {
    WentBusy,
    WentIdle,
}

#[derive(Debug)]
pub(super) struct CarrierSense {
    busy: bool,
    busy_since: Time,
    nav_until: Time,
    nav_generation: u32,
    /// IFS counting starts here (end of the last busy period or timeout).
    ifs_from: Time,
    /// DIFS or EIFS.
    ifs: Time,
    /// The last reception failed: the next idle period starts with EIFS.
    eifs_pending: bool,
}

impl CarrierSense {
    pub(super) fn new(timings: &MacTimings) -> Self {
        CarrierSense { busy: false, busy_since: 0, nav_until: 0, nav_generation: 0, ifs_from: 0, ifs: timings.difs, eifs_pending: false }
    }

    pub(super) fn is_busy(&self) -> bool {
        self.busy
    }

    /// When the interframe space ends, if the medium stays idle.
    pub(super) fn ifs_end(&self) -> Time {
        self.ifs_from + self.ifs
    }

    pub(super) fn nav_set(&self, now: Time) -> bool {
        self.nav_until > now
    }

    /// Whether a NavEnd event of this generation is the NAV's current end.
    pub(super) fn is_nav_end(&self, generation: u32) -> bool {
        self.nav_generation == generation
    }

    /// Extends the NAV to `until`; returns the generation of its new end,
    /// to schedule, if it grew.
    pub(super) fn extend_nav(&mut self, until: Time, now: Time) -> Option<u32> {
        if until <= self.nav_until || until <= now {
            return None;
        }
        self.nav_until = until;
        self.nav_generation = self.nav_generation.wrapping_add(1);
        Some(self.nav_generation)
    }

    /// Recomputes the medium's state from what the PHY senses (own
    /// transmission or power over the carrier-sense threshold) and the NAV.
    /// Going idle counts the busy period and starts DIFS (EIFS after a
    /// failed reception).
    pub(super) fn update(&mut self, sensed: bool, now: Time, timings: &MacTimings, counters: &mut NodeCounters) -> Option<Sensed> {
        let busy = sensed || self.nav_until > now;
        if busy == self.busy {
            return None;
        }
        self.busy = busy;
        if busy {
            self.busy_since = now;
            return Some(Sensed::WentBusy);
        }
        counters.busy_ns += now - self.busy_since;
        self.ifs_from = now;
        self.ifs = if self.eifs_pending { timings.eifs } else { timings.difs };
        self.eifs_pending = false;
        Some(Sensed::WentIdle)
    }

    /// A CTS/ACK timeout ends our exchange like the end of a busy period:
    /// the next countdown starts after DIFS/EIFS from here.
    pub(super) fn exchange_ended(&mut self, now: Time) {
        self.ifs_from = self.ifs_from.max(now);
    }

    /// A locked reception ended (`lost` or decoded); returns the NAV it
    /// sets, if any. ns-2's way with `eifs_nav` (recv_timer): a failed
    /// reception sets the NAV to EIFS, unless the node is transmitting
    /// (then it never saw the frame); otherwise the next idle period starts
    /// with EIFS.
    pub(super) fn reception_ended(&mut self, lost: bool, sending: bool, now: Time, radio: &RadioState) -> Option<Time> {
        if radio.cfg.eifs_nav {
            self.eifs_pending = false;
            (lost && !sending).then_some(now + radio.timings.eifs)
        } else {
            self.eifs_pending = lost;
            None
        }
    }
}

impl<P: Clone> Medium<P> {
    /// Sets the NAV to at least `until` (virtual carrier sense).
    pub(super) fn set_nav(&mut self, n: NodeId, until: Time) {
        if let Some(generation) = self.nodes[n].carrier.extend_nav(until, self.now) {
            self.timeline.schedule(until, Event::NavEnd { node: n as u32, generation });
        }
    }

    /// Recomputes carrier sense (own transmission, sensed power, NAV). Going
    /// busy freezes the backoff countdown; going idle may start access.
    pub(super) fn update_carrier(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let sensed = node.sending.is_some() || node.receiver.senses_carrier(&node.radio);
        match node.carrier.update(sensed, self.now, &node.radio.timings, self.stats.node_mut(n)) {
            None => {}
            Some(Sensed::WentBusy) => self.freeze_countdown(n),
            Some(Sensed::WentIdle) => {
                self.stats.touch(n);
                self.kick(n, out);
            }
        }
    }
}
