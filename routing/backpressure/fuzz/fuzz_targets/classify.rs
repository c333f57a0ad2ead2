//! The packet classifier on arbitrary bytes (what NFQUEUE or the packet
//! socket may hand the daemon): a summary or a named problem, never a panic;
//! what it accepts agrees with the bytes, and every key classifies it.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use meshemu_backpressure::flow::{classify, global_key, ClassifyBy, FlowKey, PreviousHop};
use meshemu_backpressure::packet::fingerprint;
use meshemu_netutil::ipv4::parse_ipv4;

fuzz_target!(|data: &[u8]| {
    let _ = fingerprint(data);
    let Ok(header) = parse_ipv4(data) else { return };
    assert_eq!(data[0] >> 4, 4);
    assert_eq!(header.source.octets(), data[12..16]);
    assert_eq!(header.destination.octets(), data[16..20]);
    assert!(usize::from(header.total_len) >= usize::from(data[0] & 0x0f) * 4);
    let next_hop = Ipv4Addr::new(10, 0, 0, 2);
    let previous = [PreviousHop::Local, PreviousHop::UnknownMac([2, 0, 0, 0, 0, 1])];
    for by in [ClassifyBy::Source, ClassifyBy::Destination, ClassifyBy::NextHop, ClassifyBy::PreviousHop] {
        for hop in previous {
            let key = classify(by, &header, next_hop, hop, Ipv4Addr::new(10, 0, 0, 1));
            if let Some(global) = global_key(by, &header) {
                assert_eq!(global, key);
            }
            let _ = key.to_string();
        }
    }
    assert_eq!(global_key(ClassifyBy::Source, &header), Some(FlowKey::Addr(header.source)));
});
