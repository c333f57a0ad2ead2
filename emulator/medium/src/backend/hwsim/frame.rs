//! What the medium needs to know of an 802.11 frame from mac80211: who it is
//! for, whether it is acknowledged, and how many network-layer bytes it
//! carries. Frames from hwsim have no FCS.

/// Bytes of the FCS the air adds to every frame hwsim hands over.
pub const FCS_BYTES: u32 = 4;
const LLC_SNAP: [u8; 6] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00];

/// The fields of a frame the model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Address 1 (the receiver).
    pub receiver: [u8; 6],
    /// Group address (broadcast or multicast): never acknowledged.
    pub group: bool,
    /// Body bytes after the MAC header and, for data frames, the LLC/SNAP
    /// header: the network-layer packet (the model's `len`).
    pub network_len: u32,
}

/// Parses the MAC header of `frame`; `None` if it is too short to have one.
pub fn parse(frame: &[u8]) -> Option<Header> {
    if frame.len() < 10 {
        return None;
    }
    let frame_type = (frame[0] >> 2) & 0b11;
    let subtype = frame[0] >> 4;
    let flags = frame[1];
    let receiver: [u8; 6] = frame[4..10].try_into().expect("6 bytes");
    let header_len = match frame_type {
        0 => 24, // management
        2 => {
            let four_addresses = flags & 0b11 == 0b11;
            let qos = subtype & 0b1000 != 0;
            let order = flags & 0x80 != 0; // HT control follows QoS control
            24 + if four_addresses { 6 } else { 0 } + if qos { 2 } else { 0 } + if qos && order { 4 } else { 0 }
        }
        _ => frame.len(), // control (and reserved) frames carry no body
    };
    let mut body = frame.get(header_len..).unwrap_or(&[]);
    if frame_type == 2 && body.starts_with(&LLC_SNAP) && body.len() >= 8 {
        body = &body[8..];
    }
    Some(Header { receiver, group: receiver[0] & 1 == 1, network_len: body.len() as u32 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn header(fc0: u8, fc1: u8, addr1: [u8; 6]) -> Vec<u8> {
        let mut f = vec![fc0, fc1, 0, 0];
        f.extend_from_slice(&addr1);
        f.extend_from_slice(&A);
        f.extend_from_slice(&[0x02, 0x6d, 0x65, 0x73, 0x68, 0x00]);
        f.extend_from_slice(&[0x10, 0x00]);
        f
    }

    #[test]
    fn an_ibss_data_frame_carries_its_ip_packet_after_llc_snap() {
        let mut f = header(0x08, 0x00, B);
        f.extend_from_slice(&[0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00]);
        f.extend_from_slice(&[0x45; 84]);
        assert_eq!(parse(&f), Some(Header { receiver: B, group: false, network_len: 84 }));
    }

    #[test]
    fn qos_and_four_address_headers_are_longer() {
        let mut f = header(0x88, 0x00, B); // QoS data
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&[0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00, 1, 2, 3]);
        assert_eq!(parse(&f).unwrap().network_len, 3);
        let mut f = header(0x88, 0x03, B); // QoS data, ToDS and FromDS: mesh forwarding
        f.extend_from_slice(&A);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&[9; 20]);
        assert_eq!(parse(&f).unwrap().network_len, 20, "no LLC/SNAP: the whole body");
    }

    #[test]
    fn management_frames_count_their_body_and_broadcasts_are_group_frames() {
        let mut beacon = header(0x80, 0x00, [0xff; 6]);
        beacon.extend_from_slice(&[0; 40]);
        assert_eq!(parse(&beacon), Some(Header { receiver: [0xff; 6], group: true, network_len: 40 }));
        let multicast = header(0x08, 0x00, [0x33, 0x33, 0, 0, 0, 1]);
        assert!(parse(&multicast).unwrap().group);
        assert_eq!(parse(&multicast).unwrap().network_len, 0);
        assert_eq!(parse(&beacon[..9]), None);
    }
}
