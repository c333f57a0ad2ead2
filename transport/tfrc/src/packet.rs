//! Wire formats of the data, feedback and end-of-flow packets.
//!
//! Every packet is one UDP datagram and starts with the same 4 bytes: the
//! magic `"TF"`, the version ([`VERSION`]) and the kind. All integers are
//! big-endian. The byte layouts are drawn in the crate documentation.
//!
//! The parser never panics: anything that is not exactly one of these
//! packets is a [`ParseError`] naming what is wrong.

use thiserror::Error;

/// First two bytes of every packet.
pub const MAGIC: [u8; 2] = *b"TF";
/// Version of the layouts below.
pub const VERSION: u8 = 1;

const KIND_DATA: u8 = 1;
const KIND_FEEDBACK: u8 = 2;
const KIND_FIN: u8 = 3;

/// Bytes of the data header; the payload (padding up to the packet size) follows.
pub const DATA_HEADER_LEN: usize = 36;
/// Bytes of a feedback packet.
pub const FEEDBACK_LEN: usize = 64;
/// Bytes of an end-of-flow packet.
pub const FIN_LEN: usize = 24;

/// Feedback flag: sent at once because a new loss event was detected
/// (RFC 5348 §6.2 "expedited" feedback).
pub const FLAG_NEW_LOSS_EVENT: u8 = 0x01;
/// Feedback flag: the answer to an end-of-flow packet; its counters are final.
pub const FLAG_FINAL: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_NEW_LOSS_EVENT | FLAG_FINAL;

/// Header of a data packet (RFC 5348 §3.2.1: sequence number, timestamp,
/// the sender's RTT estimate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Identifies one flow of one sender; a new value starts a new flow.
    pub session: u32,
    /// Packet sequence number, from 0, one per data packet.
    pub seq: u64,
    /// Send time on the sender's protocol clock, µs. Echoed in feedback for
    /// RTT measurement; the receiver also uses it for jitter (RFC 3550).
    pub timestamp_us: u64,
    /// The sender's current RTT estimate in µs; 0 while it has none.
    pub rtt_us: u32,
    /// Send time on the wall clock (CLOCK_REALTIME), ns since the Unix epoch;
    /// 0 if not given. Gives one-way delay when both ends share a clock.
    pub wallclock_ns: u64,
}

/// A feedback packet (RFC 5348 §3.2.2), sent by the receiver about once per RTT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    /// Session of the data this feedback is about.
    pub session: u32,
    /// `t_recvdata`: the timestamp of the most recently received data packet.
    pub echo_timestamp_us: u64,
    /// `t_delay`: µs between the arrival of that packet and sending this feedback.
    pub elapsed_us: u32,
    /// `X_recv`: the rate at which data arrived since the last feedback, bytes/s.
    pub x_recv: u64,
    /// `p`: the loss event rate, 0..=1 (on the wire as a 32-bit fraction).
    pub loss_event_rate: f64,
    /// Highest sequence number received so far.
    pub highest_seq: u64,
    /// Data packets received so far (duplicates not counted).
    pub received_packets: u64,
    /// Data bytes (UDP payload) received so far.
    pub received_bytes: u64,
    /// RFC 3550 interarrival jitter, µs.
    pub jitter_us: u32,
    /// Hops of the forward path as seen from the IP TTL; 0 when unknown.
    pub hops: u8,
    /// [`FLAG_NEW_LOSS_EVENT`], [`FLAG_FINAL`].
    pub flags: u8,
}

/// End of a flow: the sender has stopped sending data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fin {
    pub session: u32,
    /// Data packets the sender sent.
    pub sent_packets: u64,
    /// Data bytes (UDP payload) the sender sent.
    pub sent_bytes: u64,
}

/// One parsed packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Packet {
    /// A data packet; `payload_len` counts the bytes after the header.
    Data {
        header: DataHeader,
        payload_len: usize,
    },
    Feedback(Feedback),
    Fin(Fin),
}

/// Why bytes are not a packet.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("packet of {len} bytes is shorter than the 4-byte common header")]
    TooShort { len: usize },
    #[error("bad magic {found:02x?}: expected \"TF\"")]
    BadMagic { found: [u8; 2] },
    #[error("unsupported version {0} (this build speaks version {VERSION})")]
    UnsupportedVersion(u8),
    #[error("unknown packet kind {0}")]
    UnknownKind(u8),
    #[error("{kind} packet has {len} bytes, expected {expected}")]
    WrongLength {
        kind: &'static str,
        len: usize,
        expected: &'static str,
    },
    #[error("feedback has unknown flag bits {0:#04x}")]
    UnknownFlags(u8),
    #[error("{kind} packet has non-zero reserved bytes")]
    ReservedNotZero { kind: &'static str },
}

