//! Bring-up and teardown time of a 100-node lab (10×10 grid, 200 m apart,
//! static routes: about 95 host routes per node), five times each way:
//! - in process: `Lab::bring_up` (namespaces, TAPs, addresses, sysctls,
//!   routes, statistics pages, by-netns links, control socket) and its drop;
//! - end to end: `meshemu-medium tap` from spawn to its ready line, and from
//!   SIGTERM to its exit.
//!
//! Needs root. Build the binary first:
//!     cargo build --release -p meshemu-medium && cargo run --release -p meshemu-medium --example bringup

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use meshemu_medium::backend::{Lab, Tap};
use meshemu_medium::config::LabConfig;

const RUNS: usize = 5;
const SIDE: usize = 10;

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<32} min {:>7.1} ms  median {:>7.1} ms  max {:>7.1} ms",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}

fn main() {
    if !have_root("bringup benchmark") {
        return;
    }
    let nodes = SIDE * SIDE;
    println!("{nodes} nodes, {RUNS} runs each");

    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let config = LabConfig::from_json(&lab_config("bench-lab", &grid(SIDE, 200.0), "static").to_string()).unwrap();
        let run_dir = config.run_dir.clone();
        let start = Instant::now();
        let lab = Lab::bring_up(config, &Tap).expect("bring-up");
        ups.push(start.elapsed());
        let start = Instant::now();
        drop(lab);
        downs.push(start.elapsed());
        let _ = std::fs::remove_dir_all(run_dir);
    }
    report("in process: up", ups);
    report("in process: down", downs);

    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let start = Instant::now();
        let mut guard = LabGuard::start(lab_config("bench-lab", &grid(SIDE, 200.0), "static"));
        ups.push(start.elapsed());
        let start = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(guard.pid()), nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = guard.child.wait().unwrap();
        downs.push(start.elapsed());
        assert!(status.success(), "{}", guard.take_stderr());
    }
    report("process: spawn to ready", ups);
    report("process: SIGTERM to exit", downs);
}
