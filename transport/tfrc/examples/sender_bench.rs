//! How fast can one TFRC sender go, and what does it cost?
//!
//! Creates two network namespaces joined by a veth pair (and removes them
//! at the end, also on failure), runs `tfrc recv` in one and `tfrc send` in
//! the other — the library loops, each in a thread that entered its
//! namespace — and prints min/median/max over several runs of:
//!
//! 1. a sweep of constrained rates: what arrives, and the sender's CPU per
//!    Mbit/s; the highest rate delivered within 5 % is the highest one
//!    sender sustains;
//! 2. unconstrained TFRC on the loss-free link, which runs until the
//!    receiver or the sender cannot keep up.
//!
//! ```text
//! cargo run --release -p meshemu-tfrc --example sender_bench [SECONDS_PER_RUN [RUNS]]
//! ```
//! Needs root. If it is killed, remove `tfrcbench-<pid>-tx/-rx` with `ip netns del`.

use std::fs::File;
use std::net::SocketAddr;
use std::process::Command;
use std::thread;
use std::time::Duration;

use nix::sched::{setns, CloneFlags};

use meshemu_tfrc::net::{
    FlowSummary, ReceiverBinding, RecvOptions, SendOptions, SenderBinding, SenderSummary,
};

const PACKET: usize = 1400;
const RECEIVER: &str = "10.77.0.2:5001";
/// Delivered within this fraction of the cap counts as sustained.
const SUSTAINED: f64 = 0.95;
const CAPS_MBPS: [f64; 7] = [25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0];

