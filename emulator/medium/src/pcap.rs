//! Air capture: every transmission on the emulated medium as a real 802.11
//! frame behind a radiotap header, in a pcap file (linktype 127,
//! IEEE802_11_RADIO) that Wireshark and tshark decode.
//!
//! Frames carry no FCS. A data frame is either the real 802.11 frame a node
//! handed down (the hwsim backend: beacons, management and data frames as
//! mac80211 built them) or, for an Ethernet frame (the TAP backend), an IBSS
//! frame (ToDS = FromDS = 0): address 1 the receiver, 2 the transmitter, 3 the
//! fixed [`BSSID`]; the body an LLC/SNAP header with the Ethernet type, then
//! the Ethernet payload.

use std::io::{self, Write};

use meshemu_model::FrameKind;

/// Linktype of 802.11 frames behind a radiotap header.
pub const LINKTYPE_IEEE802_11_RADIOTAP: u32 = 127;
/// pcap magic for nanosecond timestamps.
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// The BSSID of the emulated ad hoc network (locally administered).
pub const BSSID: [u8; 6] = [0x02, 0x6d, 0x65, 0x73, 0x68, 0x00];
const BROADCAST: [u8; 6] = [0xff; 6];

/// One transmission as the capture shows it.
#[derive(Debug, Clone)]
pub struct AirRecord<'a> {
    /// Model time at the start of the transmission, ns.
    pub time_ns: u64,
    pub kind: FrameKind,
    /// Receiver address.
    pub receiver: [u8; 6],
    /// Transmitter address.
    pub transmitter: [u8; 6],
    pub duration_us: u16,
    pub retry: bool,
    pub seq: u16,
    pub rate_bps: u64,
    pub frequency_mhz: u16,
    pub ofdm: bool,
    pub short_preamble: bool,
    /// Signal reported in the radiotap header: the transmit power, dBm.
    pub signal_dbm: i8,
    /// For data frames: what they carry.
    pub body: AirBody<'a>,
}

/// The carried frame of a data frame.
#[derive(Debug, Clone, Copy)]
pub enum AirBody<'a> {
    None,
    /// An Ethernet frame: the capture wraps it in an IBSS data frame.
    Ethernet(&'a [u8]),
    /// A whole 802.11 frame without FCS: the capture shows it as it is (with
    /// the retry bit of the attempt).
    Mpdu(&'a [u8]),
}

impl AirBody<'_> {
    /// The receiver address it names (broadcast if it names none).
    pub fn receiver(&self) -> [u8; 6] {
        match self {
            AirBody::Ethernet(frame) => ethernet_destination(Some(frame)),
            AirBody::Mpdu(frame) if frame.len() >= 10 => frame[4..10].try_into().expect("6 bytes"),
            _ => BROADCAST,
        }
    }
}

/// Radiotap header: version, pad, length, present flags, then TSFT, Flags,
/// Rate, Channel and dBm antenna signal, each at its natural alignment.
const RADIOTAP_LEN: u16 = 23;
const RADIOTAP_PRESENT: u32 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5);
const RADIOTAP_FLAG_SHORT_PREAMBLE: u8 = 0x02;
const CHANNEL_CCK: u16 = 0x0020;
const CHANNEL_OFDM: u16 = 0x0040;
const CHANNEL_2GHZ: u16 = 0x0080;
const CHANNEL_5GHZ: u16 = 0x0100;

fn encode_radiotap(r: &AirRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&RADIOTAP_LEN.to_le_bytes());
    out.extend_from_slice(&RADIOTAP_PRESENT.to_le_bytes());
    out.extend_from_slice(&(r.time_ns / 1000).to_le_bytes()); // TSFT, µs
    out.push(if r.short_preamble && !r.ofdm { RADIOTAP_FLAG_SHORT_PREAMBLE } else { 0 });
    out.push((r.rate_bps / 500_000).min(255) as u8); // 500 kbit/s units
    out.extend_from_slice(&r.frequency_mhz.to_le_bytes());
    let band = match r.frequency_mhz {
        2400..=2500 => CHANNEL_2GHZ,
        4900.. => CHANNEL_5GHZ,
        _ => 0,
    };
    let modulation = if r.ofdm { CHANNEL_OFDM } else { CHANNEL_CCK };
    out.extend_from_slice(&(band | modulation).to_le_bytes());
    out.push(r.signal_dbm as u8);
}

