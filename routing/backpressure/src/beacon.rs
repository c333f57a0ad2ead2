//! The beacon: a one-hop UDP broadcast in which a node advertises its
//! per-flow queue lengths (held + still in its radio).
//!
//! Layout (network byte order):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `BPQL` |
//! | 4 | 1 | version = 1 |
//! | 5 | 1 | flags: bit 0 = complete (every flow with packets is listed) |
//! | 6 | 2 | number of entries N |
//! | 8 | 4 | sequence number (per sender, +1 per beacon) |
//! | 12 | 6 × N | entries: flow IPv4 address (4), queue length (2, saturating) |
//!
//! Flows named by a MAC address (previous-hop classification) are never
//! advertised: backpressure needs source or destination flows.

use std::net::Ipv4Addr;

use crate::flow::FlowKey;

pub const MAGIC: [u8; 4] = *b"BPQL";
pub const VERSION: u8 = 1;
/// The default UDP port of beacons (give it priority in the lab:
/// LAB.json `priority_udp_ports`).
pub const DEFAULT_PORT: u16 = 6710;
/// Entries that fit one beacon well inside a 1500-byte MTU.
pub const MAX_ENTRIES: usize = 200;
const HEADER: usize = 12;
const ENTRY: usize = 6;
const COMPLETE: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beacon {
    pub sequence: u32,
    /// Every flow with packets is listed (the unlisted ones are empty).
    pub complete: bool,
    pub entries: Vec<(Ipv4Addr, u16)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BeaconError {
    #[error("{0} bytes, shorter than a beacon header")]
    Truncated(usize),
    #[error("not a beacon (magic {0:02x?})")]
    Magic([u8; 4]),
    #[error("beacon version {0}, this daemon knows {VERSION}")]
    Version(u8),
    #[error("{count} entries announced, {bytes} bytes of entries")]
    Length { count: usize, bytes: usize },
}

impl Beacon {
    /// A beacon from our advertisement (flow, length); the longest queues
    /// first when they do not all fit.
    pub fn from_advertisement(sequence: u32, advertisement: &[(FlowKey, u32)]) -> Beacon {
        let mut entries: Vec<(Ipv4Addr, u16)> = advertisement
            .iter()
            .filter_map(|(flow, length)| match flow {
                FlowKey::Addr(addr) => Some((*addr, (*length).min(u32::from(u16::MAX)) as u16)),
                FlowKey::Mac(_) => None,
            })
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let complete = entries.len() <= MAX_ENTRIES;
        entries.truncate(MAX_ENTRIES);
        Beacon { sequence, complete, entries }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER + ENTRY * self.entries.len());
        bytes.extend(MAGIC);
        bytes.push(VERSION);
        bytes.push(if self.complete { COMPLETE } else { 0 });
        bytes.extend((self.entries.len() as u16).to_be_bytes());
        bytes.extend(self.sequence.to_be_bytes());
        for (addr, length) in &self.entries {
            bytes.extend(addr.octets());
            bytes.extend(length.to_be_bytes());
        }
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Beacon, BeaconError> {
        if bytes.len() < HEADER {
            return Err(BeaconError::Truncated(bytes.len()));
        }
        let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if magic != MAGIC {
            return Err(BeaconError::Magic(magic));
        }
        if bytes[4] != VERSION {
            return Err(BeaconError::Version(bytes[4]));
        }
        let count = usize::from(u16::from_be_bytes([bytes[6], bytes[7]]));
        let body = &bytes[HEADER..];
        if body.len() != count * ENTRY {
            return Err(BeaconError::Length { count, bytes: body.len() });
        }
        let entries = body
            .chunks_exact(ENTRY)
            .map(|e| (Ipv4Addr::new(e[0], e[1], e[2], e[3]), u16::from_be_bytes([e[4], e[5]])))
            .collect();
        Ok(Beacon {
            sequence: u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
            complete: bytes[5] & COMPLETE != 0,
            entries,
        })
    }

    /// The entries as the scheduler takes them.
    pub fn flows(&self) -> Vec<(FlowKey, u32)> {
        self.entries.iter().map(|(addr, length)| (FlowKey::Addr(*addr), u32::from(*length))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_mac_flows_left_out() {
        let advertisement = [
            (FlowKey::Addr(Ipv4Addr::new(10, 0, 0, 1)), 3),
            (FlowKey::Mac([2, 0, 0, 0, 0, 1]), 4),
            (FlowKey::Addr(Ipv4Addr::new(10, 0, 0, 7)), 100_000),
        ];
        let beacon = Beacon::from_advertisement(9, &advertisement);
        assert_eq!(beacon.entries, vec![(Ipv4Addr::new(10, 0, 0, 7), u16::MAX), (Ipv4Addr::new(10, 0, 0, 1), 3)]);
        let bytes = beacon.encode();
        assert_eq!(bytes.len(), 12 + 2 * 6);
        assert_eq!(Beacon::decode(&bytes).unwrap(), beacon);
        assert!(beacon.complete);
    }

    #[test]
    fn too_many_flows_make_an_incomplete_beacon_of_the_longest() {
        let advertisement: Vec<(FlowKey, u32)> =
            (0..300u32).map(|i| (FlowKey::Addr(Ipv4Addr::from(0x0a00_0000 + i)), i + 1)).collect();
        let beacon = Beacon::from_advertisement(1, &advertisement);
        assert!(!beacon.complete);
        assert_eq!(beacon.entries.len(), MAX_ENTRIES);
        assert_eq!(beacon.entries[0].1, 300);
        assert!(beacon.encode().len() < 1400);
    }

    #[test]
    fn bad_bytes_are_named() {
        let good = Beacon { sequence: 1, complete: true, entries: vec![(Ipv4Addr::new(10, 0, 0, 1), 1)] }.encode();
        assert_eq!(Beacon::decode(&good[..5]), Err(BeaconError::Truncated(5)));
        let mut magic = good.clone();
        magic[0] = b'X';
        assert!(matches!(Beacon::decode(&magic), Err(BeaconError::Magic(_))));
        let mut version = good.clone();
        version[4] = 2;
        assert_eq!(Beacon::decode(&version), Err(BeaconError::Version(2)));
        assert_eq!(Beacon::decode(&good[..good.len() - 1]), Err(BeaconError::Length { count: 1, bytes: 5 }));
    }
}
