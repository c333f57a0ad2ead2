//! The event loop: one thread polls the control socket, the NFQUEUE, a
//! signalfd, the kernel's neighbour notifications and the link layer's
//! change notifications, with the protocol's
//! next timer and the loop's own deadlines ([`crate::schedule`]: route use
//! while routes exist, link feedback after a change, the counters file
//! after it changed; [`crate::pacing`]: the next packet of a paced
//! release) as the poll timeout; with nothing to do it sleeps
//! until an event. The protocol core sees time as the monotonic clock
//! since start.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use meshemu_netutil::iptables::Rule;
use meshemu_netutil::ipv4::parse_ipv4;
use meshemu_netutil::nfqueue::{NfQueue, Verdict, HOOK_LOCAL_OUT, HOOK_PRE_ROUTING};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde::Serialize;
use tracing::{error, info, warn};

use crate::control::ControlSocket;
use crate::iptables::{self, RECENT_DESTINATIONS, RECENT_SOURCES};
use crate::link_feedback::{arp_table, LinkLayer};
use crate::pacing::Pacer;
use crate::resolution::ResolutionFailures;
use crate::route_use::{self, RecentList};
use crate::routes::{Interface, RouteTable};
use crate::schedule::{OnChange, Schedule};
use crate::{Counters, DataPath, Input, Output, Protocol};

/// Bytes of each queued packet copied to us: the IPv4 header is enough.
const COPY_RANGE: u32 = 128;
/// Packets the kernel queues for us before it drops new ones.
const QUEUE_MAX_LEN: u32 = 4096;

/// The address, prefix and index of `name`.
pub fn interface(name: &str) -> Result<Interface> {
    let index = nix::net::if_::if_nametoindex(name).with_context(|| format!("interface {name}"))?;
    let addresses = nix::ifaddrs::getifaddrs().context("listing interface addresses")?;
    for entry in addresses.filter(|a| a.interface_name == name) {
        let address = entry.address.as_ref().and_then(|a| a.as_sockaddr_in()).map(|a| a.ip());
        let mask = entry.netmask.as_ref().and_then(|a| a.as_sockaddr_in()).map(|a| u32::from(a.ip()));
        if let (Some(address), Some(mask)) = (address, mask) {
            return Ok(Interface { index, address, prefix_len: mask.count_ones() as u8 });
        }
    }
    Err(anyhow!("interface {name} has no IPv4 address"))
}

#[derive(Serialize)]
struct CountersFile<'a> {
    address: Ipv4Addr,
    uptime_ms: u64,
    /// Every control packet sent: IP bytes and packets (the routing overhead).
    overhead_bytes: u64,
    overhead_packets: u64,
    routes: usize,
    /// Times the kernel dropped queued packets for us (the NFQUEUE overran).
    queue_overruns: u64,
    /// Times neighbour notifications were lost (the table was read instead).
    neighbour_overruns: u64,
    #[serde(flatten)]
    counters: &'a Counters,
}

/// A packet in the queue waiting for a route.
struct Held {
    id: u32,
    /// Its mark when queued.
    mark: u32,
    /// Sent by this node (held in OUTPUT), or forwarded (held before routing).
    local: bool,
}

/// Everything the loop owns besides the protocol.
struct Platform {
    config: DataPath,
    interface: Interface,
    rules: Vec<Rule>,
    control: ControlSocket,
    queue: NfQueue,
    routes: RouteTable,
    /// Held packets by destination.
    held: HashMap<Ipv4Addr, Vec<Held>>,
    /// Released packets that wait for their turn (a paced release).
    paced: Pacer<Held>,
    /// The rule holding forwarded packets, by destination under repair.
    holds: BTreeMap<Ipv4Addr, Rule>,
    installed: usize,
    destinations: RecentList,
    sources: RecentList,
    /// The TTL this namespace's sources send with (hops from the destinations list's TTLs).
    default_ttl: u8,
    link_layer: Option<Box<dyn LinkLayer>>,
    resolution: ResolutionFailures,
    events: Option<File>,
    start: Instant,
    mono_at_start_ns: u64,
}

