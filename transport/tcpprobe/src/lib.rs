//! Samples of the kernel's TCP state (`struct tcp_info`) of chosen sockets.
//!
//! The binary asks sock_diag netlink for every IPv4 TCP socket of its network
//! namespace with `INET_DIAG_INFO` and keeps those whose local or remote port
//! is the one asked for. This library turns one socket of the answer into a
//! [`Sample`] (no I/O, no clock: the caller gives the time).

use std::net::IpAddr;

use netlink_packet_sock_diag::inet::{nlas::Nla, InetResponse};
use serde::Serialize;

/// One socket at one instant; times in microseconds as the kernel keeps them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Wall-clock time of the sample, ns since the epoch.
    pub time_ns: u64,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
    /// TCP state (1 established, ... as in the kernel's tcp_states.h).
    pub state: u8,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    pub congestion: Option<String>,
    /// Congestion window, in segments.
    pub cwnd: u32,
    /// Slow-start threshold, in segments (2147483647 until the first loss).
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub rto_us: u32,
    pub min_rtt_us: u32,
    pub mss: u32,
    /// Segments in flight not yet acknowledged.
    pub unacked: u32,
    pub lost: u32,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    pub segs_out: u32,
    pub data_segs_out: u32,
    /// Bytes acknowledged by the peer, each once (retransmissions excluded).
    pub bytes_acked: u64,
    /// Bytes received in order (the receiving side's goodput counter).
    pub bytes_received: u64,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub delivery_rate_bps: u64,
    pub pacing_rate_bps: u64,
}

/// Whether `port` is the socket's local or remote port.
pub fn uses_port(response: &InetResponse, port: u16) -> bool {
    let id = &response.header.socket_id;
    id.source_port == port || id.destination_port == port
}

/// The sample of one socket, or None when the answer carries no TCP info
/// (a listening or closing socket).
pub fn sample(time_ns: u64, response: &InetResponse) -> Option<Sample> {
    let info = response.nlas.iter().find_map(|nla| match nla {
        Nla::TcpInfo(info) => Some(info),
        _ => None,
    })?;
    let congestion = response.nlas.iter().find_map(|nla| match nla {
        Nla::Congestion(name) => Some(name.clone()),
        _ => None,
    });
    let id = &response.header.socket_id;
    Some(Sample {
        time_ns,
        src: id.source_address,
        sport: id.source_port,
        dst: id.destination_address,
        dport: id.destination_port,
        state: response.header.state,
        ca_state: info.ca_state,
        congestion,
        cwnd: info.snd_cwnd,
        ssthresh: info.snd_ssthresh,
        srtt_us: info.rtt,
        rttvar_us: info.rttvar,
        rto_us: info.rto,
        min_rtt_us: info.min_rtt,
        mss: info.snd_mss,
        unacked: info.unacked,
        lost: info.lost,
        total_retrans: info.total_retrans,
        segs_out: info.segs_out,
        data_segs_out: info.data_segs_out,
        bytes_acked: info.bytes_acked,
        bytes_received: info.bytes_received,
        bytes_sent: info.bytes_sent,
        bytes_retrans: info.bytes_retrans,
        // The kernel reports both rates in bytes per second.
        delivery_rate_bps: info.delivery_rate.saturating_mul(8),
        pacing_rate_bps: info.pacing_rate.saturating_mul(8),
    })
}

/// The sock_diag query: every IPv4 TCP socket of the caller's namespace.
pub mod diag {
    use std::io;

    use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
    use netlink_packet_sock_diag::constants::{AF_INET, IPPROTO_TCP};
    use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags};
    use netlink_packet_sock_diag::SockDiagMessage;
    use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

    pub struct Diag {
        socket: Socket,
        buf: Vec<u8>,
    }

    impl Diag {
        pub fn open() -> io::Result<Self> {
            let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
            socket.bind_auto()?;
            socket.connect(&SocketAddr::new(0, 0))?;
            Ok(Diag { socket, buf: vec![0; 1 << 16] })
        }

        /// Every IPv4 TCP socket with its `tcp_info` and congestion control.
        pub fn dump(&mut self) -> io::Result<Vec<InetResponse>> {
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_DUMP;
            let mut request = NetlinkMessage::new(
                header,
                SockDiagMessage::InetRequest(InetRequest {
                    family: AF_INET,
                    protocol: IPPROTO_TCP,
                    extensions: ExtensionFlags::INFO | ExtensionFlags::CONG,
                    states: StateFlags::all(),
                    socket_id: SocketId::new_v4(),
                })
                .into(),
            );
            request.finalize();
            let mut bytes = vec![0; request.buffer_len()];
            request.serialize(&mut bytes);
            self.socket.send(&bytes, 0)?;

            let mut sockets = Vec::new();
            loop {
                let size = self.socket.recv(&mut &mut self.buf[..], 0)?;
                let mut offset = 0;
                while offset < size {
                    let message = NetlinkMessage::<SockDiagMessage>::deserialize(&self.buf[offset..size])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag answer: {e}")))?;
                    let length = message.header.length as usize;
                    match message.payload {
                        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => {
                            sockets.push(*response)
                        }
                        NetlinkPayload::Done(_) => return Ok(sockets),
                        NetlinkPayload::Error(error) => {
                            return Err(io::Error::other(format!("sock_diag refused the dump: {error:?}")))
                        }
                        _ => {}
                    }
                    if length == 0 {
                        break;
                    }
                    offset += length;
                }
            }
        }
    }
}
