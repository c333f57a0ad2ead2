//! What the kernel's routing and neighbour tables say: the next hop of a
//! destination (`ip route get`, cached until a route changes) and the IPv4
//! address behind a neighbour's MAC address (the neighbour table, kept
//! current from its change notifications).

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd};

use meshemu_netutil::rtnetlink::{neighbour_ipv4, parse_messages, subscribe, RouteSocket, RTNLGRP_IPV4_ROUTE, RTNLGRP_NEIGH};
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::Socket;

/// Where the kernel sends a packet for a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To this neighbour (the gateway, or the destination itself on-link).
    Unicast { next_hop: Ipv4Addr },
    /// Broadcast, multicast, local, unreachable: not ours to queue.
    Other,
}

pub struct Routes {
    requests: RouteSocket,
    events: Socket,
    buffer: Vec<u8>,
    cache: HashMap<Ipv4Addr, Route>,
    neighbours: HashMap<[u8; 6], Ipv4Addr>,
    /// Route lookups that reached the kernel (cache misses).
    pub lookups: u64,
}

impl Routes {
    /// Opens the sockets in the calling thread's network namespace and reads the neighbour table.
    pub fn open() -> io::Result<Routes> {
        let requests = RouteSocket::open()?;
        let events = subscribe(&[RTNLGRP_IPV4_ROUTE, RTNLGRP_NEIGH])?;
        let mut routes = Routes {
            requests,
            events,
            buffer: vec![0; 64 * 1024],
            cache: HashMap::new(),
            neighbours: HashMap::new(),
            lookups: 0,
        };
        routes.dump_neighbours()?;
        Ok(routes)
    }

    /// The route to `destination`, from the cache or the kernel.
    pub fn route(&mut self, destination: Ipv4Addr) -> io::Result<Route> {
        if let Some(route) = self.cache.get(&destination) {
            return Ok(*route);
        }
        self.lookups += 1;
        let mut message = RouteMessage::default();
        message.header.address_family = AddressFamily::Inet;
        message.header.destination_prefix_length = 32;
        message.header.table = RouteHeader::RT_TABLE_UNSPEC;
        message.attributes.push(RouteAttribute::Destination(RouteAddress::Inet(destination)));
        let replies = self.get_route(message)?;
        let route = replies
            .into_iter()
            .find_map(|reply| match reply {
                RouteNetlinkMessage::NewRoute(route) => Some(route),
                _ => None,
            })
            .map_or(Route::Other, |reply| {
                if reply.header.kind != RouteType::Unicast {
                    return Route::Other;
                }
                let gateway = reply.attributes.iter().find_map(|attribute| match attribute {
                    RouteAttribute::Gateway(RouteAddress::Inet(gateway)) => Some(*gateway),
                    _ => None,
                });
                Route::Unicast { next_hop: gateway.unwrap_or(destination) }
            });
        self.cache.insert(destination, route);
        Ok(route)
    }

    /// The IPv4 address of the neighbour with this MAC address, if known.
    pub fn neighbour(&self, mac: &[u8; 6]) -> Option<Ipv4Addr> {
        self.neighbours.get(mac).copied()
    }

    /// Reads route and neighbour notifications: a route change empties the
    /// route cache, a neighbour change updates the MAC map.
    pub fn handle_events(&mut self) -> io::Result<()> {
        loop {
            let size = match self.events.recv(&mut &mut self.buffer[..], 0) {
                Ok(size) => size,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // Notifications lost: start again from a clean state.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.cache.clear();
                    self.neighbours.clear();
                    return self.dump_neighbours();
                }
                Err(e) => return Err(e),
            };
            for message in parse_messages(&self.buffer[..size]) {
                match message {
                    RouteNetlinkMessage::NewRoute(_) | RouteNetlinkMessage::DelRoute(_) => self.cache.clear(),
                    RouteNetlinkMessage::NewNeighbour(neighbour) => self.learn(&neighbour),
                    RouteNetlinkMessage::DelNeighbour(neighbour) => {
                        if let Some((mac, _)) = neighbour_entry(&neighbour) {
                            self.neighbours.remove(&mac);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn learn(&mut self, neighbour: &NeighbourMessage) {
        if let Some((mac, address)) = neighbour_entry(neighbour) {
            self.neighbours.insert(mac, address);
        }
    }

    fn dump_neighbours(&mut self) -> io::Result<()> {
        for neighbour in self.requests.neighbours().map_err(io::Error::other)? {
            self.learn(&neighbour);
        }
        Ok(())
    }

    /// Asks the kernel for a route and collects its reply; no route is no
    /// reply (the kernel would not send the packet either).
    fn get_route(&mut self, request: RouteMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        match self.requests.exchange(RouteNetlinkMessage::GetRoute(request), 0) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENETUNREACH | libc::EHOSTUNREACH)) => Ok(Vec::new()),
            other => other,
        }
    }

    pub fn events_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

fn neighbour_entry(neighbour: &NeighbourMessage) -> Option<([u8; 6], Ipv4Addr)> {
    let mac = neighbour.attributes.iter().find_map(|attribute| match attribute {
        NeighbourAttribute::LinkLayerAddress(bytes) => <[u8; 6]>::try_from(bytes.as_slice()).ok(),
        _ => None,
    });
    Some((mac?, neighbour_ipv4(neighbour)?))
}
