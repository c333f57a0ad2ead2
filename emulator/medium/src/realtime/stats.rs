//! Statistics publishing: every node's page (`meshemu-radiostats`) at
//! `run_dir/nodes/<name>/`, rewritten for the nodes the model touched, and the
//! `/run/meshemu/by-netns/<inode>` links by which a process in a node finds
//! its own page.

use std::fs;
use std::path::Path;

use anyhow::Context;
use meshemu_model::{Medium, NodeId, Time, Touched};
use meshemu_radiostats::{PeerEntry, Writer, BY_NETNS_DIR, PAGE_FILE_NAME};

use crate::config::LabConfig;
use crate::files::{create_dirs, RemoveOnDrop};

/// The pages and links of a running lab. Field order is teardown order.
pub struct StatsPages {
    _by_netns_links: Vec<RemoveOnDrop>,
    pages: Vec<Writer>,
    /// Nodes whose statistics changed since the last publication.
    touched: Vec<Touched>,
    peer_scratch: Vec<PeerEntry>,
}

impl StatsPages {
    /// The pages, each published once with the counters at start (so the
    /// peer table has its addresses before any traffic), then one by-netns
    /// link per namespace inode (`inodes` in node order).
    pub fn create<P: Clone>(config: &LabConfig, medium: &Medium<P>, inodes: &[u64]) -> anyhow::Result<Self> {
        let nodes_dir = config.run_dir.join("nodes");
        let n = config.nodes.len();
        let macs: Vec<[u8; 6]> = config.medium.nodes.iter().map(|node| node.mac_address.0).collect();
        let mut peers = vec![PeerEntry::default(); n];
        let mut pages = Vec::with_capacity(n);
        for (i, node) in config.medium.nodes.iter().enumerate() {
            let dir = nodes_dir.join(&node.name);
            create_dirs(&dir, 0o755)?;
            let mut page = Writer::create(&dir.join(PAGE_FILE_NAME), i as u32, n as u32)?;
            fill_peers(medium, i, &macs, &mut peers);
            page.update(0, medium.stats(i), &peers);
            pages.push(page);
        }
        create_dirs(Path::new(BY_NETNS_DIR), 0o755)?;
        let mut by_netns_links = Vec::with_capacity(n);
        for (node, inode) in config.medium.nodes.iter().zip(inodes) {
            let link = Path::new(BY_NETNS_DIR).join(inode.to_string());
            // A link of this inode is stale: its namespace is gone, or ours
            // could not have this inode.
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(nodes_dir.join(&node.name), &link)
                .with_context(|| format!("node {}: creating {}", node.name, link.display()))?;
            by_netns_links.push(RemoveOnDrop(link));
        }
        Ok(StatsPages { _by_netns_links: by_netns_links, pages, touched: Vec::new(), peer_scratch: peers })
    }

    /// Rewrites the pages of the nodes whose statistics changed: the peer
    /// table only where it changed (it is 40 bytes per node of the lab).
    pub fn publish<P: Clone>(&mut self, medium: &mut Medium<P>, macs: &[[u8; 6]], now: Time) {
        medium.take_touched(&mut self.touched);
        for &Touched { node, peers } in &self.touched {
            let counters = *medium.stats(node);
            if peers {
                fill_peers(medium, node, macs, &mut self.peer_scratch);
                self.pages[node].update(now, &counters, &self.peer_scratch);
            } else {
                self.pages[node].update_counters(now, &counters);
            }
        }
        self.touched.clear();
    }
}

/// The peer table of `node` in page layout.
pub fn fill_peers<P: Clone>(medium: &Medium<P>, node: NodeId, macs: &[[u8; 6]], peers: &mut [PeerEntry]) {
    for (j, entry) in peers.iter_mut().enumerate() {
        if j == node {
            *entry = PeerEntry::default();
            continue;
        }
        let p = medium.peer_stats(node, j);
        *entry = PeerEntry {
            mac_address: macs[j],
            reserved: [0; 2],
            tx_acked: p.tx_acked,
            tx_failed: p.tx_failed,
            rx_frames: p.rx_frames,
            last_rx_power_mdbm: p.last_rx_power_mdbm,
            last_sinr_mdb: p.last_sinr_mdb,
        };
    }
}
