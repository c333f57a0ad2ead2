//! The control socket: UDP port 654 on one interface, broadcasts allowed,
//! the IP TTL set per packet and read from every packet received.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::cmsg_space;
use nix::sys::socket::{
    bind, recvmsg, sendmsg, setsockopt, socket, sockopt, AddressFamily, ControlMessage, ControlMessageOwned,
    MsgFlags, SockFlag, SockType, SockaddrIn,
};

use crate::CONTROL_PORT;

pub struct ControlSocket {
    fd: OwnedFd,
    buffer: Vec<u8>,
}

/// A packet received: sender, IP TTL on arrival, payload length in the buffer.
pub struct Received {
    pub from: Ipv4Addr,
    pub ttl: u8,
    pub len: usize,
}

impl ControlSocket {
    pub fn bind(interface: &str) -> io::Result<ControlSocket> {
        let fd = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC, None)?;
        setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(interface))?;
        setsockopt(&fd, sockopt::Broadcast, &true)?;
        setsockopt(&fd, sockopt::Ipv4RecvTtl, &true)?;
        bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, CONTROL_PORT)))?;
        Ok(ControlSocket { fd, buffer: vec![0; 65536] })
    }

    pub fn send(&self, to: Ipv4Addr, ttl: u8, payload: &[u8]) -> io::Result<()> {
        let ttl = libc::c_int::from(ttl);
        let destination = SockaddrIn::from(SocketAddrV4::new(to, CONTROL_PORT));
        sendmsg(
            self.fd.as_raw_fd(),
            &[IoSlice::new(payload)],
            &[ControlMessage::Ipv4Ttl(&ttl)],
            MsgFlags::empty(),
            Some(&destination),
        )?;
        Ok(())
    }

    /// The next packet waiting, or None.
    pub fn receive(&mut self) -> io::Result<Option<(Received, &[u8])>> {
        let mut control = cmsg_space!(libc::c_int);
        let (from, ttl, len) = {
            let mut iov = [IoSliceMut::new(&mut self.buffer)];
            let message = match recvmsg::<SockaddrIn>(self.fd.as_raw_fd(), &mut iov, Some(&mut control), MsgFlags::empty()) {
                Ok(message) => message,
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(error) => return Err(error.into()),
            };
            let ttl = message
                .cmsgs()
                .map_err(io::Error::from)?
                .find_map(|c| match c {
                    ControlMessageOwned::Ipv4Ttl(ttl) => Some(ttl.clamp(0, 255) as u8),
                    _ => None,
                })
                .unwrap_or(1);
            let from = message.address.map(|a| a.ip()).unwrap_or(Ipv4Addr::UNSPECIFIED);
            (from, ttl, message.bytes)
        };
        Ok(Some((Received { from, ttl, len }, &self.buffer[..len])))
    }
}

impl AsFd for ControlSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for ControlSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
