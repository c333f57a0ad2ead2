//! Requests on an rtnetlink socket (routes, rules, neighbours), answered
//! synchronously, and the messages of rtnetlink notifications. The socket
//! talks to the network namespace of the thread that opened it.

use std::io;
use std::net::Ipv4Addr;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

// linux/rtnetlink.h multicast groups (numbers, not bit masks)
pub const RTNLGRP_NEIGH: u32 = 3;
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;

/// A non-blocking socket that receives the notifications of `groups`
/// (read them with [`parse_messages`]).
pub fn subscribe(groups: &[u32]) -> io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    for &group in groups {
        socket.add_membership(group)?;
    }
    socket.set_non_blocking(true)?;
    Ok(socket)
}

/// The IPv4 address a neighbour message is about.
pub fn neighbour_ipv4(neighbour: &NeighbourMessage) -> Option<Ipv4Addr> {
    neighbour.attributes.iter().find_map(|attribute| match attribute {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(*ip),
        _ => None,
    })
}

/// A request that failed: what it was for and the kernel's error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct NetlinkError {
    pub what: String,
    pub source: io::Error,
}

pub struct RouteSocket {
    socket: Socket,
    sequence: u32,
    buffer: Vec<u8>,
}

impl RouteSocket {
    pub fn open() -> io::Result<RouteSocket> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(RouteSocket { socket, sequence: 0, buffer: vec![0; 64 * 1024] })
    }

    /// Sends `message` with `flags` and collects what answers it: a dump's
    /// messages up to its end; with [`NLM_F_ACK`], whatever comes before
    /// the acknowledgement; otherwise the first reply. A kernel error is
    /// returned as an I/O error with its errno.
    pub fn exchange(&mut self, message: RouteNetlinkMessage, flags: u16) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.sequence;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(message));
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;
        let first_reply_answers = flags & (NLM_F_DUMP | NLM_F_ACK) == 0;
        let mut replies = Vec::new();
        loop {
            let size = self.socket.recv(&mut &mut self.buffer[..], 0)?;
            let mut rest = &self.buffer[..size];
            while let Ok(buffer) = NetlinkBuffer::new_checked(rest) {
                let length = buffer.length() as usize;
                let sequence = buffer.sequence_number();
                let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..length]);
                rest = &rest[((length + 3) & !3).min(rest.len())..];
                if sequence != self.sequence {
                    continue; // an answer to an earlier request we gave up on
                }
                match message.map(|m| m.payload) {
                    Ok(NetlinkPayload::InnerMessage(reply)) => {
                        replies.push(reply);
                        if first_reply_answers {
                            return Ok(replies);
                        }
                    }
                    Ok(NetlinkPayload::Done(_)) => return Ok(replies),
                    Ok(NetlinkPayload::Error(error)) => {
                        return match error.code {
                            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                            None => Ok(replies),
                        };
                    }
                    Ok(_) => {}
                    Err(e) => return Err(io::Error::other(format!("rtnetlink reply: {e}"))),
                }
            }
        }
    }

    /// A change (`flags`: [`NLM_F_CREATE`](netlink_packet_core::NLM_F_CREATE), ...)
    /// the kernel acknowledges; `what` names it in the error.
    pub fn request(&mut self, message: RouteNetlinkMessage, flags: u16, what: String) -> Result<(), NetlinkError> {
        self.exchange(message, flags | NLM_F_ACK).map(drop).map_err(|source| NetlinkError { what, source })
    }

    /// Every object a dump request lists.
    pub fn dump(&mut self, message: RouteNetlinkMessage, what: &str) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        self.exchange(message, NLM_F_DUMP).map_err(|source| NetlinkError { what: what.to_string(), source })
    }

    /// The IPv4 neighbour table, every interface's entries.
    pub fn neighbours(&mut self) -> Result<Vec<NeighbourMessage>, NetlinkError> {
        let mut request = NeighbourMessage::default();
        request.header.family = AddressFamily::Inet;
        let replies = self.dump(RouteNetlinkMessage::GetNeighbour(request), "dumping the neighbour table")?;
        Ok(replies
            .into_iter()
            .filter_map(|reply| match reply {
                RouteNetlinkMessage::NewNeighbour(neighbour) => Some(neighbour),
                _ => None,
            })
            .collect())
    }
}

/// The rtnetlink messages in a datagram of notifications (what cannot be
/// read is left out).
pub fn parse_messages(mut bytes: &[u8]) -> Vec<RouteNetlinkMessage> {
    let mut messages = Vec::new();
    while let Ok(buffer) = NetlinkBuffer::new_checked(bytes) {
        let length = buffer.length() as usize;
        if let Ok(NetlinkPayload::InnerMessage(message)) =
            NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes[..length]).map(|m| m.payload)
        {
            messages.push(message);
        }
        bytes = &bytes[((length + 3) & !3).min(bytes.len())..];
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::process::Command;

    /// Runs `body` on a thread of its own in a new network namespace, which
    /// ends with the thread; programs it starts run there too.
    fn in_new_namespace(body: impl FnOnce() + Send + 'static) {
        std::thread::spawn(move || {
            // SAFETY: unshare only changes this thread's namespaces.
            let result = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(result, 0, "unshare: {}", io::Error::last_os_error());
            body();
        })
        .join()
        .unwrap();
    }

    fn ip(args: &[&str]) {
        let status = Command::new("ip").args(args).status().expect("running ip");
        assert!(status.success(), "ip {args:?}: {status}");
    }

    #[test]
    fn the_neighbour_table_is_its_ipv4_entries_with_their_interface() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: a network namespace needs root");
            return;
        }
        in_new_namespace(|| {
            ip(&["link", "add", "name", "v0", "type", "veth", "peer", "name", "v1"]);
            ip(&["neigh", "add", "10.9.0.2", "lladdr", "02:00:00:00:00:02", "dev", "v0", "nud", "permanent"]);
            ip(&["neigh", "add", "10.9.0.3", "lladdr", "02:00:00:00:00:03", "dev", "v1", "nud", "permanent"]);
            ip(&["-6", "neigh", "add", "fe80::2", "lladdr", "02:00:00:00:00:02", "dev", "v0", "nud", "permanent"]);
            let index = |name: &str| {
                let name = CString::new(name).unwrap();
                // SAFETY: a valid NUL-terminated name.
                unsafe { libc::if_nametoindex(name.as_ptr()) }
            };
            let mut entries: Vec<_> = RouteSocket::open()
                .unwrap()
                .neighbours()
                .unwrap()
                .iter()
                .map(|neighbour| (neighbour.header.ifindex, neighbour_ipv4(neighbour)))
                .collect();
            entries.sort();
            let mut expected = vec![(index("v0"), Some(Ipv4Addr::new(10, 9, 0, 2))), (index("v1"), Some(Ipv4Addr::new(10, 9, 0, 3)))];
            expected.sort();
            assert_eq!(entries, expected);
        });
    }
}
