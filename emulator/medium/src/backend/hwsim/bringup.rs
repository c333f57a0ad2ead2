//! Bring-up of a hwsim lab's nodes: per node a named network namespace with
//! the sysctls of a multi-hop node, a mac80211_hwsim radio (created from the
//! root namespace, so it belongs to the medium's hwsim group, then moved into
//! the node's namespace), an interface `wlan0` of type IBSS or mesh with the
//! node's address, MTU and static routes, joined to the lab's cell. Radios
//! are configured with `iw` argument lists; addresses and routes with
//! rtnetlink as in the TAP backend.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use nix::sched::{setns, CloneFlags};

use super::genl::{Attr, HwsimMessage, HwsimSocket, CMD_NEW_RADIO};
use super::{Mode, Options};
use crate::backend::nodes::{set_up_each, BringUpError, NodeSpec};
use crate::netlink::{self, RouteSocket};
use crate::netns::{self, NetSysctls, NetnsMount, NETNS_RUN_DIR, TAP_NAME};
use crate::pcap::BSSID;

/// Longest wiphy name cfg80211 accepts (NL80211_WIPHY_NAME_MAXLEN).
const WIPHY_NAME_MAX: usize = 64;

/// The radios and namespaces of a lab. Dropping it closes the socket that
/// created the radios (hwsim destroys them), then removes the namespaces.
pub struct Radios {
    // Field order is drop order.
    _creator: HwsimSocket,
    mounts: Vec<NetnsMount>,
    inodes: Vec<u64>,
}

impl Radios {
    /// Network namespace inode of node i.
    pub fn inodes(&self) -> &[u64] {
        &self.inodes
    }
}

/// Creates every node's radio, then brings the nodes up with `threads`
/// workers. On failure everything made so far is removed again.
pub fn bring_up(nodes: &[NodeSpec], options: &Options, threads: usize) -> Result<Radios, BringUpError> {
    let fail = |node: &NodeSpec, step: &'static str| {
        let (name, netns) = (node.name.clone(), node.netns.clone());
        move |source: io::Error| BringUpError { node: name, netns, step, source }
    };
    let lab_wide =
        |step: &'static str| move |source| BringUpError { node: "-".into(), netns: "-".into(), step, source };
    netns::prepare_netns_dir().map_err(lab_wide("preparing /run/netns"))?;
    let root = File::open("/proc/thread-self/ns/net").map_err(lab_wide("opening the root network namespace"))?;
    let mut creator = HwsimSocket::open().map_err(lab_wide("opening a MAC80211_HWSIM socket"))?;
    let kind = match options.mode {
        Mode::Ibss => "ibss",
        Mode::Mesh => "mesh",
    };
    for (i, node) in nodes.iter().enumerate() {
        if node.netns.len() > WIPHY_NAME_MAX {
            return Err(fail(node, "naming the radio")(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the radio is named after the namespace, which is longer than {WIPHY_NAME_MAX} characters"),
            )));
        }
        let radio = HwsimMessage {
            cmd: CMD_NEW_RADIO,
            attrs: vec![
                Attr::PermAddr(node.mac),
                Attr::RadioName(node.netns.clone()),
                Attr::DestroyRadioOnClose,
                Attr::NoVif,
            ],
        };
        creator.request(radio).map_err(fail(node, "creating the hwsim radio"))?;
        // iw finds a radio by name in sysfs, which shows a radio only in the
        // namespace it is in: its interface is made here, before it moves.
        iw(&["phy", &node.netns, "interface", "add", &interim_name(i), "type", kind])
            .map_err(fail(node, "adding the radio's interface"))?;
    }

    let (made, error) = match set_up_each(nodes, threads, |i, node| set_up_node(i, node, options, &root)) {
        Ok(made) => (made, None),
        Err((made, error)) => (made, Some(error)),
    };
    let mut radios = Radios { _creator: creator, mounts: Vec::new(), inodes: Vec::new() };
    for (mount, inode) in made {
        radios.mounts.push(mount);
        radios.inodes.push(inode);
    }
    match error {
        Some(error) => Err(error), // `radios` drops what was made
        None => Ok(radios),
    }
}

