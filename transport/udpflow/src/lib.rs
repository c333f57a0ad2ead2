//! UDP traffic generator and sink with one-way delay, jitter, loss and reordering.
//!
//! Every datagram starts with a [`Header`]: flow id, sequence number and the
//! sender's wall-clock send time. Namespaces on one host share one clock, so
//! the receiver's arrival time minus the send time is the exact one-way delay.
//!
//! The library is free of I/O and clocks: [`FlowStats`] folds arrivals
//! (sequence, send time, arrival time, length) into delay, RFC 3550 jitter,
//! loss and RFC 4737-style reordering; [`Schedule`] computes the absolute
//! send times of a constant-rate sender. The `meshemu-udp` binary puts them on
//! sockets.

pub mod header;
pub mod schedule;
pub mod stats;

pub use header::{Header, HeaderError, HEADER_LEN};
pub use schedule::Schedule;
pub use stats::{DelaySummary, FlowStats, FlowSummary, IntervalStats, Window};
