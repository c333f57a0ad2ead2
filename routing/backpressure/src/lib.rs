//! Per-flow fair queuing and hop-by-hop backpressure (Gupta, Krishnamurthy
//! and Faloutsos), as a sans-IO library; the `bpd` daemon around it takes
//! packets from NFQUEUE and gives them back in the order and at the time this
//! library decides.
//!
//! - [`packet`]: a packet's fingerprint (its header fields are read by
//!   `meshemu_netutil::ipv4`);
//! - [`flow`]: classification by IP source, IP destination, next hop or
//!   previous hop;
//! - [`scheduler`]: per-flow queues, round-robin, buffer limits, release
//!   gated by the radio's backlog, backpressure, age drops, counters;
//! - [`downstream`]: what we believe of our neighbours' queues (overhearing,
//!   beacons, oracle);
//! - [`beacon`]: the beacon's wire format;
//! - [`histogram`]: the per-packet processing time histogram.
//!
//! Time is an integer number of nanoseconds from any fixed origin ([`Time`]);
//! nothing here reads a clock or does I/O. The [`Scheduler`](scheduler::Scheduler)
//! speaks the contract of every sans-IO core of the project (the top
//! README, "Sans-IO cores: one contract"): `handle_*` feeds what happened
//! (an arrival, the radio's counters, an overheard transmission, a
//! neighbour's report) and appends the decisions to `out`; `poll_timeout`
//! says when `handle_timeout` has age drops, expiries or releases to run.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use meshemu_backpressure::downstream::Knowledge;
//! use meshemu_backpressure::flow::{ClassifyBy, FlowKey};
//! use meshemu_backpressure::scheduler::{Arrival, Config, Mode, Scheduler, Verdict};
//!
//! let config = Config {
//!     mode: Mode::Backpressure { threshold: 1 },
//!     classify: ClassifyBy::Source,
//!     flow_limit: 50,
//!     total_limit: 1000,
//!     radio_depth: Some(2),
//!     max_hold: 2_000_000_000,
//!     flow_idle: 10_000_000_000,
//!     knowledge: Knowledge::Overhear,
//!     overhear_timeout: 200_000_000,
//! };
//! let mut scheduler = Scheduler::new(config).unwrap();
//! let (source, next_hop) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
//! let packet = |id| Arrival { id, flow: FlowKey::Addr(source), next_hop, next_hop_forwards: true };
//! let mut out = Vec::new();
//! scheduler.handle_radio(0, 0, 0, &mut out); // the radio's counters as read now
//! scheduler.handle_arrival(0, packet(1), &mut out);
//! assert_eq!(out.pop().unwrap().verdict, Verdict::Accept); // released at once
//! scheduler.handle_arrival(1, packet(2), &mut out);
//! assert!(out.is_empty()); // held: the next hop holds one of the flow already
//! scheduler.handle_arrival(2, packet(3), &mut out);
//! assert_eq!(out.pop().unwrap().verdict, Verdict::Drop); // beyond the threshold
//! scheduler.handle_overheard(3, next_hop, FlowKey::Addr(source), 0xfeed, &mut out);
//! assert_eq!(out.pop().unwrap().id, 2); // the next hop forwarded packet 1
//! ```

pub mod beacon;
pub mod downstream;
pub mod flow;
pub mod histogram;
pub mod packet;
pub mod scheduler;

/// Nanoseconds: instants from an arbitrary fixed origin (bpd: CLOCK_MONOTONIC)
/// and the spans between them, as the model's `Time` counts them.
pub type Time = u64;
