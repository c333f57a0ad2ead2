//! The 802.11 DCF MAC (802.11-2012 §9.3, with the choices of the project's
//! issue 2): channel access with DIFS/EIFS and a slotted backoff that freezes
//! while the medium is busy, post-backoff, RTS/CTS, ACK, retries, NAV and
//! duplicate detection. The frame exchange logic (responses, ACK handling,
//! finishing a frame) is shared with TDMA.

use rand::RngExt;

use super::{Action, Dest, Exchange, FrameKind, Medium, Outgoing, Response, TxOutcome};
use crate::phy;
use crate::stats::record_attempts;
use crate::NodeId;

/// How a frame's MAC work ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Finish {
    Acked,
    Broadcast,
    RetryDrop,
}

impl<P: Clone> Medium<P> {
    fn has_frame(&self, n: NodeId) -> bool {
        let node = &self.nodes[n];
        node.current.is_some() || !node.queue.is_empty()
    }

    /// A frame reached a MAC that had nothing to send.
    pub(super) fn dcf_frame_arrived(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &self.nodes[n];
        if node.busy {
            // Access starts on a busy medium: defer and back off.
            self.nodes[n].stats.defers += 1;
            if self.nodes[n].backoff.is_none() {
                self.draw_backoff(n);
            }
        }
        self.kick(n, out);
    }

    /// Draws a random backoff in [0, CW] slots.
    fn draw_backoff(&mut self, n: NodeId) -> u32 {
        let node = &mut self.nodes[n];
        let slots = node.backoff_rng.random_range(0..=node.cw);
        node.backoff = Some(slots);
        node.stats.backoffs += 1;
        self.touch(n);
        slots
    }

    /// Starts channel access if the node has something to do and nothing
    /// stops it: sends at once (no backoff pending, idle for DIFS/EIFS
    /// already) or schedules the end of the IFS + backoff countdown.
    pub(super) fn kick(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        if self.is_tdma() {
            return;
        }
        let now = self.now;
        let has_frame = self.has_frame(n);
        let node = &self.nodes[n];
        if node.busy || node.countdown_from.is_some() || node.exchange != Exchange::Idle || node.response.is_some() {
            return;
        }
        let start = node.ifs_from + node.ifs;
        let slots = match node.backoff {
            Some(k) => k,
            None if !has_frame => return,
            None if now >= start => {
                self.start_exchange(n, out);
                return;
            }
            None => self.draw_backoff(n),
        };
        let node = &mut self.nodes[n];
        let from = start.max(now);
        node.countdown_from = Some(from);
        node.access_generation = node.access_generation.wrapping_add(1);
        let (generation, slot) = (node.access_generation, node.radio.timings.slot);
        self.schedule(from + slots as u64 * slot, super::Event::Access { node: n as u32, generation });
    }

    /// The medium went busy: keep the whole idle slots counted so far.
    pub(super) fn freeze_countdown(&mut self, n: NodeId) {
        let has_frame = self.has_frame(n);
        let now = self.now;
        let node = &mut self.nodes[n];
        let Some(from) = node.countdown_from.take() else { return };
        node.access_generation = node.access_generation.wrapping_add(1);
        let elapsed = now.saturating_sub(from) / node.radio.timings.slot;
        node.backoff = node.backoff.map(|k| k.saturating_sub(elapsed.min(u32::MAX as u64) as u32));
        if has_frame {
            node.stats.defers += 1;
            self.touch(n);
        }
    }

    /// The countdown reached zero.
    pub(super) fn access(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        node.countdown_from = None;
        node.backoff = None;
        if self.has_frame(n) {
            self.start_exchange(n, out);
        }
    }

    /// Takes the head-of-line frame (if not already working on one).
    pub(super) fn take_head_of_line(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        if node.current.is_some() {
            return;
        }
        let Some(super::Queued { frame, mpdu_bytes }) = node.queue.pop_front() else { return };
        node.current = Some(Outgoing { frame, mpdu_bytes, seq: node.next_seq, short_retries: 0, long_retries: 0, rts_attempts: 0, data_attempts: 0 });
        node.next_seq = (node.next_seq + 1) & 0x0fff;
        node.stats.queue_len = node.queue.len() as u64;
        self.touch(n);
    }