/// Runs in a worker thread, which it moves between namespaces.
fn set_up_node(i: usize, node: &NodeSpec, options: &Options, root: &File) -> Result<(NetnsMount, u64), BringUpError> {
    let fail = |step: &'static str| {
        move |source: io::Error| BringUpError { node: node.name.clone(), netns: node.netns.clone(), step, source }
    };
    let mount = netns::create_named_netns(&node.netns).map_err(fail("creating the network namespace"))?;
    let inode = netns::current_netns_inode().map_err(fail("reading the namespace inode"))?;
    let sysctls = NetSysctls::open().map_err(fail("opening /proc/sys/net"))?;
    sysctls.set_node().map_err(fail("setting sysctls"))?;
    let own = File::open(format!("{NETNS_RUN_DIR}/{}", node.netns)).map_err(fail("opening the namespace"))?;

    // The radio is still in the root namespace, where it was created.
    setns(root.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| fail("entering the root namespace")(e.into()))?;
    iw(&["phy", &node.netns, "set", "netns", "name", &node.netns])
        .map_err(fail("moving the radio into the namespace"))?;
    setns(own.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| fail("entering the namespace")(e.into()))?;

    run(&["ip", "link", "set", "dev", &interim_name(i), "name", TAP_NAME])
        .map_err(fail("renaming the interface wlan0"))?;
    sysctls.set_interface_ipv4(TAP_NAME).map_err(fail("setting wlan0 sysctls"))?;
    sysctls.set_arp(TAP_NAME, node.arp).map_err(fail("setting wlan0's neighbour table"))?;
    let index = netns::interface_index(TAP_NAME).map_err(fail("finding wlan0"))?;
    let mut requests = vec![
        netlink::link_up(1, "lo", None, None),
        netlink::link_up(index, TAP_NAME, Some(node.mac), Some(node.mtu)),
        netlink::add_ipv4_address(index, TAP_NAME, node.ipv4, node.prefix_len),
    ];
    requests.extend(node.routes.iter().map(|r| netlink::add_route(index, r.destination, r.prefix_len, r.gateway)));
    let mut socket = RouteSocket::new().map_err(fail("opening rtnetlink"))?;
    socket
        .run(requests)
        .map_err(|e| fail("configuring interfaces and routes")(io::Error::new(e.source.kind(), e.to_string())))?;

    let frequency = options.frequency_mhz.to_string();
    let bssid = BSSID.map(|b| format!("{b:02x}")).join(":");
    match options.mode {
        Mode::Ibss => iw(&["dev", TAP_NAME, "ibss", "join", &options.ssid, &frequency, "NOHT", "fixed-freq", &bssid]),
        Mode::Mesh => iw(&["dev", TAP_NAME, "mesh", "join", &options.ssid, "freq", &frequency, "NOHT"]),
    }
    .map_err(fail("joining the cell"))?;
    Ok((mount, inode))
}

/// The name node i's interface has in the root namespace, before it is
/// `wlan0` in the node's (unique, at most 15 bytes).
fn interim_name(i: usize) -> String {
    format!("mhw{i}")
}

fn iw(args: &[&str]) -> io::Result<()> {
    run(&[&["iw"], args].concat())
}

/// Runs a program (iw, ip) in the calling thread's network namespace.
fn run(argv: &[&str]) -> io::Result<()> {
    let output = Command::new(argv[0]).args(&argv[1..]).stdin(Stdio::null()).output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(
                e.kind(),
                format!("{} not found: the hwsim backend needs it (Debian packages iw, iproute2)", argv[0]),
            )
        } else {
            e
        }
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(io::Error::other(format!("{}: {}", argv.join(" "), stderr.trim())))
}
