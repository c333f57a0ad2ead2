//! COPAS (contention-based path selection, Cordeiro, Das and Agrawal):
//! disjoint forward and reverse paths chosen by MAC contention, moved when
//! contention grows. A sans-IO core for the on-demand routing platform
//! (`meshemu-ondemand`), which runs it as the copasd program.
//!
//! - [`packet`]: the control messages;
//! - [`select`]: path choice among collected RREQ copies;
//! - [`core`]: the state machine, sans-IO;
//! - [`config`]: parameters (the paper's Table 1);
//! - [`event`]: what it reports to the event log.

pub mod config;
pub mod core;
pub mod event;
pub mod packet;
pub mod select;

pub use crate::config::Config;
pub use crate::core::Copas;
pub use crate::event::Event;

/// What the COPAS core asks its daemon to do.
pub type Output = meshemu_ondemand::Output<Event>;
