//! Real-time lateness of the TAP medium under load: a 5×5 grid (200 m apart,
//! static routes) with four UDP floods corner to opposite corner (1000-byte
//! datagrams, 500 per second each: more than the 2 Mbit/s medium carries, so
//! queues stay full). After each run the lab's `lateness` histogram (how late
//! each model action was carried out) is read from the control socket.
//! Prints, per mode, min/median/max over the runs of p50, p99, p99.9 and max,
//! and the medium's CPU use.
//!
//! Needs root. Build the binary first:
//!     cargo build --release -p meshemu-medium && cargo run --release -p meshemu-medium --example lateness

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SIDE: usize = 5;
const RUNS: usize = 3;
const DURATION: Duration = Duration::from_secs(8);
const DATAGRAM: usize = 1000;
const SEND_INTERVAL: Duration = Duration::from_millis(2);
const PORT: u16 = 5001;

/// Runs `f` on a thread inside namespace `netns` and returns its result.
fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let file = std::fs::File::open(Path::new("/run/netns").join(netns)).expect("namespace");
    std::thread::spawn(move || {
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("namespace thread")
}

/// CPU seconds (user + system) used so far by process `pid`.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

struct RunResult {
    lateness: Value,
    cpu_percent: f64,
}

fn run_once(sched_fifo: &str, spin_ns: u64) -> RunResult {
    let mut config = lab_config("bench-late", &grid(SIDE, 200.0), "static");
    config["realtime"] = json!({"sched_fifo": sched_fifo, "spin_ns": spin_ns});
    let guard = LabGuard::start(config);
    let last = SIDE * SIDE - 1;
    let flows = [(0, last), (last, 0), (SIDE - 1, last + 1 - SIDE), (last + 1 - SIDE, SIDE - 1)];

    // Sinks that never read: a full socket buffer drops quietly (no ICMP).
    let _sinks: Vec<UdpSocket> = flows
        .iter()
        .map(|&(_, dst)| in_netns(&guard.namespaces[dst], || UdpSocket::bind(("0.0.0.0", PORT)).expect("bind sink")))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = flows
        .iter()
        .map(|&(src, dst)| {
            let socket = in_netns(&guard.namespaces[src], || UdpSocket::bind(("0.0.0.0", 0)).expect("bind source"));
            let target = (node_ip(dst), PORT);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let payload = [0x5au8; DATAGRAM];
                while !stop.load(Ordering::Relaxed) {
                    let _ = socket.send_to(&payload, (target.0.as_str(), target.1));
                    std::thread::sleep(SEND_INTERVAL);
                }
            })
        })
        .collect();

    let cpu_before = cpu_seconds(guard.pid());
    let start = Instant::now();
    std::thread::sleep(DURATION);
    let cpu = cpu_seconds(guard.pid()) - cpu_before;
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.join().unwrap();
    }
    let lateness = guard.control().request(json!({"op": "lateness"}));
    assert_eq!(lateness["ok"], true, "{lateness}");
    RunResult { lateness, cpu_percent: 100.0 * cpu / elapsed }
}

fn spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!("{:>9.1} {:>9.1} {:>9.1}", values[0], values[values.len() / 2], values[values.len() - 1])
}

fn main() {
    if !have_root("lateness benchmark") {
        return;
    }
    println!(
        "{SIDE}x{SIDE} grid, 4 UDP floods of {DATAGRAM}-byte datagrams every {SEND_INTERVAL:?}, {RUNS} runs of {DURATION:?} per mode"
    );
    println!("lateness in µs as min / median / max over the runs");
    for (mode, sched_fifo, spin_ns) in
        [("normal scheduling", "off", 0), ("SCHED_FIFO", "on", 0), ("SCHED_FIFO + spin 50 µs", "on", 50_000)]
    {
        let results: Vec<RunResult> = (0..RUNS).map(|_| run_once(sched_fifo, spin_ns)).collect();
        let field = |name: &str| results.iter().map(|r| r.lateness[name].as_f64().unwrap() / 1e3).collect::<Vec<_>>();
        let counts: Vec<f64> = results.iter().map(|r| r.lateness["count"].as_f64().unwrap()).collect();
        println!("\n{mode}");
        println!("  {:<20} {:>9} {:>9} {:>9}", "", "min", "median", "max");
        println!("  {:<20} {}", "actions", spread(counts));
        for name in ["p50_ns", "p99_ns", "p999_ns", "max_ns"] {
            println!("  {:<20} {}", name.trim_end_matches("_ns"), spread(field(name)));
        }
        println!("  {:<20} {}", "medium CPU %", spread(results.iter().map(|r| r.cpu_percent).collect()));
    }
}
