//! The TAP driver (`meshemu-medium tap`, emulator/README.md section 4):
//! brings a lab up with one TAP per node namespace, then runs the shared
//! real-time loop (`realtime.rs`) until SIGTERM, SIGINT, SIGHUP or a
//! `shutdown` request; then takes the lab down.
//!
//! What it creates, and removes on a clean exit:
//! - `/run/netns/<netns>` for every node (the namespaces, with `wlan0` inside);
//! - `/run/meshemu/by-netns/<inode>` symlinks to `run_dir/nodes/<name>`;
//! - `run_dir/control.sock`.
//!
//! What it creates and leaves for the control plane (which owns `run_dir`):
//! `run_dir/nodes/<name>/radio`, the statistics pages with their final counters.
//! The directories `run_dir`, `run_dir/nodes/<name>` and `/run/meshemu/by-netns`
//! are created when missing and never removed by the medium.

use std::os::fd::AsFd;

use anyhow::Context;
use meshemu_model::{LinkInfo, Medium, NodeId, TxOutcome};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};

use crate::bringup::{self, Namespaces, NodeSpec, Route};
use crate::config::{LabConfig, Routing};
use crate::frame::{Classifier, Payload, ETHERNET_HEADER_LEN};
use crate::pcap::AirBody;
use crate::realtime::{self, Delivery, Inbound, Port, Service};
use crate::routes;

/// Largest frame a TAP hands us (64 KiB MTU + Ethernet header).
const READ_BUFFER: usize = 65_536 + ETHERNET_HEADER_LEN;

/// Brings the lab of `config` up, prints the ready line, runs until told to
/// stop, and takes the lab down. Errors during bring-up leave nothing behind.
pub fn run(config: LabConfig) -> anyhow::Result<()> {
    realtime::block_exit_signals()?;
    let lab = Lab::bring_up(config)?;
    realtime::run(lab.port, lab.service)
}

/// Everything a running TAP lab holds. Field order is teardown order:
/// namespaces first, then links and socket.
pub struct Lab {
    port: TapPort,
    service: Service<Payload>,
}

impl Lab {
    /// Namespaces, TAPs, routes, then what [`Service::bring_up`] makes;
    /// undone on failure.
    pub fn bring_up(config: LabConfig) -> anyhow::Result<Lab> {
        let medium = Medium::new(config.medium.clone()).context("medium")?;
        let links_at_start = medium.links(0);
        let specs = node_specs(&config, &links_at_start);
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let namespaces = bringup::bring_up(&specs, threads)?;
        let macs: Vec<[u8; 6]> = config.medium.nodes.iter().map(|node| node.mac_address.0).collect();
        let port = TapPort {
            classifier: Classifier::new(&macs, &config.priority_udp_ports),
            names: config.medium.nodes.iter().map(|n| n.name.clone()).collect(),
            read_buffer: vec![0; READ_BUFFER],
            namespaces,
        };
        let inodes = port.namespaces.inodes().to_vec();
        // On failure `port` is dropped here, which removes the namespaces.
        let service = Service::bring_up(config, medium, links_at_start, &inodes)?;
        Ok(Lab { port, service })
    }
}

/// The nodes' TAPs: token i is node i's TAP.
struct TapPort {
    namespaces: Namespaces,
    classifier: Classifier,
    names: Vec<String>,
    read_buffer: Vec<u8>,
}

impl Port for TapPort {
    type Payload = Payload;

    fn register(&self, epoll: &Epoll) -> anyhow::Result<()> {
        for (i, tap) in self.namespaces.taps().iter().enumerate() {
            epoll.add(tap, EpollEvent::new(EpollFlags::EPOLLIN, i as u64)).context("epoll add TAP")?;
        }
        Ok(())
    }

    fn read_frame(&mut self, token: u64) -> Option<Inbound<Payload>> {
        let node = token as NodeId;
        loop {
            let fd = self.namespaces.taps()[node].as_fd();
            let length = match nix::unistd::read(fd, &mut self.read_buffer) {
                Ok(length) => length,
                Err(Errno::EAGAIN) => return None,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    eprintln!("meshemu-medium: reading {}'s wlan0: {e}", self.names[node]);
                    return None;
                }
            };
            let Some(frame) = self.classifier.classify(&self.read_buffer[..length]) else {
                continue;
            };
            let mpdu_bytes = meshemu_model::phy::data_mpdu_bytes(frame.len);
            return Some(Inbound { node, frame, mpdu_bytes });
        }
    }

    fn deliver(&mut self, delivery: Delivery<'_, Payload>) -> bool {
        // Fails when wlan0 is down, or the frame does not fit its MTU.
        nix::unistd::write(self.namespaces.taps()[delivery.node].as_fd(), delivery.payload).is_ok()
    }

    fn tx_done(&mut self, _: &Medium<Payload>, _: NodeId, _: &Payload, _: &TxOutcome) {}

    fn network_len(payload: &Payload) -> usize {
        payload.len().saturating_sub(ETHERNET_HEADER_LEN)
    }

    fn air_body(payload: &Payload) -> AirBody<'_> {
        AirBody::Ethernet(payload)
    }
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
        })
        .collect()
}
