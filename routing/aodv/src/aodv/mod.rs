//! AODV (RFC 3561): message codec, parameters and the sans-IO protocol core.

pub mod config;
mod core;
pub mod packet;

pub use self::config::{Config, ConfigError, RepairRule, RreqBackoff};
pub use self::core::Aodv;

#[cfg(test)]
mod tests;
