//! The generic-netlink family `MAC80211_HWSIM` as wmediumd speaks it: the
//! messages (commands and attributes of drivers/net/wireless/mac80211_hwsim.h)
//! and a socket that resolves the family and sends and receives them.

use std::io;

use netlink_packet_core::{
    emit_u32, emit_u64, parse_mac, parse_u32, parse_u64, DecodeError, DefaultNla, Emitable, ErrorContext,
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NlaBuffer, NlasIterator, Parseable,
    ParseableParametrized, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::protocols::NETLINK_GENERIC;
use netlink_sys::{Socket, SocketAddr};

pub const FAMILY_NAME: &str = "MAC80211_HWSIM";

pub const CMD_REGISTER: u8 = 1;
pub const CMD_FRAME: u8 = 2;
pub const CMD_TX_INFO_FRAME: u8 = 3;
pub const CMD_NEW_RADIO: u8 = 4;

const ATTR_ADDR_RECEIVER: u16 = 1;
const ATTR_ADDR_TRANSMITTER: u16 = 2;
const ATTR_FRAME: u16 = 3;
const ATTR_FLAGS: u16 = 4;
const ATTR_RX_RATE: u16 = 5;
const ATTR_SIGNAL: u16 = 6;
const ATTR_TX_INFO: u16 = 7;
const ATTR_COOKIE: u16 = 8;
const ATTR_DESTROY_RADIO_ON_CLOSE: u16 = 16;
const ATTR_RADIO_NAME: u16 = 17;
const ATTR_NO_VIF: u16 = 18;
const ATTR_FREQ: u16 = 19;
const ATTR_PERM_ADDR: u16 = 22;

/// `hwsim_tx_control_flags`.
pub const TX_CTL_REQ_TX_STATUS: u32 = 1 << 0;
pub const TX_CTL_NO_ACK: u32 = 1 << 1;
pub const TX_STAT_ACK: u32 = 1 << 2;

/// Entries of the rate table (IEEE80211_TX_MAX_RATES).
pub const MAX_RATES: usize = 4;

/// One entry of a frame's rate table (`struct hwsim_tx_rate`): a rate index
/// (-1: unused) and how many attempts at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxRate {
    pub idx: i8,
    pub count: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    AddrReceiver([u8; 6]),
    AddrTransmitter([u8; 6]),
    Frame(Vec<u8>),
    Flags(u32),
    RxRate(u32),
    /// dBm.
    Signal(i32),
    TxInfo([TxRate; MAX_RATES]),
    Cookie(u64),
    DestroyRadioOnClose,
    RadioName(String),
    NoVif,
    Freq(u32),
    PermAddr([u8; 6]),
    Other(DefaultNla),
}

