//! The on-demand routing platform: what a routing protocol that finds routes
//! when traffic asks for them (AODV, COPAS, and DSR one day) needs from
//! Linux, and the contract between that machinery and the protocol's core.
//!
//! # The contract
//!
//! A protocol core is sans-IO, in the manner of quinn-proto: it owns no
//! socket, reads no clock and spawns nothing. The daemon feeds it and
//! carries out what it answers, in the vocabulary of every sans-IO core of
//! the project (the top README, "Sans-IO cores: one contract"):
//!
//! - [`Protocol::handle`] feeds one [`Input`] (a control packet, a packet
//!   without a route, route use, or link-layer news) at time `now`; the core
//!   appends the [`Output`]s it wants carried out, in order, to a vector the
//!   daemon drains (packets to send, kernel routes to set or delete, held
//!   packets to release or drop, and the protocol's own events);
//! - [`Protocol::poll_timeout`] says when [`Protocol::handle_timeout`] next
//!   has timers to run;
//! - time is one type throughout: a [`Duration`](std::time::Duration) since
//!   the daemon started, given with every input.
//!
//! Events belong to each protocol ([`Protocol::Event`]): the platform only
//! serialises them, one JSON object a line, tagged by their `event` field.
//! [`Counters`] are shared: the core fills the protocol part, the daemon the
//! data-path part.
//!
//! # The platform
//!
//! The kernel forwards; the daemon installs host routes ([`routes`]), holds
//! packets that found no route in an NFQUEUE (the client is
//! `meshemu_netutil::nfqueue`, shared with bpd; rules in [`iptables`]) and
//! releases (at once or paced, [`pacing`]) or rejects them when the
//! protocol says so, sees route use through xt_recent ([`route_use`]) and
//! link failures through the radio statistics ([`link_feedback`]) and the
//! kernel's failed neighbour entries ([`resolution`]), and
//! talks to neighbours on the [`control`] socket. [`daemon::run`] drives any [`Protocol`] with all of
//! it on one thread ([`schedule`]: its own deadlines); [`program::main`] is
//! a whole daemon program (command line, config file, `--print-rules`,
//! `--print-config`) around a [`program::Daemon`], so a protocol's binary is
//! its set-up and one call.

pub mod control;
pub mod daemon;
mod data_path;
pub mod iptables;
pub mod link_feedback;
pub mod pacing;
pub mod program;
mod protocol;
pub mod resolution;
pub mod route_use;
pub mod routes;
pub mod schedule;
pub mod settings;

pub use crate::data_path::DataPath;
pub use crate::protocol::{Counters, Input, Output, Protocol, Traffic, BROADCAST, CONTROL_PORT, IP_UDP_HEADER_BYTES};
