//! The header at the start of every datagram (big-endian):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `MUDP` |
//! | 4 | 1 | version = 1 |
//! | 5 | 3 | zero |
//! | 8 | 4 | flow id |
//! | 12 | 8 | sequence number, from 0 |
//! | 20 | 8 | send time, CLOCK_REALTIME ns |
//!
//! The rest of the datagram is padding up to the requested size.

use thiserror::Error;

pub const MAGIC: [u8; 4] = *b"MUDP";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub flow_id: u32,
    pub seq: u64,
    pub send_ns: u64,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("datagram of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    TooShort(usize),
    #[error("not a meshemu-udp datagram (bad magic)")]
    BadMagic,
    #[error("unknown header version {0}")]
    BadVersion(u8),
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than the header (the sender sizes its buffer).
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4] = VERSION;
        buf[5..8].fill(0);
        buf[8..12].copy_from_slice(&self.flow_id.to_be_bytes());
        buf[12..20].copy_from_slice(&self.seq.to_be_bytes());
        buf[20..28].copy_from_slice(&self.send_ns.to_be_bytes());
    }

    /// Reads a header from a received datagram; anything else is an error.
    pub fn read(buf: &[u8]) -> Result<Self, HeaderError> {
        if buf.len() < HEADER_LEN {
            return Err(HeaderError::TooShort(buf.len()));
        }
        if buf[0..4] != MAGIC {
            return Err(HeaderError::BadMagic);
        }
        if buf[4] != VERSION {
            return Err(HeaderError::BadVersion(buf[4]));
        }
        let word = |range: std::ops::Range<usize>| {
            let mut bytes = [0u8; 8];
            bytes[8 - range.len()..].copy_from_slice(&buf[range]);
            u64::from_be_bytes(bytes)
        };
        Ok(Header {
            flow_id: word(8..12) as u32,
            seq: word(12..20),
            send_ns: word(20..28),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let header = Header { flow_id: 7, seq: 0x0102_0304_0506_0708, send_ns: u64::MAX - 3 };
        let mut buf = [0xffu8; 40];
        header.write(&mut buf);
        assert_eq!(&buf[0..4], b"MUDP");
        assert_eq!(Header::read(&buf), Ok(header));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(Header::read(b"MUDP"), Err(HeaderError::TooShort(4)));
        assert_eq!(Header::read(&[0u8; 28]), Err(HeaderError::BadMagic));
        let mut buf = [0u8; 28];
        Header { flow_id: 1, seq: 1, send_ns: 1 }.write(&mut buf);
        buf[4] = 9;
        assert_eq!(Header::read(&buf), Err(HeaderError::BadVersion(9)));
    }
}