/// Parses one datagram.
pub fn parse(buf: &[u8]) -> Result<Packet, ParseError> {
    if buf.len() < 4 {
        return Err(ParseError::TooShort { len: buf.len() });
    }
    if buf[0..2] != MAGIC {
        return Err(ParseError::BadMagic {
            found: [buf[0], buf[1]],
        });
    }
    if buf[2] != VERSION {
        return Err(ParseError::UnsupportedVersion(buf[2]));
    }
    match buf[3] {
        KIND_DATA => parse_data(buf),
        KIND_FEEDBACK => parse_feedback(buf),
        KIND_FIN => parse_fin(buf),
        other => Err(ParseError::UnknownKind(other)),
    }
}

fn parse_data(buf: &[u8]) -> Result<Packet, ParseError> {
    if buf.len() < DATA_HEADER_LEN {
        return Err(ParseError::WrongLength {
            kind: "data",
            len: buf.len(),
            expected: "at least 36",
        });
    }
    let mut r = Reader::new(&buf[4..DATA_HEADER_LEN]);
    let header = DataHeader {
        session: r.u32(),
        seq: r.u64(),
        timestamp_us: r.u64(),
        rtt_us: r.u32(),
        wallclock_ns: r.u64(),
    };
    Ok(Packet::Data {
        header,
        payload_len: buf.len() - DATA_HEADER_LEN,
    })
}

fn parse_feedback(buf: &[u8]) -> Result<Packet, ParseError> {
    if buf.len() != FEEDBACK_LEN {
        return Err(ParseError::WrongLength {
            kind: "feedback",
            len: buf.len(),
            expected: "64",
        });
    }
    let mut r = Reader::new(&buf[4..]);
    let feedback = Feedback {
        session: r.u32(),
        echo_timestamp_us: r.u64(),
        elapsed_us: r.u32(),
        x_recv: r.u64(),
        loss_event_rate: decode_loss_event_rate(r.u32()),
        highest_seq: r.u64(),
        received_packets: r.u64(),
        received_bytes: r.u64(),
        jitter_us: r.u32(),
        hops: r.u8(),
        flags: r.u8(),
    };
    if feedback.flags & !KNOWN_FLAGS != 0 {
        return Err(ParseError::UnknownFlags(feedback.flags & !KNOWN_FLAGS));
    }
    if r.u16() != 0 {
        return Err(ParseError::ReservedNotZero { kind: "feedback" });
    }
    Ok(Packet::Feedback(feedback))
}

fn parse_fin(buf: &[u8]) -> Result<Packet, ParseError> {
    if buf.len() != FIN_LEN {
        return Err(ParseError::WrongLength {
            kind: "end-of-flow",
            len: buf.len(),
            expected: "24",
        });
    }
    let mut r = Reader::new(&buf[4..]);
    Ok(Packet::Fin(Fin {
        session: r.u32(),
        sent_packets: r.u64(),
        sent_bytes: r.u64(),
    }))
}

impl DataHeader {
    /// Writes the header into the first [`DATA_HEADER_LEN`] bytes of `buf`
    /// (the rest of `buf` is the payload and left alone).
    ///
    /// # Panics
    /// If `buf` is shorter than [`DATA_HEADER_LEN`]: a caller bug, not input.
    pub fn write(&self, buf: &mut [u8]) {
        let mut w = Writer::new(&mut buf[..DATA_HEADER_LEN]);
        w.header(KIND_DATA);
        w.u32(self.session);
        w.u64(self.seq);
        w.u64(self.timestamp_us);
        w.u32(self.rtt_us);
        w.u64(self.wallclock_ns);
    }
}

impl Feedback {
    pub fn to_bytes(&self) -> [u8; FEEDBACK_LEN] {
        let mut buf = [0u8; FEEDBACK_LEN];
        let mut w = Writer::new(&mut buf);
        w.header(KIND_FEEDBACK);
        w.u32(self.session);
        w.u64(self.echo_timestamp_us);
        w.u32(self.elapsed_us);
        w.u64(self.x_recv);
        w.u32(encode_loss_event_rate(self.loss_event_rate));
        w.u64(self.highest_seq);
        w.u64(self.received_packets);
        w.u64(self.received_bytes);
        w.u32(self.jitter_us);
        w.u8(self.hops);
        w.u8(self.flags);
        w.u16(0);
        buf
    }
}

