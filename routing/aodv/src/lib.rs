//! AODV (RFC 3561) routing daemon: sans-IO protocol core and the aodvd program.
//!
//! - [`aodv`]: the AODV message codec, parameters and state machine (no I/O, no clock);
//! - [`ondemand`]: what any on-demand protocol core exchanges with its daemon
//!   (inputs, outputs, counters), shared with sibling protocols;
//! - [`platform`]: the Linux side a daemon of such a protocol needs: kernel
//!   routes over netlink, NFQUEUE holding of packets without a route, the
//!   control socket, route-use and link-layer-feedback readers, the counters
//!   file and the event loop.

pub mod aodv;
pub mod ondemand;
pub mod platform;
