//! The UDP socket of the tools: non-blocking, waits with `ppoll` (ns
//! timeouts), reports the IP TTL of received packets.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use nix::sys::time::TimeSpec;

/// Socket buffers asked for, so bursts at high rates are not dropped.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Datagram {
    pub len: usize,
    pub from: SocketAddr,
    /// IP TTL (IPv4) or hop limit (IPv6), when the kernel reported it.
    pub ttl: Option<u8>,
}

/// What became of a datagram handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Sent,
    /// The socket buffer or the device queue was full; the datagram is gone.
    Dropped,
}

#[derive(Debug)]
pub struct Endpoint {
    socket: UdpSocket,
}

fn option_error(what: &'static str) -> impl FnOnce(nix::Error) -> io::Error {
    move |e| io::Error::other(format!("{what}: {e}"))
}

impl Endpoint {
    /// Binds a non-blocking UDP socket with large buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        // Forcing past rmem_max/wmem_max needs CAP_NET_ADMIN; otherwise the
        // kernel's limits apply.
        if setsockopt(&socket, sockopt::RcvBufForce, &SOCKET_BUFFER_BYTES).is_err() {
            setsockopt(&socket, sockopt::RcvBuf, &SOCKET_BUFFER_BYTES)
                .map_err(option_error("SO_RCVBUF"))?;
        }
        if setsockopt(&socket, sockopt::SndBufForce, &SOCKET_BUFFER_BYTES).is_err() {
            setsockopt(&socket, sockopt::SndBuf, &SOCKET_BUFFER_BYTES)
                .map_err(option_error("SO_SNDBUF"))?;
        }
        Ok(Self { socket })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sets the TTL (hop limit) of outgoing packets.
    pub fn set_ttl(&self, ttl: u8) -> io::Result<()> {
        if self.local_addr()?.is_ipv4() {
            setsockopt(&self.socket, sockopt::Ipv4Ttl, &i32::from(ttl))
                .map_err(option_error("IP_TTL"))
        } else {
            setsockopt(&self.socket, sockopt::Ipv6Ttl, &i32::from(ttl))
                .map_err(option_error("IPV6_UNICAST_HOPS"))
        }
    }

    /// Asks the kernel to report the TTL (hop limit) of received packets.
    pub fn report_ttl(&self) -> io::Result<()> {
        if self.local_addr()?.is_ipv4() {
            setsockopt(&self.socket, sockopt::Ipv4RecvTtl, &true)
                .map_err(option_error("IP_RECVTTL"))
        } else {
            setsockopt(&self.socket, sockopt::Ipv6RecvHopLimit, &true)
                .map_err(option_error("IPV6_RECVHOPLIMIT"))
        }
    }

    pub fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<Sent> {
        match self.socket.send_to(buf, to) {
            Ok(_) => Ok(Sent::Sent),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(nix::Error::ENOBUFS as i32) =>
            {
                Ok(Sent::Dropped)
            }
            // An ICMP port unreachable from an earlier datagram: the peer is
            // not (yet) listening; the datagram is lost like any other.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Sent::Dropped),
            Err(e) => Err(e),
        }
    }

    /// The next datagram, or `None` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Datagram>> {
        // Room for one TTL (an int) control message.
        let mut cmsg = nix::cmsg_space!(i32);
        let mut iov = [io::IoSliceMut::new(buf)];
        let msg = match recvmsg::<SockaddrStorage>(
            self.socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(msg) => msg,
            Err(nix::Error::EAGAIN) => return Ok(None),
            // ICMP errors from earlier sends surface here; they carry no data.
            Err(nix::Error::ECONNREFUSED) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let from = msg.address.as_ref().and_then(to_socket_addr);
        let ttl = msg.cmsgs().ok().and_then(|mut cmsgs| {
            cmsgs.find_map(|c| match c {
                ControlMessageOwned::Ipv4Ttl(ttl) | ControlMessageOwned::Ipv6HopLimit(ttl) => {
                    u8::try_from(ttl).ok()
                }
                _ => None,
            })
        });
        // A UDP socket always reports the sender's address.
        Ok(from.map(|from| Datagram {
            len: msg.bytes,
            from,
            ttl,
        }))
    }

    /// Waits until a datagram is waiting or `timeout` has passed.
    pub fn wait(&self, timeout: Duration) -> io::Result<()> {
        let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
            Ok(_) | Err(nix::Error::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn to_socket_addr(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}

/// Lets this thread's timers fire within a microsecond instead of Linux's
/// default 50 µs slack (MACHINE-NOTES: timer lateness 55 µs → 5 µs).
pub fn tighten_timer_slack() {
    // Best effort: without it pacing is only a little coarser.
    let _ = nix::sys::prctl::set_timerslack(1);
}

/// CPU time this thread has used.
pub fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Wall-clock time, ns since the Unix epoch (0 if the clock is before it).
pub fn wallclock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