impl Fin {
    pub fn to_bytes(&self) -> [u8; FIN_LEN] {
        let mut buf = [0u8; FIN_LEN];
        let mut w = Writer::new(&mut buf);
        w.header(KIND_FIN);
        w.u32(self.session);
        w.u64(self.sent_packets);
        w.u64(self.sent_bytes);
        buf
    }
}

/// `p` as a fraction of `u32::MAX`. A positive `p` never rounds to 0, which
/// would tell the sender "no loss yet" and put it back into slow start.
fn encode_loss_event_rate(p: f64) -> u32 {
    if p.is_nan() || p <= 0.0 {
        return 0;
    }
    let scaled = (p.min(1.0) * f64::from(u32::MAX)).round();
    (scaled as u32).max(1)
}

fn decode_loss_event_rate(v: u32) -> f64 {
    f64::from(v) / f64::from(u32::MAX)
}

/// Big-endian reads from a slice whose length the caller has checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.buf.split_at(N);
        self.buf = rest;
        head.try_into().expect("split_at gave N bytes")
    }

    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
}

struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    fn header(&mut self, kind: u8) {
        self.put(&MAGIC);
        self.put(&[VERSION, kind]);
    }

    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }

    fn u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.put(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_feedback() -> Feedback {
        Feedback {
            session: 0xdead_beef,
            echo_timestamp_us: 1_234_567,
            elapsed_us: 250,
            x_recv: 125_000,
            loss_event_rate: 0.0125,
            highest_seq: 4242,
            received_packets: 4200,
            received_bytes: 4_200_000,
            jitter_us: 37,
            hops: 7,
            flags: FLAG_NEW_LOSS_EVENT,
        }
    }

    #[test]
    fn data_header_layout_is_as_documented() {
        let header = DataHeader {
            session: 0x0102_0304,
            seq: 0x1112_1314_1516_1718,
            timestamp_us: 0x2122_2324_2526_2728,
            rtt_us: 0x3132_3334,
            wallclock_ns: 0x4142_4344_4546_4748,
        };
        let mut buf = [0xAAu8; 40];
        header.write(&mut buf);
        assert_eq!(&buf[0..4], b"TF\x01\x01");
        assert_eq!(&buf[4..8], &[1, 2, 3, 4]);
        assert_eq!(
            &buf[8..16],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(
            &buf[16..24],
            &[0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28]
        );
        assert_eq!(&buf[24..28], &[0x31, 0x32, 0x33, 0x34]);
        assert_eq!(
            &buf[28..36],
            &[0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48]
        );
        assert_eq!(&buf[36..], &[0xAA; 4], "payload untouched");
        assert_eq!(
            parse(&buf),
            Ok(Packet::Data {
                header,
                payload_len: 4
            })
        );
    }

    #[test]
    fn feedback_layout_is_as_documented() {
        let fb = sample_feedback();
        let buf = fb.to_bytes();
        assert_eq!(&buf[0..4], b"TF\x01\x02");
        assert_eq!(
            u32::from_be_bytes(buf[4..8].try_into().unwrap()),
            0xdead_beef
        );
        assert_eq!(
            u64::from_be_bytes(buf[8..16].try_into().unwrap()),
            1_234_567
        );
        assert_eq!(u32::from_be_bytes(buf[16..20].try_into().unwrap()), 250);
        assert_eq!(u64::from_be_bytes(buf[20..28].try_into().unwrap()), 125_000);
        let p = u32::from_be_bytes(buf[28..32].try_into().unwrap());
        assert_eq!(p, (0.0125 * f64::from(u32::MAX)).round() as u32);
        assert_eq!(u64::from_be_bytes(buf[32..40].try_into().unwrap()), 4242);
        assert_eq!(u64::from_be_bytes(buf[40..48].try_into().unwrap()), 4200);
        assert_eq!(
            u64::from_be_bytes(buf[48..56].try_into().unwrap()),
            4_200_000
        );
        assert_eq!(u32::from_be_bytes(buf[56..60].try_into().unwrap()), 37);
        assert_eq!(buf[60], 7);
        assert_eq!(buf[61], FLAG_NEW_LOSS_EVENT);
        assert_eq!(&buf[62..64], &[0, 0]);
        let Ok(Packet::Feedback(back)) = parse(&buf) else {
            panic!("not feedback")
        };
        assert!((back.loss_event_rate - 0.0125).abs() < 1e-9);
        assert_eq!(
            Feedback {
                loss_event_rate: fb.loss_event_rate,
                ..back
            },
            fb
        );
    }

    #[test]
    fn fin_round_trips() {
        let fin = Fin {
            session: 9,
            sent_packets: 77,
            sent_bytes: 77_000,
        };
        let buf = fin.to_bytes();
        assert_eq!(&buf[0..4], b"TF\x01\x03");
        assert_eq!(parse(&buf), Ok(Packet::Fin(fin)));
    }

    #[test]
    fn tiny_loss_event_rates_stay_positive_on_the_wire() {
        assert_eq!(encode_loss_event_rate(0.0), 0);
        assert_eq!(encode_loss_event_rate(1e-15), 1);
        assert_eq!(encode_loss_event_rate(1.0), u32::MAX);
        assert_eq!(encode_loss_event_rate(f64::NAN), 0);
        assert_eq!(decode_loss_event_rate(u32::MAX), 1.0);
    }

    #[test]
    fn malformed_packets_name_the_problem() {
        assert_eq!(parse(b"TF"), Err(ParseError::TooShort { len: 2 }));
        assert_eq!(
            parse(b"XX\x01\x01"),
            Err(ParseError::BadMagic { found: *b"XX" })
        );
        assert_eq!(parse(b"TF\x09\x01"), Err(ParseError::UnsupportedVersion(9)));
        assert_eq!(parse(b"TF\x01\x07"), Err(ParseError::UnknownKind(7)));
        assert!(matches!(
            parse(b"TF\x01\x01short"),
            Err(ParseError::WrongLength { kind: "data", .. })
        ));

        let good = sample_feedback().to_bytes();
        assert!(matches!(
            parse(&good[..63]),
            Err(ParseError::WrongLength {
                kind: "feedback",
                ..
            })
        ));
        let mut longer = good.to_vec();
        longer.push(0);
        assert!(matches!(
            parse(&longer),
            Err(ParseError::WrongLength {
                kind: "feedback",
                ..
            })
        ));
        let mut flags = good;
        flags[61] = 0x80;
        assert_eq!(parse(&flags), Err(ParseError::UnknownFlags(0x80)));
        let mut reserved = good;
        reserved[63] = 1;
        assert_eq!(
            parse(&reserved),
            Err(ParseError::ReservedNotZero { kind: "feedback" })
        );

        let fin = Fin {
            session: 1,
            sent_packets: 2,
            sent_bytes: 3,
        }
        .to_bytes();
        assert!(matches!(
            parse(&fin[..20]),
            Err(ParseError::WrongLength {
                kind: "end-of-flow",
                ..
            })
        ));
        // The error text names the problem for logs.
        assert_eq!(
            parse(&good[..10]).unwrap_err().to_string(),
            "feedback packet has 10 bytes, expected 64"
        );
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn parser_never_panics_behind_a_valid_prefix(
            kind in 0u8..5,
            rest in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let mut bytes = vec![b'T', b'F', VERSION, kind];
            bytes.extend(rest);
            let _ = parse(&bytes);
        }

        #[test]
        fn feedback_round_trips(
            session: u32, echo: u64, elapsed: u32, x_recv: u64, p in 0.0f64..=1.0,
            highest: u64, packets: u64, bytes: u64, jitter: u32, hops: u8, flags in 0u8..4,
        ) {
            let fb = Feedback {
                session, echo_timestamp_us: echo, elapsed_us: elapsed, x_recv,
                loss_event_rate: p, highest_seq: highest, received_packets: packets,
                received_bytes: bytes, jitter_us: jitter, hops, flags,
            };
            let Ok(Packet::Feedback(back)) = parse(&fb.to_bytes()) else {
                return Err(TestCaseError::fail("feedback did not parse"));
            };
            prop_assert!((back.loss_event_rate - p).abs() <= 1.0 / f64::from(u32::MAX));
            prop_assert_eq!(back.loss_event_rate > 0.0, p > 0.0);
            prop_assert_eq!(Feedback { loss_event_rate: p, ..back }, fb);
        }

        #[test]
        fn data_round_trips(session: u32, seq: u64, ts: u64, rtt: u32, wall: u64, payload in 0usize..64) {
            let header = DataHeader { session, seq, timestamp_us: ts, rtt_us: rtt, wallclock_ns: wall };
            let mut buf = vec![0u8; DATA_HEADER_LEN + payload];
            header.write(&mut buf);
            prop_assert_eq!(parse(&buf), Ok(Packet::Data { header, payload_len: payload }));
        }
    }
}
