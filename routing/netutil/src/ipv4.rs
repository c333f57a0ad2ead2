//! The IPv4 header fields the daemons read (addresses, protocol, length,
//! the UDP port of a first fragment), from untrusted bytes: a packet the
//! kernel queued, one overheard on the air.

use std::net::Ipv4Addr;

/// What a well-formed IPv4 header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Summary {
    pub source: Ipv4Addr,
    pub destination: Ipv4Addr,
    pub protocol: u8,
    /// Total length from the header (bytes).
    pub total_len: u16,
    /// UDP destination port of a first (or only) fragment, when the bytes reach it.
    pub udp_destination_port: Option<u16>,
}

/// Why bytes are not a usable IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("{0} bytes, shorter than an IPv4 header")]
    Truncated(usize),
    #[error("IP version {0}, not 4")]
    NotIpv4(u8),
    #[error("IPv4 header length {0} bytes (below 20 or beyond the data)")]
    BadHeaderLength(usize),
    #[error("IPv4 total length {0} shorter than its header")]
    BadTotalLength(u16),
}

impl Malformed {
    /// A short stable name, for counters.
    pub fn name(&self) -> &'static str {
        match self {
            Malformed::Truncated(_) => "truncated",
            Malformed::NotIpv4(_) => "not_ipv4",
            Malformed::BadHeaderLength(_) => "bad_header_length",
            Malformed::BadTotalLength(_) => "bad_total_length",
        }
    }
}

const MIN_HEADER: usize = 20;
const UDP: u8 = 17;

/// Reads the IPv4 header at the start of `bytes` (which may be a copy of only
/// the first bytes of the packet: fields beyond it are left out, never guessed).
pub fn parse_ipv4(bytes: &[u8]) -> Result<Ipv4Summary, Malformed> {
    if bytes.len() < MIN_HEADER {
        return Err(Malformed::Truncated(bytes.len()));
    }
    let version = bytes[0] >> 4;
    if version != 4 {
        return Err(Malformed::NotIpv4(version));
    }
    let header_len = usize::from(bytes[0] & 0x0f) * 4;
    if header_len < MIN_HEADER || header_len > bytes.len() {
        return Err(Malformed::BadHeaderLength(header_len));
    }
    let total_len = u16::from_be_bytes([bytes[2], bytes[3]]);
    if usize::from(total_len) < header_len {
        return Err(Malformed::BadTotalLength(total_len));
    }
    let fragment_offset = u16::from_be_bytes([bytes[6], bytes[7]]) & 0x1fff;
    let protocol = bytes[9];
    let udp_destination_port = (protocol == UDP && fragment_offset == 0)
        .then(|| bytes.get(header_len + 2..header_len + 4))
        .flatten()
        .map(|port| u16::from_be_bytes([port[0], port[1]]));
    Ok(Ipv4Summary {
        source: Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]),
        destination: Ipv4Addr::new(bytes[16], bytes[17], bytes[18], bytes[19]),
        protocol,
        total_len,
        udp_destination_port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal IPv4 header (+ 8 bytes of UDP header when `protocol` is 17).
    fn ipv4(source: [u8; 4], destination: [u8; 4], protocol: u8, udp_port: u16) -> Vec<u8> {
        let mut bytes = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, protocol, 0, 0];
        bytes.extend(source);
        bytes.extend(destination);
        bytes.extend([0x30, 0x39]);
        bytes.extend(udp_port.to_be_bytes());
        bytes.extend([0, 8, 0, 0]);
        let total = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        bytes
    }

    #[test]
    fn reads_addresses_protocol_and_udp_port() {
        let packet = ipv4([10, 0, 0, 1], [10, 0, 0, 9], 17, 654);
        let summary = parse_ipv4(&packet).unwrap();
        assert_eq!(summary.source, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(summary.destination, Ipv4Addr::new(10, 0, 0, 9));
        assert_eq!(summary.protocol, 17);
        assert_eq!(summary.udp_destination_port, Some(654));
        assert_eq!(summary.total_len, 28);
    }

    #[test]
    fn udp_port_only_for_first_fragments_and_when_present() {
        let mut later_fragment = ipv4([10, 0, 0, 1], [10, 0, 0, 9], 17, 654);
        later_fragment[7] = 0x10;
        assert_eq!(parse_ipv4(&later_fragment).unwrap().udp_destination_port, None);
        let header_only = &ipv4([10, 0, 0, 1], [10, 0, 0, 9], 17, 654)[..21];
        assert_eq!(parse_ipv4(header_only).unwrap().udp_destination_port, None);
        let tcp = ipv4([10, 0, 0, 1], [10, 0, 0, 9], 6, 654);
        assert_eq!(parse_ipv4(&tcp).unwrap().udp_destination_port, None);
    }

    #[test]
    fn malformed_headers_are_named() {
        let good = ipv4([10, 0, 0, 1], [10, 0, 0, 9], 6, 0);
        assert_eq!(parse_ipv4(&good[..19]), Err(Malformed::Truncated(19)));
        assert_eq!(parse_ipv4(&[]), Err(Malformed::Truncated(0)));
        let mut v6 = good.clone();
        v6[0] = 0x60;
        assert_eq!(parse_ipv4(&v6), Err(Malformed::NotIpv4(6)));
        let mut short_ihl = good.clone();
        short_ihl[0] = 0x44;
        assert_eq!(parse_ipv4(&short_ihl), Err(Malformed::BadHeaderLength(16)));
        let mut long_ihl = good.clone();
        long_ihl[0] = 0x4f;
        assert_eq!(parse_ipv4(&long_ihl), Err(Malformed::BadHeaderLength(60)));
        let mut bad_total = good.clone();
        bad_total[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(parse_ipv4(&bad_total), Err(Malformed::BadTotalLength(10)));
    }
}