/// Sets up the data path, runs `protocol` until SIGTERM/SIGINT/SIGHUP,
/// then undoes the set-up (rules, routes; held packets are rejected).
pub fn run<P: Protocol>(
    config: DataPath,
    make_protocol: impl FnOnce(Ipv4Addr, Duration) -> P,
    link_layer: Option<Box<dyn LinkLayer>>,
) -> Result<()> {
    let interface = interface(&config.interface)?;
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGUSR1] {
        signals.add(signal);
    }
    signals.thread_block().context("blocking signals")?;
    let signal_fd = SignalFd::with_flags(&signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("creating the signalfd")?;

    let control = ControlSocket::bind(&config.interface).context("binding UDP port 654")?;
    let queue = NfQueue::open(config.queue, COPY_RANGE, QUEUE_MAX_LEN, None)?;
    let mut routes = RouteTable::open(interface).context("opening rtnetlink")?;
    let resolution = ResolutionFailures::open(interface.index).context("subscribing to neighbour changes")?;
    routes.set_quickack(config.quickack);
    let leftovers = routes.flush_host_routes()? + routes.flush_pair_routes()?;
    if leftovers > 0 {
        warn!(leftovers, "deleted host routes left by an earlier run");
    }
    let rules = iptables::rules(&config, &config.interface);
    let events = match &config.events {
        Some(path) => Some(
            OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("{}", path.display()))?,
        ),
        None => None,
    };
    let mut platform = Platform {
        interface,
        rules,
        control,
        queue,
        routes,
        held: HashMap::new(),
        paced: Pacer::default(),
        holds: BTreeMap::new(),
        installed: 0,
        destinations: RecentList::new(RECENT_DESTINATIONS),
        sources: RecentList::new(RECENT_SOURCES),
        default_ttl: route_use::default_ttl(),
        link_layer,
        resolution,
        events,
        start: Instant::now(),
        mono_at_start_ns: monotonic_ns(),
        config,
    };
    // Rules before the catch-all route: from then on, no packet leaves on it unseen.
    meshemu_netutil::iptables::add(&platform.config.iptables, &platform.rules).map_err(|e| anyhow!(e))?;
    let result = platform
        .routes
        .install_catch_all(platform.config.realm)
        .map_err(anyhow::Error::from)
        .and_then(|()| {
            let mut protocol = make_protocol(platform.interface.address, Duration::ZERO);
            info!(address = %platform.interface.address, interface = %platform.config.interface, "running");
            let outcome = platform.event_loop(&mut protocol, &signal_fd);
            platform.shut_down(&mut protocol);
            outcome
        });
    platform.restore();
    result
}

