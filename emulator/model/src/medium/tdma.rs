//! The TDMA MAC alternative (the backpressure paper's "fair MAC"): time is cut
//! into fixed slots from 0, node k owns slot s when s mod N == k, and in its
//! slot a node sends at most one data frame, no carrier sense, no backoff.
//! Unicast frames are ACKed within the slot and retried in the node's next
//! slots up to its long retry limit; broadcast is unacknowledged.

use super::{Action, Event, Exchange, Medium};

impl<P: Clone> Medium<P> {
    pub(super) fn tdma_slot(&mut self, slot: u64, out: &mut Vec<Action<P>>) {
        let next = (slot + 1) * self.tdma_slot_ns;
        self.schedule(next, Event::TdmaSlot { slot: slot + 1 });
        let owner = (slot % self.nodes.len() as u64) as usize;
        let node = &self.nodes[owner];
        if node.sending.is_some() || node.exchange != Exchange::Idle || node.response.is_some() {
            return;
        }
        self.take_head_of_line(owner);
        if self.nodes[owner].current.is_some() {
            self.send_data(owner, out);
        }
    }
}
