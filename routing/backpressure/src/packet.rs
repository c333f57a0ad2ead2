//! A fingerprint of a packet's first bytes, to tell a MAC retransmission
//! from the next packet of a flow. The header fields themselves are read by
//! `meshemu_netutil::ipv4`.

/// A fingerprint of a packet's first bytes (header and start of the payload)
/// that tells a MAC retransmission of the same frame (identical bytes) from
/// the next packet of the flow. FNV-1a: fast, and collisions only make one
/// overheard packet count as a duplicate.
pub fn fingerprint(ip_packet: &[u8]) -> u64 {
    const PREFIX: usize = 96;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in &ip_packet[..ip_packet.len().min(PREFIX)] {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal IPv4 header (+ 8 bytes of UDP header when `protocol` is 17).
    pub fn ipv4(source: [u8; 4], destination: [u8; 4], protocol: u8, udp_port: u16) -> Vec<u8> {
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
    fn fingerprints_tell_packets_apart_and_retransmissions_not() {
        let a = ipv4([10, 0, 0, 1], [10, 0, 0, 9], 17, 5000);
        let mut b = a.clone();
        b[27] = 1; // another payload byte (e.g. a sequence number)
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
