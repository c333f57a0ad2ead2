//! The sans-IO 802.11 medium model of meshemu (see emulator/README.md, the
//! contract between the parts).
//!
//! The model never reads a clock and does no I/O. Time is an integer number of
//! nanoseconds passed in by the caller; frames handed down by nodes go in
//! through [`Medium::send`], and everything the medium does comes out as
//! [`Action`]s from [`Medium::send`] and [`Medium::handle_timeout`]: frames delivered
//! to nodes, transmit status to senders, and (when asked) every transmission
//! on the air. Every random draw comes from streams derived from the
//! configuration's seed, so the same configuration and inputs give the same
//! actions.
//!
//! Parts: [`config`] (the resolved configuration and its validation), [`phy`]
//! (frame sizes, airtime, propagation), [`mobility`], [`medium`] (the event
//! loop with PHY reception, DCF and TDMA MACs), [`stats`], and [`sim`] (the
//! virtual-time driver with synthetic traffic).

pub mod config;
pub mod medium;
pub mod mobility;
pub mod phy;
pub mod rng;
pub mod routing;
pub mod sim;
pub mod stats;

pub use config::{ConfigError, LinkOverride, MacAddr, MacConfig, MediumConfig, MobilityConfig, NodeConfig, Propagation, RadioConfig};
pub use medium::{Action, AirFrame, Dest, Frame, FrameKind, LinkInfo, Medium, PacketKind, Touched, TxOutcome};
pub use phy::Phy;
pub use stats::{NodeCounters, PeerStats};

/// Nanoseconds since the start of the run.
pub type Time = u64;

/// Index into [`MediumConfig::nodes`].
pub type NodeId = usize;
