//! TFRC (RFC 5348) and RE-TFRC (Li et al., "Performance Enhancement of TFRC
//! in Wireless Ad Hoc Networks") over UDP.
//!
//! The protocol core is sans-IO: it never reads a clock and never touches a
//! socket. Times go in as [`std::time::Duration`]s since an origin the caller
//! picks; packets go in as parsed structs; what comes out is headers to send,
//! feedback to send and the next deadline.
//!
//! | module | what |
//! |---|---|
//! | [`equation`] | the TCP throughput equation (RFC 5348 §3.1) and its inverse |
//! | [`packet`] | the wire formats below; a parser that never panics |
//! | [`loss`] | loss detection (3-packet rule), loss events, loss intervals with weights and history discounting (§5) |
//! | [`receiver`] | the receiver (§6): X_recv, p, feedback once per RTT and on new loss events, jitter, hops from the TTL |
//! | [`sender`] | the sender (§4): slow start, equation, X_recv_set, no-feedback timer, RTT/RTO, pacing, the rate cap, RE-TFRC |
//! | [`re`] | RE-TFRC: the 802.11 saturation delay model r(N) and the rate controller of the paper's Fig. 7 |
//! | [`net`] | the I/O: the loops behind `tfrc send` / `tfrc recv`, their JSON summaries and traces |
//!
//! # Using the library
//!
//! A sender and a receiver connected by hand, over a path with 20 ms of
//! one-way delay that loses every 50th packet. A real program puts the
//! bytes from [`packet::DataHeader::write`] and [`packet::Feedback::to_bytes`]
//! into datagrams and [`packet::parse`]s what arrives; `examples/embed.rs`
//! does that over UDP sockets.
//!
//! ```
//! use std::time::Duration;
//! use meshemu_tfrc::packet::{self, Packet, DATA_HEADER_LEN};
//! use meshemu_tfrc::receiver::{Receiver, ReceiverConfig};
//! use meshemu_tfrc::sender::{Sender, SenderConfig, Transmit};
//!
//! let config = SenderConfig { session: 7, packet_size: 1000, max_rate: None, re: None };
//! let mut sender = Sender::new(config, Duration::ZERO)?;
//! let mut receiver = Receiver::new(7, ReceiverConfig::default());
//! let delay = Duration::from_millis(20);
//! let mut in_flight = Vec::new(); // (arrival time, datagram, towards the receiver?)
//! let mut datagram = vec![0u8; 1000];
//!
//! let mut now = Duration::ZERO;
//! while now < Duration::from_secs(30) {
//!     // Everything the sender may send now.
//!     while let Transmit::Send(header) = sender.poll_transmit(now) {
//!         header.write(&mut datagram);
//!         if header.seq % 50 != 49 {
//!             in_flight.push((now + delay, datagram.clone(), true));
//!         }
//!     }
//!     sender.handle_timeout(now);
//!     if let Some(feedback) = receiver.poll_feedback(now) {
//!         in_flight.push((now + delay, feedback.to_bytes().to_vec(), false));
//!     }
//!     // Deliver what has arrived.
//!     for (_, bytes, to_receiver) in in_flight.iter().filter(|(at, ..)| *at <= now) {
//!         match (packet::parse(bytes), to_receiver) {
//!             (Ok(Packet::Data { header, payload_len }), true) => {
//!                 receiver.handle_data(now, &header, payload_len, None);
//!             }
//!             (Ok(Packet::Feedback(feedback)), false) => {
//!                 sender.handle_feedback(now, &feedback).expect("our own feedback is valid");
//!             }
//!             _ => unreachable!(),
//!         }
//!     }
//!     in_flight.retain(|(at, ..)| *at > now);
//!     now += Duration::from_micros(500);
//! }
//! // One loss per 50 packets, each its own loss event.
//! assert!((sender.loss_event_rate() - 0.02).abs() < 1e-3);
//! let rtt = sender.rtt().unwrap();
//! assert!(rtt >= Duration::from_millis(40) && rtt < Duration::from_millis(42));
//! # Ok::<(), meshemu_tfrc::sender::ConfigError>(())
//! ```
//!
//! For RE-TFRC, give the sender a [`re::ReConfig`]:
//! `SenderConfig { re: Some(ReConfig::new(PhyParams::dsss(), 1000)), .. }`;
//! the hop count then comes from the receiver's feedback (IP TTL) unless
//! [`re::ReConfig::hops`] fixes it.
//!
//! # Wire formats
//!
//! Every packet is one UDP datagram starting with the magic `"TF"`, the
//! version (1) and the kind. Integers are big-endian.
//!
//! **Data** (kind 1): a 36-byte header, then the payload up to the packet
//! size (zeros from the tool).
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 2 | `"TF"` |
//! | 2 | 1 | version = 1 |
//! | 3 | 1 | kind = 1 |
//! | 4 | 4 | session: names the flow |
//! | 8 | 8 | sequence number, from 0 |
//! | 16 | 8 | send timestamp, µs on the sender's clock (echoed for RTT; jitter) |
//! | 24 | 4 | the sender's RTT estimate, µs (0 = none yet) |
//! | 28 | 8 | send time on CLOCK_REALTIME, ns since 1970 (0 = not given; one-way delay) |
//!
//! **Feedback** (kind 2): exactly 64 bytes.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `"TF"`, 1, 2 |
//! | 4 | 4 | session |
//! | 8 | 8 | echoed timestamp `t_recvdata`, µs: of the latest data packet |
//! | 16 | 4 | elapsed time `t_delay`, µs, since that packet arrived |
//! | 20 | 8 | `X_recv`, bytes/s |
//! | 28 | 4 | `p` as a fraction of 2³²−1 (a positive p is never sent as 0) |
//! | 32 | 8 | highest sequence number received |
//! | 40 | 8 | data packets received |
//! | 48 | 8 | data bytes received |
//! | 56 | 4 | RFC 3550 jitter, µs |
//! | 60 | 1 | hops from the IP TTL (0 = unknown) |
//! | 61 | 1 | flags: 1 = sent at once for a new loss event, 2 = final counters (answer to an end-of-flow packet) |
//! | 62 | 2 | reserved, 0 |
//!
//! **End of flow** (kind 3): exactly 24 bytes — `"TF"`, 1, 3; session (4);
//! data packets sent (8); data bytes sent (8). The receiver answers with a
//! final feedback; the sender repeats it until then or for `linger`.
//!
//! A datagram that is none of these (wrong length, magic, version, kind,
//! unknown flags, non-zero reserved bytes) is counted as malformed and
//! ignored; a well-formed feedback that does not fit what the sender sent
//! (other session, an echoed time it never sent, an elapsed time longer than
//! the round trip, a sequence number it has not reached) is counted as
//! refused and ignored.
//!
//! # Hop count from the TTL
//!
//! The receiver asks for `IP_RECVTTL` (`IPV6_RECVHOPLIMIT`) and reports
//! `hops = 65 − TTL`, assuming the sender's initial TTL is 64; the `tfrc`
//! sender sets `IP_TTL` to 64 explicitly so the sysctl does not matter.
//!
//! # Choices where the RFC or the paper leave room
//!
//! * RFC 5348: history discounting (§5.5) is on (the receiver can turn it
//!   off); oscillation prevention (§4.5) is not implemented; a data-limited
//!   interval (§8.2.1) is one in which the application never had to wait for
//!   the rate (it never got [`sender::Transmit::Wait`]); `X_recv` is measured
//!   over the time since the last feedback but at least one RTT; before the
//!   sender has an RTT the receiver answers every data packet.
//! * RE-TFRC: see the [`re`] module — α and q from Bianchi's model, `r(1)`,
//!   `r_cur` as the latest RTT sample, a 10 s window of RTT samples, the
//!   comparison with the receive rate and a 20 % tolerance, ns-2's
//!   additive increase, decreases of at most a sixteenth of the rate, one
//!   per round trip.
//! * The rate cap (the paper's "constrained rate") limits the pacing rate,
//!   not X: like the paper's Fig. 4, X is still computed and reported.

pub mod equation;
pub mod loss;
pub mod net;
pub mod packet;
pub mod re;
pub mod receiver;
pub mod sender;
