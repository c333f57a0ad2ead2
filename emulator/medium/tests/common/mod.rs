//! Shared by the root integration tests and the benchmark examples: lab
//! configurations, a guard that always removes a lab, and a control client.
#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// The `meshemu-medium` binary: cargo's for tests; for examples the one next
/// to the examples directory (build it first).
pub fn medium_program() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_meshemu-medium") {
        Some(path) => PathBuf::from(path),
        None => {
            let exe = std::env::current_exe().expect("own path");
            let release = exe.parent().and_then(Path::parent).expect("target/<profile>/examples/");
            let program = release.join("meshemu-medium");
            assert!(program.exists(), "{} not found: cargo build --release -p meshemu-medium", program.display());
            program
        }
    }
}

/// Whether we may create namespaces; prints why a test is skipped if not.
pub fn have_root(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        println!("skipping {test}: needs root (network namespaces)");
    }
    root
}

/// The ns-2 WaveLAN radio of the papers: 2 Mbit/s data, 1 Mbit/s basic rate,
/// two-ray ground at 914 MHz, 250 m receive and 550 m carrier-sense range,
/// RTS/CTS for every unicast.
pub fn wavelan_radio() -> Value {
    json!({
        "phy": "dsss", "data_rate_bps": 2000000, "basic_rate_bps": 1000000,
        "preamble": "long", "signal_extension_ns": 0, "frequency_hz": 914000000.0,
        "tx_power_dbm": 24.5, "antenna_gain_dbi": 0.0, "antenna_height_m": 1.5,
        "system_loss_db": 0.0, "propagation": {"model": "two_ray_ground"},
        "rx_threshold_dbm": -64.37, "cs_threshold_dbm": -78.07,
        "capture_threshold_db": 10.0, "capture_restart": false,
        "noise_floor_dbm": -101.0, "interference_floor_dbm": -88.07,
        "bit_error_rate": 0.0, "slot_ns": 20000, "sifs_ns": 10000,
        "cw_min": 31, "cw_max": 1023, "rts_threshold_bytes": 0,
        "short_retry_limit": 7, "long_retry_limit": 4,
        "queue_len": 50, "queue_priority": true
    })
}

pub fn node_ip(i: usize) -> String {
    format!("10.0.{}.{}", i / 250, i % 250 + 1)
}

/// LAB.json for nodes at `positions` (node i is `n<i>` in namespace `<lab>-n<i>`).
pub fn lab_config(lab: &str, positions: &[[f64; 3]], routing: &str) -> Value {
    let nodes: Vec<Value> = positions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({"name": format!("n{i}"), "mac_address": format!("02:00:00:00:{:02x}:{:02x}", i >> 8, (i & 0xff) + 1),
                   "position": p, "mobility": {"kind": "static"}, "radio": wavelan_radio()})
        })
        .collect();
    let netns: Vec<Value> = (0..positions.len())
        .map(|i| json!({"netns": format!("{lab}-n{i}"), "ipv4": node_ip(i), "prefix_len": 16, "mtu": 1500}))
        .collect();
    json!({
        "lab": lab, "run_dir": format!("/run/meshemu/{lab}"),
        "medium": {"seed": 1, "mac": {"kind": "dcf"}, "nodes": nodes},
        "nodes": netns, "routing": routing, "priority_udp_ports": [654, 698, 6696],
        "realtime": {"sched_fifo": "off", "spin_ns": 0}
    })
}

/// `count` nodes in a line, `spacing` metres apart.
pub fn chain(count: usize, spacing: f64) -> Vec<[f64; 3]> {
    (0..count).map(|i| [i as f64 * spacing, 0.0, 0.0]).collect()
}

/// A `side`×`side` grid, `spacing` metres apart.
pub fn grid(side: usize, spacing: f64) -> Vec<[f64; 3]> {
    (0..side * side).map(|i| [(i % side) as f64 * spacing, (i / side) as f64 * spacing, 0.0]).collect()
}

/// A running `meshemu-medium tap`. Dropping it kills the medium by PID if it
/// still runs and removes whatever of the lab is left: namespaces,
/// by-netns links into the run directory, the run directory.
pub struct LabGuard {
    pub child: Child,
    pub config: Value,
    pub ready: Value,
    pub run_dir: PathBuf,
    pub namespaces: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl LabGuard {
    /// Starts the medium on `config` and waits for its ready line.
    pub fn start(config: Value) -> LabGuard {
        Self::try_start(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As `start`; Err(stderr) if the medium exits before it is ready.
    pub fn try_start(config: Value) -> Result<LabGuard, String> {
        let run_dir = PathBuf::from(config["run_dir"].as_str().unwrap());
        let namespaces: Vec<String> =
            config["nodes"].as_array().unwrap().iter().map(|n| n["netns"].as_str().unwrap().to_string()).collect();
        std::fs::create_dir_all(&run_dir).unwrap();
        let config_path = run_dir.join("lab.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let mut child = Command::new(medium_program())
            .arg("tap")
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start meshemu-medium");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
        });
        let mut guard = LabGuard { child, config, ready: Value::Null, run_dir, namespaces, stderr: Some(stderr) };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) => {
                guard.ready = serde_json::from_str(&line).expect("ready line is JSON");
                assert_eq!(guard.ready["ready"], true);
                Ok(guard)
            }
            _ => {
                let _ = guard.child.kill();
                let _ = guard.child.wait();
                Err(format!("the medium was not ready: {}", guard.take_stderr()))
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Everything the medium wrote on stderr (waits for it to close).
    pub fn take_stderr(&mut self) -> String {
        self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    }

    pub fn socket(&self) -> PathBuf {
        self.run_dir.join("control.sock")
    }

    pub fn page(&self, node: &str) -> PathBuf {
        self.run_dir.join("nodes").join(node).join("radio")
    }

    pub fn control(&self) -> Control {
        Control::connect(&self.socket())
    }

    /// `ip netns exec <netns of node i> argv...`, returns (success, stdout).
    pub fn exec(&self, node: usize, argv: &[&str]) -> (bool, String) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.namespaces[node]])
            .args(argv)
            .output()
            .expect("run ip netns exec");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill(); // by PID
            let _ = self.child.wait();
        }
        for ns in &self.namespaces {
            let path = Path::new("/run/netns").join(ns);
            // Only a mounted namespace is one of ours; a plain file of that
            // name belongs to someone else.
            if nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH).is_ok() {
                let _ = std::fs::remove_file(&path);
            }
        }
        if let Ok(entries) = std::fs::read_dir("/run/meshemu/by-netns") {
            for entry in entries.flatten() {
                if std::fs::read_link(entry.path()).is_ok_and(|t| t.starts_with(&self.run_dir)) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// A control socket connection.
pub struct Control {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Control {
    pub fn connect(path: &Path) -> Control {
        let stream = UnixStream::connect(path).expect("connect to the control socket");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Control { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    /// Sends a raw line, returns the reply.
    pub fn send_line(&mut self, line: &str) -> Value {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
        self.read()
    }

    pub fn request(&mut self, request: Value) -> Value {
        self.send_line(&request.to_string())
    }

    /// The next line from the medium.
    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read from the control socket");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("reply {line:?} is not JSON: {e}"))
    }
}