impl Nla for Attr {
    fn value_len(&self) -> usize {
        match self {
            Attr::AddrReceiver(_) | Attr::AddrTransmitter(_) | Attr::PermAddr(_) => 6,
            Attr::Frame(frame) => frame.len(),
            Attr::Flags(_) | Attr::RxRate(_) | Attr::Signal(_) | Attr::Freq(_) => 4,
            Attr::TxInfo(_) => 2 * MAX_RATES,
            Attr::Cookie(_) => 8,
            Attr::DestroyRadioOnClose | Attr::NoVif => 0,
            Attr::RadioName(name) => name.len() + 1,
            Attr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            Attr::AddrReceiver(_) => ATTR_ADDR_RECEIVER,
            Attr::AddrTransmitter(_) => ATTR_ADDR_TRANSMITTER,
            Attr::Frame(_) => ATTR_FRAME,
            Attr::Flags(_) => ATTR_FLAGS,
            Attr::RxRate(_) => ATTR_RX_RATE,
            Attr::Signal(_) => ATTR_SIGNAL,
            Attr::TxInfo(_) => ATTR_TX_INFO,
            Attr::Cookie(_) => ATTR_COOKIE,
            Attr::DestroyRadioOnClose => ATTR_DESTROY_RADIO_ON_CLOSE,
            Attr::RadioName(_) => ATTR_RADIO_NAME,
            Attr::NoVif => ATTR_NO_VIF,
            Attr::Freq(_) => ATTR_FREQ,
            Attr::PermAddr(_) => ATTR_PERM_ADDR,
            Attr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            Attr::AddrReceiver(a) | Attr::AddrTransmitter(a) | Attr::PermAddr(a) => buffer[..6].copy_from_slice(a),
            Attr::Frame(frame) => buffer[..frame.len()].copy_from_slice(frame),
            Attr::Flags(v) | Attr::RxRate(v) | Attr::Freq(v) => emit_u32(buffer, *v).expect("4 bytes"),
            Attr::Signal(v) => emit_u32(buffer, *v as u32).expect("4 bytes"),
            Attr::TxInfo(rates) => {
                for (i, rate) in rates.iter().enumerate() {
                    buffer[2 * i] = rate.idx as u8;
                    buffer[2 * i + 1] = rate.count;
                }
            }
            Attr::Cookie(v) => emit_u64(buffer, *v).expect("8 bytes"),
            Attr::DestroyRadioOnClose | Attr::NoVif => {}
            Attr::RadioName(name) => {
                buffer[..name.len()].copy_from_slice(name.as_bytes());
                buffer[name.len()] = 0;
            }
            Attr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for Attr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let value = buf.value();
        Ok(match buf.kind() {
            ATTR_ADDR_RECEIVER => Attr::AddrReceiver(parse_mac(value).context("receiver address")?),
            ATTR_ADDR_TRANSMITTER => Attr::AddrTransmitter(parse_mac(value).context("transmitter address")?),
            ATTR_FRAME => Attr::Frame(value.to_vec()),
            ATTR_FLAGS => Attr::Flags(parse_u32(value).context("flags")?),
            ATTR_RX_RATE => Attr::RxRate(parse_u32(value).context("rx rate")?),
            ATTR_SIGNAL => Attr::Signal(parse_u32(value).context("signal")? as i32),
            ATTR_TX_INFO => {
                let mut rates = [TxRate { idx: -1, count: 0 }; MAX_RATES];
                for (i, pair) in value.chunks_exact(2).take(MAX_RATES).enumerate() {
                    rates[i] = TxRate { idx: pair[0] as i8, count: pair[1] };
                }
                Attr::TxInfo(rates)
            }
            ATTR_COOKIE => Attr::Cookie(parse_u64(value).context("cookie")?),
            ATTR_FREQ => Attr::Freq(parse_u32(value).context("frequency")?),
            ATTR_PERM_ADDR => Attr::PermAddr(parse_mac(value).context("permanent address")?),
            _ => Attr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// A message of the family: a command and its attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwsimMessage {
    pub cmd: u8,
    pub attrs: Vec<Attr>,
}

impl GenlFamily for HwsimMessage {
    fn family_name() -> &'static str {
        FAMILY_NAME
    }

    fn command(&self) -> u8 {
        self.cmd
    }

    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for HwsimMessage {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for HwsimMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let attrs = NlasIterator::new(buf)
            .map(|nla| nla.and_then(|nla| Attr::parse(&nla)))
            .collect::<Result<Vec<_>, _>>()
            .context("hwsim attributes")?;
        Ok(HwsimMessage { cmd: header.cmd, attrs })
    }
}

/// What arrives on a socket of the family.
#[derive(Debug)]
pub enum Incoming {
    Message(HwsimMessage),
    /// An acknowledgement (`code` 0, or positive: NEW_RADIO's radio id) or an
    /// error (negative errno) for the request with this sequence number.
    Ack {
        sequence: u32,
        code: i32,
    },
}

/// A NETLINK_GENERIC socket talking to `MAC80211_HWSIM`.
pub struct HwsimSocket {
    socket: Socket,
    family: u16,
    next_sequence: u32,
    send_buffer: Vec<u8>,
    receive_buffer: Vec<u8>,
}

/// The kernel keeps at most this many bytes of frames for us.
const RECEIVE_BUFFER_BYTES: usize = 8 << 20;

impl HwsimSocket {
    /// Opens a socket and resolves the family. `io::ErrorKind::NotFound`
    /// means the kernel has no mac80211_hwsim loaded.
    pub fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_GENERIC)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        // SO_RCVBUFFORCE as root: beacons and bursts must not overflow it.
        let _ = nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBufForce, &RECEIVE_BUFFER_BYTES);
        let mut hwsim = HwsimSocket {
            socket,
            family: 0,
            next_sequence: 1,
            send_buffer: Vec::new(),
            receive_buffer: vec![0; 256 * 1024],
        };
        hwsim.family = hwsim.resolve_family()?;
        Ok(hwsim)
    }

