//! The event loop: one thread that sleeps in epoll until the model's next
//! event, a frame from the port, a control client or an exit signal; then
//! runs everything due in order, reads the port (at most
//! [`MAX_READS_PER_WAKEUP`] frames per token per wake-up, the rest on the next
//! turn), carries out what the model did at once, answers the control
//! requests and republishes the statistics of the nodes the model touched.

use std::io::{self, Write};

use anyhow::Context;
use meshemu_model::{Action, LinkInfo, Medium, Time, TxOutcome};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde::Serialize;
use serde_json::json;

use super::capture::Capture;
use super::nodes::Nodes;
use super::requests;
use super::stats::StatsPages;
use super::timer::{self, Clock, DeadlineTimer};
use super::{exit_signals, Delivery, Lateness, Port, Service, TOKEN_CLIENT_BASE};
use crate::control::{error_reply, ControlServer, EventKind};

/// Frames read under one port token per wake-up: bounds how long one flooding
/// node can hold the loop; level-triggered epoll brings us back at once for the rest.
const MAX_READS_PER_WAKEUP: usize = 256;

const TOKEN_TIMER: u64 = u64::MAX;
const TOKEN_SIGNAL: u64 = u64::MAX - 1;
const TOKEN_LISTENER: u64 = u64::MAX - 2;

/// The line that tells the control plane the lab is up (section 4).
#[derive(Serialize)]
struct ReadyLine<'a> {
    ready: bool,
    pid: u32,
    links: &'a [LinkInfo],
}

/// The loop and what it serves. Field order is teardown order: the port (the
/// nodes' side) first, then the links and the socket.
pub struct EventLoop<T: Port> {
    port: Capture<T>,
    stats: StatsPages,
    control: ControlServer,
    medium: Medium<T::Payload>,
    lab: String,
    links_at_start: Vec<LinkInfo>,
    nodes: Nodes,
    epoll: Epoll,
    timer: DeadlineTimer,
    signals: SignalFd,
    clock: Clock,
    lateness: Lateness,
    /// The model's actions not carried out yet.
    actions: Vec<Action<T::Payload>>,
    /// Deliveries the nodes' side refused (`tap_write_errors` in status).
    delivery_errors: u64,
    shutdown: bool,
}

