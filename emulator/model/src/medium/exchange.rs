//! The frame exchange, shared by the DCF and TDMA MACs: the frame a node
//! works on, RTS/CTS, DATA and ACK, responses SIFS after a reception, the
//! CTS/ACK timeout, retries and their limits, duplicate detection, and
//! reporting a frame done.

use super::air::TxSpec;
use super::queue::InterfaceQueue;
use super::{Action, Dest, Event, Frame, FrameKind, Medium, PacketKind, RadioState};
use crate::config::RadioConfig;
use crate::phy;
use crate::stats::NodeCounters;
use crate::{NodeId, Time};

/// The frame a node's MAC is working on (head of line).
#[derive(Debug)]
pub(super) struct Outgoing<P> {
    pub frame: Frame<P>,
    pub mpdu_bytes: u32,
    seq: u16,
    short_retries: u32,
    long_retries: u32,
    pub rts_attempts: u32,
    pub data_attempts: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Idle,
    /// Sending our RTS.
    Rts,
    AwaitCts,
    /// CTS received; DATA goes out after SIFS.
    DataDue,
    /// Sending our DATA.
    Data,
    AwaitAck,
}

/// A response due SIFS after a reception.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Response {
    Cts { to: NodeId, duration: Time },
    Ack { to: NodeId },
    /// Our DATA after the CTS.
    Data,
}

/// How a frame's MAC work ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Finish {
    Acked,
    Broadcast,
    RetryDrop,
}

#[derive(Debug)]
pub(super) struct Exchange<P> {
    pub current: Option<Outgoing<P>>,
    next_seq: u16,
    step: Step,
    response: Option<Response>,
    timeout_generation: u32,
    /// The CTS/ACK timeout expired during a reception: decide at its end.
    timeout_expired: bool,
    /// Per sender, the sequence number of the last data frame received.
    last_seq: Vec<u16>,
}

/// No data frame received yet (sequence numbers have 12 bits).
const NO_SEQ: u16 = u16::MAX;

impl<P> Exchange<P> {
    pub(super) fn new(nodes: usize) -> Self {
        Exchange { current: None, next_seq: 0, step: Step::Idle, response: None, timeout_generation: 0, timeout_expired: false, last_seq: vec![NO_SEQ; nodes] }
    }

    /// No exchange of our own going on and no response due.
    pub(super) fn is_idle(&self) -> bool {
        self.step == Step::Idle && self.response.is_none()
    }

    /// Takes the head-of-line frame, if not already working on one;
    /// returns whether it took one.
    pub(super) fn take_head_of_line(&mut self, queue: &mut InterfaceQueue<P>) -> bool {
        if self.current.is_some() {
            return false;
        }
        let Some(q) = queue.pop_front() else { return false };
        let seq = self.next_seq;
        self.next_seq = (self.next_seq + 1) & 0x0fff;
        self.current = Some(Outgoing { frame: q.frame, mpdu_bytes: q.mpdu_bytes, seq, short_retries: 0, long_retries: 0, rts_attempts: 0, data_attempts: 0 });
        true
    }

    /// Whether a data frame from `src` repeats the last one received (a
    /// retry after our ACK was lost); remembers its sequence number if not.
    fn is_duplicate(&mut self, src: NodeId, seq: u16, retry: bool) -> bool {
        let last = &mut self.last_seq[src];
        if retry && *last == seq {
            return true;
        }
        *last = seq;
        false
    }

    /// Whether a Timeout event of this generation is the armed timeout's.
    pub(super) fn is_timeout(&self, generation: u32) -> bool {
        self.timeout_generation == generation
    }

    fn arm_timeout(&mut self) -> u32 {
        self.timeout_generation = self.timeout_generation.wrapping_add(1);
        self.timeout_expired = false;
        self.timeout_generation
    }

    fn disarm_timeout(&mut self) {
        self.timeout_generation = self.timeout_generation.wrapping_add(1);
        self.timeout_expired = false;
    }