impl Platform {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn event_loop<P: Protocol>(&mut self, protocol: &mut P, signal_fd: &SignalFd) -> Result<()> {
        let millis = Duration::from_millis;
        let feedback_every = self.link_layer.is_some().then(|| millis(self.config.link_feedback_poll_ms));
        let mut schedule = Schedule::new(millis(self.config.route_use_poll_ms), feedback_every);
        let mut status = OnChange::new(millis(self.config.counters_interval_ms));
        // A link layer that cannot say when its counters change is read every interval.
        let polled_links = self.link_layer.as_ref().is_some_and(|links| links.changes().is_none());
        let mut out = Vec::new();
        loop {
            let now = self.now();
            self.track_routes(&mut schedule, now);
            let protocol_due = protocol.poll_timeout().is_some_and(|t| t <= now);
            if schedule.route_use_due(now, protocol_due) {
                schedule.route_use_read(now);
                let (used, hops) = self.route_use();
                for (dst, hops) in hops {
                    protocol.data_hops(now, dst, hops);
                }
                for addr in used {
                    protocol.handle(now, Input::RouteUsed { addr }, &mut out);
                }
            }
            if schedule.feedback_due(now) {
                schedule.feedback_read(now);
                if polled_links {
                    schedule.link_changed(now);
                }
                for input in self.link_inputs() {
                    protocol.handle(now, input, &mut out);
                }
            }
            if protocol.poll_timeout().is_some_and(|t| t <= now) {
                protocol.handle_timeout(now, &mut out);
            }
            self.carry_out(protocol, &mut out);
            for packet in self.paced.poll_due(now) {
                self.release(protocol, packet);
            }
            self.track_routes(&mut schedule, now);
            let current = self.status(protocol);
            if status.update(now, &current).is_some_and(|at| at <= now) {
                self.write_counters(protocol.counters());
                status.wrote(now, current);
            }

            let wake = schedule.wake_at(protocol.poll_timeout(), status.due());
            let timeout = match [wake, self.paced.next_due()].into_iter().flatten().min() {
                Some(wake) => PollTimeout::from(wake.saturating_sub(self.now()).as_micros().div_ceil(1000).min(60_000) as u16),
                None => PollTimeout::NONE,
            };
            let changes = match &self.link_layer {
                Some(links) if schedule.awaiting_change() => links.changes(),
                _ => None,
            };
            let mut fds = vec![
                PollFd::new(self.control.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.queue.as_fd(), PollFlags::POLLIN),
                PollFd::new(signal_fd.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.resolution.as_fd(), PollFlags::POLLIN),
            ];
            fds.extend(changes.map(|fd| PollFd::new(fd, PollFlags::POLLIN)));
            match poll(&mut fds, timeout) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(error) => return Err(error).context("poll"),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            let (control_ready, queue_ready, signal_ready) = (ready(&fds[0]), ready(&fds[1]), ready(&fds[2]));
            let neighbours_changed = ready(&fds[3]);
            let links_changed = fds.get(4).is_some_and(ready);
            drop(fds);
            if links_changed {
                schedule.link_changed(self.now());
            }
            if signal_ready {
                while let Ok(Some(info)) = signal_fd.read_signal() {
                    if info.ssi_signo == Signal::SIGUSR1 as u32 {
                        let current = self.status(protocol);
                        self.write_counters(protocol.counters());
                        status.wrote(self.now(), current);
                    } else {
                        info!(signal = info.ssi_signo, "stopping");
                        return Ok(());
                    }
                }
            }
            if neighbours_changed {
                self.resolution_failures(protocol, &mut out);
            }
            if control_ready {
                self.receive_control(protocol, &mut out);
            }
            if queue_ready {
                self.receive_queued(protocol, &mut out);
            }
        }
    }

    /// Route use is read while routes are installed; when they appear, a
    /// first read takes the baseline (earlier use kept no route of now alive).
    fn track_routes(&mut self, schedule: &mut Schedule, now: Duration) {
        if schedule.routes_installed(now, self.installed > 0) {
            self.route_use();
        }
    }

    /// What the counters file says, but the time of writing.
    fn status<P: Protocol>(&self, protocol: &P) -> (Counters, usize, [u64; 2]) {
        (protocol.counters().clone(), self.installed, [self.queue.overruns, self.resolution.overruns])
    }

    fn resolution_failures<P: Protocol>(&mut self, protocol: &mut P, out: &mut Vec<Output<P::Event>>) {
        let overruns = self.resolution.overruns;
        let failed = self.resolution.failed_since_last().unwrap_or_else(|error| {
            warn!(%error, "reading neighbour notifications");
            Vec::new()
        });
        if self.resolution.overruns > overruns {
            warn!("neighbour notifications lost (the socket's buffer overran): the table's failed entries taken instead");
        }
        let now = self.now();
        for neighbor in failed {
            protocol.handle(now, Input::ResolutionFailed { neighbor }, out);
        }
        self.carry_out(protocol, out);
    }

    fn receive_control<P: Protocol>(&mut self, protocol: &mut P, out: &mut Vec<Output<P::Event>>) {
        loop {
            let now = self.now();
            match self.control.receive() {
                Ok(Some((received, payload))) => {
                    protocol.handle(now, Input::Control { from: received.from, ttl: received.ttl, payload }, out);
                }
                Ok(None) => break,
                Err(error) => {
                    warn!(%error, "receiving a control packet");
                    break;
                }
            }
        }
        self.carry_out(protocol, out);
    }

