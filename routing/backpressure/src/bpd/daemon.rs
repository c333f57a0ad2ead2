//! The event loop around the scheduler: one thread, epoll over the NFQUEUE
//! socket, the packet socket (overhearing), the beacon socket, route and
//! neighbour notifications, the radio helper's eventfd, a timerfd for the
//! scheduler's deadlines and periodic work, and a signalfd.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use meshemu_backpressure::beacon::Beacon;
use meshemu_backpressure::downstream::Knowledge;
use meshemu_backpressure::flow::{classify, global_key, PreviousHop};
use meshemu_backpressure::histogram::{Histogram, HistogramReport};
use meshemu_backpressure::packet::fingerprint;
use meshemu_backpressure::scheduler::{Arrival, Decision, FlowReport, Mode, Scheduler, Totals, Verdict};
use meshemu_backpressure::Time;
use meshemu_netutil::ipv4::parse_ipv4;
use meshemu_netutil::nfqueue::{self, NfQueue};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId as Clock};
use serde::Serialize;

use crate::cli::{Args, RadioSource, Settings};
use crate::iptables::{self, InstalledRule};
use crate::oracle::Oracle;
use crate::overhear::Overhear;
use crate::radio::Radio;
use crate::routes::{Route, Routes};

const TOKEN_QUEUE: u64 = 0;
const TOKEN_OVERHEAR: u64 = 1;
const TOKEN_BEACON: u64 = 2;
const TOKEN_ROUTES: u64 = 3;
const TOKEN_RADIO: u64 = 4;
const TOKEN_TIMER: u64 = 5;
const TOKEN_SIGNAL: u64 = 6;
const TOKEN_REPORT: u64 = 7;
/// The queue is read at most this many times per turn, so other sources get their turn.
const RECEIVES_PER_TURN: usize = 16;
/// Bytes of each packet the kernel copies to us: the IPv4 header with options and a UDP port.
const COPY_RANGE: u32 = 80;
/// The counters file is written at most this often, and only when it changed.
const REPORT_EVERY: Time = 1_000_000_000;

/// A queued packet taken out of the receive buffer: id, source MAC, first bytes and their length.
type CopiedPacket = (u32, Option<[u8; 6]>, [u8; COPY_RANGE as usize], usize);

/// Signals that stop the daemon cleanly.
pub fn exit_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(signal);
    }
    set
}

fn monotonic_ns() -> Time {
    let now = clock_gettime(Clock::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always available");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

/// The interface's first IPv4 address.
fn interface_address(interface: &str) -> anyhow::Result<Ipv4Addr> {
    let addresses = nix::ifaddrs::getifaddrs().context("listing interface addresses")?;
    for entry in addresses {
        if entry.interface_name != interface {
            continue;
        }
        if let Some(address) = entry.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
            return Ok(address.ip());
        }
    }
    bail!("interface {interface} has no IPv4 address (or does not exist): give --address")
}

#[derive(Debug, Default, Serialize)]
struct BeaconCounters {
    sent: u64,
    send_errors: u64,
    received: u64,
    rejected: u64,
}

#[derive(Debug, Default, Serialize)]
struct IoCounters {
    receive_batches: u64,
    overruns: u64,
    unexpected_messages: u64,
    verdict_send_errors: u64,
    route_lookups: u64,
    route_errors: u64,
    radio_waits: u64,
    /// Overheard frames from a MAC address not in the neighbour table.
    overheard_unknown_transmitter: u64,
    overheard_malformed: u64,
}

/// The counters file: when it was written, and what changes only with events.
#[derive(Serialize)]
struct Report<'a> {
    uptime_ns: Time,
    #[serde(flatten)]
    status: Status<'a>,
}

