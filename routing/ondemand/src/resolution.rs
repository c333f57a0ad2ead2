//! Failed address resolution: the kernel's neighbour entries on the
//! routing interface that went FAILED (its ARP requests or probes went
//! unanswered), from the neighbour table's change notifications.
//!
//! The link layer cannot report these: an ARP request is broadcast, so no
//! frame fails, and the kernel drops the packets that waited for the
//! address with an ICMP host unreachable to their sender. Without this a
//! route through a neighbour that left while its entry was unresolved (or
//! after the entry expired) stays up for as long as traffic keeps it in
//! use, and no packet on it arrives.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd};

use meshemu_netutil::rtnetlink::{neighbour_ipv4, parse_messages, subscribe, RouteSocket, RTNLGRP_NEIGH};
use netlink_packet_route::neighbour::{NeighbourMessage, NeighbourState};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::Socket;
use tracing::warn;

/// The neighbour notifications of the calling thread's network namespace.
pub struct ResolutionFailures {
    socket: Socket,
    /// For the table itself, read when notifications were lost.
    table: RouteSocket,
    interface: u32,
    buffer: Vec<u8>,
    /// Times notifications were lost (the socket's buffer overran).
    pub overruns: u64,
}

impl ResolutionFailures {
    /// Subscribes to neighbour changes on the interface with this index.
    pub fn open(interface: u32) -> io::Result<ResolutionFailures> {
        let socket = subscribe(&[RTNLGRP_NEIGH])?;
        let table = RouteSocket::open()?;
        Ok(ResolutionFailures { socket, table, interface, buffer: vec![0; 64 * 1024], overruns: 0 })
    }

    /// The neighbours whose resolution failed since the last call, in the
    /// order the kernel reported them (reads every pending notification).
    /// When notifications were lost, the entries the table still holds as
    /// FAILED follow: a failure whose notice was lost shows there until
    /// the entry is used again or collected (one reported before may come
    /// again: its neighbour is still unresolved).
    pub fn failed_since_last(&mut self) -> io::Result<Vec<Ipv4Addr>> {
        let mut failed = Vec::new();
        let mut lost = false;
        loop {
            let size = match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(size) => size,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.overruns += 1;
                    lost = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let messages = parse_messages(&self.buffer[..size]);
            failed.extend(messages.iter().filter_map(|message| failed_neighbour(message, self.interface)));
        }
        if lost {
            match self.table.neighbours() {
                Ok(table) => add_failed(&mut failed, &table, self.interface),
                // What the notifications named still counts.
                Err(error) => warn!(%error, "reading the neighbour table after lost notifications"),
            }
        }
        Ok(failed)
    }
}

/// The neighbours `table` holds as FAILED on `interface` that `failed`
/// does not name yet, added after it.
fn add_failed(failed: &mut Vec<Ipv4Addr>, table: &[NeighbourMessage], interface: u32) {
    for neighbor in table.iter().filter_map(|entry| failed_entry(entry, interface)) {
        if !failed.contains(&neighbor) {
            failed.push(neighbor);
        }
    }
}

impl AsFd for ResolutionFailures {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// The IPv4 neighbour on `interface` a notification reports as FAILED.
fn failed_neighbour(message: &RouteNetlinkMessage, interface: u32) -> Option<Ipv4Addr> {
    let RouteNetlinkMessage::NewNeighbour(neighbour) = message else { return None };
    failed_entry(neighbour, interface)
}

/// The IPv4 neighbour of a FAILED entry on `interface`.
fn failed_entry(neighbour: &NeighbourMessage, interface: u32) -> Option<Ipv4Addr> {
    if neighbour.header.ifindex != interface || neighbour.header.state != NeighbourState::Failed {
        return None;
    }
    neighbour_ipv4(neighbour)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute};
    use netlink_packet_route::AddressFamily;

    fn entry(ifindex: u32, state: NeighbourState, ip: Ipv4Addr) -> NeighbourMessage {
        let mut message = NeighbourMessage::default();
        message.header.family = AddressFamily::Inet;
        message.header.ifindex = ifindex;
        message.header.state = state;
        message.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
        message
    }

    fn notification(ifindex: u32, state: NeighbourState, ip: Ipv4Addr) -> RouteNetlinkMessage {
        RouteNetlinkMessage::NewNeighbour(entry(ifindex, state, ip))
    }

    #[test]
    fn only_a_failed_entry_on_the_routing_interface_is_a_failure() {
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(failed_neighbour(&notification(4, NeighbourState::Failed, ip), 4), Some(ip));
        assert_eq!(failed_neighbour(&notification(5, NeighbourState::Failed, ip), 4), None);
        for state in [NeighbourState::Incomplete, NeighbourState::Reachable, NeighbourState::Stale, NeighbourState::Probe] {
            assert_eq!(failed_neighbour(&notification(4, state, ip), 4), None, "{state:?}");
        }
        let deleted = RouteNetlinkMessage::DelNeighbour(entry(4, NeighbourState::Failed, ip));
        assert_eq!(failed_neighbour(&deleted, 4), None);
    }

    #[test]
    fn after_lost_notifications_the_tables_failed_entries_follow_once() {
        let [a, b, c] = [2, 3, 4].map(|host| Ipv4Addr::new(10, 0, 0, host));
        let table = [
            entry(4, NeighbourState::Failed, a),
            entry(4, NeighbourState::Reachable, b),
            entry(4, NeighbourState::Failed, c),
            entry(5, NeighbourState::Failed, b),
        ];
        let mut failed = vec![c];
        add_failed(&mut failed, &table, 4);
        assert_eq!(failed, vec![c, a]);
    }

    #[test]
    fn a_failed_entry_without_an_ipv4_address_is_left_out() {
        let mut message = NeighbourMessage::default();
        message.header.ifindex = 4;
        message.header.state = NeighbourState::Failed;
        message.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet6("fe80::1".parse().unwrap())));
        assert_eq!(failed_neighbour(&RouteNetlinkMessage::NewNeighbour(message), 4), None);
    }
}
