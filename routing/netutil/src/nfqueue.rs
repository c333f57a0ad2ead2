//! The NFQUEUE protocol (nfnetlink_queue) on a netlink socket: bind a queue,
//! receive packet messages in batches, send verdicts (with a new mark if
//! asked; several in one send).
//!
//! Written here rather than taken from the `nfq` crate: the daemons poll the
//! queue with their other sockets in one loop (nfq 0.2 exposes no file
//! descriptor), bpd sends many verdicts per system call (nfq sends one
//! each), aodvd lets a verdict wait while later packets are read, and none
//! may panic on a message it did not expect (nfq asserts). The netlink
//! framing and attribute parsing come from `netlink-packet-core`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use netlink_packet_core::{NetlinkBuffer, NlaBuffer, NlasIterator, NLM_F_ACK, NLM_F_REQUEST, NLMSG_ERROR};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

// linux/netfilter/nfnetlink.h, nfnetlink_queue.h
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
const NFQA_HWADDR: u16 = 9;
const NFQA_PAYLOAD: u16 = 10;
const NLMSG_HEADER: usize = 16;
const NFGENMSG: usize = 4;
const AF_INET: u8 = libc::AF_INET as u8;

/// Netfilter hooks a queued IPv4 packet may come from.
pub const HOOK_PRE_ROUTING: u8 = 0;
pub const HOOK_FORWARD: u8 = 2;
pub const HOOK_LOCAL_OUT: u8 = 3;

/// What the kernel does with a queued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Drop = 0,
    Accept = 1,
    /// Run the same hook's table again (e.g. to let a mark-matching rule act).
    Repeat = 4,
}

/// One queued packet as the kernel described it.
#[derive(Debug, PartialEq, Eq)]
pub struct QueuedPacket<'a> {
    pub id: u32,
    /// The netfilter hook it was queued from ([`HOOK_LOCAL_OUT`], ...).
    pub hook: u8,
    /// Its mark when queued.
    pub mark: u32,
    /// Source MAC address of a forwarded packet (absent for our own).
    pub source_mac: Option<[u8; 6]>,
    /// The first bytes of the packet (up to the copy range).
    pub payload: &'a [u8],
}

pub struct NfQueue {
    socket: Socket,
    queue: u16,
    receive_buffer: Vec<u8>,
    received: usize,
    verdicts: Vec<u8>,
    pending_verdicts: usize,
    /// Messages that were not packets or could not be parsed.
    pub unexpected_messages: u64,
    /// Times the kernel reported our socket buffer overrun (packets lost to us).
    pub overruns: u64,
}

fn align4(length: usize) -> usize {
    (length + 3) & !3
}

fn push_header(buffer: &mut Vec<u8>, message_type: u16, flags: u16, family: u8, queue: u16) -> usize {
    let start = buffer.len();
    buffer.extend([0; 4]); // length, set by finish_message
    buffer.extend(((NFNL_SUBSYS_QUEUE << 8) | message_type).to_ne_bytes());
    buffer.extend((NLM_F_REQUEST | flags).to_ne_bytes());
    buffer.extend(0u32.to_ne_bytes()); // sequence
    buffer.extend(0u32.to_ne_bytes()); // port: the kernel
    buffer.extend([family, 0]); // nfgenmsg: family, version 0
    buffer.extend(queue.to_be_bytes());
    start
}

fn push_attribute(buffer: &mut Vec<u8>, kind: u16, value: &[u8]) {
    buffer.extend(((4 + value.len()) as u16).to_ne_bytes());
    buffer.extend(kind.to_ne_bytes());
    buffer.extend(value);
    buffer.resize(align4(buffer.len()), 0);
}

fn finish_message(buffer: &mut [u8], start: usize) {
    let length = (buffer.len() - start) as u32;
    buffer[start..start + 4].copy_from_slice(&length.to_ne_bytes());
}

fn push_verdict(buffer: &mut Vec<u8>, queue: u16, id: u32, verdict: Verdict, mark: Option<u32>) {
    let start = push_header(buffer, NFQNL_MSG_VERDICT, 0, 0, queue);
    let mut header = (verdict as u32).to_be_bytes().to_vec();
    header.extend(id.to_be_bytes());
    push_attribute(buffer, NFQA_VERDICT_HDR, &header);
    if let Some(mark) = mark {
        push_attribute(buffer, NFQA_MARK, &mark.to_be_bytes());
    }
    finish_message(buffer, start);
}

