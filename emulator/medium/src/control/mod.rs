//! The control socket (emulator/README.md section 6): the requests' wire
//! format (`request.rs`), one client's connection (`connection.rs`) and the
//! listening socket with its clients (`server.rs`). What each request does to
//! a running lab is `realtime/requests.rs`.

mod connection;
mod request;
mod server;

pub use request::{error_reply, parse_request, EventKind, Request};
pub use server::{ControlServer, MAX_CLIENTS};
