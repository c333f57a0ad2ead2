//! Promiscuous reception: every IPv4 frame the node's interface receives,
//! its own and those overheard for other nodes (the medium writes them to a
//! promiscuous node's TAP), with the transmitter's MAC address.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{recvfrom, socket, AddressFamily, LinkAddr, SockFlag, SockProtocol, SockType};

/// `sll_pkttype` of frames we sent ourselves (linux/if_packet.h).
const PACKET_OUTGOING: u8 = 4;

/// A frame transmitted by a neighbour.
pub struct Heard<'a> {
    pub transmitter: [u8; 6],
    /// The IPv4 packet.
    pub packet: &'a [u8],
}

pub struct Overhear {
    socket: OwnedFd,
    ifindex: usize,
    buffer: Vec<u8>,
}

impl Overhear {
    /// A packet socket for IPv4 frames of interface `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<Overhear> {
        let socket = socket(
            AddressFamily::Packet,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::EthIp,
        )?;
        Ok(Overhear { socket, ifindex: ifindex as usize, buffer: vec![0; 2048] })
    }

    /// The next frame a neighbour transmitted on our interface, if one is waiting.
    pub fn next(&mut self) -> io::Result<Option<Heard<'_>>> {
        loop {
            let (size, from) = match recvfrom::<LinkAddr>(self.socket.as_raw_fd(), &mut self.buffer) {
                Ok(received) => received,
                Err(Errno::EAGAIN) => return Ok(None),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(from) = from else { continue };
            if from.ifindex() != self.ifindex || from.pkttype() == PACKET_OUTGOING {
                continue;
            }
            let Some(transmitter) = from.addr() else { continue };
            return Ok(Some(Heard { transmitter, packet: &self.buffer[..size.min(self.buffer.len())] }));
        }
    }
}

impl AsFd for Overhear {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}