    fn receive_queued<P: Protocol>(&mut self, protocol: &mut P, out: &mut Vec<Output<P::Event>>) {
        loop {
            let overruns = self.queue.overruns;
            match self.queue.receive() {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    warn!(%error, "reading the NFQUEUE");
                    break;
                }
            }
            if self.queue.overruns > overruns {
                // ENOBUFS: the kernel dropped packets for us; later ones still come.
                warn!("NFQUEUE overrun: the kernel dropped queued packets");
            }
            // What each packet says, taken out of the queue's buffer before verdicts are given.
            let packets: Vec<_> = self
                .queue
                .packets()
                .iter()
                .map(|p| (p.id, p.hook, p.mark, parse_ipv4(p.payload).ok().map(|h| (h.source, h.destination))))
                .collect();
            for (id, hook, mark, addresses) in packets {
                let now = self.now();
                let Some((src, dst)) = addresses else {
                    self.verdict(id, Verdict::Drop, None);
                    continue;
                };
                let local = match hook {
                    HOOK_LOCAL_OUT => true,
                    // Queued before the hold ended: routing decides now.
                    HOOK_PRE_ROUTING if !self.holds.contains_key(&dst) => {
                        self.verdict(id, Verdict::Accept, None);
                        continue;
                    }
                    HOOK_PRE_ROUTING => false,
                    _ => {
                        self.verdict(id, Verdict::Drop, None);
                        protocol.handle(now, Input::NoRoute { src, dst, local: false }, out);
                        continue;
                    }
                };
                let held = self.held.entry(dst).or_default();
                if held.len() >= self.config.max_held_per_destination {
                    protocol.counters_mut().packets_dropped += 1;
                    self.give_up(Held { id, mark, local });
                    continue;
                }
                held.push(Held { id, mark, local });
                protocol.counters_mut().packets_held += 1;
                if local {
                    protocol.handle(now, Input::NoRoute { src, dst, local: true }, out);
                    self.carry_out(protocol, out);
                }
            }
        }
        self.carry_out(protocol, out);
    }

    /// One verdict, sent at once (a held packet waits for none of the others).
    fn verdict(&mut self, id: u32, verdict: Verdict, mark: Option<u32>) {
        self.queue.verdict(id, verdict, mark);
        if let Err(error) = self.queue.flush() {
            warn!(%error, id, "NFQUEUE verdict");
        }
    }

    /// Carries out the protocol's outputs in order.
    fn carry_out<P: Protocol>(&mut self, protocol: &mut P, out: &mut Vec<Output<P::Event>>) {
        for output in out.drain(..) {
            match output {
                Output::Send { to, ttl, payload } => {
                    if let Err(error) = self.control.send(to, ttl, &payload) {
                        warn!(%error, %to, "sending a control packet");
                    }
                }
                Output::SetRoute { dst, next_hop, .. } => match self.routes.set_host_route(dst, next_hop) {
                    Ok(()) => self.installed += 1,
                    Err(error) => error!(%error, "installing a route"),
                },
                Output::DeleteRoute { dst } => {
                    match self.routes.delete_host_route(dst) {
                        Ok(()) => self.installed = self.installed.saturating_sub(1),
                        Err(error) => error!(%error, "deleting a route"),
                    }
                    // Lost as in ns-2, where they leave for the old next hop.
                    for packet in self.paced.cancel(dst) {
                        protocol.counters_mut().packets_dropped += 1;
                        self.verdict(packet.id, Verdict::Drop, None);
                    }
                }
                Output::SetPairRoute { src, dst, next_hop } => match self.routes.set_pair_route(src, dst, next_hop) {
                    Ok(true) => self.installed += 1,
                    Ok(false) => {}
                    Err(error) => error!(%error, "installing a route"),
                },
                Output::DeletePairRoute { src, dst } => match self.routes.delete_pair_route(src, dst) {
                    Ok(()) => self.installed = self.installed.saturating_sub(1),
                    Err(error) => error!(%error, "deleting a route"),
                },
                Output::HoldForwarded { dst } => self.hold_forwarded(dst),
                Output::Release { dst, spacing } => {
                    self.end_hold(dst);
                    let packets = self.held.remove(&dst).unwrap_or_default();
                    if spacing.is_zero() {
                        for packet in packets {
                            self.release(protocol, packet);
                        }
                    } else {
                        let now = self.now();
                        self.paced.start(now, dst, spacing, packets);
                        for packet in self.paced.poll_due(now) {
                            self.release(protocol, packet);
                        }
                    }
                }
                Output::Drop { dst } => {
                    self.end_hold(dst);
                    for packet in self.held.remove(&dst).unwrap_or_default() {
                        protocol.counters_mut().packets_dropped += 1;
                        self.give_up(packet);
                    }
                }
                Output::Flush { neighbor } => self.flush(neighbor),
                Output::Event(event) => self.log_event(&event),
            }
        }
    }

    /// A held packet goes on: a local packet's new mark makes the kernel
    /// route it again; a forwarded one was held before routing and is routed next.
    fn release<P: Protocol>(&mut self, protocol: &mut P, packet: Held) {
        protocol.counters_mut().packets_released += 1;
        let mark = packet.local.then_some(packet.mark | self.config.release_mark);
        self.verdict(packet.id, Verdict::Accept, mark);
    }

    /// A local packet is repeated with the reject mark (the OUTPUT rule
    /// answers ICMP host unreachable); a forwarded one is dropped.
    fn give_up(&mut self, packet: Held) {
        if packet.local {
            self.verdict(packet.id, Verdict::Repeat, Some(packet.mark | self.config.reject_mark));
        } else {
            self.verdict(packet.id, Verdict::Drop, None);
        }
    }

    fn hold_forwarded(&mut self, dst: Ipv4Addr) {
        if self.holds.contains_key(&dst) {
            return;
        }
        let rule = iptables::hold(&self.config, dst);
        match meshemu_netutil::iptables::append(&self.config.iptables, &rule) {
            Ok(()) => {
                self.holds.insert(dst, rule);
            }
            Err(error) => error!(%error, %dst, "holding forwarded packets"),
        }
    }

    fn end_hold(&mut self, dst: Ipv4Addr) {
        if let Some(rule) = self.holds.remove(&dst) {
            if let Err(error) = meshemu_netutil::iptables::delete(&self.config.iptables, &rule) {
                error!(%error, %dst, "ending the hold of forwarded packets");
            }
        }
    }

    /// Addresses data went to or came from since the last look, and for
    /// destinations the hops their last packet had travelled.
    fn route_use(&mut self) -> (Vec<Ipv4Addr>, Vec<(Ipv4Addr, u8)>) {
        let mut used = Vec::new();
        let mut hops = Vec::new();
        match self.destinations.used_since_last() {
            Ok(entries) => {
                for (addr, ttl) in entries {
                    used.push(addr);
                    if let Some(ttl) = ttl {
                        hops.push((addr, route_use::hops_travelled(self.default_ttl, ttl)));
                    }
                }
            }
            Err(error) => warn!(%error, "reading route use"),
        }
        match self.sources.used_since_last() {
            Ok(entries) => used.extend(entries.into_iter().map(|(addr, _)| addr)),
            Err(error) => warn!(%error, "reading route use"),
        }
        used.sort();
        used.dedup();
        (used, hops)
    }

    /// What the link layer saw since the last look, as inputs: the MAC's
    /// contention backoffs, then neighbours heard, neighbours that
    /// acknowledged frames, neighbours it failed to reach (by IPv4 address).
    fn link_inputs(&mut self) -> Vec<Input<'static>> {
        let Some(source) = self.link_layer.as_mut() else { return Vec::new() };
        let activity = match source.activity_since_last() {
            Ok(activity) => activity,
            Err(error) => {
                warn!(%error, "reading the link layer's counters");
                return Vec::new();
            }
        };
        let mut inputs: Vec<Input> = activity.contention_backoffs.map(|total| Input::MacBackoffs { total }).into_iter().collect();
        if activity.failed.is_empty() && activity.received.is_empty() && activity.acked.is_empty() {
            return inputs;
        }
        let neighbors = arp_table(&self.config.interface);
        let resolve = |macs: Vec<[u8; 6]>| macs.into_iter().filter_map(|mac| neighbors.get(&mac).copied()).collect::<Vec<_>>();
        inputs.extend(resolve(activity.received).into_iter().map(|neighbor| Input::NeighborHeard { neighbor }));
        inputs.extend(resolve(activity.acked).into_iter().map(|neighbor| Input::NeighborAcked { neighbor }));
        inputs.extend(resolve(activity.failed).into_iter().map(|neighbor| Input::LinkFailed { neighbor }));
        inputs
    }

    /// Asks the link layer to drop what it holds for `neighbor` (found by
    /// its MAC address in the ARP table).
    fn flush(&mut self, neighbor: Ipv4Addr) {
        let Some(link_layer) = self.link_layer.as_mut() else { return };
        // Unresolved (a failed resolution broke the link): the kernel
        // handed the link layer nothing for it lately.
        let Some(mac) = arp_table(&self.config.interface).into_iter().find_map(|(mac, ip)| (ip == neighbor).then_some(mac))
        else {
            return;
        };
        if let Err(error) = link_layer.flush(mac) {
            warn!(%error, %neighbor, "flushing the link layer's queue");
        }
    }

    fn log_event<E: Serialize + std::fmt::Debug>(&mut self, event: &E) {
        let elapsed = self.now();
        info!(event = ?event, "protocol event");
        let Some(file) = self.events.as_mut() else { return };
        let mut line = match serde_json::to_value(event) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return,
        };
        line.insert("mono_ns".into(), (self.mono_at_start_ns + elapsed.as_nanos() as u64).into());
        line.insert("wall".into(), wall_clock().into());
        line.insert("node".into(), self.interface.address.to_string().into());
        if let Err(error) = writeln!(file, "{}", serde_json::Value::Object(line)) {
            warn!(%error, "writing the event log");
        }
    }

    fn write_counters(&self, counters: &Counters) {
        let Some(path) = &self.config.counters else { return };
        let (overhead_bytes, overhead_packets) = counters.overhead();
        let file = CountersFile {
            address: self.interface.address,
            uptime_ms: self.now().as_millis() as u64,
            overhead_bytes,
            overhead_packets,
            routes: self.installed,
            queue_overruns: self.queue.overruns,
            neighbour_overruns: self.resolution.overruns,
            counters,
        };
        if let Err(error) = write_atomically(path, &file) {
            warn!(%error, path = %path.display(), "writing the counters");
        }
    }

    fn shut_down<P: Protocol>(&mut self, protocol: &mut P) {
        for dst in self.holds.keys().copied().collect::<Vec<_>>() {
            self.end_hold(dst);
        }
        let paced = self.paced.cancel_all();
        for packet in std::mem::take(&mut self.held).into_values().flatten().chain(paced) {
            protocol.counters_mut().packets_dropped += 1;
            self.give_up(packet);
        }
        self.write_counters(protocol.counters());
    }

    /// Back to the kernel's own subnet route, without our rules and routes.
    fn restore(&mut self) {
        meshemu_netutil::iptables::remove(&self.config.iptables, &self.rules);
        if let Err(error) = self.routes.flush_host_routes() {
            error!(%error, "removing our routes");
        }
        if let Err(error) = self.routes.flush_pair_routes() {
            error!(%error, "removing our policy routes");
        }
        if let Err(error) = self.routes.restore_connected() {
            error!(%error, "restoring the subnet route");
        }
    }
}

fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 would only mark the events as unplaced.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|now| now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64)
        .unwrap_or(0)
}

fn wall_clock() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Writes `value` as one line of JSON to a temporary file, in one write,
/// and renames it over `path`: readers see the old file or the new one.
pub fn write_atomically(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let mut text = serde_json::to_vec(value)?;
    text.push(b'\n');
    let temporary = path.with_extension("json.tmp");
    fs::write(&temporary, text)?;
    fs::rename(&temporary, path)
}
