//! AODV (RFC 3561) as a sans-IO protocol core for the on-demand routing
//! platform (`meshemu-ondemand`), which runs it as the aodvd program.
//!
//! - [`packet`]: the message codec;
//! - [`config`]: the parameters (RFC 3561 section 10) and presets;
//! - [`core`]: the state machine ([`Aodv`], a [`meshemu_ondemand::Protocol`]);
//! - [`event`]: what it reports to the event log.

pub mod config;
pub mod core;
pub mod event;
pub mod packet;

pub use crate::config::{Config, ConfigError, PrecursorRule, RepairRule, RreqBackoff};
pub use crate::core::Aodv;
pub use crate::event::Event;

/// What the AODV core asks its daemon to do.
pub type Output = meshemu_ondemand::Output<Event>;