impl<T: Port> EventLoop<T> {
    pub fn new(port: T, lab: Service<T::Payload>) -> anyhow::Result<Self> {
        let Service { stats, control, medium, config, links_at_start } = lab;
        let nodes = Nodes::new(&config.medium);
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll")?;
        port.register(&epoll)?;
        let timer = DeadlineTimer::new(config.realtime.spin_ns)?;
        epoll.add(timer.fd(), EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_TIMER))?;
        let signals = SignalFd::with_flags(&exit_signals(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("signalfd")?;
        epoll.add(&signals, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_SIGNAL))?;
        epoll.add(control.listener(), EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LISTENER))?;
        let sched_fifo = timer::set_up_thread(config.realtime.sched_fifo)?;
        Ok(EventLoop {
            port: Capture::new(port, nodes.macs.clone()),
            stats,
            control,
            medium,
            lab: config.lab,
            links_at_start,
            nodes,
            epoll,
            timer,
            signals,
            clock: Clock::default(),
            lateness: Lateness { sched_fifo, ..Lateness::default() },
            actions: Vec::new(),
            delivery_errors: 0,
            shutdown: false,
        })
    }

    /// Prints the ready line (model time 0) and runs until told to stop.
    pub fn run(&mut self) -> anyhow::Result<()> {
        // Serialized first and written at once: a large lab's line is
        // megabytes (its links), and the control plane reads the file as it
        // grows.
        let ready = ReadyLine { ready: true, pid: std::process::id(), links: &self.links_at_start };
        let mut line = serde_json::to_vec(&ready).context("serializing the ready line")?;
        line.push(b'\n');
        self.clock.start();
        let mut stdout = io::stdout().lock();
        // The control plane may not read our stdout at all; a failure to
        // print is not a reason to stop the lab.
        let _ = stdout.write_all(&line).and_then(|_| stdout.flush());
        drop(stdout);

        let mut events = vec![EpollEvent::empty(); 64 + self.nodes.len()];
        loop {
            let next_event = self.medium.poll_timeout();
            let polling = self.timer.is_close(next_event, self.clock.now());
            if !polling {
                self.timer.arm(&self.clock, next_event)?;
            }
            // Clients with requests still queued are served on the next turn, after the model.
            let wait =
                if polling || self.control.has_requests() { EpollTimeout::ZERO } else { EpollTimeout::NONE };
            let count = match self.epoll.wait(&mut events, wait) {
                Ok(count) => count,
                Err(Errno::EINTR) => 0,
                Err(e) => return Err(e).context("epoll_wait"),
            };
            let woke = self.clock.now();
            self.advance(woke);
            for event in &events[..count] {
                match event.data() {
                    TOKEN_TIMER => {
                        if let Some(deadline) = self.timer.expired() {
                            self.lateness.timer_wakeup.record(woke.saturating_sub(deadline));
                        }
                    }
                    TOKEN_SIGNAL => {
                        if let Ok(Some(info)) = self.signals.read_signal() {
                            let name = Signal::try_from(info.ssi_signo as i32).map_or("?", |s| s.as_str());
                            eprintln!("meshemu-medium: {name}: taking lab {} down", self.lab);
                            self.shutdown = true;
                        }
                    }
                    TOKEN_LISTENER => self.control.accept(&self.epoll),
                    client if client >= TOKEN_CLIENT_BASE => {
                        self.control.mark_readable(client);
                        self.serve_client(client);
                    }
                    token => self.read_port(token),
                }
            }
            for client in self.control.clients_with_requests() {
                self.serve_client(client);
            }
            let now = self.clock.now();
            self.advance(now);
            self.stats.publish(&mut self.medium, &self.nodes.macs, now);
            self.control.flush(&self.epoll);
            if self.port.flush_if_due(self.clock.now()) {
                self.medium.set_air_capture(false);
            }
            if self.shutdown {
                return Ok(());
            }
        }
    }

    /// Ends a running capture.
    pub fn stop_capture(&mut self) {
        if self.port.stop().is_some() {
            self.medium.set_air_capture(false);
        }
    }

    fn advance(&mut self, now: Time) {
        self.medium.handle_timeout(now, &mut self.actions);
        self.carry_out_actions();
    }

    fn read_port(&mut self, token: u64) {
        for _ in 0..MAX_READS_PER_WAKEUP {
            let Some(inbound) = self.port.read_frame(token) else {
                break;
            };
            let now = self.clock.now();
            self.medium.send_mpdu(now, inbound.node, inbound.frame, inbound.mpdu_bytes, &mut self.actions);
            self.carry_out_actions();
        }
    }

    /// Answers one request of the client: one per turn of the loop, so that
    /// a client sending many delays the lab's events by one answer at a time.
    fn serve_client(&mut self, client: u64) {
        let Some(request) = self.control.next_request(client) else {
            self.control.flush_client(client, &self.epoll);
            return;
        };
        let reply = match request {
            Ok(request) => {
                let lab = requests::Lab {
                    name: &self.lab,
                    now: self.clock.now(),
                    medium: &mut self.medium,
                    nodes: &mut self.nodes,
                    capture: &mut self.port,
                    control: &mut self.control,
                    lateness: &self.lateness,
                    delivery_errors: self.delivery_errors,
                    actions: &mut self.actions,
                    shutdown: &mut self.shutdown,
                };
                requests::handle(lab, client, request)
            }
            Err(message) => error_reply(message),
        };
        self.carry_out_actions();
        self.control.reply(client, &reply, &self.epoll);
    }

    fn carry_out_actions(&mut self) {
        let mut actions = std::mem::take(&mut self.actions);
        for action in actions.drain(..) {
            let now = self.clock.now();
            match action {
                Action::Deliver { time, node, from, payload, len, rx_power_dbm, sinr_db, overheard } => {
                    if !self.port.deliver(Delivery { node, from, payload: &payload, rx_power_dbm }) {
                        self.delivery_errors += 1;
                    }
                    self.lateness.actions.record(now.saturating_sub(time));
                    if self.control.wants(EventKind::Rx) {
                        let event = json!({"event": "rx", "time_ns": time, "node": self.nodes.names[node],
                            "from": self.nodes.names[from], "len": len, "rx_power_dbm": rx_power_dbm,
                            "sinr_db": sinr_db, "overheard": overheard});
                        self.control.publish(EventKind::Rx, &event);
                    }
                }
                Action::TxDone { time, node, payload, outcome } => {
                    self.port.tx_done(&self.medium, node, &payload, &outcome);
                    self.lateness.actions.record(now.saturating_sub(time));
                    let kind = match outcome {
                        TxOutcome::Acked { .. } | TxOutcome::Broadcast => EventKind::Tx,
                        TxOutcome::RetryDrop { .. } | TxOutcome::QueueDrop | TxOutcome::LinkDrop => EventKind::Drop,
                    };
                    if self.control.wants(kind) {
                        let event = json!({"event": if kind == EventKind::Tx { "tx" } else { "drop" },
                            "time_ns": time, "node": self.nodes.names[node],
                            "len": T::network_len(&payload), "outcome": outcome});
                        self.control.publish(kind, &event);
                    }
                }
                Action::Air { time, node, frame } => {
                    self.lateness.actions.record(now.saturating_sub(time));
                    if self.port.record(time, &frame, &self.nodes.radios[node]) {
                        self.medium.set_air_capture(false);
                    }
                }
            }
        }
        self.actions = actions;
    }
}