    /// No CTS or ACK came: counts the retry. Returns whether the retry
    /// limit is hit, or `None` without a frame. TDMA counts every unicast
    /// attempt against the long retry limit.
    fn fail_attempt(&mut self, tdma: bool, radio: &RadioConfig, counters: &mut NodeCounters) -> Option<bool> {
        self.disarm_timeout();
        let cur = self.current.as_mut()?;
        let long = tdma || cur.mpdu_bytes > radio.rts_threshold_bytes;
        let limit_hit = if self.step == Step::AwaitCts {
            counters.cts_timeouts += 1;
            cur.short_retries += 1;
            cur.short_retries >= radio.short_retry_limit
        } else {
            counters.ack_timeouts += 1;
            if long {
                cur.long_retries += 1;
                cur.long_retries >= radio.long_retry_limit
            } else {
                cur.short_retries += 1;
                cur.short_retries >= radio.short_retry_limit
            }
        };
        self.step = Step::Idle;
        Some(limit_hit)
    }

    /// The RTS for the current frame, or `None` when it goes without one
    /// (broadcast, or not over the RTS threshold).
    fn rts(&mut self, radio: &RadioState, counters: &mut NodeCounters) -> Option<TxSpec<P>>
    where
        P: Clone,
    {
        let cur = self.current.as_mut()?;
        let cfg = &radio.cfg;
        if cur.frame.dst == Dest::Broadcast || cur.mpdu_bytes <= cfg.rts_threshold_bytes {
            return None;
        }
        cur.rts_attempts += 1;
        counters.rts_attempts += 1;
        let t = radio.timings;
        let duration = 3 * t.sifs + t.cts + phy::airtime_ns(cfg, cur.mpdu_bytes, cfg.data_rate_bps) + t.ack;
        self.step = Step::Rts;
        Some(TxSpec {
            kind: FrameKind::Rts,
            dst: cur.frame.dst,
            bytes: phy::RTS_BYTES,
            rate_bps: cfg.basic_rate_bps,
            duration,
            seq: cur.seq,
            retry: false,
            len: 0,
            // The RTS carries the packet it announces only for air captures,
            // which take an unknown receiver's address from it.
            payload: Some(cur.frame.payload.clone()),
        })
    }

    /// The DATA of the current frame: unicast at the data rate, broadcast
    /// once at the basic rate.
    fn data(&mut self, radio: &RadioState, counters: &mut NodeCounters) -> Option<TxSpec<P>>
    where
        P: Clone,
    {
        let cur = self.current.as_mut()?;
        cur.data_attempts += 1;
        counters.data_attempts += 1;
        let cfg = &radio.cfg;
        let unicast = cur.frame.dst != Dest::Broadcast;
        let (rate_bps, duration) = if unicast { (cfg.data_rate_bps, radio.timings.sifs + radio.timings.ack) } else { (cfg.basic_rate_bps, 0) };
        self.step = Step::Data;
        Some(TxSpec {
            kind: FrameKind::Data,
            dst: cur.frame.dst,
            bytes: cur.mpdu_bytes,
            rate_bps,
            duration,
            seq: cur.seq,
            retry: cur.data_attempts > 1,
            len: cur.frame.len,
            payload: Some(cur.frame.payload.clone()),
        })
    }
}

impl<P: Clone> Medium<P> {
    /// Takes the head-of-line frame (if not already working on one).
    pub(super) fn take_head_of_line(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        if node.exchange.take_head_of_line(&mut node.queue) {
            self.stats.node_mut(n).queue_len = node.queue.len() as u64;
            self.stats.touch(n);
        }
    }

    /// Sends the RTS or, without RTS/CTS, the data frame.
    pub(super) fn start_exchange(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        self.take_head_of_line(n);
        let node = &mut self.nodes[n];
        if node.exchange.current.is_none() {
            return;
        }
        match node.exchange.rts(&node.radio, self.stats.node_mut(n)) {
            Some(rts) => self.transmit(n, rts, out),
            None => self.send_data(n, out),
        }
    }

    /// Puts the current data frame on the air.
    pub(super) fn send_data(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        if let Some(data) = node.exchange.data(&node.radio, self.stats.node_mut(n)) {
            self.transmit(n, data, out);
        }
    }