    /// Sends the RTS or, without RTS/CTS, the data frame.
    fn start_exchange(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        self.take_head_of_line(n);
        let node = &mut self.nodes[n];
        let Some(cur) = node.current.as_mut() else { return };
        let mpdu = cur.mpdu_bytes;
        let cfg = &node.radio.cfg;
        if cur.frame.dst != Dest::Broadcast && mpdu > cfg.rts_threshold_bytes {
            cur.rts_attempts += 1;
            node.stats.rts_attempts += 1;
            let t = node.radio.timings;
            let duration = 3 * t.sifs + t.cts + phy::airtime_ns(cfg, mpdu, cfg.data_rate_bps) + t.ack;
            let (dst, seq, basic) = (cur.frame.dst, cur.seq, cfg.basic_rate_bps);
            // The RTS carries the packet it announces only for air captures,
            // which take an unknown receiver's address from it.
            let announced = Some(cur.frame.payload.clone());
            node.exchange = Exchange::Rts;
            self.transmit(n, FrameKind::Rts, dst, phy::RTS_BYTES, basic, duration, seq, false, 0, announced, out);
        } else {
            self.send_data(n, out);
        }
    }

    /// Puts the current data frame on the air.
    pub(super) fn send_data(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let Some(cur) = node.current.as_mut() else { return };
        cur.data_attempts += 1;
        node.stats.data_attempts += 1;
        let cfg = &node.radio.cfg;
        let unicast = cur.frame.dst != Dest::Broadcast;
        let (rate, duration) = if unicast { (cfg.data_rate_bps, node.radio.timings.sifs + node.radio.timings.ack) } else { (cfg.basic_rate_bps, 0) };
        let (dst, seq, retry, len, mpdu) = (cur.frame.dst, cur.seq, cur.data_attempts > 1, cur.frame.len, cur.mpdu_bytes);
        let payload = cur.frame.payload.clone();
        node.exchange = Exchange::Data;
        self.transmit(n, FrameKind::Data, dst, mpdu, rate, duration, seq, retry, len, Some(payload), out);
    }

    /// Our RTS or DATA left the air: wait for the response, or (broadcast) done.
    pub(super) fn exchange_tx_end(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let broadcast = node.current.as_ref().is_some_and(|c| c.frame.dst == Dest::Broadcast);
        match node.exchange {
            Exchange::Rts => {
                node.exchange = Exchange::AwaitCts;
                self.arm_timeout(n);
            }
            Exchange::Data if broadcast => self.finish_frame(n, Finish::Broadcast, out),
            Exchange::Data => {
                node.exchange = Exchange::AwaitAck;
                self.arm_timeout(n);
            }
            _ => {}
        }
    }

    fn arm_timeout(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        node.timeout_generation = node.timeout_generation.wrapping_add(1);
        node.timeout_expired = false;
        let (generation, at) = (node.timeout_generation, self.now + node.radio.timings.response_timeout);
        self.schedule(at, super::Event::Timeout { node: n as u32, generation });
    }

    fn disarm_timeout(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        node.timeout_generation = node.timeout_generation.wrapping_add(1);
        node.timeout_expired = false;
    }

    /// The CTS/ACK timeout expired; a reception in progress is waited for.
    pub(super) fn timeout(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        if self.nodes[n].lock.is_some() {
            self.nodes[n].timeout_expired = true;
        } else {
            self.fail_attempt(n, out);
        }
    }

    /// A reception ended: if the timeout had expired and the reception did
    /// not bring our response, the attempt failed.
    pub(super) fn after_reception(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &self.nodes[n];
        if node.timeout_expired && matches!(node.exchange, Exchange::AwaitCts | Exchange::AwaitAck) {
            self.fail_attempt(n, out);
        }
    }

