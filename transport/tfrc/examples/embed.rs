//! Embedding the TFRC core in your own event loop: a receiver thread and a
//! sender loop on loopback, driving `Sender` and `Receiver` directly. The
//! sockets are `net::socket::Endpoint`s — non-blocking UDP with a wait that
//! ends on a datagram or at a deadline with µs precision (a socket read
//! timeout would not do: Linux rounds it up to whole scheduler ticks). Any
//! event loop with such a wait (mio, tokio, epoll) works the same way. An
//! application would put its media into the payload after the 36-byte header.
//!
//! ```text
//! cargo run --release -p meshemu-tfrc --example embed
//! ```

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use meshemu_tfrc::net::socket::Endpoint;
use meshemu_tfrc::packet::{self, Packet, DATA_HEADER_LEN};
use meshemu_tfrc::receiver::{Receiver, ReceiverConfig};
use meshemu_tfrc::sender::{Sender, SenderConfig, Transmit};

const SESSION: u32 = 1;
const PACKET: usize = 1200;
const RUN: Duration = Duration::from_secs(5);

/// Answers data with feedback until the sender's end-of-flow packet.
fn receive(socket: Endpoint) -> std::io::Result<()> {
    let start = Instant::now();
    let mut receiver = Receiver::new(SESSION, ReceiverConfig::default());
    let mut sender_addr: Option<SocketAddr> = None;
    let mut buf = [0u8; 2048];
    loop {
        while let Some(datagram) = socket.recv(&mut buf)? {
            match packet::parse(&buf[..datagram.len]) {
                Ok(Packet::Data {
                    header,
                    payload_len,
                }) => {
                    receiver.handle_data(start.elapsed(), &header, payload_len, datagram.ttl);
                    sender_addr = Some(datagram.from);
                }
                Ok(Packet::Fin(_)) => {
                    socket.send_to(
                        &receiver.final_feedback(start.elapsed()).to_bytes(),
                        datagram.from,
                    )?;
                    return Ok(());
                }
                _ => {} // not for us: ignore
            }
        }
        if let (Some(feedback), Some(to)) = (receiver.poll_feedback(start.elapsed()), sender_addr) {
            socket.send_to(&feedback.to_bytes(), to)?;
        }
        // Until the next datagram or the feedback timer.
        let wait = receiver
            .poll_timeout()
            .map_or(Duration::from_millis(100), |t| {
                t.saturating_sub(start.elapsed())
            });
        socket.wait(wait)?;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let receiver_socket = Endpoint::bind("127.0.0.1:0".parse()?)?;
    receiver_socket.report_ttl()?;
    let receiver_addr = receiver_socket.local_addr()?;
    let receiver_thread = thread::spawn(move || receive(receiver_socket));

    let socket = Endpoint::bind("127.0.0.1:0".parse()?)?;
    // Cap the rate at 8 Mbit/s: on loopback nothing else would end slow start.
    let config = SenderConfig {
        session: SESSION,
        packet_size: PACKET,
        max_rate: Some(1_000_000.0),
        re: None,
    };
    let start = Instant::now();
    let mut sender = Sender::new(config, Duration::ZERO)?;
    let mut datagram = vec![0u8; PACKET];
    let mut buf = [0u8; 2048];
    while start.elapsed() < RUN {
        while let Some(received) = socket.recv(&mut buf)? {
            if let Ok(Packet::Feedback(feedback)) = packet::parse(&buf[..received.len]) {
                if let Err(refused) = sender.handle_feedback(start.elapsed(), &feedback) {
                    eprintln!("ignored feedback: {refused}");
                }
            }
        }
        let now = start.elapsed();
        sender.handle_timeout(now);
        let next = loop {
            match sender.poll_transmit(now) {
                Transmit::Send(header) => {
                    header.write(&mut datagram);
                    datagram[DATA_HEADER_LEN..].fill(0xAB); // the application's data
                    socket.send_to(&datagram, receiver_addr)?;
                }
                Transmit::Wait(at) => break at,
            }
        };
        // Until feedback arrives, the next packet is due or the timer fires.
        socket.wait(
            next.min(sender.poll_timeout())
                .saturating_sub(start.elapsed()),
        )?;
    }
    socket.send_to(&sender.fin().to_bytes(), receiver_addr)?;
    receiver_thread.join().expect("receiver thread")?;
    let stats = sender.stats();
    println!(
        "sent {} packets in {:?} ({:.2} Mbit/s), RTT {:?}, p {}",
        stats.packets,
        RUN,
        stats.bytes as f64 * 8.0 / RUN.as_secs_f64() / 1e6,
        sender.rtt().unwrap_or_default(),
        sender.loss_event_rate()
    );
    Ok(())
}
