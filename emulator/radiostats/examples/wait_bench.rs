//! What waiting for a page change costs: the writer's `update()` with nobody
//! waiting and with a thread blocked in `wait_for_change()` (the writer then
//! calls FUTEX_WAKE), and the wake-up latency from the writer's update to the
//! waiter's return. Prints min/median/max over several runs.
//!
//!     cargo run --release -p meshemu-radiostats --example wait_bench

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshemu_radiostats::{NodeCounters, PeerEntry, RadioStats, Writer};

const PEERS: u32 = 100;
const UPDATES_PER_RUN: u64 = 100_000;
const WAKES_PER_RUN: usize = 2_000;
const RUNS: usize = 7;

fn summary(mut runs: Vec<f64>) -> (f64, f64, f64) {
    runs.sort_by(f64::total_cmp);
    (runs[0], runs[runs.len() / 2], runs[runs.len() - 1])
}

fn update_cost(writer: &mut Writer, peers: &[PeerEntry]) -> Vec<f64> {
    let mut counters = NodeCounters::default();
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..UPDATES_PER_RUN {
                counters.tx_data_frames += 1;
                writer.update(counters.tx_data_frames, &counters, peers);
            }
            start.elapsed().as_nanos() as f64 / UPDATES_PER_RUN as f64
        })
        .collect()
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("radio");
    let mut writer = Writer::create(&path, 0, PEERS).expect("create page");
    let peers = vec![PeerEntry::default(); PEERS as usize];
    let reader = Arc::new(RadioStats::open(&path).expect("open page"));

    let (min, median, max) = summary(update_cost(&mut writer, &peers));
    println!("update(), {PEERS} peers, nobody waiting      min {min:>7.1}  median {median:>7.1}  max {max:>7.1} ns");

    // A waiter that blocks again at once after every wake-up.
    let stop = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (reader, stop) = (reader.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let seen = reader.seq();
                reader.wait_for_change(seen, Duration::from_millis(100)).expect("wait");
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let (min, median, max) = summary(update_cost(&mut writer, &peers));
    println!("update(), {PEERS} peers, one thread waiting   min {min:>7.1}  median {median:>7.1}  max {max:>7.1} ns");
    stop.store(true, Ordering::Relaxed);
    waiter.join().unwrap();

    // Latency: the writer stamps the time just before update(); the waiter
    // measures from that stamp to its return. The writer waits for the
    // waiter to block again before the next update.
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let blocked = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (reader, stamp, blocked) = (reader.clone(), stamp.clone(), blocked.clone());
        std::thread::spawn(move || {
            let mut latencies = Vec::with_capacity(RUNS * WAKES_PER_RUN);
            for _ in 0..RUNS * WAKES_PER_RUN {
                let seen = reader.seq();
                blocked.store(true, Ordering::Release);
                while !reader.wait_for_change(seen, Duration::from_secs(5)).expect("wait") {}
                let woke = base.elapsed().as_nanos() as u64;
                latencies.push(woke.saturating_sub(stamp.load(Ordering::Acquire)) as f64 / 1000.0);
            }
            latencies
        })
    };
    let mut counters = NodeCounters::default();
    for _ in 0..RUNS * WAKES_PER_RUN {
        while !blocked.swap(false, Ordering::AcqRel) {
            std::hint::spin_loop();
        }
        // Give the waiter time to get into the futex (it may still be on its way).
        std::thread::sleep(Duration::from_micros(200));
        counters.tx_data_frames += 1;
        stamp.store(base.elapsed().as_nanos() as u64, Ordering::Release);
        writer.update(counters.tx_data_frames, &counters, &peers);
    }
    let latencies = waiter.join().unwrap();
    let per_run: Vec<Vec<f64>> = latencies.chunks(WAKES_PER_RUN).map(|c| c.to_vec()).collect();
    let quantile = |run: &[f64], q: f64| {
        let mut sorted = run.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted[((sorted.len() - 1) as f64 * q) as usize]
    };
    for (label, q) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
        let (min, median, max) = summary(per_run.iter().map(|run| quantile(run, q)).collect());
        println!("wake-up latency {label} over {WAKES_PER_RUN} wakes       min {min:>7.1}  median {median:>7.1}  max {max:>7.1} µs");
    }
}
