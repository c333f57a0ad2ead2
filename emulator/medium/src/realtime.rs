//! The real-time part both lab drivers share (emulator/README.md sections 4–6):
//! the event loop that runs the model against the monotonic clock, the
//! statistics pages, the `/run/meshemu/by-netns` links, the control socket,
//! air capture and lateness. A driver attaches the nodes to the medium through
//! a [`Port`]: TAP devices (`tap.rs`) or mac80211_hwsim radios (`hwsim/`).

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::Context;
use meshemu_model::{
    Action, AirFrame, Dest, Frame, LinkInfo, LinkOverride, Medium, NodeId, RadioConfig, Time, TxOutcome,
};
use meshemu_radiostats::{PeerEntry, Writer, BY_NETNS_DIR, PAGE_FILE_NAME};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId as TimerClock, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId};
use serde_json::{json, Value};

use crate::config::{LabConfig, SchedFifo};
use crate::control::{self, error_reply, Connection, EventKind, Request};
use crate::lateness::Histogram;
use crate::pcap::{AirBody, AirRecord, PcapWriter};

pub const CONTROL_SOCKET: &str = "control.sock";
/// Priority of the event loop with `realtime.sched_fifo`.
const FIFO_PRIORITY: i32 = 50;
/// Frames read under one port token per wake-up: bounds how long one flooding
/// node can hold the loop; level-triggered epoll brings us back at once for the rest.
const MAX_READS_PER_WAKEUP: usize = 256;
/// A running capture is flushed to its file at least this often.
const CAPTURE_FLUSH_NS: u64 = 200_000_000;

const TOKEN_TIMER: u64 = u64::MAX;
const TOKEN_SIGNAL: u64 = u64::MAX - 1;
const TOKEN_LISTENER: u64 = u64::MAX - 2;
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

/// How a driver attaches the nodes to the medium.
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

/// Signals that end the lab cleanly.
fn exit_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(signal);
    }
    set
}

/// Runs a lab whose nodes are up: prints the ready line, serves until told to
/// stop, then drops the port (the nodes' side) before the service (links,
/// socket).
pub fn run<T: Port>(port: T, lab: Service<T::Payload>) -> anyhow::Result<()> {
    let mut driver = Driver::new(port, lab)?;
    let outcome = driver.run();
    driver.stop_capture();
    let lab_name = driver.lab.config.lab.clone();
    drop(driver);
    eprintln!("meshemu-medium: lab {lab_name} is down");
    outcome
}

/// Blocks the exit signals in the calling thread (before any other thread
/// exists, so every thread inherits the mask and the signals wait for the
/// signalfd: a SIGTERM during bring-up still ends with a clean teardown).
pub fn block_exit_signals() -> anyhow::Result<()> {
    exit_signals().thread_block().context("blocking signals")
}

/// What a running lab holds besides its nodes. Field order is teardown order.
pub struct Service<P: Clone> {
    _by_netns_links: Vec<RemoveOnDrop>,
    _socket_file: RemoveOnDrop,
    listener: UnixListener,
    pages: Vec<Writer>,
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
        let nodes_dir = config.run_dir.join("nodes");
        let n = config.nodes.len();
        let macs: Vec<[u8; 6]> = config.medium.nodes.iter().map(|node| node.mac_address.0).collect();
        let mut peers = vec![PeerEntry::default(); n];
        let mut pages = Vec::with_capacity(n);
        for (i, node) in config.medium.nodes.iter().enumerate() {
            let dir = nodes_dir.join(&node.name);
            create_dirs(&dir, 0o755)?;
            let mut page = Writer::create(&dir.join(PAGE_FILE_NAME), i as u32, n as u32)?;
            // Published once at start, so the peer table has its addresses before any traffic.
            fill_peers(&medium, i, &macs, &mut peers);
            page.update(0, medium.stats(i), &peers);
            pages.push(page);
        }
        create_dirs(Path::new(BY_NETNS_DIR), 0o755)?;
        let mut by_netns_links = Vec::with_capacity(n);
        for (node, inode) in config.medium.nodes.iter().zip(inodes) {
            let link = Path::new(BY_NETNS_DIR).join(inode.to_string());
            // A link of this inode is stale: its namespace is gone, or ours
            // could not have this inode.
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(nodes_dir.join(&node.name), &link)
                .with_context(|| format!("node {}: creating {}", node.name, link.display()))?;
            by_netns_links.push(RemoveOnDrop(link));
        }
        let socket_path = config.run_dir.join(CONTROL_SOCKET);
        let _ = fs::remove_file(&socket_path); // left by a medium that was killed
        let listener = UnixListener::bind(&socket_path)
            .with_context(|| format!("creating the control socket {}", socket_path.display()))?;
        let socket_file = RemoveOnDrop(socket_path.clone());
        fs::set_permissions(&socket_path, fs::Permissions::from_mode(0o600))
            .with_context(|| format!("chmod {}", socket_path.display()))?;
        listener.set_nonblocking(true)?;
        Ok(Service {
            _by_netns_links: by_netns_links,
            _socket_file: socket_file,
            listener,
            pages,
            medium,
            config,
            links_at_start,
        })
    }
}

