//! The medium's timeline: its events in time order, ties in the order they
//! were scheduled (so the same inputs give the same run).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::Time;

#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    /// The node's own transmission ends.
    TxEnd { node: u32 },
    /// A transmission starts arriving at its next receiver (in arrival order).
    Arrive { tx: u32 },
    /// A transmission stops arriving at its next receiver.
    Depart { tx: u32 },
    /// Backoff countdown (or IFS) done: transmit.
    Access { node: u32, generation: u32 },
    /// CTS or ACK timeout.
    Timeout { node: u32, generation: u32 },
    /// SIFS after a reception: send the CTS, ACK or DATA due.
    Respond { node: u32 },
    NavEnd { node: u32, generation: u32 },
    TdmaSlot { slot: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Scheduled {
    time: Time,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

#[derive(Debug)]
pub(super) struct Timeline {
    queue: BinaryHeap<Reverse<Scheduled>>,
    next_seq: u64,
    /// Events handled so far (stale timers and walked receivers included).
    processed: u64,
}

impl Timeline {
    pub(super) fn new() -> Self {
        Timeline { queue: BinaryHeap::with_capacity(1024), next_seq: 0, processed: 0 }
    }

    pub(super) fn schedule(&mut self, time: Time, event: Event) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Reverse(Scheduled { time, seq, event }));
    }

    pub(super) fn next_time(&self) -> Option<Time> {
        self.queue.peek().map(|Reverse(s)| s.time)
    }

    /// Takes the next event if it is due at or before `until`, and counts it.
    pub(super) fn pop_due(&mut self, until: Time) -> Option<(Time, Event)> {
        if self.next_time()? > until {
            return None;
        }
        let Reverse(s) = self.queue.pop().expect("peeked");
        self.processed += 1;
        Some((s.time, s.event))
    }

    /// Whether an event at `time` would come before every queued one: then
    /// the caller may handle it at once, unqueued (and count it here).
    pub(super) fn is_before_all(&self, time: Time) -> bool {
        self.queue.peek().is_none_or(|Reverse(s)| time < s.time)
    }

    pub(super) fn count_unqueued(&mut self) {
        self.processed += 1;
    }

    pub(super) fn processed(&self) -> u64 {
        self.processed
    }
}
