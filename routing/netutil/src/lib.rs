//! Linux networking pieces the routing daemons share, with no loop of their
//! own: each daemon (aodvd and copasd through `meshemu-ondemand`, bpd)
//! polls the descriptors in its own event loop.
//!
//! - [`nfqueue`]: an NFQUEUE client: bind a queue, read queued packets in
//!   batches, send verdicts (with a new mark if asked), several per system call;
//! - [`iptables`]: rules as argument lists for the iptables program, added
//!   and deleted (never through a shell);
//! - [`rtnetlink`]: requests and dumps on an rtnetlink socket, and the
//!   messages of its notifications;
//! - [`ipv4`]: the IPv4 header fields a daemon reads, from untrusted bytes.

pub mod iptables;
pub mod ipv4;
pub mod nfqueue;
pub mod rtnetlink;