/// A file or symlink removed when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.0) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!("meshemu-medium: removing {}: {e}", self.0.display());
            }
        }
    }
}

fn create_dirs(dir: &Path, mode: u32) -> anyhow::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(mode).create(dir).with_context(|| format!("creating {}", dir.display()))
}

/// Puts the calling thread under SCHED_FIFO at [`FIFO_PRIORITY`].
fn enter_sched_fifo() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: FIFO_PRIORITY };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn monotonic_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn realtime_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_REALTIME).expect("CLOCK_REALTIME");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

struct Capture {
    writer: PcapWriter<BufWriter<fs::File>>,
    path: PathBuf,
    frames: u64,
    last_flush: u64,
}

/// The event loop and what it serves. Field order is teardown order.
struct Driver<T: Port> {
    port: T,
    lab: Service<T::Payload>,
    names: Vec<String>,
    node_by_name: HashMap<String, usize>,
    macs: Vec<[u8; 6]>,
    /// Current radio of each node (set_radio changes single fields).
    radios: Vec<RadioConfig>,
    epoll: Epoll,
    timer: TimerFd,
    signals: SignalFd,
    /// Model deadline the timer is armed for.
    armed: Option<Time>,
    /// CLOCK_MONOTONIC at model time 0.
    t0: u64,
    spin_ns: u64,
    /// The event loop runs under SCHED_FIFO (reported with the lateness).
    sched_fifo: bool,
    lateness: Histogram,
    /// How late the timer woke the loop (from its armed deadline): the
    /// host's share of the lateness, without the loop's own work.
    timer_wakeup: Histogram,
    actions: Vec<Action<T::Payload>>,
    touched: Vec<usize>,
    peer_scratch: Vec<PeerEntry>,
    clients: HashMap<u64, Connection>,
    next_client: u64,
    /// Which event kinds any subscriber wants (index: EventKind as usize).
    wanted: [bool; 4],
    capture: Option<Capture>,
    /// Deliveries the nodes' side refused (`tap_write_errors` in status).
    delivery_errors: u64,
    shutdown: bool,
}

fn event_index(kind: EventKind) -> usize {
    match kind {
        EventKind::Tx => 0,
        EventKind::Rx => 1,
        EventKind::Drop => 2,
        EventKind::Move => 3,
    }
}

impl<T: Port> Driver<T> {
    fn new(port: T, lab: Service<T::Payload>) -> anyhow::Result<Self> {
        let cfg = &lab.config;
        let names: Vec<String> = cfg.medium.nodes.iter().map(|n| n.name.clone()).collect();
        let macs: Vec<[u8; 6]> = cfg.medium.nodes.iter().map(|n| n.mac_address.0).collect();
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll")?;
        port.register(&epoll)?;
        let timer = TimerFd::new(TimerClock::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)
            .context("timerfd")?;
        epoll.add(&timer, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_TIMER))?;
        let signals = SignalFd::with_flags(&exit_signals(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("signalfd")?;
        epoll.add(&signals, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_SIGNAL))?;
        epoll.add(&lab.listener, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LISTENER))?;

