//! Frames on the air: what a node transmits ([`TxSpec`]), the transmission
//! it becomes (shared by its receivers until the last signal of it has
//! ended), and its signals starting and ending at each receiver in order of
//! arrival.

use super::channel::Arrival;
use super::{Action, AirFrame, Dest, Event, FrameKind, Medium};
use crate::config::RadioConfig;
use crate::phy;
use crate::{NodeId, Time};

/// A frame a node puts on the air.
#[derive(Debug)]
pub(super) struct TxSpec<P> {
    pub kind: FrameKind,
    pub dst: Dest,
    /// MPDU bytes.
    pub bytes: u32,
    pub rate_bps: u64,
    /// NAV the frame sets (duration field), ns.
    pub duration: Time,
    pub seq: u16,
    pub retry: bool,
    /// Network-layer bytes (data frames).
    pub len: u32,
    /// The carried packet: for data frames, and for the RTS announcing one.
    pub payload: Option<P>,
}

impl<P: Clone> TxSpec<P> {
    /// A CTS or ACK to `to`: basic rate, nothing carried.
    pub(super) fn response(kind: FrameKind, to: NodeId, bytes: u32, duration: Time, radio: &RadioConfig) -> Self {
        TxSpec { kind, dst: Dest::Node(to), bytes, rate_bps: radio.basic_rate_bps, duration, seq: 0, retry: false, len: 0, payload: None }
    }

    /// The frame as a capture shows it.
    fn air_frame(&self, src: NodeId, airtime_ns: Time) -> AirFrame<P> {
        AirFrame {
            kind: self.kind,
            src,
            dst: self.dst,
            duration_us: self.duration.div_ceil(1000).min(32_767) as u16,
            rate_bps: self.rate_bps,
            seq: self.seq,
            retry: self.retry,
            bytes: self.bytes,
            airtime_ns,
            payload: self.payload.clone(),
        }
    }
}

/// A transmission on the air. Its arrivals are walked by two cursors, so
/// the timeline holds one arrival and one departure per transmission, not
/// one per receiver.
#[derive(Debug)]
pub(super) struct Transmission<P> {
    pub src: NodeId,
    pub spec: TxSpec<P>,
    start: Time,
    pub airtime: Time,
    /// Receivers in order of arrival.
    arrivals: Vec<Arrival>,
    next_arrival: usize,
    next_departure: usize,
    /// The transmitter's TxEnd, plus one while departures are to come.
    refs: u32,
}

/// The transmissions on the air, by id. Slots are reused (with their
/// arrival lists).
#[derive(Debug)]
pub(super) struct Transmissions<P> {
    slots: Vec<Transmission<P>>,
    free: Vec<u32>,
}

impl<P> Transmissions<P> {
    pub(super) fn new() -> Self {
        Transmissions { slots: Vec::new(), free: Vec::new() }
    }

    pub(super) fn get(&self, id: u32) -> &Transmission<P> {
        &self.slots[id as usize]
    }

    /// An empty arrival list, from the slot the next insert takes.
    fn spare_arrivals(&mut self) -> Vec<Arrival> {
        let mut arrivals = self.free.last().map(|&id| std::mem::take(&mut self.slots[id as usize].arrivals)).unwrap_or_default();
        arrivals.clear();
        arrivals
    }

    fn insert(&mut self, t: Transmission<P>) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = t;
                id
            }
            None => {
                self.slots.push(t);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Drops one reference to a transmission; frees its slot after the last.
    fn release(&mut self, id: u32) {
        let t = &mut self.slots[id as usize];
        t.refs -= 1;
        if t.refs == 0 {
            t.spec.payload = None;
            self.free.push(id);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cursor {
    Arrival,
    Departure,
}

impl<P: Clone> Medium<P> {
    /// Puts a frame on the air from `src` now and schedules its arrival at
    /// every receiver it reaches.
    pub(super) fn transmit(&mut self, src: NodeId, spec: TxSpec<P>, out: &mut Vec<Action<P>>) {
        let now = self.now;
        let airtime = phy::airtime_ns(&self.nodes[src].radio.cfg, spec.bytes, spec.rate_bps);
        if self.air_capture {
            out.push(Action::Air { time: now, node: src, frame: spec.air_frame(src, airtime) });
        }
        let mut arrivals = self.transmissions.spare_arrivals();
        self.channel.arrivals(&mut self.nodes, src, now, &mut arrivals);
        let first_delay = arrivals.first().map(|a| a.delay);
        let kind = spec.kind;
        let refs = if first_delay.is_some() { 2 } else { 1 };
        let id = self.transmissions.insert(Transmission { src, spec, start: now, airtime, arrivals, next_arrival: 0, next_departure: 0, refs });

        let node = &mut self.nodes[src];
        if node.receiver.transmitting(&node.radio) {
            self.stats.node_mut(src).rx_collisions += 1;
        }
        node.sending = Some((kind, id));
        self.stats.node_mut(src).tx_ns += airtime;
        self.stats.touch(src);
        self.timeline.schedule(now + airtime, Event::TxEnd { node: src as u32 });
        self.update_carrier(src, out);
        if let Some(delay) = first_delay {
            self.timeline.schedule(now + delay, Event::Arrive { tx: id });
            self.timeline.schedule(now + delay + airtime, Event::Depart { tx: id });
        }
    }

    /// Starts or ends the signal of transmission `tx` at its next receivers:
    /// one, then more while the next one is due before any other event (and
    /// by `until`); otherwise the cursor's event is scheduled again.
    pub(super) fn walk_receivers(&mut self, tx: u32, cursor: Cursor, until: Time, out: &mut Vec<Action<P>>) {
        loop {
            let t = &mut self.transmissions.slots[tx as usize];
            let (index, offset) = match cursor {
                Cursor::Arrival => (&mut t.next_arrival, t.start),
                Cursor::Departure => (&mut t.next_departure, t.start + t.airtime),
            };
            let a = t.arrivals[*index];
            *index += 1;
            let next = t.arrivals.get(*index).map(|b| offset + b.delay);
            match cursor {
                Cursor::Arrival => self.signal_start(a.rx as NodeId, tx, a.power_mw, out),
                Cursor::Departure => self.signal_end(a.rx as NodeId, tx, out),
            }
            let Some(at) = next else {
                if cursor == Cursor::Departure {
                    self.transmissions.release(tx);
                }
                return;
            };
            if at <= until && self.timeline.is_before_all(at) {
                self.now = at;
                self.timeline.count_unqueued();
            } else {
                let event = match cursor {
                    Cursor::Arrival => Event::Arrive { tx },
                    Cursor::Departure => Event::Depart { tx },
                };
                self.timeline.schedule(at, event);
                return;
            }
        }
    }

    /// The node's own transmission ended.
    pub(super) fn tx_end(&mut self, n: NodeId, out: &mut Vec<Action<P>>) {
        let Some((kind, id)) = self.nodes[n].sending.take() else { return };
        self.transmissions.release(id);
        if matches!(kind, FrameKind::Rts | FrameKind::Data) {
            self.exchange_tx_end(n, out);
        }
        self.update_carrier(n, out);
        self.kick(n, out);
    }
}
