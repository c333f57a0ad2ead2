//! What `bpd` costs per packet: packets/s through it, its CPU time per
//! packet, and the round-trip time it adds, on a veth pair between two
//! network namespaces this program creates (and deletes, also on failure).
//! Without the daemon, then `fifo` and `fq` with batched verdicts (64 per
//! system call) and without (one each). Prints min/median/max of several runs.
//!
//!     cargo build --release -p meshemu-backpressure
//!     cargo run --release -p meshemu-backpressure --example nfqueue_bench   # as root

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};

const SENDER_NS: &str = "bpbench-a";
const RECEIVER_NS: &str = "bpbench-b";
const SENDER_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const RECEIVER_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
const RUNS: usize = 5;
const FLOOD: Duration = Duration::from_secs(2);
const PINGS: usize = 2000;

fn run(argv: &[&str]) {
    let status = Command::new(argv[0]).args(&argv[1..]).status().unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    assert!(status.success(), "{} failed", argv.join(" "));
}

/// The two namespaces and their veth pair; removed when dropped.
struct Testbed;

impl Testbed {
    fn new() -> Testbed {
        for ns in [SENDER_NS, RECEIVER_NS] {
            assert!(!Path::new("/run/netns").join(ns).exists(), "namespace {ns} exists already (left over?)");
        }
        run(&["ip", "netns", "add", SENDER_NS]);
        let testbed = Testbed; // from here on, dropping it cleans up
        run(&["ip", "netns", "add", RECEIVER_NS]);
        run(&["ip", "-n", SENDER_NS, "link", "add", "bpb0", "type", "veth", "peer", "name", "bpb1", "netns", RECEIVER_NS]);
        for (ns, dev, ip) in [(SENDER_NS, "bpb0", SENDER_IP), (RECEIVER_NS, "bpb1", RECEIVER_IP)] {
            run(&["ip", "-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        testbed
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for ns in [SENDER_NS, RECEIVER_NS] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).status();
        }
    }
}

/// A socket made inside namespace `ns` (by a thread that enters it).
fn udp_in(ns: &str, bind: SocketAddrV4) -> UdpSocket {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let file = File::open(Path::new("/run/netns").join(&ns)).expect("namespace file");
        setns(file.as_fd(), CloneFlags::CLONE_NEWNET).expect("setns");
        UdpSocket::bind(bind).expect("bind")
    })
    .join()
    .unwrap()
}

/// The daemon in the sender's namespace; killed (by PID) when dropped.
struct Daemon {
    child: Child,
    counters: PathBuf,
}

impl Daemon {
    fn start(bpd: &Path, mode: &str, batch: usize, dir: &Path) -> Daemon {
        let counters = dir.join(format!("{mode}-{batch}.json"));
        let child = Command::new("ip")
            .args(["netns", "exec", SENDER_NS])
            .arg(bpd)
            .args(["--mode", mode, "--radio", "none", "--interface", "bpb0", "--batch", &batch.to_string()])
            .arg("--counters")
            .arg(&counters)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting bpd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !counters.exists() {
            assert!(Instant::now() < deadline, "bpd did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, counters }
    }

    /// user + system CPU time so far.
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("stat");
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap().unwrap() as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.counters);
    }
}

/// Packets per second that arrive while one thread floods 64-byte datagrams.
fn flood(sender: &UdpSocket, receiver: &UdpSocket) -> f64 {
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    receiver.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let counter = {
        let (receiver, received, stop) = (receiver.try_clone().unwrap(), received.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buffer = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if receiver.recv(&mut buffer).is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let payload = [0u8; 64];
    let to = SocketAddrV4::new(RECEIVER_IP, 9000);
    let start = Instant::now();
    let before = received.load(Ordering::Relaxed);
    while start.elapsed() < FLOOD {
        let _ = sender.send_to(&payload, to);
    }
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let count = received.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    counter.join().unwrap();
    count as f64 / elapsed.as_secs_f64()
}

/// Median round-trip time (µs) of request/echo pairs; the request crosses the daemon.
fn ping_pong(client: &UdpSocket, server: &UdpSocket) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    server.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let echo = {
        let (server, stop) = (server.try_clone().unwrap(), stop.clone());
        std::thread::spawn(move || {
            let mut buffer = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((size, from)) = server.recv_from(&mut buffer) {
                    let _ = server.send_to(&buffer[..size], from);
                }
            }
        })
    };
    client.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let to = SocketAddrV4::new(RECEIVER_IP, 9001);
    let mut rtts = Vec::with_capacity(PINGS);
    let mut buffer = [0u8; 64];
    for i in 0..PINGS as u32 {
        let start = Instant::now();
        client.send_to(&i.to_be_bytes(), to).unwrap();
        loop {
            match client.recv(&mut buffer) {
                Ok(4) if buffer[..4] == i.to_be_bytes() => break,
                Ok(_) => continue,
                Err(e) => panic!("echo {i} lost: {e}"),
            }
        }
        rtts.push(start.elapsed().as_secs_f64() * 1e6);
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    rtts.sort_by(f64::total_cmp);
    rtts[rtts.len() / 2]
}

fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!("min {:>9.1}  median {:>9.1}  max {:>9.1}", values[0], values[values.len() / 2], values[values.len() - 1])
}

fn main() {
    assert!(nix::unistd::geteuid().is_root(), "run as root: it creates network namespaces");
    let bpd = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("bpd");
    assert!(bpd.exists(), "{} missing: cargo build --release -p meshemu-backpressure first", bpd.display());
    let dir = tempfile::tempdir().unwrap();
    let _testbed = Testbed::new();
    let sender = udp_in(SENDER_NS, SocketAddrV4::new(SENDER_IP, 0));
    let sink = udp_in(RECEIVER_NS, SocketAddrV4::new(RECEIVER_IP, 9000));
    let echo = udp_in(RECEIVER_NS, SocketAddrV4::new(RECEIVER_IP, 9001));
    let client = udp_in(SENDER_NS, SocketAddrV4::new(SENDER_IP, 0));
    // Resolve the neighbour once, so no run pays for ARP.
    ping_pong(&client, &echo);

    println!("{RUNS} runs each: {FLOOD:?} floods of 64-byte datagrams, {PINGS} request/echo pairs");
    let baseline: Vec<f64> = (0..RUNS).map(|_| ping_pong(&client, &echo)).collect();
    let pps: Vec<f64> = (0..RUNS).map(|_| flood(&sender, &sink)).collect();
    println!("{:<26} packets/s   {}", "no daemon", summary(pps));
    println!("{:<26} median RTT  {} µs", "no daemon", summary(baseline.clone()));
    let baseline_rtt = {
        let mut sorted = baseline;
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    for (mode, batch) in [("fifo", 64), ("fifo", 1), ("fq", 64), ("fq", 1)] {
        let label = format!("bpd {mode}, batch {batch}");
        let (mut pps, mut cpu_us, mut added) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let daemon = Daemon::start(&bpd, mode, batch, dir.path());
            added.push(ping_pong(&client, &echo) - baseline_rtt);
            let cpu_before = daemon.cpu();
            let rate = flood(&sender, &sink);
            let cpu = daemon.cpu() - cpu_before;
            pps.push(rate);
            cpu_us.push(cpu.as_secs_f64() * 1e6 / (rate * FLOOD.as_secs_f64()).max(1.0));
        }
        println!("{label:<26} packets/s   {}", summary(pps));
        println!("{label:<26} CPU µs/pkt  {}", summary(cpu_us));
        println!("{label:<26} added RTT   {} µs (median RTT minus the no-daemon median)", summary(added));
    }
}
