//! AODV control messages (RFC 3561 section 5): RREQ, RREP (and HELLO, an
//! RREP with hop count 0 about its own sender), RERR, RREP-ACK.
//!
//! Decoding never panics: any byte string gives a message or a
//! [`DecodeError`] saying what is wrong. Reserved bits are ignored on
//! receipt and sent as zero. Extensions (type, length, data) may follow a
//! message; they are checked for well-formedness and skipped.

use std::net::Ipv4Addr;

use thiserror::Error;

const TYPE_RREQ: u8 = 1;
const TYPE_RREP: u8 = 2;
const TYPE_RERR: u8 = 3;
const TYPE_RREP_ACK: u8 = 4;

const RREQ_LEN: usize = 24;
const RREP_LEN: usize = 20;
const RERR_HEADER_LEN: usize = 4;
const RERR_ENTRY_LEN: usize = 8;
const RREP_ACK_LEN: usize = 2;

/// Route Request (section 5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rreq {
    /// J: join (multicast; carried, not used).
    pub join: bool,
    /// R: repair (multicast; carried, not used).
    pub repair: bool,
    /// G: a gratuitous RREP should go to the destination.
    pub gratuitous: bool,
    /// D: only the destination may answer.
    pub destination_only: bool,
    /// U: the destination sequence number is unknown.
    pub unknown_seq: bool,
    pub hop_count: u8,
    pub id: u32,
    pub dst: Ipv4Addr,
    pub dst_seq: u32,
    pub orig: Ipv4Addr,
    pub orig_seq: u32,
}

/// Route Reply (section 5.2); also HELLO (section 6.9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rrep {
    /// R: repair (multicast; carried, not used).
    pub repair: bool,
    /// A: the sender asks for an RREP-ACK.
    pub ack_required: bool,
    /// Prefix size (0..=31): the route covers a subnet of this length.
    pub prefix_size: u8,
    pub hop_count: u8,
    pub dst: Ipv4Addr,
    pub dst_seq: u32,
    pub orig: Ipv4Addr,
    pub lifetime_ms: u32,
}

impl Rrep {
    /// A HELLO is an RREP whose sender tells about itself: hop count 0 and
    /// destination = originator = sender. (A destination's own RREP names
    /// the RREQ's originator instead.)
    pub fn is_hello_from(&self, sender: Ipv4Addr) -> bool {
        self.hop_count == 0 && self.dst == sender && self.orig == sender
    }
}

/// Route Error (section 5.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rerr {
    /// N: no delete (the upstream node repairs locally).
    pub no_delete: bool,
    /// Unreachable destinations and their sequence numbers (at least one).
    pub unreachable: Vec<(Ipv4Addr, u32)>,
}

/// Any AODV message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Rreq(Rreq),
    Rrep(Rrep),
    Rerr(Rerr),
    RrepAck,
}

/// Why bytes are not an AODV message.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("empty packet")]
    Empty,
    #[error("unknown message type {0}")]
    UnknownType(u8),
    #[error("{kind} needs {needed} bytes, got {got}")]
    Truncated { kind: &'static str, needed: usize, got: usize },
    #[error("RERR with destination count 0")]
    NoDestinations,
    #[error("malformed extension at byte {0}")]
    BadExtension(usize),
}