    fn resolve_family(&mut self) -> io::Result<u16> {
        let request =
            GenlCtrl { cmd: GenlCtrlCmd::GetFamily, nlas: vec![GenlCtrlAttrs::FamilyName(FAMILY_NAME.into())] };
        let mut message = NetlinkMessage::from(GenlMessage::from_payload(request));
        message.header.flags = NLM_F_REQUEST | NLM_F_ACK;
        message.header.sequence_number = self.take_sequence();
        message.finalize();
        let mut buffer = vec![0; message.buffer_len()];
        message.serialize(&mut buffer);
        self.socket.send(&buffer, 0)?;
        loop {
            let received = self.socket.recv(&mut &mut self.receive_buffer[..], 0)?;
            for bytes in split_messages(&self.receive_buffer[..received])? {
                let message = NetlinkMessage::<GenlMessage<GenlCtrl>>::deserialize(bytes).map_err(decode_error)?;
                match message.payload {
                    NetlinkPayload::InnerMessage(reply) => {
                        for attr in reply.payload.nlas {
                            if let GenlCtrlAttrs::FamilyId(id) = attr {
                                return Ok(id);
                            }
                        }
                    }
                    NetlinkPayload::Error(error) if error.code.is_some() => {
                        let errno = -error.raw_code();
                        return Err(if errno == libc::ENOENT {
                            io::Error::new(io::ErrorKind::NotFound, "no generic netlink family MAC80211_HWSIM")
                        } else {
                            io::Error::from_raw_os_error(errno)
                        });
                    }
                    _ => {}
                }
            }
        }
    }

    fn take_sequence(&mut self) -> u32 {
        let sequence = self.next_sequence;
        self.next_sequence = self.next_sequence.wrapping_add(1);
        sequence
    }

    /// Sends a message; with `ack`, the kernel answers with an [`Incoming::Ack`]
    /// of the returned sequence number.
    pub fn send(&mut self, message: HwsimMessage, ack: bool) -> io::Result<u32> {
        let sequence = self.take_sequence();
        let mut genl = GenlMessage::from_payload(message);
        genl.set_resolved_family_id(self.family);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | if ack { NLM_F_ACK } else { 0 };
        header.sequence_number = sequence;
        let mut netlink = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(genl));
        netlink.finalize();
        self.send_buffer.resize(netlink.buffer_len(), 0);
        netlink.serialize(&mut self.send_buffer);
        self.socket.send(&self.send_buffer, 0)?;
        Ok(sequence)
    }

    /// Sends a request and waits for its acknowledgement (the socket must be
    /// blocking); returns the kernel's non-negative code.
    pub fn request(&mut self, message: HwsimMessage) -> io::Result<i32> {
        let sequence = self.send(message, true)?;
        loop {
            for incoming in self.receive()? {
                if let Incoming::Ack { sequence: s, code } = incoming {
                    if s == sequence {
                        return if code < 0 { Err(io::Error::from_raw_os_error(-code)) } else { Ok(code) };
                    }
                }
            }
        }
    }

    /// One read from the socket: every message in it (`WouldBlock` when
    /// non-blocking and empty).
    pub fn receive(&mut self) -> io::Result<Vec<Incoming>> {
        let received = self.socket.recv(&mut &mut self.receive_buffer[..], 0)?;
        let mut incoming = Vec::new();
        for bytes in split_messages(&self.receive_buffer[..received])? {
            let message = match NetlinkMessage::<GenlMessage<HwsimMessage>>::deserialize(bytes) {
                Ok(message) => message,
                // A message we cannot read is the kernel's business, not a reason to stop.
                Err(_) => continue,
            };
            match message.payload {
                NetlinkPayload::InnerMessage(genl) => incoming.push(Incoming::Message(genl.payload)),
                NetlinkPayload::Error(error) => {
                    incoming.push(Incoming::Ack { sequence: message.header.sequence_number, code: error.raw_code() })
                }
                _ => {}
            }
        }
        Ok(incoming)
    }

    pub fn set_nonblocking(&self) -> io::Result<()> {
        self.socket.set_non_blocking(true)
    }

    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}

