//! Any bytes as a frame a node writes to its TAP (the classifier) or as a
//! frame mac80211_hwsim hands the medium (the 802.11 header parser): never
//! a panic, and a classified frame keeps every byte it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshemu_medium::backend::hwsim::frame::parse;
use meshemu_medium::backend::tap::frame::{Classifier, ETHERNET_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let macs = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
    let classifier = Classifier::new(&macs, &[654, 269]);
    if let Some(frame) = classifier.classify(data) {
        assert_eq!(&frame.payload[..], data);
        assert_eq!(frame.len as usize + ETHERNET_HEADER_LEN, data.len());
    }
    let _ = parse(data);
});
