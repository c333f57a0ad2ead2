//! Arbitrary input at arbitrary times into a receiver and a sending sender:
//! every outcome is a refusal or a state change, never a panic (overflow
//! checks are on in fuzz builds), and the outputs stay sane.
//!
//! Input: records of [kind][2-byte time step, µs][fields]. Most records are
//! built into well-formed packets of the right session (with sequence
//! numbers and timestamps near the flow's), so the fuzzer reaches loss
//! detection and rate control; the rest are raw datagrams for the parser.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use meshemu_tfrc::packet::{self, DataHeader, Feedback, Packet};
use meshemu_tfrc::re::{HopSource, PhyParams, ReConfig};
use meshemu_tfrc::receiver::{Receiver, ReceiverConfig};
use meshemu_tfrc::sender::{Sender, SenderConfig};

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
}

fn run(data: &[u8]) -> Option<()> {
    let mut input = Bytes(data);
    let flags = input.u8()?;
    let re = (flags & 1 == 1).then(|| ReConfig {
        hops: if flags & 2 == 2 { HopSource::Fixed(flags >> 4 | 1) } else { HopSource::FromFeedback },
        ..ReConfig::new(PhyParams::dsss(), 500)
    });
    let max_rate = (flags & 4 == 4).then_some(10_000.0);
    let mut sender = Sender::new(SenderConfig { session: 1, packet_size: 500, max_rate, re }, Duration::ZERO).unwrap();
    let mut receiver = Receiver::new(1, ReceiverConfig { history_discounting: flags & 8 == 8 });
    let mut now = Duration::ZERO;
    let mut seq = 0u64;
    loop {
        let kind = input.u8()?;
        now += Duration::from_micros(input.u16()?.into());
        let now_us = now.as_micros() as u64;
        let _ = sender.poll_transmit(now);
        sender.handle_timeout(now);
        match kind % 4 {
            0 | 1 => {
                seq = seq.saturating_add_signed(i64::from(input.u8()? as i8));
                let header = DataHeader {
                    session: 1,
                    seq,
                    timestamp_us: now_us.saturating_sub(input.u16()?.into()),
                    rtt_us: u32::from(input.u16()?) * 10,
                    wallclock_ns: 0,
                };
                let ttl = input.u8()?;
                receiver.handle_data(now, &header, 464, (ttl != 0).then_some(ttl));
            }
            2 => {
                let feedback = Feedback {
                    session: 1,
                    echo_timestamp_us: now_us.saturating_sub(input.u16()?.into()),
                    elapsed_us: input.u16()?.into(),
                    x_recv: input.u32()?.into(),
                    loss_event_rate: f64::from(input.u32()?) / f64::from(u32::MAX),
                    highest_seq: input.u16()?.into(),
                    received_packets: 0,
                    received_bytes: 0,
                    jitter_us: 0,
                    hops: input.u8()?,
                    flags: input.u8()? & 1,
                };
                let _ = sender.handle_feedback(now, &feedback);
            }
            _ => {
                let len = usize::from(input.u8()?);
                let datagram = input.0.get(..len)?;
                input.0 = &input.0[len..];
                match packet::parse(datagram) {
                    Ok(Packet::Data { header, payload_len }) => {
                        receiver.handle_data(now, &header, payload_len, None);
                    }
                    Ok(Packet::Feedback(feedback)) => {
                        let _ = sender.handle_feedback(now, &feedback);
                    }
                    Ok(Packet::Fin(_)) => {
                        receiver.final_feedback(now);
                    }
                    Err(_) => {}
                }
            }
        }
        if let Some(feedback) = receiver.poll_feedback(now) {
            assert!(packet::parse(&feedback.to_bytes()).is_ok());
        }
        let rate = sender.sending_rate();
        assert!(rate > 0.0 && rate.is_finite(), "sending rate {rate}");
        let p = receiver.loss_event_rate();
        assert!((0.0..=1.0).contains(&p), "p {p}");
    }
}

fuzz_target!(|data: &[u8]| {
    run(data);
});
