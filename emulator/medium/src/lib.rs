//! The meshemu medium process (emulator/README.md sections 2–6): the drivers
//! that run `meshemu-model` against virtual time (`sim`) or against real
//! time and TAP devices (`tap`) or mac80211_hwsim radios (`hwsim`) in
//! network namespaces.

pub mod bringup;
pub mod config;
pub mod control;
pub mod files;
pub mod frame;
pub mod hwsim;
pub mod lateness;
pub mod netlink;
pub mod netns;
pub mod pcap;
pub mod realtime;
pub mod routes;
pub mod tap;
