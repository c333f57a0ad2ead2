//! What an upstream node believes about its neighbours' per-flow queues
//! (paper §4.2). Three sources of knowledge:
//!
//! - **overhear**: per (neighbour, flow), the packets we released towards the
//!   neighbour that we have not yet heard it transmit onwards (promiscuous
//!   reception). Each such packet is remembered with its release time and
//!   forgotten when it was not heard forwarded in time, so a missed
//!   overhearing (a collision at our receiver, the neighbour's own drop)
//!   cannot block a flow for good. "In time" adapts to what is heard, as
//!   TCP's retransmission timeout does: the smoothed release-to-forward delay
//!   plus four times its mean deviation, at most `overhear_timeout` (and that
//!   until the first delay was measured). Retransmissions of one frame are
//!   heard as identical bytes and counted once.
//! - **beacon**: the neighbour's own advertisement of its per-flow queue
//!   lengths, plus what we released towards it since that advertisement and
//!   still hold in our radio.
//! - **oracle**: as beacon, but read from a table every node writes (the
//!   paper's global array), before each release decision.
//!
//! A report (beacon or oracle) also corrects an overhearing estimate: it
//! becomes the reported length plus our packets still on their way.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use crate::flow::FlowKey;
use crate::Time;

/// Where downstream queue lengths come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knowledge {
    Overhear,
    Beacon,
    Oracle,
}

impl Knowledge {
    pub fn name(self) -> &'static str {
        match self {
            Knowledge::Overhear => "overhear",
            Knowledge::Beacon => "beacon",
            Knowledge::Oracle => "oracle",
        }
    }
}

/// Fingerprints remembered per (neighbour, flow) to recognise retransmissions.
const RECENT: usize = 8;

#[derive(Debug, Default)]
struct Estimate {
    /// Overhear: release times of packets not yet heard forwarded, oldest first.
    in_flight: VecDeque<Time>,
    /// Beacon/oracle: the neighbour's last reported length.
    reported: u32,
    /// Beacon/oracle: released towards it since that report.
    sent_since_report: u32,
    recent: [Option<u64>; RECENT],
    recent_next: usize,
    /// Smoothed release-to-forward delay and its mean deviation, ns.
    delay: Option<(Time, Time)>,
}

/// The adaptive timeout never goes below this (a forward takes at least one
/// frame's airtime at the neighbour).
const MIN_TIMEOUT: Time = 2_000_000;

impl Estimate {
    fn timeout(&self, ceiling: Time) -> Time {
        match self.delay {
            Some((mean, deviation)) => (mean + 4 * deviation).clamp(MIN_TIMEOUT, ceiling),
            None => ceiling,
        }
    }

    fn sample_delay(&mut self, sample: Time) {
        self.delay = Some(match self.delay {
            None => (sample, sample / 2),
            Some((mean, deviation)) => {
                let error = mean.abs_diff(sample);
                (mean - mean / 8 + sample / 8, deviation - deviation / 4 + error / 4)
            }
        });
    }
}

/// Counters of the overhearing and reports, for the daemon's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DownstreamCounters {
    /// Overheard transmissions that matched a packet we had sent.
    pub overheard_matched: u64,
    /// Overheard retransmissions of a frame already counted.
    pub overheard_duplicates: u64,
    /// Overheard transmissions of a (neighbour, flow) with nothing outstanding.
    pub overheard_unmatched: u64,
    /// Outstanding packets forgotten after the overhearing timeout.
    pub overhear_timeouts: u64,
    /// Reports (beacon entries or oracle reads) applied.
    pub reports: u64,
    /// Reports that changed an estimate (drift corrected).
    pub corrections: u64,
}

#[derive(Debug)]
pub(crate) struct Downstream {
    knowledge: Knowledge,
    overhear_timeout: Time,
    estimates: HashMap<(Ipv4Addr, FlowKey), Estimate>,
    pub(crate) counters: DownstreamCounters,
}

impl Downstream {
    pub(crate) fn new(knowledge: Knowledge, overhear_timeout: Time) -> Self {
        Downstream { knowledge, overhear_timeout, estimates: HashMap::new(), counters: DownstreamCounters::default() }
    }