impl NfQueue {
    /// Binds queue `queue` of this network namespace: copies of the first
    /// `copy_range` bytes of each packet, at most `max_len` packets waiting in
    /// the kernel, a socket receive buffer of `socket_buffer` bytes (None:
    /// the system's default).
    pub fn open(queue: u16, copy_range: u32, max_len: u32, socket_buffer: Option<usize>) -> io::Result<NfQueue> {
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        if let Some(bytes) = socket_buffer {
            set_receive_buffer(socket.as_raw_fd(), bytes)?;
        }
        socket.set_no_enobufs(false)?;
        let mut nfq = NfQueue {
            socket,
            queue,
            receive_buffer: vec![0; 256 * 1024],
            received: 0,
            verdicts: Vec::with_capacity(64 * 1024),
            pending_verdicts: 0,
            unexpected_messages: 0,
            overruns: 0,
        };
        let mut request = Vec::new();
        let start = push_header(&mut request, NFQNL_MSG_CONFIG, NLM_F_ACK, 0, queue);
        push_attribute(&mut request, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, AF_INET]);
        finish_message(&mut request, start);
        nfq.request(&request).map_err(|e| io::Error::new(e.kind(), format!("binding NFQUEUE {queue}: {e}")))?;
        let mut request = Vec::new();
        let start = push_header(&mut request, NFQNL_MSG_CONFIG, NLM_F_ACK, 0, queue);
        let mut params = copy_range.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_PACKET);
        push_attribute(&mut request, NFQA_CFG_PARAMS, &params);
        push_attribute(&mut request, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes());
        finish_message(&mut request, start);
        nfq.request(&request)
            .map_err(|e| io::Error::new(e.kind(), format!("configuring NFQUEUE {queue}: {e}")))?;
        nfq.socket.set_non_blocking(true)?;
        Ok(nfq)
    }

    /// Sends one configuration request and waits for its acknowledgement.
    fn request(&mut self, message: &[u8]) -> io::Result<()> {
        self.socket.send(message, 0)?;
        loop {
            let size = self.socket.recv(&mut &mut self.receive_buffer[..], 0)?;
            let mut rest = &self.receive_buffer[..size];
            while let Ok(buffer) = NetlinkBuffer::new_checked(rest) {
                let length = buffer.length() as usize;
                if buffer.message_type() == NLMSG_ERROR {
                    let payload = buffer.payload();
                    let code = payload.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    return if code == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-code)) };
                }
                rest = &rest[align4(length).min(rest.len())..];
            }
        }
    }

    /// Reads what the kernel has queued for us (without blocking); then
    /// [`packets`](Self::packets) walks it. Returns false when nothing was there.
    pub fn receive(&mut self) -> io::Result<bool> {
        self.received = 0;
        match self.socket.recv(&mut &mut self.receive_buffer[..], 0) {
            Ok(size) => {
                self.received = size;
                Ok(size > 0)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                self.overruns += 1;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// The packets of the last [`receive`](Self::receive).
    pub fn packets(&mut self) -> Vec<QueuedPacket<'_>> {
        let (packets, unexpected) = parse_batch(&self.receive_buffer[..self.received]);
        self.unexpected_messages += unexpected;
        packets
    }

    /// Adds a verdict to the next [`flush`](Self::flush); with `mark`, the
    /// packet's mark becomes that.
    pub fn verdict(&mut self, id: u32, verdict: Verdict, mark: Option<u32>) {
        push_verdict(&mut self.verdicts, self.queue, id, verdict, mark);
        self.pending_verdicts += 1;
    }

    pub fn pending_verdicts(&self) -> usize {
        self.pending_verdicts
    }

    /// Sends the verdicts added since the last flush, in one system call.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.verdicts.is_empty() {
            return Ok(());
        }
        let outcome = loop {
            match self.socket.send(&self.verdicts, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The kernel takes netlink requests synchronously; a full socket is momentary.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                other => break other,
            }
        };
        self.verdicts.clear();
        self.pending_verdicts = 0;
        outcome.map(|_| ())
    }
}

impl AsFd for NfQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// Raises the socket's receive buffer beyond `rmem_max` (we are root).
fn set_receive_buffer(fd: i32, bytes: usize) -> io::Result<()> {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local.
    let status = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The packet messages in a batch of netlink messages, and how many other or
/// unparseable messages it held. Never panics, whatever the bytes.
pub fn parse_batch(mut bytes: &[u8]) -> (Vec<QueuedPacket<'_>>, u64) {
    let mut packets = Vec::new();
    let mut unexpected = 0;
    while !bytes.is_empty() {
        let Ok(message) = NetlinkBuffer::new_checked(bytes) else {
            unexpected += 1;
            break;
        };
        let length = message.length() as usize;
        let payload = &bytes[NLMSG_HEADER..length];
        if message.message_type() == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            match parse_packet(payload) {
                Some(packet) => packets.push(packet),
                None => unexpected += 1,
            }
        } else {
            unexpected += 1;
        }
        bytes = &bytes[align4(length).min(bytes.len())..];
    }
    (packets, unexpected)
}

