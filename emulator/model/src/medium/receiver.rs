//! The PHY receive side: arriving signals, locking on a frame, SINR and
//! capture, and the decision at the frame's end (weak, collided, bit errors
//! or decoded).

use rand::RngExt;

use super::{Action, Medium, RadioState};
use crate::phy;
use crate::rng::Stream;
use crate::stats::NodeCounters;
use crate::NodeId;

/// The frame a receiver is locked on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lock {
    pub tx: u32,
    pub power_mw: f64,
    pub min_sinr: f64,
    /// The SINR fell under the capture threshold at some point.
    collided: bool,
}

/// What a new signal did beyond the receiver.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrived {
    /// A frame at or above the carrier-sense threshold captured under the
    /// locked one: with `eifs_nav` (ns-2's capture()) the weaker frame is
    /// ignored, but the NAV covers it and an EIFS after it.
    pub captured_under_nav: bool,
    /// It took the receiver over from a weaker frame (`capture_restart`,
    /// counted as a collision).
    pub took_over: bool,
}

#[derive(Debug)]
pub(super) struct Receiver {
    /// Signals arriving now: (transmission, power).
    signals: Vec<(u32, f64)>,
    signal_mw: f64,
    lock: Option<Lock>,
    /// Data frames for others are handed up too (as overheard).
    pub promiscuous: bool,
    bit_error_rng: Stream,
}

impl Receiver {
    pub(super) fn new(promiscuous: bool, bit_error_rng: Stream) -> Self {
        Receiver { signals: Vec::new(), signal_mw: 0.0, lock: None, promiscuous, bit_error_rng }
    }

    pub(super) fn is_locked(&self) -> bool {
        self.lock.is_some()
    }

    /// Physical carrier sense: the power arriving reaches the threshold.
    pub(super) fn senses_carrier(&self, radio: &RadioState) -> bool {
        self.signal_mw >= radio.cs_threshold_mw
    }

    /// The node starts transmitting (half duplex): a reception in progress
    /// is lost (with `receive_during_tx`, as ns-2, it keeps the receiver
    /// until its end). Returns whether one was dropped.
    pub(super) fn transmitting(&mut self, radio: &RadioState) -> bool {
        if radio.cfg.receive_during_tx {
            if let Some(lock) = self.lock.as_mut() {
                lock.collided = true;
            }
            false
        } else {
            self.lock.take().is_some()
        }
    }

    /// Transmission `tx` starts arriving with `power_mw`, while the node
    /// is `sending` or not.
    pub(super) fn signal_start(&mut self, tx: u32, power_mw: f64, sending: bool, radio: &RadioState) -> Arrived {
        self.signals.push((tx, power_mw));
        self.signal_mw += power_mw;
        let r = radio;
        let mut arrived = Arrived { captured_under_nav: false, took_over: false };
        if let Some(lock) = &mut self.lock {
            let sinr = lock.power_mw / (r.noise_mw + self.signal_mw - lock.power_mw);
            lock.min_sinr = lock.min_sinr.min(sinr);
            if sinr < r.capture_ratio {
                lock.collided = true;
            }
            arrived.captured_under_nav = r.cfg.eifs_nav && power_mw >= r.cs_threshold_mw && lock.power_mw >= r.capture_ratio * power_mw;
            if !sending && r.cfg.capture_restart && power_mw >= r.cs_threshold_mw {
                let new_sinr = power_mw / (r.noise_mw + self.signal_mw - power_mw);
                if new_sinr >= r.capture_ratio {
                    // The stronger newcomer takes the receiver over.
                    self.lock = Some(Lock { tx, power_mw, min_sinr: new_sinr, collided: false });
                    arrived.took_over = true;
                }
            }
        } else if sending {
            // Half duplex: the frame cannot be received. With
            // `receive_during_tx` (ns-2) it still takes the receiver, lost.
            if r.cfg.receive_during_tx && power_mw >= r.cs_threshold_mw {
                self.lock = Some(Lock { tx, power_mw, min_sinr: 0.0, collided: true });
            }
        } else if power_mw >= r.cs_threshold_mw {
            let sinr = power_mw / (r.noise_mw + self.signal_mw - power_mw);
            self.lock = Some(Lock { tx, power_mw, min_sinr: sinr, collided: sinr < r.capture_ratio });
        }
        arrived
    }

