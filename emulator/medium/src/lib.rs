//! The meshemu medium process (emulator/README.md sections 2–7): runs
//! `meshemu-model` against virtual time (`sim`, in the model crate) or
//! against real time (`realtime/`), with the nodes in network namespaces
//! attached by a backend (`backend/`: TAP devices or mac80211_hwsim radios)
//! and the control plane served over a socket (`control/`).

pub mod backend;
pub mod config;
pub mod control;
pub mod files;
pub mod lateness;
pub mod netlink;
pub mod netns;
pub mod pcap;
pub mod realtime;
pub mod routes;