    /// No CTS or ACK: count the retry, drop at the limit, else back off with
    /// a doubled CW (DCF) or wait for the next own slot (TDMA).
    fn fail_attempt(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        self.disarm_timeout(n);
        let tdma = self.is_tdma();
        let now = self.now;
        let node = &mut self.nodes[n];
        let cfg = &node.radio.cfg;
        let Some(cur) = node.current.as_mut() else { return };
        let long = tdma || cur.mpdu_bytes > cfg.rts_threshold_bytes;
        let limit_hit = if node.exchange == Exchange::AwaitCts {
            node.stats.cts_timeouts += 1;
            cur.short_retries += 1;
            cur.short_retries >= cfg.short_retry_limit
        } else {
            node.stats.ack_timeouts += 1;
            if long {
                cur.long_retries += 1;
                cur.long_retries >= cfg.long_retry_limit
            } else {
                cur.short_retries += 1;
                cur.short_retries >= cfg.short_retry_limit
            }
        };
        node.exchange = Exchange::Idle;
        // The timeout ends our exchange like the end of a busy period: the
        // next countdown starts after DIFS/EIFS from here.
        node.ifs_from = node.ifs_from.max(now);
        self.touch(n);
        if limit_hit {
            self.finish_frame(n, Finish::RetryDrop, out);
        } else if !tdma {
            let node = &mut self.nodes[n];
            node.cw = (2 * node.cw + 1).min(node.radio.cfg.cw_max);
            self.draw_backoff(n);
            if self.nodes[n].busy {
                self.nodes[n].stats.defers += 1;
            }
        }
        self.kick(n, out);
    }

    /// The current frame is done: count it, report it, reset CW and draw the
    /// post-backoff (DCF).
    pub(super) fn finish_frame(&mut self, n: NodeId, how: Finish, out: &mut Vec<Action<P>>) {
        let nn = self.nodes.len();
        let node = &mut self.nodes[n];
        let Some(cur) = node.current.take() else { return };
        node.exchange = Exchange::Idle;
        node.cw = node.radio.cfg.cw_min;
        let s = &mut node.stats;
        if cur.rts_attempts > 0 {
            record_attempts(&mut s.rts_attempts_hist, cur.rts_attempts);
        }
        record_attempts(&mut s.data_attempts_hist, cur.data_attempts);
        let (rts_attempts, data_attempts) = (cur.rts_attempts, cur.data_attempts);
        let outcome = match how {
            Finish::Acked => {
                s.tx_data_frames += 1;
                s.tx_bytes += cur.frame.len as u64;
                if let Dest::Node(d) = cur.frame.dst {
                    self.peer_stats[n * nn + d].tx_acked += 1;
                }
                TxOutcome::Acked { rts_attempts, data_attempts }
            }
            Finish::Broadcast => {
                s.tx_broadcast_frames += 1;
                s.tx_bytes += cur.frame.len as u64;
                TxOutcome::Broadcast
            }
            Finish::RetryDrop => {
                s.retry_drops += 1;
                if let Dest::Node(d) = cur.frame.dst {
                    self.peer_stats[n * nn + d].tx_failed += 1;
                }
                TxOutcome::RetryDrop { rts_attempts, data_attempts }
            }
        };
        let flush_to = match cur.frame.dst {
            Dest::Node(d) if how == Finish::RetryDrop && node.radio.cfg.retry_drop_flush && !cur.frame.priority => Some(Dest::Node(d)),
            _ => None,
        };
        self.touch(n);
        out.push(Action::TxDone { time: self.now, node: n, payload: cur.frame.payload, outcome });
        if let Some(dst) = flush_to {
            self.flush_queue_to(n, dst, out);
        }
        if !self.is_tdma() {
            self.draw_backoff(n);
            if self.nodes[n].busy && self.has_frame(n) {
                self.nodes[n].stats.defers += 1;
            }
        }
    }

    /// Every queued frame to `dst` leaves the queue as a `LinkDrop`, in
    /// queue order (ns-2 AODV's rt_ll_failed: the interface queue's packets
    /// for the broken next hop are dropped with the one that failed): after
    /// a retry drop with `retry_drop_flush`, or when a daemon asks.
    pub(super) fn flush_queue_to(&mut self, n: NodeId, dst: Dest, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let mut kept = std::collections::VecDeque::with_capacity(node.queue.len());
        for q in node.queue.drain(..) {
            if q.frame.dst == dst {
                node.stats.link_drops += 1;
                out.push(Action::TxDone { time: self.now, node: n, payload: q.frame.payload, outcome: TxOutcome::LinkDrop });
            } else {
                kept.push_back(q);
            }
        }
        node.queue = kept;
        node.stats.queue_len = node.queue.len() as u64;
        self.touch(n);
    }

