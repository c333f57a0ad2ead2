//! The parser must answer every datagram with a packet or an error, never a
//! panic; what it accepts must encode back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshemu_tfrc::packet::{self, Packet, DATA_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    match packet::parse(data) {
        Ok(Packet::Data { header, payload_len }) => {
            let mut again = data.to_vec();
            header.write(&mut again);
            assert_eq!(again, data);
            assert_eq!(payload_len, data.len() - DATA_HEADER_LEN);
        }
        Ok(Packet::Feedback(feedback)) => assert_eq!(&feedback.to_bytes()[..], data),
        Ok(Packet::Fin(fin)) => assert_eq!(&fin.to_bytes()[..], data),
        Err(_) => {}
    }
});
