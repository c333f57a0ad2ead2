//! Held packets released one at a time, a fixed spacing apart, sans-IO
//! (time is an input). ns-2's AODV sends the packets it held during a
//! search 10 ms apart when a reply brings their route (`recvReply`,
//! ARP_DELAY, "to help ARP"), so a full buffer of 64 takes 0.64 s to leave
//! and packets sent meanwhile overtake it; the daemon reproduces that when
//! the protocol asks for a spacing ([`crate::Output::Release`]).

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The paced releases under way, by destination.
#[derive(Debug)]
pub struct Pacer<T> {
    releases: BTreeMap<Ipv4Addr, Release<T>>,
}

#[derive(Debug)]
struct Release<T> {
    spacing: Duration,
    /// When the first of `waiting` is due.
    next: Duration,
    waiting: VecDeque<T>,
}

impl<T> Default for Pacer<T> {
    fn default() -> Self {
        Pacer { releases: BTreeMap::new() }
    }
}

impl<T> Pacer<T> {
    /// Releases `packets` to `dst` from `now` on, `spacing` apart, the
    /// first at once. A release already under way for `dst` keeps its pace
    /// and takes them on at its end.
    pub fn start(&mut self, now: Duration, dst: Ipv4Addr, spacing: Duration, packets: Vec<T>) {
        if packets.is_empty() {
            return;
        }
        let release = self.releases.entry(dst).or_insert_with(|| Release { spacing, next: now, waiting: VecDeque::new() });
        release.waiting.extend(packets);
    }

    /// The packets due at `now`, in the order they are to leave.
    pub fn poll_due(&mut self, now: Duration) -> Vec<T> {
        let mut due = Vec::new();
        self.releases.retain(|_, release| {
            while release.next <= now {
                let Some(packet) = release.waiting.pop_front() else { break };
                due.push(packet);
                release.next += release.spacing;
            }
            !release.waiting.is_empty()
        });
        due
    }

    /// When the next packet is due (None: nothing waits).
    pub fn next_due(&self) -> Option<Duration> {
        self.releases.values().map(|release| release.next).min()
    }

    /// The packets still waiting for `dst`, taken out (its route went).
    pub fn cancel(&mut self, dst: Ipv4Addr) -> Vec<T> {
        self.releases.remove(&dst).map(|release| release.waiting.into()).unwrap_or_default()
    }

    /// Every packet still waiting, taken out (the daemon stops).
    pub fn cancel_all(&mut self) -> Vec<T> {
        std::mem::take(&mut self.releases).into_values().flat_map(|release| release.waiting).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn the_first_leaves_at_once_and_the_rest_one_per_spacing() {
        let mut pacer = Pacer::default();
        pacer.start(ms(100), A, ms(10), vec![1, 2, 3]);
        assert_eq!(pacer.next_due(), Some(ms(100)));
        assert_eq!(pacer.poll_due(ms(100)), vec![1]);
        assert_eq!(pacer.next_due(), Some(ms(110)));
        assert_eq!(pacer.poll_due(ms(109)), Vec::<i32>::new());
        // A late wake-up releases everything that fell due, in order, without
        // shifting the pace of the rest.
        pacer.start(ms(115), A, ms(10), vec![4]);
        assert_eq!(pacer.poll_due(ms(121)), vec![2, 3]);
        assert_eq!(pacer.next_due(), Some(ms(130)));
        assert_eq!(pacer.poll_due(ms(130)), vec![4]);
        assert_eq!(pacer.next_due(), None);
    }

    #[test]
    fn destinations_keep_their_own_pace_and_a_cancel_takes_only_its_own() {
        let mut pacer = Pacer::default();
        pacer.start(ms(0), A, ms(10), vec![1, 2, 3]);
        pacer.start(ms(5), B, ms(10), vec![7, 8]);
        assert_eq!(pacer.poll_due(ms(5)), vec![1, 7]);
        assert_eq!(pacer.next_due(), Some(ms(10)));
        assert_eq!(pacer.cancel(A), vec![2, 3]);
        assert_eq!(pacer.cancel(A), Vec::<i32>::new());
        assert_eq!(pacer.next_due(), Some(ms(15)));
        assert_eq!(pacer.cancel_all(), vec![8]);
        assert_eq!(pacer.next_due(), None);
    }

    #[test]
    fn nothing_to_release_starts_nothing() {
        let mut pacer: Pacer<i32> = Pacer::default();
        pacer.start(ms(0), A, ms(10), Vec::new());
        assert_eq!(pacer.next_due(), None);
    }
}
