//! A minimal NFQUEUE client (nfnetlink_queue) on a netlink-sys socket.
//!
//! Written here rather than taken from the `nfq` crate because the event
//! loop must poll the socket together with the others, and `nfq` 0.2 does
//! not expose its descriptor (nor lets a verdict wait while later packets
//! are read without holding its buffer). Only what holding packets needs:
//! bind a queue, read packets (id, hook, mark, the first bytes), verdicts
//! with an optional new mark.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_MARK: u16 = 3;
const NFQA_PAYLOAD: u16 = 10;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HEADER: usize = 16;
const NFGENMSG: usize = 4;

/// Netfilter hooks a queued IPv4 packet may come from.
pub const HOOK_FORWARD: u8 = 2;
pub const HOOK_LOCAL_OUT: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Drop = 0,
    Accept = 1,
    /// Run the same hook's table again (e.g. to let a mark-matching rule act).
    Repeat = 4,
}

/// A packet the kernel queued to us.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedPacket {
    pub id: u32,
    pub hook: u8,
    pub mark: u32,
    /// The packet from its IP header on (as much as the copy range allows).
    pub payload: Vec<u8>,
}

pub struct PacketQueue {
    socket: Socket,
    queue: u16,
    sequence: u32,
    buffer: Vec<u8>,
}

impl PacketQueue {
    /// Binds queue number `queue`, copying up to `copy_range` bytes of each
    /// packet; the kernel holds at most `max_len` packets for us.
    pub fn bind(queue: u16, copy_range: u32, max_len: u32) -> io::Result<PacketQueue> {
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind(&SocketAddr::new(0, 0))?;
        let mut this = PacketQueue { socket, queue, sequence: 0, buffer: vec![0; 256 * 1024] };
        let bind_cmd = [NFQNL_CFG_CMD_BIND, 0, 0, 0]; // command, pad, pf (unused)
        this.configure(&[(NFQA_CFG_CMD, &bind_cmd)])?;
        let mut params = copy_range.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_PACKET);
        this.configure(&[(NFQA_CFG_PARAMS, &params), (NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes())])?;
        this.socket.set_non_blocking(true)?;
        Ok(this)
    }

    fn message(&mut self, kind: u16, flags: u16, attributes: &[(u16, &[u8])]) -> Vec<u8> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&[0; 4]); // length, filled in below
        bytes.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
        bytes.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
        bytes.extend_from_slice(&self.sequence.to_ne_bytes());
        bytes.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
        bytes.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]); // nfgenmsg family, version
        bytes.extend_from_slice(&self.queue.to_be_bytes());
        for (kind, value) in attributes {
            bytes.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            bytes.extend_from_slice(&kind.to_ne_bytes());
            bytes.extend_from_slice(value);
            bytes.resize((bytes.len() + 3) & !3, 0);
        }
        let length = bytes.len() as u32;
        bytes[..4].copy_from_slice(&length.to_ne_bytes());
        bytes
    }

    /// A config request, waiting for the kernel's acknowledgement.
    fn configure(&mut self, attributes: &[(u16, &[u8])]) -> io::Result<()> {
        let request = self.message(NFQNL_MSG_CONFIG, libc::NLM_F_ACK as u16, attributes);
        self.socket.send(&request, 0)?;
        loop {
            let size = self.socket.recv(&mut &mut self.buffer[..], 0)?;
            for (kind, body) in netlink_messages(&self.buffer[..size]) {
                if kind == NLMSG_ERROR {
                    let code = body.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    return if code == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-code)) };
                }
            }
        }
    }

    /// The packets queued since the last call (none when nothing waits).
    pub fn receive(&mut self) -> io::Result<Vec<QueuedPacket>> {
        let mut packets = Vec::new();
        loop {
            let size = match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(size) => size,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(packets),
                Err(error) => return Err(error),
            };
            for (kind, body) in netlink_messages(&self.buffer[..size]) {
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
                    if let Some(packet) = parse_packet(body) {
                        packets.push(packet);
                    }
                }
            }
        }
    }

    pub fn verdict(&mut self, id: u32, verdict: Verdict, mark: Option<u32>) -> io::Result<()> {
        let mut header = (verdict as u32).to_be_bytes().to_vec();
        header.extend_from_slice(&id.to_be_bytes());
        let mark_bytes = mark.map(u32::to_be_bytes);
        let mut attributes: Vec<(u16, &[u8])> = vec![(NFQA_VERDICT_HDR, &header)];
        if let Some(bytes) = &mark_bytes {
            attributes.push((NFQA_MARK, bytes));
        }
        let request = self.message(NFQNL_MSG_VERDICT, 0, &attributes);
        self.socket.send(&request, 0).map(|_| ())
    }
}

impl AsFd for PacketQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// (type, body after the netlink header) of each message in a datagram.
fn netlink_messages(mut bytes: &[u8]) -> Vec<(u16, &[u8])> {
    let mut messages = Vec::new();
    while bytes.len() >= NLMSG_HEADER {
        let length = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if length < NLMSG_HEADER || length > bytes.len() {
            break;
        }
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        messages.push((kind, &bytes[NLMSG_HEADER..length]));
        bytes = &bytes[((length + 3) & !3).min(bytes.len())..];
    }
    messages
}

/// A queued-packet message: nfgenmsg, then attributes.
fn parse_packet(body: &[u8]) -> Option<QueuedPacket> {
    let mut attributes = body.get(NFGENMSG..)?;
    let mut packet = QueuedPacket { id: 0, hook: 0, mark: 0, payload: Vec::new() };
    let mut has_header = false;
    while attributes.len() >= 4 {
        let length = usize::from(u16::from_ne_bytes([attributes[0], attributes[1]]));
        let kind = u16::from_ne_bytes([attributes[2], attributes[3]]) & NLA_TYPE_MASK;
        if length < 4 || length > attributes.len() {
            break;
        }
        let value = &attributes[4..length];
        match kind {
            NFQA_PACKET_HDR if value.len() >= 7 => {
                packet.id = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
                packet.hook = value[6];
                has_header = true;
            }
            NFQA_MARK if value.len() >= 4 => {
                packet.mark = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
            }
            NFQA_PAYLOAD => packet.payload = value.to_vec(),
            _ => {}
        }
        attributes = &attributes[((length + 3) & !3).min(attributes.len())..];
    }
    has_header.then_some(packet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_packet_message_is_parsed() {
        let mut body = vec![2, 0, 0, 7]; // nfgenmsg: AF_INET, version 0, queue 7
        let header = [0, 0, 0, 42, 0x08, 0x00, HOOK_LOCAL_OUT, 0];
        for (kind, value) in [(NFQA_PACKET_HDR, &header[..7]), (NFQA_MARK, &[0, 0, 1, 0][..]), (NFQA_PAYLOAD, &[0x45, 0, 0][..])] {
            body.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&kind.to_ne_bytes());
            body.extend_from_slice(value);
            body.resize((body.len() + 3) & !3, 0);
        }
        let packet = parse_packet(&body).unwrap();
        assert_eq!(packet, QueuedPacket { id: 42, hook: HOOK_LOCAL_OUT, mark: 256, payload: vec![0x45, 0, 0] });
    }

    #[test]
    fn truncated_messages_are_ignored() {
        assert_eq!(parse_packet(&[2, 0]), None);
        assert_eq!(parse_packet(&[2, 0, 0, 7, 200, 0, 1, 0]), None);
        assert!(netlink_messages(&[16, 0, 0, 0, 1]).is_empty());
    }
}