/// Frame control byte 0: subtype << 4 | type << 2.
fn frame_control(kind: FrameKind) -> u8 {
    match kind {
        FrameKind::Rts => 0xb4,  // control, subtype 11
        FrameKind::Cts => 0xc4,  // control, subtype 12
        FrameKind::Ack => 0xd4,  // control, subtype 13
        FrameKind::Data => 0x08, // data, subtype 0
    }
}

const FLAG_RETRY: u8 = 0x08;
const LLC_SNAP: [u8; 6] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00];

/// Appends the 802.11 frame (no FCS) of `r` to `out`.
pub fn encode_80211(r: &AirRecord, out: &mut Vec<u8>) {
    let retry = r.kind == FrameKind::Data && r.retry;
    if let (FrameKind::Data, AirBody::Mpdu(frame)) = (r.kind, r.body) {
        let start = out.len();
        out.extend_from_slice(frame);
        if retry && frame.len() >= 2 {
            out[start + 1] |= FLAG_RETRY;
        }
        return;
    }
    out.push(frame_control(r.kind));
    out.push(if retry { FLAG_RETRY } else { 0 });
    out.extend_from_slice(&r.duration_us.to_le_bytes());
    out.extend_from_slice(&r.receiver);
    match r.kind {
        FrameKind::Cts | FrameKind::Ack => {}
        FrameKind::Rts => out.extend_from_slice(&r.transmitter),
        FrameKind::Data => {
            out.extend_from_slice(&r.transmitter);
            out.extend_from_slice(&BSSID);
            out.extend_from_slice(&((r.seq & 0x0fff) << 4).to_le_bytes());
            if let AirBody::Ethernet(ethernet) = r.body.filter_short() {
                out.extend_from_slice(&LLC_SNAP);
                out.extend_from_slice(&ethernet[12..14]);
                out.extend_from_slice(&ethernet[14..]);
            }
        }
    }
}

impl<'a> AirBody<'a> {
    /// Ethernet frames too short for a header carry nothing.
    fn filter_short(self) -> AirBody<'a> {
        match self {
            AirBody::Ethernet(e) if e.len() < 14 => AirBody::None,
            other => other,
        }
    }
}

/// Receiver address of a data frame the model sent to an address no node has.
fn ethernet_destination(ethernet: Option<&[u8]>) -> [u8; 6] {
    ethernet.filter(|e| e.len() >= 6).map_or(BROADCAST, |e| e[..6].try_into().expect("6 bytes"))
}

