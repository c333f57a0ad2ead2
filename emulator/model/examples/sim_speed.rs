//! Benchmark: simulated seconds per wall-clock second of the sim driver, for
//! 50 saturated stations in one cell and for a 13×13 grid (200 m spacing)
//! carrying 10 multi-hop CBR flows, both with the ns-2 WaveLAN radio.
//! Prints min/median/max of 5 runs of each.
//!
//!     cargo run --release -p meshemu-model --example sim_speed

use std::time::Instant;

use meshemu_model::sim::{self, FlowConfig, FlowDest, Routing, Scenario, Traffic};
use meshemu_model::{MacAddr, MacConfig, MediumConfig, MobilityConfig, NodeConfig, RadioConfig};

const S: u64 = 1_000_000_000;
const RUNS: usize = 5;

/// The ns2-wavelan profile, resolved (see emulator/meshemu/profiles/).
fn wavelan() -> RadioConfig {
    serde_json::from_value(serde_json::json!({
        "phy": "dsss", "data_rate_bps": 2000000, "basic_rate_bps": 1000000, "preamble": "long",
        "signal_extension_ns": 0, "frequency_hz": 914e6, "tx_power_dbm": 10.0 * (281.83815f64).log10(),
        "antenna_gain_dbi": 0.0, "antenna_height_m": 1.5, "system_loss_db": 0.0,
        "propagation": {"model": "two_ray_ground"},
        "rx_threshold_dbm": 10.0 * (3.652e-7f64).log10(), "cs_threshold_dbm": 10.0 * (1.559e-8f64).log10(),
        "capture_threshold_db": 10.0, "capture_restart": false, "noise_floor_dbm": -101.0,
        "interference_floor_dbm": 10.0 * (1.559e-8f64).log10() - 10.0, "bit_error_rate": 0.0,
        "slot_ns": 20000, "sifs_ns": 10000, "cw_min": 31, "cw_max": 1023, "rts_threshold_bytes": 0,
        "short_retry_limit": 7, "long_retry_limit": 4, "queue_len": 50, "queue_priority": true
    }))
    .expect("valid radio")
}

fn nodes(positions: &[[f64; 2]]) -> Vec<NodeConfig> {
    positions
        .iter()
        .enumerate()
        .map(|(i, p)| NodeConfig {
            name: format!("n{i}"),
            mac_address: MacAddr([2, 0, 0, 0, (i >> 8) as u8, i as u8]),
            position: [p[0], p[1], 0.0],
            promiscuous: false,
            mobility: MobilityConfig::Static,
            radio: wavelan(),
        })
        .collect()
}

fn flow(name: String, src: usize, dst: usize, traffic: Traffic, packet_bytes: u32) -> FlowConfig {
    FlowConfig { name, src, dst: FlowDest::Node(dst), packet_bytes, traffic, start_ns: 0, stop_ns: None }
}

/// 50 stations on a 10 m circle around n0, all saturated toward it.
fn cell() -> Scenario {
    let mut pos = vec![[0.0, 0.0]];
    for k in 0..50 {
        let a = k as f64 * std::f64::consts::TAU / 50.0;
        pos.push([10.0 * a.cos(), 10.0 * a.sin()]);
    }
    let flows = (1..=50).map(|s| flow(format!("f{s}"), s, 0, Traffic::Saturated, 1460)).collect();
    Scenario {
        medium: MediumConfig { seed: 1, mac: MacConfig::Dcf, nodes: nodes(&pos), links: vec![] },
        duration_ns: 20 * S,
        warmup_ns: 0,
        window_end_ns: None,
        routing: Routing::Static,
        flows,
        snapshots_ns: vec![],
        trace: false,
    }
}

/// 13×13 grid, 200 m apart; 10 CBR flows of 100 kbit/s between fixed
/// far-apart node pairs (corners, edge midpoints, opposite sides).
fn grid() -> Scenario {
    let pos: Vec<[f64; 2]> = (0..169).map(|i| [(i % 13) as f64 * 200.0, (i / 13) as f64 * 200.0]).collect();
    let at = |row: usize, col: usize| row * 13 + col;
    let pairs = [
        (at(0, 0), at(12, 12)),
        (at(12, 0), at(0, 12)),
        (at(6, 0), at(6, 12)),
        (at(0, 6), at(12, 6)),
        (at(2, 1), at(10, 11)),
        (at(11, 2), at(1, 9)),
        (at(3, 12), at(9, 0)),
        (at(12, 4), at(0, 8)),
        (at(4, 4), at(8, 8)),
        (at(8, 3), at(3, 10)),
    ];
    let flows = pairs.iter().enumerate().map(|(k, &(s, d))| flow(format!("f{k}"), s, d, Traffic::Cbr { rate_bps: 100_000.0 }, 512)).collect();
    Scenario {
        medium: MediumConfig { seed: 1, mac: MacConfig::Dcf, nodes: nodes(&pos), links: vec![] },
        duration_ns: 60 * S,
        warmup_ns: 0,
        window_end_ns: None,
        routing: Routing::Static,
        flows,
        snapshots_ns: vec![],
        trace: false,
    }
}

fn bench(name: &str, scenario: &Scenario) {
    let mut speeds = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = sim::run(scenario).expect("scenario runs");
        let wall = start.elapsed().as_secs_f64();
        speeds.push(scenario.duration_ns as f64 * 1e-9 / wall);
        last = Some(out);
    }
    speeds.sort_by(f64::total_cmp);
    let out = last.expect("ran");
    let delivered: u64 = out.flows.iter().map(|f| f.delivered).sum();
    let hops: Vec<u32> = out.flows.iter().map(|f| f.hops).collect();
    println!(
        "{name}: {:.0} / {:.0} / {:.0} simulated s per wall s (min/median/max of {RUNS}); {} simulated s, {} events, {delivered} packets delivered, hops {hops:?}",
        speeds[0],
        speeds[RUNS / 2],
        speeds[RUNS - 1],
        scenario.duration_ns / S,
        out.events,
    );
}

fn main() {
    bench("50 saturated stations, one cell", &cell());
    bench("13x13 grid, 10 CBR flows", &grid());
}
