//! How much a radio statistics read costs: ns per call of `read_counters()`
//! (counters only) and `read_into()` (whole page, 100 peers), with the page
//! idle and with a writer updating it every 10 µs (100k updates/s, more than
//! the medium's whole frame rate on this kind of machine). Prints
//! min/median/max over several runs.
//!
//!     cargo run --release -p meshemu-radiostats --example read_bench

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use meshemu_radiostats::{NodeCounters, PeerEntry, RadioStats, Snapshot, Writer};

const PEERS: u32 = 100;
const READS_PER_RUN: u32 = 200_000;
const RUNS: usize = 7;
const WRITE_INTERVAL: std::time::Duration = std::time::Duration::from_micros(10);

fn ns_per_call(mut call: impl FnMut()) -> Vec<f64> {
    let mut runs: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..READS_PER_RUN {
                call();
            }
            start.elapsed().as_nanos() as f64 / READS_PER_RUN as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs
}

fn report(what: &str, runs: &[f64]) {
    println!(
        "{what:<44} min {:>8.1}  median {:>8.1}  max {:>8.1} ns/read",
        runs[0],
        runs[runs.len() / 2],
        runs[runs.len() - 1]
    );
}

fn measure(reader: &RadioStats, label: &str) {
    report(&format!("read_counters(), {label}"), &ns_per_call(|| {
        std::hint::black_box(reader.read_counters().unwrap());
    }));
    let mut snapshot = Snapshot::default();
    report(&format!("read_into(), {PEERS} peers, {label}"), &ns_per_call(|| {
        reader.read_into(&mut snapshot).unwrap();
        std::hint::black_box(&snapshot);
    }));
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("radio");
    let mut writer = Writer::create(&path, 0, PEERS).expect("create page");
    let peers = vec![PeerEntry::default(); PEERS as usize];
    writer.update(1, &NodeCounters::default(), &peers);
    let reader = RadioStats::open(&path).expect("open page");

    println!("{RUNS} runs of {READS_PER_RUN} reads each");
    measure(&reader, "idle page");

    let stop = Arc::new(AtomicBool::new(false));
    let writer_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut updates = 0u64;
            let mut counters = NodeCounters::default();
            while !stop.load(Ordering::Relaxed) {
                updates += 1;
                counters.rts_attempts = updates;
                writer.update(updates, &counters, &peers);
                let next = Instant::now() + WRITE_INTERVAL;
                while Instant::now() < next {
                    std::hint::spin_loop();
                }
            }
            updates
        })
    };
    let start = Instant::now();
    measure(&reader, "writer every 10 µs");
    stop.store(true, Ordering::Relaxed);
    let updates = writer_thread.join().unwrap();
    println!(
        "(the writer made {:.0} updates/s meanwhile)",
        updates as f64 / start.elapsed().as_secs_f64()
    );
}
