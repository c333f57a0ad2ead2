//! The TDMA MAC alternative (the backpressure paper's "fair MAC"): time is cut
//! into fixed slots from 0, node k owns slot s when s mod N == k, and in its
//! slot a node sends at most one data frame, no carrier sense, no backoff.
//! Unicast frames are ACKed within the slot and retried in the node's next
//! slots up to its long retry limit; broadcast is unacknowledged.

use super::{Action, Event, Medium};
use crate::config::{MacConfig, NodeConfig, RadioConfig};
use crate::phy;
use crate::Time;

#[derive(Debug, Clone, Copy)]
pub(super) struct Tdma {
    pub slot_ns: Time,
}

impl Tdma {
    /// The configured TDMA, its slot resolved (0: long enough for the
    /// largest packet at the slowest radio); `None` with DCF.
    pub(super) fn new(mac: MacConfig, nodes: &[NodeConfig]) -> Option<Self> {
        let slot_ns = match mac {
            MacConfig::Dcf => return None,
            MacConfig::Tdma { slot_ns: 0 } => nodes.iter().map(|nc| phy::tdma_exchange_ns(&nc.radio, phy::TDMA_MAX_PACKET_BYTES)).max().unwrap_or(1),
            MacConfig::Tdma { slot_ns } => slot_ns,
        };
        Some(Tdma { slot_ns })
    }

    /// Whether DATA + SIFS + ACK + guard of an MPDU fits in a slot.
    pub(super) fn fits(&self, radio: &RadioConfig, mpdu_bytes: u32) -> bool {
        phy::tdma_mpdu_exchange_ns(radio, mpdu_bytes) <= self.slot_ns
    }
}

impl<P: Clone> Medium<P> {
    pub(super) fn tdma_slot(&mut self, slot: u64, out: &mut Vec<Action<P>>) {
        let Some(tdma) = self.tdma else { return };
        self.timeline.schedule((slot + 1) * tdma.slot_ns, Event::TdmaSlot { slot: slot + 1 });
        let owner = (slot % self.nodes.len() as u64) as usize;
        let node = &self.nodes[owner];
        if node.sending.is_some() || !node.exchange.is_idle() {
            return;
        }
        self.take_head_of_line(owner);
        if self.nodes[owner].exchange.current.is_some() {
            self.send_data(owner, out);
        }
    }
}