fn parse_packet(message: &[u8]) -> Option<QueuedPacket<'_>> {
    let attributes = message.get(NFGENMSG..)?;
    let mut header = None;
    let mut mark = 0;
    let mut source_mac = None;
    let mut payload: &[u8] = &[];
    for attribute in NlasIterator::new(attributes) {
        let attribute: NlaBuffer<&[u8]> = attribute.ok()?;
        let (kind, length) = (attribute.kind(), usize::from(attribute.length()));
        // new_checked made sure 4 <= length <= the bytes there.
        let value = &attribute.into_inner()[4..length];
        match kind {
            // struct nfqnl_msg_packet_hdr: be32 packet id, be16 hw protocol, u8 hook
            NFQA_PACKET_HDR => header = Some((u32::from_be_bytes(value.get(..4)?.try_into().ok()?), *value.get(6)?)),
            NFQA_MARK => mark = u32::from_be_bytes(value.get(..4)?.try_into().ok()?),
            NFQA_HWADDR => {
                // struct nfqnl_msg_packet_hw: be16 length, 2 bytes padding, 8 bytes address
                let length = u16::from_be_bytes(value.get(..2)?.try_into().ok()?);
                if length == 6 {
                    source_mac = Some(value.get(4..10)?.try_into().ok()?);
                }
            }
            NFQA_PAYLOAD => payload = value,
            _ => {}
        }
    }
    let (id, hook) = header?;
    Some(QueuedPacket { id, hook, mark, source_mac, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet_message(id: u32, mac: Option<[u8; 6]>, payload: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let start = push_header(&mut bytes, NFQNL_MSG_PACKET, 0, AF_INET, 0);
        let mut header = id.to_be_bytes().to_vec();
        header.extend([8, 0, 4]); // hw protocol IPv4, hook POSTROUTING
        push_attribute(&mut bytes, NFQA_PACKET_HDR, &header);
        push_attribute(&mut bytes, NFQA_MARK, &0x100u32.to_be_bytes());
        if let Some(mac) = mac {
            let mut hw = vec![0, 6, 0, 0];
            hw.extend(mac);
            hw.extend([0, 0]);
            push_attribute(&mut bytes, NFQA_HWADDR, &hw);
        }
        push_attribute(&mut bytes, NFQA_PAYLOAD, payload);
        finish_message(&mut bytes, start);
        bytes
    }

    #[test]
    fn a_batch_of_packet_messages_is_read_back() {
        let mut batch = packet_message(7, Some([2, 0, 0, 0, 0, 3]), &[0x45, 1, 2]);
        batch.extend(packet_message(8, None, &[0x45; 41]));
        let (packets, unexpected) = parse_batch(&batch);
        assert_eq!(unexpected, 0);
        let first = QueuedPacket { id: 7, hook: 4, mark: 0x100, source_mac: Some([2, 0, 0, 0, 0, 3]), payload: &[0x45, 1, 2] };
        assert_eq!(packets[0], first);
        assert_eq!((packets[1].id, packets[1].source_mac, packets[1].payload.len()), (8, None, 41));
    }

    #[test]
    fn garbage_and_truncated_messages_are_counted_not_fatal() {
        let good = packet_message(1, None, &[0x45; 20]);
        for cut in 0..good.len() {
            let (packets, _) = parse_batch(&good[..cut]);
            assert!(packets.is_empty(), "cut at {cut}");
        }
        let mut no_header = good.clone();
        no_header[20..22].copy_from_slice(&0u16.to_ne_bytes()); // attribute length 0
        assert_eq!(parse_batch(&no_header).0.len(), 0);
        assert_eq!(parse_batch(&[0xff; 64]).1, 1);
    }

    #[test]
    fn a_verdict_carries_its_mark() {
        let mut bytes = Vec::new();
        push_verdict(&mut bytes, 3, 9, Verdict::Repeat, Some(0x4000_0000));
        assert_eq!(bytes.len(), 16 + 4 + 12 + 8);
        assert_eq!(&bytes[24..32], &[0, 0, 0, 4, 0, 0, 0, 9], "verdict NF_REPEAT for packet 9");
        assert_eq!(&bytes[32..34], &8u16.to_ne_bytes(), "mark attribute: 8 bytes");
        assert_eq!(&bytes[34..36], &NFQA_MARK.to_ne_bytes());
        assert_eq!(&bytes[36..40], &[0x40, 0, 0, 0]);
    }

    #[test]
    fn verdicts_are_packed_back_to_back() {
        let mut bytes = Vec::new();
        for id in [5, 6] {
            push_verdict(&mut bytes, 3, id, Verdict::Accept, None);
        }
        assert_eq!(bytes.len(), 2 * (16 + 4 + 12));
        let first = NetlinkBuffer::new_checked(&bytes[..]).unwrap();
        assert_eq!(first.length(), 32);
        assert_eq!(first.message_type(), (3 << 8) | 1);
        assert_eq!(&bytes[18..20], &3u16.to_be_bytes(), "queue number in the nfgenmsg");
        assert_eq!(bytes[63], 6);
    }
}