/// A pcap stream of radiotap + 802.11 records.
pub struct PcapWriter<W: Write> {
    out: W,
    /// Added to the model time for the record timestamps (wall clock at model time 0).
    epoch_ns: u64,
    scratch: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, epoch_ns: u64) -> io::Result<Self> {
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // GMT offset
        header.extend_from_slice(&0u32.to_le_bytes()); // accuracy
        header.extend_from_slice(&65535u32.to_le_bytes()); // snap length
        header.extend_from_slice(&LINKTYPE_IEEE802_11_RADIOTAP.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, epoch_ns, scratch: Vec::with_capacity(2048) })
    }

    pub fn write(&mut self, r: &AirRecord) -> io::Result<()> {
        self.scratch.clear();
        encode_radiotap(r, &mut self.scratch);
        encode_80211(r, &mut self.scratch);
        let t = self.epoch_ns + r.time_ns;
        let length = self.scratch.len() as u32;
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        record[4..8].copy_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        record[8..12].copy_from_slice(&length.to_le_bytes());
        record[12..16].copy_from_slice(&length.to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(&self.scratch)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn record(kind: FrameKind, body: AirBody<'_>) -> AirRecord<'_> {
        AirRecord {
            time_ns: 1_234_567_000,
            kind,
            receiver: B,
            transmitter: A,
            duration_us: 0x0102,
            retry: true,
            seq: 0x123,
            rate_bps: 5_500_000,
            frequency_mhz: 2412,
            ofdm: false,
            short_preamble: true,
            signal_dbm: -60,
            body,
        }
    }

    #[test]
    fn radiotap_fields_sit_at_their_aligned_offsets() {
        let mut out = Vec::new();
        encode_radiotap(&record(FrameKind::Ack, AirBody::None), &mut out);
        assert_eq!(out.len(), RADIOTAP_LEN as usize);
        assert_eq!(&out[2..4], &23u16.to_le_bytes());
        assert_eq!(u32::from_le_bytes(out[4..8].try_into().unwrap()), 0b10_1111);
        assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), 1_234_567, "TSFT in µs");
        assert_eq!(out[16], RADIOTAP_FLAG_SHORT_PREAMBLE);
        assert_eq!(out[17], 11, "5.5 Mbit/s in 500 kbit/s units");
        assert_eq!(u16::from_le_bytes([out[18], out[19]]), 2412);
        assert_eq!(u16::from_le_bytes([out[20], out[21]]), CHANNEL_2GHZ | CHANNEL_CCK);
        assert_eq!(out[22] as i8, -60);
    }

    #[test]
    fn control_frames_have_their_standard_sizes() {
        for (kind, size, fc) in [(FrameKind::Rts, 16, 0xb4), (FrameKind::Cts, 10, 0xc4), (FrameKind::Ack, 10, 0xd4)] {
            let mut out = Vec::new();
            encode_80211(&record(kind, AirBody::None), &mut out);
            assert_eq!(out.len(), size, "{kind:?} without FCS");
            assert_eq!(out[0], fc);
            assert_eq!(out[1], 0, "retry only on data frames");
            assert_eq!(&out[2..4], &[0x02, 0x01]);
            assert_eq!(&out[4..10], &B);
        }
    }

    #[test]
    fn data_frames_carry_the_ethernet_payload_after_llc_snap() {
        let mut ethernet = B.to_vec();
        ethernet.extend_from_slice(&A);
        ethernet.extend_from_slice(&[0x08, 0x00]);
        ethernet.extend_from_slice(&[0x45, 1, 2, 3]);
        let mut out = Vec::new();
        encode_80211(&record(FrameKind::Data, AirBody::Ethernet(&ethernet)), &mut out);
        assert_eq!(out[0], 0x08);
        assert_eq!(out[1], FLAG_RETRY);
        assert_eq!(&out[4..10], &B);
        assert_eq!(&out[10..16], &A);
        assert_eq!(&out[16..22], &BSSID);
        assert_eq!(u16::from_le_bytes([out[22], out[23]]), 0x123 << 4);
        assert_eq!(&out[24..32], &[0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(&out[32..], &[0x45, 1, 2, 3]);
        // The MPDU the model counts is this plus the 4-byte FCS.
        assert_eq!(out.len() + 4, 24 + 8 + 4 + 4);
        assert_eq!(AirBody::Ethernet(&ethernet).receiver(), B);
        assert_eq!(AirBody::None.receiver(), BROADCAST);
    }

    #[test]
    fn a_real_80211_frame_is_written_as_it_is_with_the_retry_bit_of_the_attempt() {
        // A beacon-like management frame: frame control, duration, addr1..3, seq.
        let mut frame = vec![0x80, 0x00, 0, 0];
        frame.extend_from_slice(&[0xff; 6]);
        frame.extend_from_slice(&A);
        frame.extend_from_slice(&BSSID);
        frame.extend_from_slice(&[0x10, 0x00, 1, 2, 3]);
        let mut out = Vec::new();
        let mut r = record(FrameKind::Data, AirBody::Mpdu(&frame));
        r.retry = false;
        encode_80211(&r, &mut out);
        assert_eq!(out, frame);
        out.clear();
        r.retry = true;
        encode_80211(&r, &mut out);
        assert_eq!(out[1], FLAG_RETRY);
        assert_eq!(&out[2..], &frame[2..]);
        assert_eq!(AirBody::Mpdu(&frame).receiver(), [0xff; 6]);
        assert_eq!(AirBody::Mpdu(&frame[..6]).receiver(), BROADCAST, "too short to name one");
    }

    #[test]
    fn pcap_records_have_nanosecond_timestamps_from_the_epoch() {
        let mut file = Vec::new();
        let mut w = PcapWriter::new(&mut file, 1_700_000_000_000_000_000).unwrap();
        w.write(&record(FrameKind::Cts, AirBody::None)).unwrap();
        w.flush().unwrap();
        assert_eq!(&file[0..4], &PCAP_MAGIC_NS.to_le_bytes());
        assert_eq!(u32::from_le_bytes(file[20..24].try_into().unwrap()), 127);
        let rec = &file[24..];
        assert_eq!(u32::from_le_bytes(rec[0..4].try_into().unwrap()), 1_700_000_001);
        assert_eq!(u32::from_le_bytes(rec[4..8].try_into().unwrap()), 234_567_000);
        assert_eq!(u32::from_le_bytes(rec[8..12].try_into().unwrap()), 23 + 10);
        assert_eq!(rec.len(), 16 + 23 + 10);
    }
}
