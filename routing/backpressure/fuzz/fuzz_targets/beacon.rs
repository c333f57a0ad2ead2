//! Beacons from arbitrary datagrams: decoded or refused with a reason, never
//! a panic; what decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshemu_backpressure::beacon::Beacon;

fuzz_target!(|data: &[u8]| {
    if let Ok(beacon) = Beacon::decode(data) {
        let mut again = beacon.encode();
        // Only bit 0 of the flags byte is defined; the others are ignored.
        again[5] |= data[5] & !1;
        assert_eq!(again, data);
        assert_eq!(beacon.flows().len(), beacon.entries.len());
    }
});