        // Timers of this thread fire when due, not up to 50 µs later.
        nix::sys::prctl::set_timerslack(1).context("setting the timer slack")?;
        let sched_fifo = match cfg.realtime.sched_fifo {
            SchedFifo::Off => false,
            SchedFifo::On => {
                enter_sched_fifo().context("realtime.sched_fifo on: sched_setscheduler")?;
                true
            }
            SchedFifo::Auto => match enter_sched_fifo() {
                Ok(()) => true,
                Err(e) => {
                    eprintln!("meshemu-medium: SCHED_FIFO refused ({e}); running with normal scheduling, expect late events");
                    false
                }
            },
        };
        Ok(Driver {
            node_by_name: names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect(),
            radios: cfg.medium.nodes.iter().map(|n| n.radio.clone()).collect(),
            spin_ns: cfg.realtime.spin_ns,
            sched_fifo,
            peer_scratch: vec![PeerEntry::default(); names.len()],
            names,
            macs,
            epoll,
            timer,
            signals,
            armed: None,
            t0: 0,
            lateness: Histogram::default(),
            timer_wakeup: Histogram::default(),
            actions: Vec::new(),
            touched: Vec::new(),
            clients: HashMap::new(),
            next_client: 0,
            wanted: [false; 4],
            capture: None,
            delivery_errors: 0,
            shutdown: false,
            port,
            lab,
        })
    }

    fn now(&self) -> Time {
        monotonic_ns().saturating_sub(self.t0)
    }

    fn run(&mut self) -> anyhow::Result<()> {
        self.t0 = monotonic_ns();
        let ready = json!({"ready": true, "pid": std::process::id(), "links": self.lab.links_at_start});
        let mut stdout = io::stdout().lock();
        // The control plane may not read our stdout at all; a failure to
        // print is not a reason to stop the lab.
        let _ = writeln!(stdout, "{ready}").and_then(|_| stdout.flush());
        drop(stdout);

        let mut events = vec![EpollEvent::empty(); 64 + self.names.len()];
        loop {
            self.arm_timer()?;
            // Clients with requests still queued are served on the next turn, after the model.
            let wait = if self.clients.values().any(Connection::has_requests) { EpollTimeout::ZERO } else { EpollTimeout::NONE };
            let count = match self.epoll.wait(&mut events, wait) {
                Ok(count) => count,
                Err(Errno::EINTR) => 0,
                Err(e) => return Err(e).context("epoll_wait"),
            };
            let woke = self.now();
            if let Some(deadline) = self.armed.filter(|&deadline| deadline <= woke) {
                self.timer_wakeup.record(woke - deadline);
            }
            let now = self.spin_until_due(woke);
            self.advance(now);
            for event in &events[..count] {
                match event.data() {
                    TOKEN_TIMER => {
                        let mut expirations = [0u8; 8];
                        let _ = nix::unistd::read(self.timer.as_fd(), &mut expirations);
                        self.armed = None; // spent: arm again whatever comes next
                    }
                    TOKEN_SIGNAL => {
                        if let Ok(Some(info)) = self.signals.read_signal() {
                            let name = Signal::try_from(info.ssi_signo as i32).map_or("?", |s| s.as_str());
                            eprintln!("meshemu-medium: {name}: taking lab {} down", self.lab.config.lab);
                            self.shutdown = true;
                        }
                    }
                    TOKEN_LISTENER => self.accept_clients(),
                    token if token >= TOKEN_CLIENT_BASE => {
                        let id = token - TOKEN_CLIENT_BASE;
                        if let Some(client) = self.clients.get_mut(&id) {
                            client.mark_readable();
                        }
                        self.serve_client(id);
                    }
                    token => self.read_port(token),
                }
            }
            self.serve_queued_requests();
            let now = self.now();
            self.advance(now);
            self.publish_stats(now);
            self.flush_clients();
            self.flush_capture_if_due();
            if self.shutdown {
                return Ok(());
            }
        }
    }

    /// Arms the timer for the model's next event (early by `spin_ns`).
    fn arm_timer(&mut self) -> anyhow::Result<()> {
        let deadline = self.lab.medium.next_event_time().map(|t| t.saturating_sub(self.spin_ns));
        if deadline == self.armed {
            return Ok(());
        }
        match deadline {
            Some(t) => {
                let at = self.t0 + t;
                let spec = TimeSpec::new((at / 1_000_000_000) as _, (at % 1_000_000_000) as _);
                self.timer.set(Expiration::OneShot(spec), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
            }
            None => self.timer.unset()?,
        }
        self.armed = deadline;
        Ok(())
    }

    /// With `spin_ns`, waits out the last stretch to a close deadline by spinning.
    fn spin_until_due(&self, mut now: Time) -> Time {
        if self.spin_ns == 0 {
            return now;
        }
        if let Some(next) = self.lab.medium.next_event_time() {
            if next > now && next - now <= self.spin_ns {
                while now < next {
                    std::hint::spin_loop();
                    now = self.now();
                }
            }
        }
        now
    }

    fn advance(&mut self, now: Time) {
        self.lab.medium.advance(now, &mut self.actions);
        self.carry_out_actions();
    }

    fn read_port(&mut self, token: u64) {
        for _ in 0..MAX_READS_PER_WAKEUP {
            let Some(inbound) = self.port.read_frame(token) else {
                break;
            };
            let now = self.now();
            self.lab.medium.send_mpdu(now, inbound.node, inbound.frame, inbound.mpdu_bytes, &mut self.actions);
            self.carry_out_actions();
        }
    }

    fn carry_out_actions(&mut self) {
        let mut actions = std::mem::take(&mut self.actions);
        for action in actions.drain(..) {
            let now = self.now();
            match action {
                Action::Deliver { time, node, from, payload, len, rx_power_dbm, sinr_db, overheard } => {
                    if !self.port.deliver(Delivery { node, from, payload: &payload, rx_power_dbm }) {
                        self.delivery_errors += 1;
                    }
                    self.lateness.record(now.saturating_sub(time));
                    if self.wanted[event_index(EventKind::Rx)] {
                        let event = json!({"event": "rx", "time_ns": time, "node": self.names[node],
                            "from": self.names[from], "len": len, "rx_power_dbm": rx_power_dbm,
                            "sinr_db": sinr_db, "overheard": overheard});
                        self.publish_event(EventKind::Rx, &event);
                    }
                }
                Action::TxDone { time, node, payload, outcome } => {
                    self.port.tx_done(&self.lab.medium, node, &payload, &outcome);
                    self.lateness.record(now.saturating_sub(time));
                    let kind = match outcome {
                        TxOutcome::Acked { .. } | TxOutcome::Broadcast => EventKind::Tx,
                        TxOutcome::RetryDrop { .. } | TxOutcome::QueueDrop | TxOutcome::LinkDrop => EventKind::Drop,
                    };
                    if self.wanted[event_index(kind)] {
                        let event = json!({"event": if kind == EventKind::Tx { "tx" } else { "drop" },
                            "time_ns": time, "node": self.names[node],
                            "len": T::network_len(&payload), "outcome": outcome});
                        self.publish_event(kind, &event);
                    }
                }
                Action::Air { time, node, frame } => {
                    self.lateness.record(now.saturating_sub(time));
                    self.capture_air(time, node, &frame);
                }
            }
        }
        self.actions = actions;
    }

    fn capture_air(&mut self, time: Time, node: usize, frame: &AirFrame<T::Payload>) {
        let Some(capture) = self.capture.as_mut() else {
            return;
        };
        let radio = &self.radios[node];
        let body = frame.payload.as_ref().map_or(AirBody::None, T::air_body);
        let receiver = match frame.dst {
            Dest::Node(j) => self.macs[j],
            Dest::Broadcast => [0xff; 6],
            Dest::Unknown => body.receiver(),
        };
        let record = AirRecord {
            time_ns: time,
            kind: frame.kind,
            receiver,
            transmitter: self.macs[frame.src],
            duration_us: frame.duration_us,
            retry: frame.retry,
            seq: frame.seq,
            rate_bps: frame.rate_bps,
            frequency_mhz: (radio.frequency_hz / 1e6).round().clamp(0.0, 65535.0) as u16,
            ofdm: radio.phy == meshemu_model::Phy::Ofdm,
            short_preamble: radio.preamble == meshemu_model::config::Preamble::Short,
            signal_dbm: radio.tx_power_dbm.round().clamp(-128.0, 127.0) as i8,
            body,
        };
        if let Err(e) = capture.writer.write(&record) {
            eprintln!("meshemu-medium: capture {}: {e}; capture stopped", capture.path.display());
            self.stop_capture();
            return;
        }
        capture.frames += 1;
    }

    fn flush_capture_if_due(&mut self) {
        let now = self.now();
        let Some(capture) = self.capture.as_mut() else {
            return;
        };
        if now.saturating_sub(capture.last_flush) >= CAPTURE_FLUSH_NS {
            capture.last_flush = now;
            if let Err(e) = capture.writer.flush() {
                eprintln!("meshemu-medium: capture {}: {e}; capture stopped", capture.path.display());
                self.stop_capture();
            }
        }
    }

    /// Ends a running capture; returns (path, frames written).
    fn stop_capture(&mut self) -> Option<(PathBuf, u64)> {
        let mut capture = self.capture.take()?;
        self.lab.medium.set_air_capture(false);
        if let Err(e) = capture.writer.flush() {
            eprintln!("meshemu-medium: capture {}: {e}", capture.path.display());
        }
        Some((capture.path, capture.frames))
    }

    fn publish_event(&mut self, kind: EventKind, event: &Value) {
        let mut line = serde_json::to_vec(event).expect("JSON values serialize");
        line.push(b'\n');
        for client in self.clients.values_mut() {
            if client.subscription.as_ref().is_some_and(|s| s.events.contains(&kind)) {
                client.queue_event(&line);
            }
        }
    }

    /// Writes the pages of the nodes whose statistics changed.
    fn publish_stats(&mut self, now: Time) {
        self.lab.medium.take_touched(&mut self.touched);
        for &node in &self.touched {
            let counters = *self.lab.medium.stats(node);
            fill_peers(&self.lab.medium, node, &self.macs, &mut self.peer_scratch);
            self.lab.pages[node].update(now, &counters, &self.peer_scratch);
        }
        self.touched.clear();
    }

    fn accept_clients(&mut self) {
        loop {
            let stream = match self.lab.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("meshemu-medium: accepting a control connection: {e}");
                    return;
                }
            };
            let refusal = match control::peer_is_root(&stream) {
                Ok(true) if self.clients.len() >= control::MAX_CLIENTS => {
                    Some(format!("{} control connections are open, the most served at once", control::MAX_CLIENTS))
                }
                Ok(true) => None,
                Ok(false) | Err(_) => Some("the control socket serves root only".to_owned()),
            };
            if let Some(reason) = refusal {
                if let Ok(mut refused) = Connection::new(stream) {
                    refused.queue(&error_reply(reason));
                    refused.flush();
                }
                continue;
            }
            let Ok(connection) = Connection::new(stream) else {
                continue;
            };
            let id = self.next_client;
            self.next_client += 1;
            let interest = EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
            if let Err(e) = self.epoll.add(connection.stream(), EpollEvent::new(interest, TOKEN_CLIENT_BASE + id)) {
                eprintln!("meshemu-medium: control connection: {e}");
                continue;
            }
            self.clients.insert(id, connection);
        }
    }

    /// Answers one request of the client: one per turn of the loop, so that
    /// a client sending many delays the lab's events by one answer at a time.
    fn serve_client(&mut self, id: u64) {
        let Some(line) = self.clients.get_mut(&id).and_then(Connection::next_request) else {
            self.flush_client(id);
            return;
        };
        let reply = match control::parse_request(&line) {
            Ok(request) => self.handle(id, request),
            Err(message) => error_reply(message),
        };
        if let Some(client) = self.clients.get_mut(&id) {
            client.queue(&reply);
        }
        self.flush_client(id);
    }

    fn serve_queued_requests(&mut self) {
        let ids: Vec<u64> = self.clients.iter().filter(|(_, c)| c.has_requests()).map(|(&id, _)| id).collect();
        for id in ids {
            self.serve_client(id);
        }
    }

    fn flush_clients(&mut self) {
        let ids: Vec<u64> =
            self.clients.iter().filter(|(_, c)| c.has_output() || c.is_over()).map(|(&id, _)| id).collect();
        for id in ids {
            self.flush_client(id);
        }
    }

    fn flush_client(&mut self, id: u64) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        client.flush();
        if client.is_over() {
            let client = self.clients.remove(&id).expect("present");
            let _ = self.epoll.delete(client.stream());
            self.update_wanted();
        }
    }

    fn update_wanted(&mut self) {
        self.wanted = [false; 4];
        for sub in self.clients.values().filter_map(|c| c.subscription.as_ref()) {
            for &kind in &sub.events {
                self.wanted[event_index(kind)] = true;
            }
        }
    }

    fn node(&self, name: &str) -> Result<usize, String> {
        self.node_by_name.get(name).copied().ok_or_else(|| format!("unknown node {name:?}"))
    }

    fn handle(&mut self, client: u64, request: Request) -> Value {
        match self.try_handle(client, request) {
            Ok(mut reply) => {
                reply["ok"] = json!(true);
                reply
            }
            Err(message) => error_reply(message),
        }
    }

    fn try_handle(&mut self, client: u64, request: Request) -> Result<Value, String> {
        let now = self.now();
        Ok(match request {
            Request::Status {} => {
                let drops: u64 =
                    self.clients.values().filter_map(|c| c.subscription.as_ref()).map(|s| s.dropped_total).sum();
                json!({"lab": self.lab.config.lab, "time_ns": now, "nodes": self.names.len(),
                    "lateness": self.lateness.summary(), "subscriber_drops": drops,
                    "tap_write_errors": self.delivery_errors,
                    "capture": self.capture.as_ref().map(|c| c.path.clone())})
            }
            Request::Stats { node, peers } => {
                let selected: Vec<usize> = match node {
                    Some(name) => vec![self.node(&name)?],
                    None => (0..self.names.len()).collect(),
                };
                let mut nodes = serde_json::Map::new();
                for i in selected {
                    nodes.insert(self.names[i].clone(), self.node_stats_json(i, peers));
                }
                json!({"time_ns": now, "nodes": nodes})
            }
            Request::Positions {} => {
                let nodes: serde_json::Map<String, Value> = self
                    .names
                    .iter()
                    .enumerate()
                    .map(|(i, name)| (name.clone(), json!(self.lab.medium.position(i, now))))
                    .collect();
                json!({"time_ns": now, "nodes": nodes})
            }
            Request::Links {} => {
                json!({"time_ns": now, "nodes": self.names.len(), "links": self.lab.medium.links(now)})
            }
            Request::Move { node, position } => {
                let i = self.node(&node)?;
                if let Some(k) = position.iter().position(|v| !v.is_finite()) {
                    return Err(format!("position[{k}] must be a finite number"));
                }
                self.lab.medium.set_position(now, i, position);
                if self.wanted[event_index(EventKind::Move)] {
                    let event = json!({"event": "move", "time_ns": now, "node": node, "position": position});
                    self.publish_event(EventKind::Move, &event);
                }
                json!({})
            }
            Request::SetRadio { node, radio } => {
                let i = self.node(&node)?;
                let mut merged = serde_json::to_value(&self.radios[i]).expect("radio serializes");
                for (field, value) in radio {
                    merged[field] = value;
                }
                let radio: RadioConfig = serde_path_to_error::deserialize(merged)
                    .map_err(|e| format!("radio.{}: {}", e.path(), e.inner()))?;
                self.lab.medium.set_radio(now, i, radio.clone()).map_err(|e| e.to_string())?;
                self.radios[i] = radio;
                json!({})
            }
            Request::Flush { node, to } => {
                let i = self.node(&node)?;
                let j = self.macs.iter().position(|&mac| mac == to.0).ok_or_else(|| format!("no node has address {to}"))?;
                let dropped = self.lab.medium.flush_queue(now, i, j, &mut self.actions);
                self.carry_out_actions();
                json!({"dropped": dropped})
            }
            Request::SetLink { a, b, bit_error_rate, extra_loss_db } => {
                let (ia, ib) = (self.node(&a)?, self.node(&b)?);
                if ia == ib {
                    return Err("a and b must be different nodes".into());
                }
                self.lab
                    .medium
                    .set_link(ia, ib, LinkOverride { bit_error_rate, extra_loss_db })
                    .map_err(|e| e.to_string())?;
                json!({})
            }
            Request::Mobility { node, run } => {
                let selected: Vec<usize> = match node {
                    Some(name) => vec![self.node(&name)?],
                    None => (0..self.names.len()).collect(),
                };
                for i in selected {
                    self.lab.medium.set_mobility_running(now, i, run);
                }
                json!({})
            }
            Request::Capture { path, run: true } => {
                let path = path.ok_or("capture with run true needs a path")?;
                if !path.is_absolute() {
                    return Err(format!("path {} is not absolute", path.display()));
                }
                let file = fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let epoch = realtime_ns().saturating_sub(now);
                let writer =
                    PcapWriter::new(BufWriter::new(file), epoch).map_err(|e| format!("{}: {e}", path.display()))?;
                self.stop_capture();
                self.capture = Some(Capture { writer, path: path.clone(), frames: 0, last_flush: now });
                self.lab.medium.set_air_capture(true);
                json!({"path": path})
            }
            Request::Capture { run: false, .. } => match self.stop_capture() {
                Some((path, frames)) => json!({"path": path, "frames": frames}),
                None => return Err("no capture is running".into()),
            },
            Request::Lateness {} => {
                let mut reply = serde_json::to_value(self.lateness.summary()).expect("summary serializes");
                reply["buckets"] = json!(self.lateness.buckets());
                reply["sched_fifo"] = json!(self.sched_fifo);
                reply["timer_wakeup"] = json!(self.timer_wakeup.summary());
                reply
            }
            Request::Subscribe { events } => {
                let Some(connection) = self.clients.get_mut(&client) else {
                    return Err("connection gone".into());
                };
                connection.subscription = Some(control::Subscription { events, ..Default::default() });
                self.update_wanted();
                json!({})
            }
            Request::Shutdown {} => {
                self.shutdown = true;
                json!({})
            }
        })
    }

    /// A node's counters and, with `with_peers`, the peers it exchanged
    /// frames with (a peer never heard nor sent to has nothing to say).
    fn node_stats_json(&self, node: usize, with_peers: bool) -> Value {
        let medium = &self.lab.medium;
        let mut value = serde_json::to_value(medium.stats(node)).expect("counters serialize");
        if !with_peers {
            return value;
        }
        let mut peers = vec![PeerEntry::default(); self.names.len()];
        fill_peers(medium, node, &self.macs, &mut peers);
        let peers: Vec<Value> = peers
            .iter()
            .enumerate()
            .filter(|&(j, peer)| j != node && peer.tx_acked + peer.tx_failed + peer.rx_frames > 0)
            .map(|(j, peer)| {
                let mut entry = serde_json::to_value(peer).expect("peer serializes");
                entry["node"] = json!(self.names[j]);
                entry
            })
            .collect();
        value["peers"] = json!(peers);
        value
    }
}

/// The peer table of `node` in page layout.
fn fill_peers<P: Clone>(medium: &Medium<P>, node: usize, macs: &[[u8; 6]], peers: &mut [PeerEntry]) {
    for (j, entry) in peers.iter_mut().enumerate() {
        if j == node {
            *entry = PeerEntry::default();
            continue;
        }
        let p = medium.peer_stats(node, j);
        *entry = PeerEntry {
            mac_address: macs[j],
            reserved: [0; 2],
            tx_acked: p.tx_acked,
            tx_failed: p.tx_failed,
            rx_frames: p.rx_frames,
            last_rx_power_mdbm: p.last_rx_power_mdbm,
            last_sinr_mdb: p.last_sinr_mdb,
        };
    }
}