    /// Our RTS or DATA left the air: wait for the response, or (broadcast) done.
    pub(super) fn exchange_tx_end(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let exchange = &mut self.nodes[n].exchange;
        let broadcast = exchange.current.as_ref().is_some_and(|c| c.frame.dst == Dest::Broadcast);
        match exchange.step {
            Step::Rts => {
                exchange.step = Step::AwaitCts;
                self.arm_timeout(n);
            }
            Step::Data if broadcast => self.finish_frame(n, Finish::Broadcast, out),
            Step::Data => {
                exchange.step = Step::AwaitAck;
                self.arm_timeout(n);
            }
            _ => {}
        }
    }

    fn arm_timeout(&mut self, n: NodeId) {
        let node = &mut self.nodes[n];
        let generation = node.exchange.arm_timeout();
        self.timeline.schedule(self.now + node.radio.timings.response_timeout, Event::Timeout { node: n as u32, generation });
    }

    /// The CTS/ACK timeout expired; a reception in progress is waited for.
    pub(super) fn timeout(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        if node.receiver.is_locked() {
            node.exchange.timeout_expired = true;
        } else {
            self.fail_attempt(n, out);
        }
    }

    /// A reception ended: if the timeout had expired and the reception did
    /// not bring our response, the attempt failed.
    pub(super) fn after_reception(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let exchange = &self.nodes[n].exchange;
        if exchange.timeout_expired && matches!(exchange.step, Step::AwaitCts | Step::AwaitAck) {
            self.fail_attempt(n, out);
        }
    }

    /// No CTS or ACK: count the retry, drop at the limit, else back off with
    /// a doubled CW (DCF) or wait for the next own slot (TDMA).
    fn fail_attempt(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let tdma = self.tdma.is_some();
        let node = &mut self.nodes[n];
        let Some(limit_hit) = node.exchange.fail_attempt(tdma, &node.radio.cfg, self.stats.node_mut(n)) else { return };
        node.carrier.exchange_ended(self.now);
        self.stats.touch(n);
        if limit_hit {
            self.finish_frame(n, Finish::RetryDrop, out);
        } else if !tdma {
            self.back_off_again(n);
            if self.nodes[n].carrier.is_busy() {
                self.stats.node_mut(n).defers += 1;
            }
        }
        self.kick(n, out);
    }

    /// The current frame is done: count it, report it, reset CW and draw the
    /// post-backoff (DCF).
    pub(super) fn finish_frame(&mut self, n: NodeId, how: Finish, out: &mut Vec<Action<P>>) {
        let node = &mut self.nodes[n];
        let Some(cur) = node.exchange.current.take() else { return };
        node.exchange.step = Step::Idle;
        node.dcf.reset_cw(&node.radio.cfg);
        let outcome = self.stats.finished(n, &cur, how);
        let flush_to = match cur.frame.dst {
            Dest::Node(d) if how == Finish::RetryDrop && node.radio.cfg.retry_drop_flush && cur.frame.carries == PacketKind::Data => Some(Dest::Node(d)),
            _ => None,
        };
        out.push(Action::TxDone { time: self.now, node: n, payload: cur.frame.payload, outcome });
        if let Some(dst) = flush_to {
            self.flush_queue_to(n, dst, out);
        }
        if self.tdma.is_none() {
            self.post_backoff(n);
        }
    }

    /// Every queued frame to `dst` leaves the queue as a `LinkDrop`, in
    /// queue order (ns-2 AODV's rt_ll_failed: the interface queue's packets
    /// for the broken next hop are dropped with the one that failed): after
    /// a retry drop with `retry_drop_flush`, or when a daemon asks.
    pub(super) fn flush_queue_to(&mut self, n: NodeId, dst: Dest, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let queue = &mut self.nodes[n].queue;
        let counters = self.stats.node_mut(n);
        queue.remove_to(dst, |frame| {
            counters.link_drops += 1;
            out.push(Action::TxDone { time: now, node: n, payload: frame.payload, outcome: super::TxOutcome::LinkDrop });
        });
        counters.queue_len = queue.len() as u64;
        self.stats.touch(n);
    }