/// The netlink messages in one datagram.
fn split_messages(mut rest: &[u8]) -> io::Result<Vec<&[u8]>> {
    let mut messages = Vec::new();
    while !rest.is_empty() {
        let length = NetlinkBuffer::new_checked(rest).map_err(decode_error)?.length() as usize;
        if length == 0 || length > rest.len() {
            break;
        }
        messages.push(&rest[..length]);
        rest = &rest[((length + 3) & !3).min(rest.len())..];
    }
    Ok(messages)
}

fn decode_error(e: DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: HwsimMessage) -> HwsimMessage {
        let mut buffer = vec![0; message.buffer_len()];
        message.emit(&mut buffer);
        HwsimMessage::parse_with_param(&buffer, GenlHeader { cmd: message.cmd, version: 1 }).unwrap()
    }

    #[test]
    fn frame_attributes_round_trip_with_the_kernel_layout() {
        let rates = [
            TxRate { idx: 1, count: 3 },
            TxRate { idx: 0, count: 2 },
            TxRate { idx: -1, count: 0 },
            TxRate { idx: -1, count: 0 },
        ];
        let message = HwsimMessage {
            cmd: CMD_FRAME,
            attrs: vec![
                Attr::AddrTransmitter([2, 0, 0, 0, 0, 1]),
                Attr::Frame(vec![0x08, 0, 1, 2, 3]),
                Attr::Flags(TX_CTL_REQ_TX_STATUS),
                Attr::TxInfo(rates),
                Attr::Cookie(0x0102_0304_0506_0708),
                Attr::Signal(-61),
                Attr::Freq(2412),
            ],
        };
        assert_eq!(round_trip(message.clone()), message);
        // The rate table is 4 packed (s8 idx, u8 count) pairs; -1 is 0xff.
        let mut buffer = vec![0; Attr::TxInfo(rates).buffer_len()];
        Attr::TxInfo(rates).emit(&mut buffer);
        assert_eq!(&buffer[..4], &[12, 0, ATTR_TX_INFO as u8, 0], "NLA header: length 4 + 8, kind");
        assert_eq!(&buffer[4..], &[1, 3, 0, 2, 0xff, 0, 0xff, 0]);
    }

    #[test]
    fn new_radio_flags_and_names_are_encoded_as_the_kernel_expects() {
        let attrs = [Attr::DestroyRadioOnClose, Attr::NoVif, Attr::RadioName("lab-n1".into())];
        let mut buffer = vec![0; attrs.as_slice().buffer_len()];
        attrs.as_slice().emit(&mut buffer);
        // Flags are empty attributes; the name is NUL-terminated and padded to 4.
        assert_eq!(&buffer[..8], &[4, 0, 16, 0, 4, 0, 18, 0]);
        assert_eq!(&buffer[8..12], &[11, 0, 17, 0]);
        assert_eq!(&buffer[12..20], b"lab-n1\0\0");
        let parsed = round_trip(HwsimMessage { cmd: CMD_NEW_RADIO, attrs: vec![Attr::PermAddr([2, 0, 0, 0, 0, 9])] });
        assert_eq!(parsed.attrs, vec![Attr::PermAddr([2, 0, 0, 0, 0, 9])]);
    }
}