/// The two namespaces; dropping it deletes them (and with them the veth pair).
struct Lab {
    tx: String,
    rx: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lab {
    fn create() -> Result<Self, String> {
        let pid = std::process::id();
        let lab = Lab {
            tx: format!("tfrcbench-{pid}-tx"),
            rx: format!("tfrcbench-{pid}-rx"),
        };
        ip(&["netns", "add", &lab.tx])?;
        ip(&["netns", "add", &lab.rx])?;
        ip(&[
            "-n", &lab.tx, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
            "netns", &lab.rx,
        ])?;
        ip(&["-n", &lab.tx, "addr", "add", "10.77.0.1/24", "dev", "veth0"])?;
        ip(&["-n", &lab.rx, "addr", "add", "10.77.0.2/24", "dev", "veth1"])?;
        for (ns, dev) in [
            (&lab.tx, "veth0"),
            (&lab.rx, "veth1"),
            (&lab.tx, "lo"),
            (&lab.rx, "lo"),
        ] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(lab)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.tx, &self.rx] {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

fn enter(namespace: &str) {
    let file = File::open(format!("/run/netns/{namespace}")).expect("namespace file");
    setns(file, CloneFlags::CLONE_NEWNET).expect("setns");
}

struct Run {
    sender: SenderSummary,
    receiver: FlowSummary,
}

fn run_once(lab: &Lab, seconds: f64, cap_bps: Option<f64>) -> Run {
    let peer: SocketAddr = RECEIVER.parse().unwrap();
    let rx_ns = lab.rx.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = thread::spawn(move || {
        enter(&rx_ns);
        let options = RecvOptions {
            bind: peer,
            once: true,
            idle_timeout: Duration::from_secs(3),
            history_discounting: true,
            report_interval: None,
            trace: None,
            trace_packets: false,
            drop_every: None,
            feedback_delay: Duration::ZERO,
            stop_after: Some(Duration::from_secs_f64(seconds + 10.0)),
        };
        let binding = ReceiverBinding::bind(options).expect("bind receiver");
        ready_tx.send(()).unwrap();
        binding.run(|_| {}, |_| {}).expect("receiver")
    });
    ready_rx.recv().expect("receiver started");
    let tx_ns = lab.tx.clone();
    let sender = thread::spawn(move || {
        enter(&tx_ns);
        let options = SendOptions {
            peer,
            bind: None,
            duration: Duration::from_secs_f64(seconds),
            packet_size: PACKET,
            max_rate_bps: cap_bps,
            re: None,
            session: 1,
            report_interval: None,
            trace: None,
            trace_packets: false,
            linger: Duration::from_secs(2),
        };
        SenderBinding::bind(options)
            .expect("bind sender")
            .run(|_| {})
            .expect("sender")
    });
    let sender = sender.join().expect("sender thread");
    let mut flows = receiver.join().expect("receiver thread");
    Run {
        sender,
        receiver: flows.remove(0),
    }
}

/// min / median / max.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

fn show(name: &str, unit: &str, values: Vec<f64>) -> String {
    let (min, median, max) = spread(values);
    format!("{name} {min:.2}/{median:.2}/{max:.2} {unit}")
}

struct Figures {
    delivered_mbps: Vec<f64>,
    cpu_percent_per_mbps: Vec<f64>,
    cpu_us_per_packet: Vec<f64>,
    receiver_cpu_percent: Vec<f64>,
    loss_percent: Vec<f64>,
}

fn measure(lab: &Lab, seconds: f64, runs: usize, cap_bps: Option<f64>) -> Figures {
    let mut f = Figures {
        delivered_mbps: vec![],
        cpu_percent_per_mbps: vec![],
        cpu_us_per_packet: vec![],
        receiver_cpu_percent: vec![],
        loss_percent: vec![],
    };
    for _ in 0..runs {
        let run = run_once(lab, seconds, cap_bps);
        let delivered = run.receiver.bytes as f64 * 8.0 / seconds / 1e6;
        let cpu_percent = 100.0 * run.sender.cpu_s / seconds;
        f.delivered_mbps.push(delivered);
        f.cpu_percent_per_mbps
            .push(cpu_percent / delivered.max(1e-9));
        f.cpu_us_per_packet
            .push(run.sender.cpu_s * 1e6 / run.sender.sent_packets.max(1) as f64);
        f.receiver_cpu_percent
            .push(100.0 * run.receiver.cpu_s / seconds);
        f.loss_percent.push(100.0 * run.receiver.loss_fraction);
    }
    f
}

fn print(label: &str, f: &Figures) {
    println!(
        "{label:>14}  {}  {}  {}  {}  {}",
        show("delivered", "Mbit/s", f.delivered_mbps.clone()),
        show("loss", "%", f.loss_percent.clone()),
        show("sender CPU", "%/(Mbit/s)", f.cpu_percent_per_mbps.clone()),
        show("", "µs/packet", f.cpu_us_per_packet.clone()),
        show("receiver CPU", "%", f.receiver_cpu_percent.clone()),
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(3.0, |s| {
        s.parse().expect("SECONDS_PER_RUN must be a number")
    });
    let runs: usize = args
        .next()
        .map_or(3, |s| s.parse().expect("RUNS must be a whole number"));
    if !nix::unistd::geteuid().is_root() {
        eprintln!("sender_bench: needs root to create network namespaces; not run");
        std::process::exit(2);
    }
    let lab = match Lab::create() {
        Ok(lab) => lab,
        Err(e) => {
            eprintln!("sender_bench: cannot build the veth lab: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "TFRC sender over a veth pair between two namespaces: {PACKET}-byte packets, {runs} runs of {seconds} s per point, min/median/max"
    );
    let mut highest = None;
    for cap in CAPS_MBPS {
        let figures = measure(&lab, seconds, runs, Some(cap * 1e6));
        print(&format!("cap {cap} Mbit/s"), &figures);
        let (_, median, _) = spread(figures.delivered_mbps.clone());
        if median >= SUSTAINED * cap {
            highest = Some(cap);
        } else {
            break;
        }
    }
    let unconstrained = measure(&lab, seconds, runs, None);
    print("no cap", &unconstrained);
    match highest {
        Some(cap) => println!(
            "highest constrained rate delivered within {:.0} % (median): {cap} Mbit/s",
            100.0 * (1.0 - SUSTAINED)
        ),
        None => println!(
            "no constrained rate was delivered within {:.0} %",
            100.0 * (1.0 - SUSTAINED)
        ),
    }
    let (min, median, max) = spread(unconstrained.delivered_mbps);
    println!("unconstrained TFRC sustains {min:.1}/{median:.1}/{max:.1} Mbit/s (min/median/max)");
}
