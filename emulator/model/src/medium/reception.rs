//! The PHY receive side: arriving signals, locking on a frame, SINR and
//! capture, bit errors, and carrier sense (physical and virtual).

use rand::RngExt;

use super::{Action, Lock, Medium, Transmission};
use crate::phy;
use crate::stats::to_milli;
use crate::{NodeId, Time};

/// How a locked reception ended.
enum RxResult {
    Decoded { min_sinr: f64, power_mw: f64 },
    Lost,
}

impl<P: Clone> Medium<P> {
    pub(super) fn signal_start(&mut self, n: NodeId, tx: u32, power_mw: f64, out: &mut Vec<Action<P>>) {
        let airtime = self.transmissions[tx as usize].airtime;
        let now = self.now;
        let node = &mut self.nodes[n];
        node.signals.push((tx, power_mw));
        node.signal_mw += power_mw;
        let r = &node.radio;
        let mut nav_until = None;
        if let Some(lock) = &mut node.lock {
            let sinr = lock.power_mw / (r.noise_mw + node.signal_mw - lock.power_mw);
            lock.min_sinr = lock.min_sinr.min(sinr);
            if sinr < r.capture_ratio {
                lock.collided = true;
            }
            if r.cfg.eifs_nav && power_mw >= r.cs_threshold_mw && lock.power_mw >= r.capture_ratio * power_mw {
                // ns-2's capture(): the weaker frame is ignored, but the NAV
                // covers it and an EIFS after it.
                nav_until = Some(now + airtime + r.timings.eifs);
            }
            if node.sending.is_none() && r.cfg.capture_restart && power_mw >= r.cs_threshold_mw {
                let new_sinr = power_mw / (r.noise_mw + node.signal_mw - power_mw);
                if new_sinr >= r.capture_ratio {
                    // The stronger newcomer takes the receiver over.
                    node.stats.rx_collisions += 1;
                    node.lock = Some(Lock { tx, power_mw, min_sinr: new_sinr, collided: false });
                    self.touch(n);
                }
            }
        } else if node.sending.is_some() {
            // Half duplex: the frame cannot be received. With
            // `receive_during_tx` (ns-2) it still takes the receiver, lost.
            if r.cfg.receive_during_tx && power_mw >= r.cs_threshold_mw {
                node.lock = Some(Lock { tx, power_mw, min_sinr: 0.0, collided: true });
            }
        } else if power_mw >= r.cs_threshold_mw {
            let sinr = power_mw / (r.noise_mw + node.signal_mw - power_mw);
            node.lock = Some(Lock { tx, power_mw, min_sinr: sinr, collided: sinr < r.capture_ratio });
        }
        if let Some(until) = nav_until {
            self.set_nav(n, until);
        }
        self.update_carrier(n, out);
    }

    pub(super) fn signal_end(&mut self, n: NodeId, tx: u32, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        if let Some(i) = node.signals.iter().position(|s| s.0 == tx) {
            node.signals.swap_remove(i);
        }
        // Re-summed rather than subtracted, so rounding cannot accumulate.
        node.signal_mw = node.signals.iter().map(|s| s.1).sum();
        let result = match node.lock {
            Some(lock) if lock.tx == tx => {
                node.lock = None;
                Some(self.finish_reception(n, tx, lock))
            }
            _ => None,
        };
        if let Some(RxResult::Decoded { min_sinr, power_mw }) = result {
            self.mac_receive(n, tx, power_mw, min_sinr, out);
        }
        if result.is_some() {
            self.after_reception(n, out);
        }
        self.update_carrier(n, out);
        self.kick(n, out);
    }

    /// Decides a locked reception at its end: weak, collided, bit errors, or
    /// decoded. Failures make the next idle period start with EIFS.
    fn finish_reception(&mut self, n: NodeId, tx: u32, lock: Lock) -> RxResult {
        let t: &Transmission<P> = &self.transmissions[tx as usize];
        let (src, bits) = (t.src, 8.0 * t.bytes as f64);
        let ber = self.links.get(&super::pair_key(src, n)).and_then(|l| l.bit_error_rate).unwrap_or(self.nodes[n].radio.cfg.bit_error_rate);
        let now = self.now;
        let node = &mut self.nodes[n];
        let lost = if lock.power_mw < node.radio.rx_threshold_mw {
            node.stats.rx_weak += 1;
            true
        } else if lock.collided {
            node.stats.rx_collisions += 1;
            true
        } else if ber > 0.0 && node.bit_error_rng.random::<f64>() < 1.0 - (1.0 - ber).powf(bits) {
            node.stats.rx_errors += 1;
            true
        } else {
            false
        };
        let nav_until = if node.radio.cfg.eifs_nav {
            // ns-2 (recv_timer): a failed reception sets the NAV to EIFS,
            // unless the node is transmitting (then it never saw the frame).
            node.eifs_pending = false;
            (lost && node.sending.is_none()).then_some(now + node.radio.timings.eifs)
        } else {
            node.eifs_pending = lost;
            None
        };
        self.touch(n);
        if let Some(until) = nav_until {
            self.set_nav(n, until);
        }
        if lost {
            RxResult::Lost
        } else {
            RxResult::Decoded { min_sinr: lock.min_sinr, power_mw: lock.power_mw }
        }
    }

    /// Hands a decoded data frame up (`Action::Deliver`) and counts it.
    pub(super) fn deliver(&mut self, n: NodeId, tx: u32, power_mw: f64, sinr: f64, overheard: bool, out: &mut Vec<Action<P>>) {
        let t = &self.transmissions[tx as usize];
        let Some(payload) = t.payload.clone() else { return };
        let (from, len) = (t.src, t.len);
        let rx_power_dbm = phy::mw_to_dbm(power_mw);
        let sinr_db = phy::mw_to_dbm(sinr);
        let nn = self.nodes.len();
        let stats = &mut self.nodes[n].stats;
        if overheard {
            stats.overheard_frames += 1;
        } else {
            stats.rx_frames += 1;
            stats.rx_bytes += len as u64;
            self.peer_stats[n * nn + from].rx_frames += 1;
        }
        let peer = &mut self.peer_stats[n * nn + from];
        peer.last_rx_power_mdbm = to_milli(rx_power_dbm);
        peer.last_sinr_mdb = to_milli(sinr_db);
        self.touch(n);
        out.push(Action::Deliver { time: self.now, node: n, from, payload, len, rx_power_dbm, sinr_db, overheard });
    }

    /// Sets the NAV to at least `until` (virtual carrier sense).
    pub(super) fn set_nav(&mut self, n: NodeId, until: Time) {
        let node = &mut self.nodes[n];
        if until > node.nav_until && until > self.now {
            node.nav_until = until;
            node.nav_generation = node.nav_generation.wrapping_add(1);
            let generation = node.nav_generation;
            self.schedule(until, super::Event::NavEnd { node: n as u32, generation });
        }
    }

    /// Recomputes carrier sense (own transmission, sensed power, NAV). Going
    /// busy freezes the backoff countdown; going idle starts the DIFS/EIFS.
    pub(super) fn update_carrier(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let busy = node.sending.is_some() || node.signal_mw >= node.radio.cs_threshold_mw || node.nav_until > now;
        if busy == node.busy {
            return;
        }
        node.busy = busy;
        if busy {
            node.busy_since = now;
            self.freeze_countdown(n);
        } else {
            node.stats.busy_ns += now - node.busy_since;
            node.ifs_from = now;
            node.ifs = if node.eifs_pending { node.radio.timings.eifs } else { node.radio.timings.difs };
            node.eifs_pending = false;
            self.touch(n);
            self.kick(n, out);
        }
    }
}
