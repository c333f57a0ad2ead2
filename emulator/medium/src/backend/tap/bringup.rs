//! Bring-up and teardown of a lab's namespaces: per node a named network
//! namespace with `lo` and a TAP `wlan0` configured, sysctls and static routes,
//! built in parallel by worker threads that each enter one new namespace after
//! another.

use std::os::fd::OwnedFd;

use crate::backend::nodes::{set_up_each, BringUpError, NodeSpec};
use crate::netlink::{self, RouteSocket};
use crate::netns::{self, NetSysctls, NetnsMount, TAP_NAME};

/// The namespaces and TAPs of a lab. Dropping it tears everything down in the
/// fast order: the TAP fds are closed first, while the names still hold every
/// namespace (closing one takes RTNL, which the kernel's destruction of dead
/// namespaces holds for long stretches), then the names are removed and the
/// namespaces die with them.
pub struct Namespaces {
    // Field order is drop order.
    taps: Vec<OwnedFd>,
    mounts: Vec<NetnsMount>,
    inodes: Vec<u64>,
}

impl Namespaces {
    /// TAP fd of node i.
    pub fn taps(&self) -> &[OwnedFd] {
        &self.taps
    }

    /// Network namespace inode of node i.
    pub fn inodes(&self) -> &[u64] {
        &self.inodes
    }
}

struct NodeUp {
    mount: NetnsMount,
    tap: OwnedFd,
    inode: u64,
}

/// Brings up every node with `threads` workers. On failure everything made so
/// far is removed again and the first error is returned.
pub fn bring_up(nodes: &[NodeSpec], threads: usize) -> Result<Namespaces, BringUpError> {
    netns::prepare_netns_dir().map_err(|source| BringUpError {
        node: "-".into(),
        netns: "-".into(),
        step: "preparing /run/netns",
        source,
    })?;
    match set_up_each(nodes, threads, |_, node| set_up_node(node)) {
        Ok(up) => Ok(into_namespaces(up)),
        Err((made, error)) => {
            drop(into_namespaces(made));
            Err(error)
        }
    }
}

fn into_namespaces(nodes: Vec<NodeUp>) -> Namespaces {
    let mut namespaces = Namespaces { mounts: Vec::new(), taps: Vec::new(), inodes: Vec::new() };
    for up in nodes {
        namespaces.mounts.push(up.mount);
        namespaces.taps.push(up.tap);
        namespaces.inodes.push(up.inode);
    }
    namespaces
}

/// Runs in a worker thread, which it leaves inside the node's namespace.
fn set_up_node(node: &NodeSpec) -> Result<NodeUp, BringUpError> {
    let fail = |step: &'static str| {
        move |source: std::io::Error| BringUpError {
            node: node.name.clone(),
            netns: node.netns.clone(),
            step,
            source,
        }
    };
    let mount = netns::create_named_netns(&node.netns).map_err(fail("creating the network namespace"))?;
    let inode = netns::current_netns_inode().map_err(fail("reading the namespace inode"))?;
    let sysctls = NetSysctls::open().map_err(fail("opening /proc/sys/net"))?;
    sysctls.set_node().map_err(fail("setting sysctls"))?;
    let tap = netns::create_tap(TAP_NAME).map_err(fail("creating the TAP wlan0"))?;
    sysctls.set_interface_ipv4(TAP_NAME).map_err(fail("setting wlan0 sysctls"))?;
    sysctls.set_arp(TAP_NAME, node.arp).map_err(fail("setting wlan0's neighbour table"))?;
    if node.ipv6_link_local {
        sysctls.enable_ipv6_link_local(TAP_NAME).map_err(fail("enabling IPv6 on wlan0"))?;
    }
    let index = netns::interface_index(TAP_NAME).map_err(fail("finding wlan0"))?;

    let mut requests = vec![
        netlink::link_up(1, "lo", None, None),
        netlink::link_up(index, TAP_NAME, Some(node.mac), Some(node.mtu)),
        netlink::add_ipv4_address(index, TAP_NAME, node.ipv4, node.prefix_len),
    ];
    requests.extend(node.routes.iter().map(|r| netlink::add_route(index, r.destination, r.prefix_len, r.gateway)));
    let mut socket = RouteSocket::new().map_err(fail("opening rtnetlink"))?;
    socket.run(requests).map_err(|e| BringUpError {
        node: node.name.clone(),
        netns: node.netns.clone(),
        step: "configuring interfaces and routes",
        source: std::io::Error::new(e.source.kind(), e.to_string()),
    })?;
    Ok(NodeUp { mount, tap, inode })
}
