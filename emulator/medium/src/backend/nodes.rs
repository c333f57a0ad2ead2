//! What both backends need to bring nodes up: each node's namespace, address
//! and static routes ([`NodeSpec`], from LAB.json and the links at time 0),
//! the error naming the node and step that failed, and the worker threads
//! that set nodes up in parallel.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use meshemu_model::LinkInfo;

use crate::config::{Arp, LabConfig, Routing};
use crate::routes;

/// What one node's namespace needs.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Node name (for messages).
    pub name: String,
    /// Name of the namespace under /run/netns.
    pub netns: String,
    pub mac: [u8; 6],
    pub ipv4: Ipv4Addr,
    pub prefix_len: u8,
    pub mtu: u32,
    pub routes: Vec<Route>,
    /// IPv6 on for wlan0 (link-local only).
    pub ipv6_link_local: bool,
    pub arp: Arp,
}

/// `destination/prefix_len via gateway dev wlan0`, or on the link
/// (`dev wlan0 scope link`) without a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub destination: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
}

/// A bring-up step that failed, naming the node and the step.
#[derive(Debug, thiserror::Error)]
// The reason follows from `source` in the error chain (`{e:#}`).
#[error("node {node} (namespace {netns}): {step}")]
pub struct BringUpError {
    pub node: String,
    pub netns: String,
    pub step: &'static str,
    pub source: std::io::Error,
}

/// What each namespace needs, static routes included when asked for.
pub fn node_specs(config: &LabConfig, links: &[LinkInfo]) -> Vec<NodeSpec> {
    let n = config.nodes.len();
    let table = match config.routing {
        Routing::Static => meshemu_model::routing::min_hop_next_hops(n, links),
        Routing::None => vec![vec![None; n]; n],
    };
    let addresses: Vec<_> = config.nodes.iter().map(|node| node.ipv4).collect();
    config
        .nodes
        .iter()
        .zip(&config.medium.nodes)
        .zip(&table)
        .map(|((node, medium_node), next_hops)| NodeSpec {
            name: medium_node.name.clone(),
            netns: node.netns.clone(),
            mac: medium_node.mac_address.0,
            ipv4: node.ipv4,
            prefix_len: node.prefix_len,
            mtu: node.mtu,
            routes: routes::node_routes(node.ipv4, node.prefix_len, &addresses, next_hops)
                .into_iter()
                .map(|route| Route {
                    destination: route.prefix,
                    prefix_len: route.len,
                    gateway: route.next_hop.map(|gateway| addresses[gateway]),
                })
                .collect(),
            ipv6_link_local: config.ipv6_link_local,
            arp: config.arp,
        })
        .collect()
}

/// Sets every node up with `set_up(index, node)` on `threads` workers, each
/// taking the next node nobody took yet, until the first failure. Returns
/// what was made in node order; on failure, what was made (for the caller to
/// remove in its order) and the first error.
pub fn set_up_each<T: Send>(
    nodes: &[NodeSpec],
    threads: usize,
    set_up: impl Fn(usize, &NodeSpec) -> Result<T, BringUpError> + Sync,
) -> Result<Vec<T>, (Vec<T>, BringUpError)> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let done: Mutex<Vec<Option<T>>> = Mutex::new((0..nodes.len()).map(|_| None).collect());
    let first_error: Mutex<Option<BringUpError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, nodes.len().max(1)) {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(node) = nodes.get(i) else { break };
                    match set_up(i, node) {
                        Ok(up) => done.lock().unwrap()[i] = Some(up),
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            first_error.lock().unwrap().get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    let done = done.into_inner().unwrap();
    match first_error.into_inner().unwrap() {
        Some(error) => Err((done.into_iter().flatten().collect(), error)),
        None => Ok(done.into_iter().map(|up| up.expect("every node is up")).collect()),
    }
}