#[derive(Serialize)]
struct Status<'a> {
    node: Ipv4Addr,
    interface: &'a str,
    mode: &'static str,
    classify: &'static str,
    threshold: Option<u32>,
    per_flow_limit: u32,
    knowledge: Option<&'static str>,
    /// False in the file written at exit.
    running: bool,
    held: u32,
    totals: &'a Totals,
    /// Packets passed unqueued because they were not well-formed IPv4, by reason.
    malformed: &'a BTreeMap<&'static str, u64>,
    flows: Vec<FlowReport>,
    downstream: &'a meshemu_backpressure::downstream::DownstreamCounters,
    beacons: &'a BeaconCounters,
    io: &'a IoCounters,
    /// Time spent per packet from reading its header to its queueing decision.
    processing: HistogramReport,
}

pub struct Daemon {
    scheduler: Scheduler,
    settings: Settings,
    interface: String,
    own: Ipv4Addr,
    bypass_ports: Vec<u16>,
    batch: usize,
    oracle_poll: Time,
    beacon_port: u16,
    counters_path: Option<PathBuf>,
    queue: NfQueue,
    routes: Routes,
    radio: Option<Radio>,
    overhear: Option<Overhear>,
    beacons: Option<UdpSocket>,
    oracle: Option<Oracle>,
    rule: Option<InstalledRule>,
    epoll: Epoll,
    timer: TimerFd,
    /// Fires when the counters file may be rewritten (armed after events only).
    report_timer: TimerFd,
    signals: SignalFd,
    decisions: Vec<Decision>,
    started: Time,
    /// Something happened since the report was last armed: the counters may have changed.
    changed: bool,
    report_armed: bool,
    last_report: Option<Time>,
    /// The status last written (JSON without the time of writing).
    written: Option<Vec<u8>>,
    next_beacon: Option<Time>,
    beacon_sequence: u32,
    malformed: BTreeMap<&'static str, u64>,
    beacon_counters: BeaconCounters,
    io: IoCounters,
    processing: Histogram,
}

