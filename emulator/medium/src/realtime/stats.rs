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
    /// peer table has its addresses before any traffic), and one by-netns
    /// link per namespace inode (`inodes` in node order). The links are made
    /// by a second thread meanwhile: they go into another directory, and on
    /// a host whose /run is a disk filesystem each new file can cost half a
    /// millisecond in its inode allocator.
    pub fn create<P: Clone>(config: &LabConfig, medium: &Medium<P>, inodes: &[u64]) -> anyhow::Result<Self> {
        let nodes_dir = config.run_dir.join("nodes");
        let (pages, links) = std::thread::scope(|scope| {
            let links = scope.spawn(|| create_by_netns_links(config, &nodes_dir, inodes));
            let pages = create_pages(config, medium, &nodes_dir);
            (pages, links.join().expect("the link thread does not panic"))
        });
        let (pages, by_netns_links) = (pages?, links?);
        let peer_scratch = vec![PeerEntry::default(); config.nodes.len()];
        Ok(StatsPages { _by_netns_links: by_netns_links, pages, touched: Vec::new(), peer_scratch })
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

fn create_pages<P: Clone>(config: &LabConfig, medium: &Medium<P>, nodes_dir: &Path) -> anyhow::Result<Vec<Writer>> {
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
    Ok(pages)
}

/// `/run/meshemu/by-netns/<inode>` to `nodes_dir/<name>` for every node;
/// each removed again when the result is dropped (also on failure halfway).
fn create_by_netns_links(config: &LabConfig, nodes_dir: &Path, inodes: &[u64]) -> anyhow::Result<Vec<RemoveOnDrop>> {
    create_dirs(Path::new(BY_NETNS_DIR), 0o755)?;
    let mut links = Vec::with_capacity(inodes.len());
    for (node, inode) in config.medium.nodes.iter().zip(inodes) {
        let link = Path::new(BY_NETNS_DIR).join(inode.to_string());
        // A link of this inode is stale: its namespace is gone, or ours
        // could not have this inode.
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(nodes_dir.join(&node.name), &link)
            .with_context(|| format!("node {}: creating {}", node.name, link.display()))?;
        links.push(RemoveOnDrop(link));
    }
    Ok(links)
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
            tx_failed_data: p.tx_failed_data,
            rx_frames: p.rx_frames,
            last_rx_power_mdbm: p.last_rx_power_mdbm,
            last_sinr_mdb: p.last_sinr_mdb,
        };
    }
}
