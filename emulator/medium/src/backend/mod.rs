//! The backends: how a lab's nodes are attached to the medium. Every backend
//! has the same shape, [`Backend`]: it brings the nodes of the lab up (from
//! [`nodes::NodeSpec`]s) and hands the real-time core (`realtime/`) a
//! [`Port`] through which the nodes' frames come and go. Registered here:
//!
//! - `tap/`: a TAP device per node (`meshemu-medium tap`);
//! - `hwsim/`: a mac80211_hwsim radio per node, the kernel's 802.11 stack in
//!   the nodes (`meshemu-medium hwsim`).
//!
//! `nodes.rs` is what both share to bring nodes up.

pub mod hwsim;
pub mod nodes;
pub mod tap;

use anyhow::Context;
use meshemu_model::Medium;

use self::nodes::NodeSpec;
use crate::config::LabConfig;
use crate::control::MAX_CLIENTS;
use crate::realtime::{self, Port, Service};

pub use self::hwsim::Hwsim;
pub use self::tap::Tap;

/// One way of attaching the nodes to the medium.
pub trait Backend {
    type Port: Port;
    /// Brings the nodes of `specs` up and attaches them to the medium;
    /// returns the port and each node's network namespace inode, in node
    /// order. On failure nothing it made is left; dropping the port takes
    /// the nodes down.
    fn attach(&self, config: &LabConfig, specs: &[NodeSpec]) -> anyhow::Result<(Self::Port, Vec<u64>)>;
}

/// Brings the lab of `config` up on `backend`, prints the ready line, runs
/// until SIGTERM, SIGINT, SIGHUP or a `shutdown` request, and takes the lab
/// down. Errors during bring-up leave nothing behind.
pub fn run<B: Backend>(config: LabConfig, backend: &B) -> anyhow::Result<()> {
    raise_open_file_limit(config.nodes.len())?;
    realtime::block_exit_signals()?;
    let lab = Lab::bring_up(config, backend)?;
    realtime::run(lab.port, lab.service)
}

/// Everything a running lab holds. Field order is teardown order: the nodes
/// first, then links and socket.
pub struct Lab<P: Port> {
    port: P,
    service: Service<P::Payload>,
}

impl<P: Port> Lab<P> {
    /// The model, the nodes (by `backend`, with static routes when asked
    /// for), then what [`Service::bring_up`] makes; undone on failure.
    pub fn bring_up<B: Backend<Port = P>>(config: LabConfig, backend: &B) -> anyhow::Result<Self> {
        let mut medium = Medium::new(config.medium.clone()).context("medium")?;
        if config.hold_mobility {
            for node in 0..config.nodes.len() {
                medium.pause_mobility(0, node);
            }
        }
        let links_at_start = medium.links(0);
        let specs = nodes::node_specs(&config, &links_at_start);
        let (port, inodes) = backend.attach(&config, &specs)?;
        // On failure `port` is dropped here, which takes the nodes down.
        let service = Service::bring_up(config, medium, links_at_start, &inodes)?;
        Ok(Lab { port, service })
    }
}

/// A lab holds a descriptor per node and one per control client: more than
/// Debian's default soft limit of 1024 for 1000 nodes, or for 800 with as
/// many clients as the medium serves. As root it may raise the hard limit too.
fn raise_open_file_limit(nodes: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let needed = (nodes + MAX_CLIENTS + 64) as u64;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading the open-file limit")?;
    if soft >= needed {
        return Ok(());
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed, hard.max(needed)).with_context(|| {
        format!("a lab of {nodes} nodes needs {needed} open files, the limit is {soft} (hard {hard}) and cannot be raised")
    })
}
