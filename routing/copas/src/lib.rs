//! COPAS (contention-based path selection, Cordeiro, Das and Agrawal):
//! disjoint forward and reverse paths chosen by MAC contention, moved when
//! contention grows. Runs on the AODV crate's on-demand machinery.
//!
//! - [`packet`]: the control messages;
//! - [`select`]: path choice among collected RREQ copies;
//! - [`core`]: the state machine, sans-IO;
//! - [`config`]: parameters (the paper's Table 1).

pub mod config;
pub mod core;
pub mod packet;
pub mod select;

pub use crate::config::Config;
pub use crate::core::Copas;
