//! COPAS routing daemon.

pub mod packet;