    /// Packets of `flow` we believe queued at `neighbour`.
    pub(crate) fn estimate(&self, neighbour: Ipv4Addr, flow: FlowKey) -> u32 {
        let Some(e) = self.estimates.get(&(neighbour, flow)) else { return 0 };
        match self.knowledge {
            Knowledge::Overhear => e.in_flight.len() as u32,
            Knowledge::Beacon | Knowledge::Oracle => e.reported.saturating_add(e.sent_since_report),
        }
    }

    pub(crate) fn released(&mut self, now: Time, neighbour: Ipv4Addr, flow: FlowKey) {
        let e = self.estimates.entry((neighbour, flow)).or_default();
        match self.knowledge {
            Knowledge::Overhear => e.in_flight.push_back(now),
            Knowledge::Beacon | Knowledge::Oracle => e.sent_since_report += 1,
        }
    }

    /// `neighbour` was heard transmitting a packet of `flow` (fingerprint of its bytes).
    pub(crate) fn overheard(&mut self, now: Time, neighbour: Ipv4Addr, flow: FlowKey, fingerprint: u64) {
        if self.knowledge != Knowledge::Overhear {
            return;
        }
        let Some(e) = self.estimates.get_mut(&(neighbour, flow)) else {
            self.counters.overheard_unmatched += 1;
            return;
        };
        if e.recent.contains(&Some(fingerprint)) {
            self.counters.overheard_duplicates += 1;
            return;
        }
        e.recent[e.recent_next] = Some(fingerprint);
        e.recent_next = (e.recent_next + 1) % RECENT;
        if let Some(sent) = e.in_flight.pop_front() {
            e.sample_delay(now.saturating_sub(sent));
            self.counters.overheard_matched += 1;
        } else {
            self.counters.overheard_unmatched += 1;
        }
    }

    /// `neighbour` reports `length` packets of `flow`; `ours_on_the_way` of
    /// ours are still in our own radio (not yet at the neighbour).
    pub(crate) fn report(&mut self, now: Time, neighbour: Ipv4Addr, flow: FlowKey, length: u32, ours_on_the_way: u32) {
        let Some(e) = self.estimates.get_mut(&(neighbour, flow)) else { return };
        self.counters.reports += 1;
        match self.knowledge {
            Knowledge::Overhear => {
                let target = length as usize + (ours_on_the_way as usize).min(e.in_flight.len());
                if target != e.in_flight.len() {
                    self.counters.corrections += 1;
                }
                while e.in_flight.len() > target {
                    e.in_flight.pop_front();
                }
                while e.in_flight.len() < target {
                    e.in_flight.push_back(now);
                }
            }
            Knowledge::Beacon | Knowledge::Oracle => {
                let sent = e.sent_since_report.min(ours_on_the_way);
                if (length, sent) != (e.reported, e.sent_since_report) {
                    self.counters.corrections += 1;
                }
                e.reported = length;
                e.sent_since_report = sent;
            }
        }
    }

    /// The flows we track at `neighbour` (a complete report zeroes the unlisted ones).
    pub(crate) fn flows_at(&self, neighbour: Ipv4Addr) -> Vec<FlowKey> {
        self.estimates.keys().filter(|(n, _)| *n == neighbour).map(|(_, f)| *f).collect()
    }

    /// Forgets outstanding packets older than the overhearing timeout.
    pub(crate) fn expire(&mut self, now: Time) {
        if self.knowledge != Knowledge::Overhear {
            return;
        }
        for e in self.estimates.values_mut() {
            let timeout = e.timeout(self.overhear_timeout);
            while e.in_flight.front().is_some_and(|sent| sent + timeout <= now) {
                e.in_flight.pop_front();
                self.counters.overhear_timeouts += 1;
            }
        }
    }

    /// When the next outstanding packet times out.
    pub(crate) fn next_expiry(&self) -> Option<Time> {
        self.estimates
            .values()
            .filter_map(|e| e.in_flight.front().map(|sent| sent + e.timeout(self.overhear_timeout)))
            .min()
    }

    /// Forgets everything about `flow` (it expired).
    pub(crate) fn forget_flow(&mut self, flow: FlowKey) {
        self.estimates.retain(|(_, f), _| *f != flow);
    }
}
