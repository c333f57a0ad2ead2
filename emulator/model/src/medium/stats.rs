//! The medium's statistics: every node's counters, its figures per peer, and
//! which nodes' statistics changed since the caller last asked, and whether
//! their peer figures did (the real-time medium republishes only those).

use super::exchange::{Finish, Outgoing};
use super::{Dest, PacketKind, Touched, TxOutcome};
use crate::stats::{record_attempts, to_milli, NodeCounters, PeerStats};
use crate::NodeId;

#[derive(Debug)]
pub(super) struct Stats {
    nodes: Vec<NodeCounters>,
    /// `peers[node * n + peer]`.
    peers: Vec<PeerStats>,
    touched: Vec<bool>,
    /// Nodes whose peer figures changed (a subset of the touched ones).
    peers_touched: Vec<bool>,
    touched_list: Vec<NodeId>,
}

impl Stats {
    pub(super) fn new(n: usize) -> Self {
        Stats {
            nodes: vec![NodeCounters::default(); n],
            peers: vec![PeerStats::default(); n * n],
            touched: vec![false; n],
            peers_touched: vec![false; n],
            touched_list: Vec::new(),
        }
    }

    pub(super) fn node(&self, node: NodeId) -> &NodeCounters {
        &self.nodes[node]
    }

    /// A node's counters, to count in; the caller touches the node.
    pub(super) fn node_mut(&mut self, node: NodeId) -> &mut NodeCounters {
        &mut self.nodes[node]
    }

    pub(super) fn peer(&self, node: NodeId, peer: NodeId) -> &PeerStats {
        &self.peers[node * self.nodes.len() + peer]
    }

    /// A node's figures about one peer, to count in; touches the node and its peers.
    fn peer_mut(&mut self, node: NodeId, peer: NodeId) -> &mut PeerStats {
        self.touch(node);
        self.peers_touched[node] = true;
        let n = self.nodes.len();
        &mut self.peers[node * n + peer]
    }

    /// Marks the node's statistics changed.
    pub(super) fn touch(&mut self, node: NodeId) {
        if !self.touched[node] {
            self.touched[node] = true;
            self.touched_list.push(node);
        }
    }

    pub(super) fn take_touched(&mut self, out: &mut Vec<Touched>) {
        for node in self.touched_list.drain(..) {
            self.touched[node] = false;
            out.push(Touched { node, peers: std::mem::take(&mut self.peers_touched[node]) });
        }
    }

    /// Counts a data frame handed up at `node` from `from`.
    pub(super) fn delivered(&mut self, node: NodeId, from: NodeId, len: u32, rx_power_dbm: f64, sinr_db: f64, overheard: bool) {
        let counters = &mut self.nodes[node];
        if overheard {
            counters.overheard_frames += 1;
        } else {
            counters.rx_frames += 1;
            counters.rx_bytes += len as u64;
            self.peer_mut(node, from).rx_frames += 1;
        }
        let peer = self.peer_mut(node, from);  // touches the node
        peer.last_rx_power_mdbm = to_milli(rx_power_dbm);
        peer.last_sinr_mdb = to_milli(sinr_db);
    }

    /// Counts the end of a frame's MAC work at `node`; returns its outcome.
    pub(super) fn finished<P>(&mut self, node: NodeId, frame: &Outgoing<P>, how: Finish) -> TxOutcome {
        let counters = &mut self.nodes[node];
        if frame.rts_attempts > 0 {
            record_attempts(&mut counters.rts_attempts_hist, frame.rts_attempts);
        }
        record_attempts(&mut counters.data_attempts_hist, frame.data_attempts);
        let (rts_attempts, data_attempts) = (frame.rts_attempts, frame.data_attempts);
        let outcome = match how {
            Finish::Acked => {
                counters.tx_data_frames += 1;
                counters.tx_bytes += frame.frame.len as u64;
                if let Dest::Node(d) = frame.frame.dst {
                    self.peer_mut(node, d).tx_acked += 1;
                }
                TxOutcome::Acked { rts_attempts, data_attempts }
            }
            Finish::Broadcast => {
                counters.tx_broadcast_frames += 1;
                counters.tx_bytes += frame.frame.len as u64;
                TxOutcome::Broadcast
            }
            Finish::RetryDrop => {
                counters.retry_drops += 1;
                if let Dest::Node(d) = frame.frame.dst {
                    let peer = self.peer_mut(node, d);
                    peer.tx_failed += 1;
                    if frame.frame.carries == PacketKind::Data {
                        peer.tx_failed_data += 1;
                    }
                }
                TxOutcome::RetryDrop { rts_attempts, data_attempts }
            }
        };
        self.touch(node);
        outcome
    }
}