impl Daemon {
    /// Opens everything; the caller has blocked the exit signals in every thread.
    pub fn new(args: &Args) -> anyhow::Result<Daemon> {
        let settings = args.settings()?;
        let scheduler = Scheduler::new(settings.scheduler.clone()).context("bad queueing options")?;
        let own = match args.address {
            Some(address) => address,
            None => interface_address(&args.interface)?,
        };
        let ifindex = nix::net::if_::if_nametoindex(args.interface.as_str())
            .with_context(|| format!("interface {}", args.interface))?;
        let backpressure = matches!(settings.scheduler.mode, Mode::Backpressure { .. });
        let knowledge = settings.scheduler.knowledge;
        let radio = match &settings.radio {
            RadioSource::OwnPage => Some(Radio::open(None)?),
            RadioSource::Page(path) => Some(Radio::open(Some(path))?),
            RadioSource::None => None,
        };
        let overhear = (backpressure && knowledge == Knowledge::Overhear)
            .then(|| Overhear::open(ifindex))
            .transpose()
            .context("opening the packet socket for overhearing")?;
        let use_beacons = backpressure && knowledge != Knowledge::Oracle && settings.beacon_period.is_some();
        let beacons = use_beacons
            .then(|| beacon_socket(&args.interface, args.beacon_port))
            .transpose()
            .with_context(|| format!("beacon socket on UDP port {}", args.beacon_port))?;
        let oracle = match (&args.oracle, backpressure && knowledge == Knowledge::Oracle) {
            (Some(path), true) => Some(Oracle::open(path, own)?),
            _ => None,
        };
        let queue = NfQueue::open(args.queue_num, COPY_RANGE, settings.queue_maxlen, Some(8 << 20))
            .context("opening NFQUEUE (is another daemon using this --queue-num?)")?;
        let routes = Routes::open().context("opening rtnetlink")?;
        let rule = match args.iptables {
            crate::cli::IptablesArg::Auto => Some(InstalledRule::add(iptables::rule(&args.interface, args.queue_num))?),
            crate::cli::IptablesArg::None => None,
        };

        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll")?;
        let timer = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        let report_timer = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        let signals = SignalFd::with_flags(&exit_signals(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        let watch = |token| EpollEvent::new(EpollFlags::EPOLLIN, token);
        epoll.add(queue.as_fd(), watch(TOKEN_QUEUE))?;
        epoll.add(routes.events_fd(), watch(TOKEN_ROUTES))?;
        epoll.add(&timer, watch(TOKEN_TIMER))?;
        epoll.add(&report_timer, watch(TOKEN_REPORT))?;
        epoll.add(&signals, watch(TOKEN_SIGNAL))?;
        if let Some(overhear) = &overhear {
            epoll.add(overhear.as_fd(), watch(TOKEN_OVERHEAR))?;
        }
        if let Some(socket) = &beacons {
            epoll.add(socket.as_fd(), watch(TOKEN_BEACON))?;
        }
        if let Some(radio) = &radio {
            epoll.add(radio.wake_fd(), watch(TOKEN_RADIO))?;
        }
        // Timely wake-ups for the scheduler's deadlines (MACHINE-NOTES: 50 µs default slack).
        nix::sys::prctl::set_timerslack(1).context("setting the timer slack")?;

        let mut bypass_ports = args.bypass_udp_ports.clone();
        bypass_ports.push(args.beacon_port);
        let started = monotonic_ns();
        Ok(Daemon {
            next_beacon: beacons.as_ref().map(|_| started),
            scheduler,
            interface: args.interface.clone(),
            own,
            bypass_ports,
            batch: args.batch,
            oracle_poll: args.oracle_poll.as_nanos() as u64,
            beacon_port: args.beacon_port,
            counters_path: args.counters.clone(),
            settings,
            queue,
            routes,
            radio,
            overhear,
            beacons,
            oracle,
            rule,
            epoll,
            timer,
            report_timer,
            signals,
            decisions: Vec::new(),
            started,
            changed: true,
            report_armed: false,
            last_report: None,
            written: None,
            beacon_sequence: 0,
            malformed: BTreeMap::new(),
            beacon_counters: BeaconCounters::default(),
            io: IoCounters::default(),
            processing: Histogram::default(),
        })
    }

    /// Runs until a signal; then every held packet gets its verdict, the rule
    /// goes, and the counters are written a last time.
    pub fn run(&mut self) -> anyhow::Result<()> {
        let mut events = vec![EpollEvent::empty(); 16];
        // The first turn arms the first report (the control plane waits for the file).
        let outcome = self.turn(false).and_then(|()| loop {
            if let Err(e) = self.arm_timer() {
                break Err(e);
            }
            let count = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(count) => count,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(e) => break Err(anyhow::Error::new(e).context("epoll_wait")),
            };
            let mut stop = false;
            let mut report_due = false;
            self.refresh_radio()?;
            for event in &events[..count] {
                self.changed |= event.data() != TOKEN_REPORT;
                let handled = match event.data() {
                    TOKEN_QUEUE => self.read_queue(),
                    TOKEN_OVERHEAR => self.read_overheard(),
                    TOKEN_BEACON => self.read_beacons(),
                    TOKEN_ROUTES => self.routes.handle_events().context("route notifications"),
                    TOKEN_RADIO => {
                        if let Some(radio) = &self.radio {
                            radio.acknowledge();
                        }
                        Ok(())
                    }
                    TOKEN_TIMER => {
                        let mut expirations = [0u8; 8];
                        let _ = nix::unistd::read(self.timer.as_fd(), &mut expirations);
                        Ok(())
                    }
                    TOKEN_REPORT => {
                        let mut expirations = [0u8; 8];
                        let _ = nix::unistd::read(self.report_timer.as_fd(), &mut expirations);
                        report_due = true;
                        Ok(())
                    }
                    TOKEN_SIGNAL => {
                        if let Ok(Some(info)) = self.signals.read_signal() {
                            let name = Signal::try_from(info.ssi_signo as i32).map_or("?", |s| s.as_str());
                            eprintln!("bpd: {name}: stopping");
                        }
                        stop = true;
                        Ok(())
                    }
                    _ => Ok(()),
                };
                if let Err(e) = handled {
                    eprintln!("bpd: {e:#}");
                }
            }
            if let Err(e) = self.turn(report_due) {
                break Err(e);
            }
            if stop {
                break Ok(());
            }
        });
        let stopped = self.stop();
        outcome.and(stopped)
    }

    /// Everything that follows the events of one wake-up.
    fn turn(&mut self, report_due: bool) -> anyhow::Result<()> {
        let now = monotonic_ns();
        self.refresh_radio()?;
        self.consult_oracle(now);
        self.scheduler.handle_timeout(now, &mut self.decisions);
        self.send_verdicts(true);
        if let (Some(radio), true) = (self.radio.as_mut(), self.scheduler.wants_radio_updates()) {
            let (completed, _) = radio.read()?;
            radio.wake_when_completed_changes(completed);
            self.io.radio_waits = radio.waits;
        }
        if let Some(oracle) = &mut self.oracle {
            oracle.write(&self.scheduler.advertisement());
        }
        if self.next_beacon.is_some_and(|at| now >= at) {
            self.send_beacon();
            self.next_beacon = self.settings.beacon_period.map(|period| now + period.as_nanos() as u64);
        }
        if report_due {
            self.report_armed = false;
            self.last_report = Some(now);
            self.write_counters(now, true);
        }
        if self.changed && !self.report_armed {
            // Events after this are seen by the next report.
            self.changed = false;
            self.report_armed = true;
            let at = self.last_report.map_or(now, |last| (last + REPORT_EVERY).max(now)).max(now + 1);
            self.report_timer.set(Expiration::OneShot(abs_time(at)), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
        }
        Ok(())
    }

    fn refresh_radio(&mut self) -> anyhow::Result<()> {
        if let Some(radio) = &self.radio {
            let (completed, queue_len) = radio.read()?;
            self.scheduler.handle_radio(monotonic_ns(), completed, queue_len, &mut self.decisions);
        }
        Ok(())
    }

    /// Oracle knowledge: fresh queue lengths of the next hops that decide the next releases.
    fn consult_oracle(&mut self, now: Time) {
        let Some(oracle) = &mut self.oracle else { return };
        for (neighbour, flow) in self.scheduler.downstream_wanted() {
            let length = oracle.read(neighbour, flow);
            self.scheduler.handle_report(now, neighbour, &[(flow, length)], false, &mut self.decisions);
        }
    }

    fn arm_timer(&mut self) -> anyhow::Result<()> {
        let now = monotonic_ns();
        let oracle_poll = (self.oracle.is_some() && !self.scheduler.downstream_wanted().is_empty())
            .then_some(now + self.oracle_poll);
        let due = [self.scheduler.poll_timeout(), self.next_beacon, oracle_poll].into_iter().flatten().min();
        match due {
            Some(due) => {
                let at = abs_time(due.max(now + 1));
                self.timer.set(Expiration::OneShot(at), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
            }
            None => self.timer.unset()?,
        }
        Ok(())
    }

    fn read_queue(&mut self) -> anyhow::Result<()> {
        for _ in 0..RECEIVES_PER_TURN {
            if !self.queue.receive().context("reading NFQUEUE")? {
                break;
            }
            self.io.receive_batches += 1;
            // Copied out of the receive buffer so each can be handled with the rest of self.
            let packets: Vec<CopiedPacket> = self
                .queue
                .packets()
                .iter()
                .map(|p| {
                    let mut head = [0u8; COPY_RANGE as usize];
                    let length = p.payload.len().min(head.len());
                    head[..length].copy_from_slice(&p.payload[..length]);
                    (p.id, p.source_mac, head, length)
                })
                .collect();
            for (id, source_mac, head, length) in packets {
                let started = Instant::now();
                self.handle_packet(id, source_mac, &head[..length]);
                self.processing.record(started.elapsed().as_nanos() as u64);
                if self.batch == 1 {
                    self.send_verdicts(true);
                }
            }
            self.send_verdicts(false);
        }
        self.io.overruns = self.queue.overruns;
        self.io.unexpected_messages = self.queue.unexpected_messages;
        Ok(())
    }

    fn handle_packet(&mut self, id: u32, source_mac: Option<[u8; 6]>, head: &[u8]) {
        let header = match parse_ipv4(head) {
            Ok(header) => header,
            Err(problem) => {
                *self.malformed.entry(problem.name()).or_default() += 1;
                return self.scheduler.handle_bypass(id, &mut self.decisions);
            }
        };
        if header.udp_destination_port.is_some_and(|port| self.bypass_ports.contains(&port)) {
            return self.scheduler.handle_bypass(id, &mut self.decisions);
        }
        let lookups_before = self.routes.lookups;
        let route = self.routes.route(header.destination);
        self.io.route_lookups += self.routes.lookups - lookups_before;
        let next_hop = match route {
            Ok(Route::Unicast { next_hop }) => next_hop,
            Ok(Route::Other) => return self.scheduler.handle_bypass(id, &mut self.decisions),
            Err(e) => {
                self.io.route_errors += 1;
                if self.io.route_errors == 1 {
                    eprintln!("bpd: route lookup for {}: {e}", header.destination);
                }
                return self.scheduler.handle_bypass(id, &mut self.decisions);
            }
        };
        let previous_hop = match source_mac {
            None => PreviousHop::Local,
            Some(mac) => self.routes.neighbour(&mac).map_or(PreviousHop::UnknownMac(mac), PreviousHop::Neighbour),
        };
        let flow = classify(self.settings.scheduler.classify, &header, next_hop, previous_hop, self.own);
        let arrival = Arrival { id, flow, next_hop, next_hop_forwards: next_hop != header.destination };
        self.scheduler.handle_arrival(monotonic_ns(), arrival, &mut self.decisions);
    }

    fn read_overheard(&mut self) -> anyhow::Result<()> {
        let classify_by = self.settings.scheduler.classify;
        let Some(overhear) = &mut self.overhear else { return Ok(()) };
        while let Some(heard) = overhear.next().context("reading overheard frames")? {
            let Some(neighbour) = self.routes.neighbour(&heard.transmitter) else {
                self.io.overheard_unknown_transmitter += 1;
                continue;
            };
            let Some(flow) = parse_ipv4(heard.packet).ok().and_then(|header| global_key(classify_by, &header)) else {
                self.io.overheard_malformed += 1;
                continue;
            };
            let print = fingerprint(heard.packet);
            self.scheduler.handle_overheard(monotonic_ns(), neighbour, flow, print, &mut self.decisions);
        }
        Ok(())
    }

    fn read_beacons(&mut self) -> anyhow::Result<()> {
        let Some(socket) = &self.beacons else { return Ok(()) };
        let mut buffer = [0u8; 2048];
        loop {
            let (size, from) = match socket.recv_from(&mut buffer) {
                Ok(received) => received,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e).context("reading beacons"),
            };
            let std::net::SocketAddr::V4(from) = from else { continue };
            if *from.ip() == self.own {
                continue; // our own broadcast, looped back
            }
            match Beacon::decode(&buffer[..size]) {
                Ok(beacon) => {
                    self.beacon_counters.received += 1;
                    let now = monotonic_ns();
                    self.scheduler.handle_report(now, *from.ip(), &beacon.flows(), beacon.complete, &mut self.decisions);
                }
                Err(_) => self.beacon_counters.rejected += 1,
            }
        }
    }

    fn send_beacon(&mut self) {
        let Some(socket) = &self.beacons else { return };
        self.beacon_sequence = self.beacon_sequence.wrapping_add(1);
        let beacon = Beacon::from_advertisement(self.beacon_sequence, &self.scheduler.advertisement());
        let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, self.beacon_port);
        match socket.send_to(&beacon.encode(), to) {
            Ok(_) => self.beacon_counters.sent += 1,
            Err(_) => self.beacon_counters.send_errors += 1,
        }
    }

    /// Hands the decisions to the kernel; `flush` sends even a partial batch.
    fn send_verdicts(&mut self, flush: bool) {
        for decision in self.decisions.drain(..) {
            let verdict = if decision.verdict == Verdict::Accept { nfqueue::Verdict::Accept } else { nfqueue::Verdict::Drop };
            self.queue.verdict(decision.id, verdict, None);
            if self.queue.pending_verdicts() >= self.batch && self.queue.flush().is_err() {
                self.io.verdict_send_errors += 1;
            }
        }
        if flush && self.queue.flush().is_err() {
            self.io.verdict_send_errors += 1;
        }
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        // No new packets for us, then a verdict for every one the kernel still holds.
        drop(self.rule.take());
        while self.queue.receive().unwrap_or(false) {
            let ids: Vec<u32> = self.queue.packets().iter().map(|p| p.id).collect();
            for id in ids {
                self.scheduler.handle_bypass(id, &mut self.decisions);
            }
            self.send_verdicts(true);
        }
        let now = monotonic_ns();
        self.scheduler.shutdown(now, self.settings.exit_verdict, &mut self.decisions);
        self.send_verdicts(true);
        self.write_counters(now, false);
        Ok(())
    }

    /// Writes the counters file if what it says changed (always at exit).
    fn write_counters(&mut self, now: Time, running: bool) {
        let Some(path) = &self.counters_path else { return };
        let config = self.scheduler.config();
        let threshold = match config.mode {
            Mode::Backpressure { threshold } => Some(threshold),
            _ => None,
        };
        let status = Status {
            node: self.own,
            interface: &self.interface,
            mode: config.mode.name(),
            classify: config.classify.name(),
            threshold,
            per_flow_limit: config.per_flow_limit(),
            knowledge: threshold.map(|_| config.knowledge.name()),
            running,
            held: self.scheduler.held(),
            totals: self.scheduler.totals(),
            malformed: &self.malformed,
            flows: self.scheduler.flow_reports(now),
            downstream: self.scheduler.downstream_counters(),
            beacons: &self.beacon_counters,
            io: &self.io,
            processing: self.processing.report(),
        };
        let current = serde_json::to_vec(&status).expect("the status serializes");
        if self.written.as_ref() == Some(&current) {
            return;
        }
        let report = Report { uptime_ns: now.saturating_sub(self.started), status };
        match write_atomically(path, &report) {
            Ok(()) => self.written = Some(current),
            Err(e) => eprintln!("bpd: writing counters to {}: {e:#}", path.display()),
        }
    }
}

/// An absolute CLOCK_MONOTONIC time for a timerfd.
fn abs_time(at: Time) -> TimeSpec {
    TimeSpec::new((at / 1_000_000_000) as _, (at % 1_000_000_000) as _)
}

/// One line of JSON, in one write to a temporary file renamed over `path`.
fn write_atomically(path: &std::path::Path, report: &Report<'_>) -> anyhow::Result<()> {
    let mut text = serde_json::to_vec(report)?;
    text.push(b'\n');
    let name = path.file_name().context("the counters path names no file")?.to_string_lossy();
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&temporary, text)?;
    fs::rename(&temporary, path)?;
    Ok(())
}

/// A UDP socket for beacons on `interface` only, allowed to broadcast.
fn beacon_socket(interface: &str, port: u16) -> anyhow::Result<UdpSocket> {
    let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
    socket.set_broadcast(true)?;
    setsockopt(&socket, sockopt::BindToDevice, &std::ffi::OsString::from(interface))?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}