    /// A frame was decoded at `n`: respond, deliver, or set the NAV.
    pub(super) fn mac_receive(&mut self, n: NodeId, tx: u32, power_mw: f64, sinr: f64, out: &mut Vec<Action<P>>) {
        let t = self.transmissions.get(tx);
        let (kind, src, dst, duration, seq, retry) = (t.spec.kind, t.src, t.spec.dst, t.spec.duration, t.spec.seq, t.spec.retry);
        let now = self.now;
        let for_me = dst == Dest::Node(n);
        let node = &mut self.nodes[n];
        let timings = node.radio.timings;
        match kind {
            FrameKind::Rts if for_me => {
                // CTS only with our NAV clear and no exchange of our own going on.
                if !node.carrier.nav_set(now) && node.exchange.is_idle() {
                    let duration = duration.saturating_sub(timings.sifs + timings.cts);
                    self.respond_after_sifs(n, Response::Cts { to: src, duration });
                }
            }
            FrameKind::Cts if for_me => {
                if node.exchange.step == Step::AwaitCts {
                    node.exchange.step = Step::DataDue;
                    if let Some(cur) = node.exchange.current.as_mut() {
                        cur.short_retries = 0;
                    }
                    node.exchange.disarm_timeout();
                    self.respond_after_sifs(n, Response::Data);
                }
            }
            FrameKind::Ack if for_me => {
                if node.exchange.step == Step::AwaitAck {
                    node.exchange.disarm_timeout();
                    self.finish_frame(n, Finish::Acked, out);
                }
            }
            FrameKind::Data if for_me => {
                // ACK every unicast data frame for us, regardless of NAV.
                if node.exchange.response.is_none() {
                    self.respond_after_sifs(n, Response::Ack { to: src });
                }
                if self.nodes[n].exchange.is_duplicate(src, seq, retry) {
                    self.stats.node_mut(n).rx_duplicates += 1;
                    self.stats.touch(n);
                } else {
                    self.deliver(n, tx, power_mw, sinr, false, out);
                }
            }
            FrameKind::Data if dst == Dest::Broadcast => self.deliver(n, tx, power_mw, sinr, false, out),
            _ => {
                if !for_me {
                    self.set_nav(n, now + duration);
                    if kind == FrameKind::Data && self.nodes[n].receiver.promiscuous {
                        self.deliver(n, tx, power_mw, sinr, true, out);
                    }
                }
            }
        }
    }

    fn respond_after_sifs(&mut self, n: NodeId, response: Response) {
        let node = &mut self.nodes[n];
        node.exchange.response = Some(response);
        self.timeline.schedule(self.now + node.radio.timings.sifs, Event::Respond { node: n as u32 });
    }

    /// SIFS after a reception: send the CTS, ACK or DATA due.
    pub(super) fn respond(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let node = &mut self.nodes[n];
        if node.sending.is_some() {
            return;
        }
        let Some(response) = node.exchange.response.take() else { return };
        let busy = node.receiver.is_locked() || node.carrier.nav_set(now);
        if node.radio.cfg.responses_need_idle && busy && !matches!(response, Response::Ack { .. }) {
            // ns-2 (check_pktCTRL, check_pktTx): no CTS, and no DATA after a
            // CTS, while receiving or under NAV; the DATA waits for a new
            // RTS after a backoff with a doubled CW, no retry counted.
            if response == Response::Data {
                node.exchange.step = Step::Idle;
                self.back_off_again(n);
            }
            self.kick(n, out);
            return;
        }
        let counters = self.stats.node_mut(n);
        let spec = match response {
            Response::Cts { to, duration } => {
                counters.cts_sent += 1;
                TxSpec::response(FrameKind::Cts, to, phy::CTS_BYTES, duration, &node.radio.cfg)
            }
            Response::Ack { to } => {
                counters.acks_sent += 1;
                TxSpec::response(FrameKind::Ack, to, phy::ACK_BYTES, 0, &node.radio.cfg)
            }
            Response::Data => {
                self.send_data(n, out);
                return;
            }
        };
        self.transmit(n, spec, out);
    }
}