    /// A frame was decoded at `n`: respond, deliver, or set the NAV.
    pub(super) fn mac_receive(&mut self, n: NodeId, tx: u32, power_mw: f64, sinr: f64, out: &mut Vec<Action<P>>) {
        let t = &self.transmissions[tx as usize];
        let (kind, src, dst, duration, seq, retry) = (t.kind, t.src, t.dst, t.duration, t.seq, t.retry);
        let now = self.now;
        let nn = self.nodes.len();
        let for_me = dst == Dest::Node(n);
        let node = &mut self.nodes[n];
        let timings = node.radio.timings;
        match kind {
            FrameKind::Rts if for_me => {
                // CTS only with our NAV clear and no exchange of our own going on.
                if node.nav_until <= now && node.exchange == Exchange::Idle && node.response.is_none() {
                    let duration = duration.saturating_sub(timings.sifs + timings.cts);
                    self.respond_after_sifs(n, Response::Cts { to: src, duration });
                }
            }
            FrameKind::Cts if for_me => {
                if node.exchange == Exchange::AwaitCts {
                    node.exchange = Exchange::DataDue;
                    if let Some(cur) = node.current.as_mut() {
                        cur.short_retries = 0;
                    }
                    self.disarm_timeout(n);
                    self.respond_after_sifs(n, Response::Data);
                }
            }
            FrameKind::Ack if for_me => {
                if node.exchange == Exchange::AwaitAck {
                    self.disarm_timeout(n);
                    self.finish_frame(n, Finish::Acked, out);
                }
            }
            FrameKind::Data if for_me => {
                // ACK every unicast data frame for us, regardless of NAV.
                if node.response.is_none() {
                    self.respond_after_sifs(n, Response::Ack { to: src });
                }
                let last = &mut self.last_seq[n * nn + src];
                if retry && *last == seq {
                    self.nodes[n].stats.rx_duplicates += 1;
                    self.touch(n);
                } else {
                    *last = seq;
                    self.deliver(n, tx, power_mw, sinr, false, out);
                }
            }
            FrameKind::Data if dst == Dest::Broadcast => self.deliver(n, tx, power_mw, sinr, false, out),
            _ => {
                if !for_me {
                    self.set_nav(n, now + duration);
                    if kind == FrameKind::Data && self.nodes[n].promiscuous {
                        self.deliver(n, tx, power_mw, sinr, true, out);
                    }
                }
            }
        }
    }

    fn respond_after_sifs(&mut self, n: NodeId, response: Response) {
        let node = &mut self.nodes[n];
        node.response = Some(response);
        let at = self.now + node.radio.timings.sifs;
        self.schedule(at, super::Event::Respond { node: n as u32 });
    }

    /// SIFS after a reception: send the CTS, ACK or DATA due.
    pub(super) fn respond(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let node = &mut self.nodes[n];
        if node.sending.is_some() {
            return;
        }
        let Some(response) = node.response.take() else { return };
        let busy = node.lock.is_some() || node.nav_until > now;
        if node.radio.cfg.responses_need_idle && busy && !matches!(response, Response::Ack { .. }) {
            // ns-2 (check_pktCTRL, check_pktTx): no CTS, and no DATA after a
            // CTS, while receiving or under NAV; the DATA waits for a new
            // RTS after a backoff with a doubled CW, no retry counted.
            if response == Response::Data {
                node.exchange = Exchange::Idle;
                node.cw = (2 * node.cw + 1).min(node.radio.cfg.cw_max);
                self.draw_backoff(n);
            }
            self.kick(n, out);
            return;
        }
        let basic = node.radio.cfg.basic_rate_bps;
        match response {
            Response::Cts { to, duration } => {
                node.stats.cts_sent += 1;
                self.transmit(n, FrameKind::Cts, Dest::Node(to), phy::CTS_BYTES, basic, duration, 0, false, 0, None, out);
            }
            Response::Ack { to } => {
                node.stats.acks_sent += 1;
                self.transmit(n, FrameKind::Ack, Dest::Node(to), phy::ACK_BYTES, basic, 0, 0, false, 0, None, out);
            }
            Response::Data => self.send_data(n, out),
        }
    }
}