impl Message {
    /// The message kind as counters and logs name it.
    pub fn kind(&self, sender: Ipv4Addr) -> &'static str {
        match self {
            Message::Rreq(_) => "rreq",
            Message::Rrep(rrep) if rrep.is_hello_from(sender) => "hello",
            Message::Rrep(_) => "rrep",
            Message::Rerr(_) => "rerr",
            Message::RrepAck => "rrep_ack",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            Message::Rreq(m) => {
                let mut out = Vec::with_capacity(RREQ_LEN);
                let flags = flag(m.join, 0x80)
                    | flag(m.repair, 0x40)
                    | flag(m.gratuitous, 0x20)
                    | flag(m.destination_only, 0x10)
                    | flag(m.unknown_seq, 0x08);
                out.extend_from_slice(&[TYPE_RREQ, flags, 0, m.hop_count]);
                out.extend_from_slice(&m.id.to_be_bytes());
                out.extend_from_slice(&m.dst.octets());
                out.extend_from_slice(&m.dst_seq.to_be_bytes());
                out.extend_from_slice(&m.orig.octets());
                out.extend_from_slice(&m.orig_seq.to_be_bytes());
                out
            }
            Message::Rrep(m) => {
                let mut out = Vec::with_capacity(RREP_LEN);
                let flags = flag(m.repair, 0x80) | flag(m.ack_required, 0x40);
                out.extend_from_slice(&[TYPE_RREP, flags, m.prefix_size & 0x1f, m.hop_count]);
                out.extend_from_slice(&m.dst.octets());
                out.extend_from_slice(&m.dst_seq.to_be_bytes());
                out.extend_from_slice(&m.orig.octets());
                out.extend_from_slice(&m.lifetime_ms.to_be_bytes());
                out
            }
            Message::Rerr(m) => {
                // The count is one byte: callers split longer lists (see MAX_RERR_DESTINATIONS).
                let count = m.unreachable.len().min(MAX_RERR_DESTINATIONS);
                let mut out = Vec::with_capacity(RERR_HEADER_LEN + count * RERR_ENTRY_LEN);
                out.extend_from_slice(&[TYPE_RERR, flag(m.no_delete, 0x80), 0, count as u8]);
                for (dst, seq) in &m.unreachable[..count] {
                    out.extend_from_slice(&dst.octets());
                    out.extend_from_slice(&seq.to_be_bytes());
                }
                out
            }
            Message::RrepAck => vec![TYPE_RREP_ACK, 0],
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let kind = *bytes.first().ok_or(DecodeError::Empty)?;
        let (message, length) = match kind {
            TYPE_RREQ => {
                need(bytes, RREQ_LEN, "RREQ")?;
                let flags = bytes[1];
                let rreq = Rreq {
                    join: flags & 0x80 != 0,
                    repair: flags & 0x40 != 0,
                    gratuitous: flags & 0x20 != 0,
                    destination_only: flags & 0x10 != 0,
                    unknown_seq: flags & 0x08 != 0,
                    hop_count: bytes[3],
                    id: u32_at(bytes, 4),
                    dst: ip_at(bytes, 8),
                    dst_seq: u32_at(bytes, 12),
                    orig: ip_at(bytes, 16),
                    orig_seq: u32_at(bytes, 20),
                };
                (Message::Rreq(rreq), RREQ_LEN)
            }
            TYPE_RREP => {
                need(bytes, RREP_LEN, "RREP")?;
                let flags = bytes[1];
                let rrep = Rrep {
                    repair: flags & 0x80 != 0,
                    ack_required: flags & 0x40 != 0,
                    prefix_size: bytes[2] & 0x1f,
                    hop_count: bytes[3],
                    dst: ip_at(bytes, 4),
                    dst_seq: u32_at(bytes, 8),
                    orig: ip_at(bytes, 12),
                    lifetime_ms: u32_at(bytes, 16),
                };
                (Message::Rrep(rrep), RREP_LEN)
            }
            TYPE_RERR => {
                need(bytes, RERR_HEADER_LEN, "RERR")?;
                let count = usize::from(bytes[3]);
                if count == 0 {
                    return Err(DecodeError::NoDestinations);
                }
                let length = RERR_HEADER_LEN + count * RERR_ENTRY_LEN;
                need(bytes, length, "RERR")?;
                let unreachable = (0..count)
                    .map(|i| {
                        let at = RERR_HEADER_LEN + i * RERR_ENTRY_LEN;
                        (ip_at(bytes, at), u32_at(bytes, at + 4))
                    })
                    .collect();
                (Message::Rerr(Rerr { no_delete: bytes[1] & 0x80 != 0, unreachable }), length)
            }
            TYPE_RREP_ACK => {
                need(bytes, RREP_ACK_LEN, "RREP-ACK")?;
                (Message::RrepAck, RREP_ACK_LEN)
            }
            other => return Err(DecodeError::UnknownType(other)),
        };
        check_extensions(bytes, length)?;
        Ok(message)
    }
}

/// The most destinations one RERR carries (its count field is one byte).
pub const MAX_RERR_DESTINATIONS: usize = 255;

/// Sequence number `a` is newer than `b` (section 6.1: signed 32-bit
/// difference, so the comparison survives wrap-around).
pub fn seq_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn flag(set: bool, bit: u8) -> u8 {
    if set {
        bit
    } else {
        0
    }
}

fn need(bytes: &[u8], needed: usize, kind: &'static str) -> Result<(), DecodeError> {
    if bytes.len() < needed {
        return Err(DecodeError::Truncated { kind, needed, got: bytes.len() });
    }
    Ok(())
}

// Callers have checked the length with `need`.
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn ip_at(bytes: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32_at(bytes, at))
}

