//! Synchronous rtnetlink requests for a node's interfaces, addresses and
//! routes. A [`RouteSocket`] talks to the network namespace of the thread that
//! created it, so bring-up creates one per node inside the node's namespace.

use std::io;
use std::net::{IpAddr, Ipv4Addr};

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE,
    NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage, AddressScope};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol,
    RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Requests sent before their acknowledgements are collected; bounds what the
/// kernel queues on our receive buffer.
const BATCH: usize = 32;

/// A failed request: what it was for and the kernel's error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct NetlinkError {
    pub what: String,
    pub source: io::Error,
}

/// One request with a description for errors.
pub struct Request {
    what: String,
    message: RouteNetlinkMessage,
    flags: u16,
}

/// `ip link set dev <index> up [address MAC] [mtu MTU]`.
pub fn link_up(index: u32, name: &str, mac: Option<[u8; 6]>, mtu: Option<u32>) -> Request {
    let mut link = LinkMessage::default();
    link.header.index = index;
    link.header.flags = LinkFlags::Up;
    link.header.change_mask = LinkFlags::Up;
    if let Some(mac) = mac {
        link.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
    if let Some(mtu) = mtu {
        link.attributes.push(LinkAttribute::Mtu(mtu));
    }
    Request {
        what: format!("setting up {name}"),
        message: RouteNetlinkMessage::SetLink(link),
        flags: 0,
    }
}

/// `ip addr add ADDR/PREFIX broadcast + dev <index>`.
pub fn add_ipv4_address(index: u32, name: &str, address: Ipv4Addr, prefix_len: u8) -> Request {
    let mut msg = AddressMessage::default();
    msg.header.family = AddressFamily::Inet;
    msg.header.prefix_len = prefix_len;
    msg.header.scope = AddressScope::Universe;
    msg.header.index = index;
    let host_mask = u32::MAX.checked_shr(u32::from(prefix_len)).unwrap_or(0);
    let broadcast = Ipv4Addr::from(u32::from(address) | host_mask);
    msg.attributes = vec![
        AddressAttribute::Local(IpAddr::V4(address)),
        AddressAttribute::Address(IpAddr::V4(address)),
        AddressAttribute::Broadcast(broadcast),
    ];
    Request {
        what: format!("adding address {address}/{prefix_len} to {name}"),
        message: RouteNetlinkMessage::NewAddress(msg),
        flags: NLM_F_CREATE | NLM_F_EXCL,
    }
}

/// `ip route add DST/LEN via GATEWAY dev <index> onlink proto static`, or
/// without a gateway `ip route add DST/LEN dev <index> scope link proto static`.
pub fn add_route(index: u32, destination: Ipv4Addr, prefix_len: u8, gateway: Option<Ipv4Addr>) -> Request {
    let mut route = RouteMessage::default();
    route.header.address_family = AddressFamily::Inet;
    route.header.destination_prefix_length = prefix_len;
    route.header.table = RouteHeader::RT_TABLE_MAIN;
    route.header.protocol = RouteProtocol::Static;
    route.header.kind = RouteType::Unicast;
    route.attributes = vec![RouteAttribute::Destination(RouteAddress::Inet(destination)), RouteAttribute::Oif(index)];
    let what = match gateway {
        Some(gateway) => {
            route.header.scope = RouteScope::Universe;
            // onlink: the next hop is a neighbour on wlan0 whatever the prefixes say.
            route.header.flags = RouteFlags::Onlink;
            route.attributes.push(RouteAttribute::Gateway(RouteAddress::Inet(gateway)));
            format!("adding route to {destination}/{prefix_len} via {gateway}")
        }
        None => {
            route.header.scope = RouteScope::Link;
            format!("adding route to {destination}/{prefix_len} on the link")
        }
    };
    Request { what, message: RouteNetlinkMessage::NewRoute(route), flags: NLM_F_CREATE | NLM_F_EXCL }
}

/// A NETLINK_ROUTE socket of the calling thread's network namespace.
pub struct RouteSocket {
    socket: Socket,
    next_sequence: u32,
    send_buffer: Vec<u8>,
    receive_buffer: Vec<u8>,
}

impl RouteSocket {
    pub fn new() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(RouteSocket {
            socket,
            next_sequence: 1,
            send_buffer: Vec::new(),
            receive_buffer: vec![0; 64 * 1024],
        })
    }

    /// Carries out the requests in order; stops at the first one the kernel
    /// refuses and reports it.
    pub fn run(&mut self, requests: Vec<Request>) -> Result<(), NetlinkError> {
        let mut requests = requests.into_iter().peekable();
        while requests.peek().is_some() {
            let batch: Vec<Request> = requests.by_ref().take(BATCH).collect();
            self.run_batch(&batch)?;
        }
        Ok(())
    }

    fn run_batch(&mut self, batch: &[Request]) -> Result<(), NetlinkError> {
        let first_sequence = self.next_sequence;
        self.send_buffer.clear();
        for request in batch {
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_ACK | request.flags;
            header.sequence_number = self.next_sequence;
            self.next_sequence = self.next_sequence.wrapping_add(1);
            let mut message =
                NetlinkMessage::new(header, NetlinkPayload::from(request.message.clone()));
            message.finalize();
            let start = self.send_buffer.len();
            self.send_buffer.resize(start + message.buffer_len(), 0);
            message.serialize(&mut self.send_buffer[start..]);
        }
        let socket_error = |source| NetlinkError { what: "rtnetlink socket".into(), source };
        self.socket.send(&self.send_buffer, 0).map_err(socket_error)?;

        let mut acknowledged = 0;
        while acknowledged < batch.len() {
            let received = self.socket.recv(&mut &mut self.receive_buffer[..], 0).map_err(socket_error)?;
            let mut rest = &self.receive_buffer[..received];
            while !rest.is_empty() {
                let length = NetlinkBuffer::new_checked(rest)
                    .map(|b| b.length() as usize)
                    .map_err(|e| socket_error(io::Error::other(e.to_string())))?;
                let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..length])
                    .map_err(|e| socket_error(io::Error::other(e.to_string())))?;
                let padded = (length + 3) & !3;
                rest = &rest[padded.min(rest.len())..];
                let NetlinkPayload::Error(error) = message.payload else { continue };
                let index = message.header.sequence_number.wrapping_sub(first_sequence) as usize;
                let Some(request) = batch.get(index) else { continue };
                acknowledged += 1;
                if let Some(code) = error.code {
                    return Err(NetlinkError {
                        what: request.what.clone(),
                        source: io::Error::from_raw_os_error(-code.get()),
                    });
                }
            }
        }
        Ok(())
    }
}
