//! Any bytes from any neighbour, at any TTL, into a source with a discovery
//! under way and into the destination collecting RREQs: the codec and the
//! protocol core must never panic, whatever the sequence of messages.
#![no_main]

use std::net::Ipv4Addr;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use meshemu_copas::packet::Message;
use meshemu_copas::{Config, Copas};
use meshemu_ondemand::{Input, Protocol};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let _ = Message::decode(&data[2..]);
    let (source, destination) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 9));
    let mut nodes = [
        Copas::new(Config::default(), source, 1, Duration::ZERO),
        Copas::new(Config::default(), destination, 2, Duration::ZERO),
        Copas::new(Config::default(), Ipv4Addr::new(10, 0, 0, 3), 3, Duration::ZERO),
    ];
    let mut out = Vec::new();
    nodes[0].handle(Duration::ZERO, Input::NoRoute { src: source, dst: destination, local: true }, &mut out);
    let from = Ipv4Addr::new(10, 0, 0, 2 + data[0] % 8);
    let mut now = Duration::from_millis(1);
    // The payload split into several packets so sequences of messages are explored too.
    for chunk in data[2..].chunks(12.max(usize::from(data[1]) % 64)) {
        for node in nodes.iter_mut() {
            node.handle(now, Input::Control { from, ttl: data[1], payload: chunk }, &mut out);
            node.handle(now, Input::MacBackoffs { total: u64::from(data[0]) * now.as_millis() as u64 }, &mut out);
            node.handle(now, Input::RouteUsed { addr: from }, &mut out);
            if data[0] & 1 == 1 {
                node.handle(now, Input::LinkFailed { neighbor: from }, &mut out);
            }
            let _ = node.poll_timeout();
        }
        now += Duration::from_millis(u64::from(data[0]) * 20);
        for node in nodes.iter_mut() {
            node.handle_timeout(now, &mut out);
        }
        out.clear();
    }
});