/// Extensions after the message: (type, length, length bytes of data) each.
fn check_extensions(bytes: &[u8], mut at: usize) -> Result<(), DecodeError> {
    while at < bytes.len() {
        let Some(&length) = bytes.get(at + 1) else {
            return Err(DecodeError::BadExtension(at));
        };
        let end = at + 2 + usize::from(length);
        if end > bytes.len() {
            return Err(DecodeError::BadExtension(at));
        }
        at = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sequence_numbers_compare_across_wrap_around() {
        assert!(seq_newer(2, 1));
        assert!(!seq_newer(1, 2));
        assert!(!seq_newer(5, 5));
        assert!(seq_newer(3, u32::MAX - 2));
    }

    fn ip() -> impl Strategy<Value = Ipv4Addr> {
        any::<u32>().prop_map(Ipv4Addr::from)
    }

    fn message() -> impl Strategy<Value = Message> {
        let rreq = (any::<[bool; 5]>(), any::<u8>(), any::<u32>(), ip(), any::<u32>(), ip(), any::<u32>())
            .prop_map(|(f, hop_count, id, dst, dst_seq, orig, orig_seq)| {
                Message::Rreq(Rreq {
                    join: f[0],
                    repair: f[1],
                    gratuitous: f[2],
                    destination_only: f[3],
                    unknown_seq: f[4],
                    hop_count,
                    id,
                    dst,
                    dst_seq,
                    orig,
                    orig_seq,
                })
            });
        let rrep = (any::<[bool; 2]>(), 0u8..32, any::<u8>(), ip(), any::<u32>(), ip(), any::<u32>())
            .prop_map(|(f, prefix_size, hop_count, dst, dst_seq, orig, lifetime_ms)| {
                Message::Rrep(Rrep {
                    repair: f[0],
                    ack_required: f[1],
                    prefix_size,
                    hop_count,
                    dst,
                    dst_seq,
                    orig,
                    lifetime_ms,
                })
            });
        let rerr = (any::<bool>(), prop::collection::vec((ip(), any::<u32>()), 1..=255))
            .prop_map(|(no_delete, unreachable)| Message::Rerr(Rerr { no_delete, unreachable }));
        prop_oneof![rreq, rrep, rerr, Just(Message::RrepAck)]
    }

    proptest! {
        #[test]
        fn encode_then_decode_gives_the_message_back(message in message()) {
            prop_assert_eq!(Message::decode(&message.encode()), Ok(message));
        }

        #[test]
        fn any_bytes_decode_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = Message::decode(&bytes);
        }
    }

    #[test]
    fn rreq_layout_matches_rfc_section_5_1() {
        let rreq = Message::Rreq(Rreq {
            join: false,
            repair: false,
            gratuitous: true,
            destination_only: true,
            unknown_seq: true,
            hop_count: 3,
            id: 0x01020304,
            dst: Ipv4Addr::new(10, 0, 0, 8),
            dst_seq: 7,
            orig: Ipv4Addr::new(10, 0, 0, 1),
            orig_seq: 9,
        });
        let bytes = rreq.encode();
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[..8], &[1, 0x38, 0, 3, 1, 2, 3, 4]);
        assert_eq!(&bytes[8..12], &[10, 0, 0, 8]);
        assert_eq!(&bytes[20..], &[0, 0, 0, 9]);
    }

    #[test]
    fn truncated_and_unknown_messages_are_errors() {
        assert_eq!(Message::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(Message::decode(&[9, 0]), Err(DecodeError::UnknownType(9)));
        assert_eq!(
            Message::decode(&[1, 0, 0, 0]),
            Err(DecodeError::Truncated { kind: "RREQ", needed: 24, got: 4 })
        );
        assert_eq!(Message::decode(&[3, 0, 0, 0]), Err(DecodeError::NoDestinations));
        assert_eq!(
            Message::decode(&[3, 0, 0, 2, 10, 0, 0, 1, 0, 0, 0, 1]),
            Err(DecodeError::Truncated { kind: "RERR", needed: 20, got: 12 })
        );
    }

    #[test]
    fn extensions_are_skipped_when_well_formed() {
        let mut bytes = Message::RrepAck.encode();
        bytes.extend_from_slice(&[1, 4, 0, 0, 3, 232]); // hello interval extension
        assert_eq!(Message::decode(&bytes), Ok(Message::RrepAck));
        bytes.push(7); // a type without a length
        assert_eq!(Message::decode(&bytes), Err(DecodeError::BadExtension(8)));
    }

    #[test]
    fn hello_is_recognised_by_its_fields() {
        let me = Ipv4Addr::new(10, 0, 0, 3);
        let hello = Rrep {
            repair: false,
            ack_required: false,
            prefix_size: 0,
            hop_count: 0,
            dst: me,
            dst_seq: 4,
            orig: me,
            lifetime_ms: 2000,
        };
        assert_eq!(Message::Rrep(hello.clone()).kind(me), "hello");
        let reply = Rrep { orig: Ipv4Addr::new(10, 0, 0, 1), ..hello };
        assert_eq!(Message::Rrep(reply).kind(me), "rrep");
    }
}
