//! The TAP backend (`meshemu-medium tap`, emulator/README.md section 4): a
//! network namespace per node with a TAP `wlan0` (`bringup.rs`), whose
//! Ethernet frames the port hands to the model (`frame.rs`) and writes
//! back to the receivers' TAPs as they were read.
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

pub mod bringup;
pub mod frame;

use std::os::fd::AsFd;

use anyhow::Context;
use meshemu_model::{Medium, NodeId, TxOutcome};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};

use self::bringup::Namespaces;
use self::frame::{Classifier, Payload, ETHERNET_HEADER_LEN};
use super::nodes::NodeSpec;
use super::Backend;
use crate::config::LabConfig;
use crate::pcap::AirBody;
use crate::realtime::{Delivery, Inbound, Port};

/// Largest frame a TAP hands us (64 KiB MTU + Ethernet header).
const READ_BUFFER: usize = 65_536 + ETHERNET_HEADER_LEN;

/// The TAP backend.
pub struct Tap;

impl Backend for Tap {
    type Port = TapPort;

    /// Namespaces, TAPs, addresses and routes.
    fn attach(&self, config: &LabConfig, specs: &[NodeSpec]) -> anyhow::Result<(TapPort, Vec<u64>)> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let namespaces = bringup::bring_up(specs, threads)?;
        let macs: Vec<[u8; 6]> = config.medium.nodes.iter().map(|node| node.mac_address.0).collect();
        let inodes = namespaces.inodes().to_vec();
        let port = TapPort {
            classifier: Classifier::new(&macs, &config.priority_udp_ports),
            names: config.medium.nodes.iter().map(|n| n.name.clone()).collect(),
            read_buffer: vec![0; READ_BUFFER],
            namespaces,
        };
        Ok((port, inodes))
    }
}

/// The nodes' TAPs: token i is node i's TAP.
pub struct TapPort {
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
