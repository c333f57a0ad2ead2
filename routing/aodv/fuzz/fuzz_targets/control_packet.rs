//! Any bytes from any neighbour, at any TTL, into a node with routes and a
//! discovery under way: the codec and the protocol core must never panic.
#![no_main]

use std::net::Ipv4Addr;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use meshemu_aodv::packet::Message;
use meshemu_aodv::{Aodv, Config};
use meshemu_ondemand::{Input, Protocol};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let _ = Message::decode(&data[2..]);
    let config = Config { local_repair: true, intermediate_replies: true, rrep_ack: true, ..Config::default() };
    let mut node = Aodv::new(config, Ipv4Addr::new(10, 0, 0, 1), 1, Duration::ZERO);
    let mut out = Vec::new();
    node.handle(Duration::ZERO, Input::NoRoute { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 9), local: true }, &mut out);
    let from = Ipv4Addr::new(10, 0, 0, 2 + data[0] % 4);
    let mut now = Duration::from_millis(1);
    // The payload split into several packets so sequences of messages are explored too.
    for chunk in data[2..].chunks(24.max(usize::from(data[1]) % 64)) {
        node.handle(now, Input::Control { from, ttl: data[1], payload: chunk }, &mut out);
        node.handle(now, Input::LinkFailed { neighbor: from }, &mut out);
        now += Duration::from_millis(u64::from(data[0]) * 10);
        node.handle_timeout(now, &mut out);
        let _ = node.poll_timeout();
    }
});