    /// Transmission `tx` stops arriving; returns the lock if it was the
    /// frame locked on.
    pub(super) fn signal_end(&mut self, tx: u32) -> Option<Lock> {
        if let Some(i) = self.signals.iter().position(|s| s.0 == tx) {
            self.signals.swap_remove(i);
        }
        // Re-summed rather than subtracted, so rounding cannot accumulate.
        self.signal_mw = self.signals.iter().map(|s| s.1).sum();
        match self.lock {
            Some(lock) if lock.tx == tx => self.lock.take(),
            _ => None,
        }
    }

    /// Decides a locked reception of `bytes` at its end, with the link's
    /// bit error rate; counts a loss. Returns whether the frame was lost.
    pub(super) fn is_lost(&mut self, lock: &Lock, bytes: u32, bit_error_rate: f64, radio: &RadioState, counters: &mut NodeCounters) -> bool {
        let bits = 8.0 * bytes as f64;
        if lock.power_mw < radio.rx_threshold_mw {
            counters.rx_weak += 1;
            true
        } else if lock.collided {
            counters.rx_collisions += 1;
            true
        } else if bit_error_rate > 0.0 && self.bit_error_rng.random::<f64>() < 1.0 - (1.0 - bit_error_rate).powf(bits) {
            counters.rx_errors += 1;
            true
        } else {
            false
        }
    }
}

impl<P: Clone> Medium<P> {
    pub(super) fn signal_start(&mut self, n: NodeId, tx: u32, power_mw: f64, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let arrived = node.receiver.signal_start(tx, power_mw, node.sending.is_some(), &node.radio);
        if arrived.took_over {
            self.stats.node_mut(n).rx_collisions += 1;
            self.stats.touch(n);
        }
        if arrived.captured_under_nav {
            let until = self.now + self.transmissions.get(tx).airtime + self.nodes[n].radio.timings.eifs;
            self.set_nav(n, until);
        }
        self.update_carrier(n, out);
    }

    pub(super) fn signal_end(&mut self, n: NodeId, tx: u32, out: &mut Vec<Action<P>>) {
        if let Some(lock) = self.nodes[n].receiver.signal_end(tx) {
            if self.finish_reception(n, tx, &lock) {
                self.mac_receive(n, tx, lock.power_mw, lock.min_sinr, out);
            }
            self.after_reception(n, out);
        }
        self.update_carrier(n, out);
        self.kick(n, out);
    }

    /// Decides a locked reception at its end; returns whether the frame was
    /// decoded. A failure makes the next idle period start with EIFS.
    fn finish_reception(&mut self, n: NodeId, tx: u32, lock: &Lock) -> bool {
        let t = self.transmissions.get(tx);
        let (src, bytes) = (t.src, t.spec.bytes);
        let node = &mut self.nodes[n];
        let bit_error_rate = self.channel.bit_error_rate(src, n).unwrap_or(node.radio.cfg.bit_error_rate);
        let lost = node.receiver.is_lost(lock, bytes, bit_error_rate, &node.radio, self.stats.node_mut(n));
        let nav_until = node.carrier.reception_ended(lost, node.sending.is_some(), self.now, &node.radio);
        self.stats.touch(n);
        if let Some(until) = nav_until {
            self.set_nav(n, until);
        }
        !lost
    }

    /// Hands a decoded data frame up (`Action::Deliver`) and counts it.
    pub(super) fn deliver(&mut self, n: NodeId, tx: u32, power_mw: f64, sinr: f64, overheard: bool, out: &mut Vec<Action<P>>) {
        let t = self.transmissions.get(tx);
        let Some(payload) = t.spec.payload.clone() else { return };
        let (from, len) = (t.src, t.spec.len);
        let rx_power_dbm = phy::mw_to_dbm(power_mw);
        let sinr_db = phy::mw_to_dbm(sinr);
        self.stats.delivered(n, from, len, rx_power_dbm, sinr_db, overheard);
        out.push(Action::Deliver { time: self.now, node: n, from, payload, len, rx_power_dbm, sinr_db, overheard });
    }
}
