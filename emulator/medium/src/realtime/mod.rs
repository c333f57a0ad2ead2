//! The real-time part both lab backends share (emulator/README.md sections
//! 4–6). A backend attaches the nodes to the medium through a [`Port`] (TAP
//! devices, `tap/`, or mac80211_hwsim radios, `hwsim/`); the rest is here:
//!
//! - `event_loop.rs`: the loop: one thread, epoll over the port, the timer,
//!   the exit signals and the control socket; runs the model and carries out
//!   what it does;
//! - `timer.rs`: model time on CLOCK_MONOTONIC, the timerfd armed for the
//!   model's next event, the final spin, SCHED_FIFO;
//! - `capture.rs`: air capture, a wrapper around the port;
//! - `requests.rs`: what each control request does (the socket is `control/`);
//! - `stats.rs`: the statistics pages and `/run/meshemu/by-netns` links;
//! - `nodes.rs`: the nodes' names, addresses and current radios.

mod capture;
mod event_loop;
mod nodes;
mod requests;
mod stats;
mod timer;

use anyhow::Context;
use meshemu_model::{Frame, LinkInfo, Medium, NodeId, TxOutcome};
use nix::sys::epoll::Epoll;
use nix::sys::signal::{SigSet, Signal};

use self::stats::StatsPages;
use crate::config::LabConfig;
use crate::control::ControlServer;
use crate::lateness::Histogram;
use crate::pcap::AirBody;

const CONTROL_SOCKET: &str = "control.sock";

/// Client connection tokens start here; a port's tokens are below.
pub const TOKEN_CLIENT_BASE: u64 = 1 << 32;

/// A frame a node handed down, as read by a port.
pub struct Inbound<P> {
    pub node: NodeId,
    pub frame: Frame<P>,
    /// Size on the air (MAC header, body, FCS).
    pub mpdu_bytes: u32,
}

/// A frame the model delivered to a node.
pub struct Delivery<'a, P> {
    pub node: NodeId,
    pub from: NodeId,
    pub payload: &'a P,
    pub rx_power_dbm: f64,
}

/// How a backend attaches the nodes to the medium.
pub trait Port {
    /// What the model carries for a frame.
    type Payload: Clone;
    /// Adds the port's file descriptors to `epoll`, with tokens below
    /// [`TOKEN_CLIENT_BASE`].
    fn register(&self, epoll: &Epoll) -> anyhow::Result<()>;
    /// The next frame readable under `token`, or `None` when there is none now.
    fn read_frame(&mut self, token: u64) -> Option<Inbound<Self::Payload>>;
    /// Hands a delivered frame to its node; false if the node's side refused it.
    fn deliver(&mut self, delivery: Delivery<'_, Self::Payload>) -> bool;
    /// The MAC of `node` is done with a frame it handed down.
    fn tx_done(&mut self, medium: &Medium<Self::Payload>, node: NodeId, payload: &Self::Payload, outcome: &TxOutcome);
    /// Network-layer bytes of a frame (the `len` of events).
    fn network_len(payload: &Self::Payload) -> usize;
    /// What an air capture shows as the body of a data frame.
    fn air_body(payload: &Self::Payload) -> AirBody<'_>;
}

/// How late the loop is (reported by `status` and `lateness`).
#[derive(Default)]
pub struct Lateness {
    /// How late each of the model's actions was carried out.
    pub actions: Histogram,
    /// How late the timer woke the loop (from its armed deadline): the
    /// host's share of the lateness, without the loop's own work.
    pub timer_wakeup: Histogram,
    /// The loop runs under SCHED_FIFO.
    pub sched_fifo: bool,
}

/// Signals that end the lab cleanly.
fn exit_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(signal);
    }
    set
}

/// Blocks the exit signals in the calling thread (before any other thread
/// exists, so every thread inherits the mask and the signals wait for the
/// signalfd: a SIGTERM during bring-up still ends with a clean teardown).
pub fn block_exit_signals() -> anyhow::Result<()> {
    exit_signals().thread_block().context("blocking signals")
}

/// Runs a lab whose nodes are up: prints the ready line, serves until told to
/// stop, then drops the port (the nodes' side) before the service (links,
/// socket).
pub fn run<T: Port>(port: T, lab: Service<T::Payload>) -> anyhow::Result<()> {
    let lab_name = lab.config.lab.clone();
    let mut event_loop = event_loop::EventLoop::new(port, lab)?;
    let outcome = event_loop.run();
    event_loop.stop_capture();
    drop(event_loop);
    eprintln!("meshemu-medium: lab {lab_name} is down");
    outcome
}

/// What a running lab holds besides its nodes. Field order is teardown order.
pub struct Service<P: Clone> {
    stats: StatsPages,
    control: ControlServer,
    pub medium: Medium<P>,
    pub config: LabConfig,
    pub links_at_start: Vec<LinkInfo>,
}

impl<P: Clone> Service<P> {
    /// Statistics pages, by-netns links (one per namespace inode, in node
    /// order) and the control socket, in that order.
    pub fn bring_up(
        config: LabConfig,
        medium: Medium<P>,
        links_at_start: Vec<LinkInfo>,
        inodes: &[u64],
    ) -> anyhow::Result<Self> {
        let stats = StatsPages::create(&config, &medium, inodes)?;
        let control = ControlServer::bind(&config.run_dir.join(CONTROL_SOCKET), TOKEN_CLIENT_BASE)?;
        Ok(Service { stats, control, medium, config, links_at_start })
    }
}
