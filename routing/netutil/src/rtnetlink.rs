//! Requests on an rtnetlink socket (routes, rules, neighbours), answered
//! synchronously, and the messages of rtnetlink notifications. The socket
//! talks to the network namespace of the thread that opened it.

use std::io;
use std::net::Ipv4Addr;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use netlink_packet_route::RouteNetlinkMessage;
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
