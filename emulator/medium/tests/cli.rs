//! `meshemu-medium links` and `sim`: JSON in, JSON out, errors naming the
//! field. No root needed.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::{json, Value};

/// Runs `meshemu-medium <subcommand> -` with `input` on stdin.
fn run_with_stdin(subcommand: &str, input: &Value) -> Output {
    let mut child = Command::new(medium_program())
        .args([subcommand, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn medium_of(positions: &[[f64; 3]]) -> Value {
    lab_config("cli", positions, "static")["medium"].clone()
}

#[test]
fn links_reports_who_hears_whom_at_time_0() {
    let out = run_with_stdin("links", &medium_of(&chain(3, 200.0)));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["nodes"], 3);
    let links = report["links"].as_array().unwrap();
    let find = |a: u64, b: u64| links.iter().find(|l| l["a"] == a && l["b"] == b).cloned();
    assert_eq!(find(0, 1).unwrap()["in_rx_range"], true, "200 m < 250 m");
    let far = find(0, 2).unwrap();
    assert_eq!((far["in_rx_range"].clone(), far["in_cs_range"].clone()), (json!(false), json!(true)), "400 m < 550 m");
    assert!(far["rx_power_dbm"].as_f64().unwrap() < find(0, 1).unwrap()["rx_power_dbm"].as_f64().unwrap());
}

#[test]
fn links_refuses_a_bad_configuration_naming_the_field() {
    let mut medium = medium_of(&chain(2, 100.0));
    medium["nodes"][1]["radio"]["data_rate_bps"] = json!(3_000_000);
    let out = run_with_stdin("links", &medium);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stdin: nodes[1].radio.data_rate_bps: 3 Mbit/s is not a dsss rate"), "{stderr}");

    let out = Command::new(medium_program()).args(["links", "/nonexistent/medium.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent/medium.json"));
}

#[test]
fn sim_runs_a_two_hop_flow_and_repeats_itself_exactly() {
    let scenario = json!({
        "medium": medium_of(&chain(3, 200.0)),
        "duration_ns": 3_000_000_000u64, "warmup_ns": 500_000_000u64, "routing": "static",
        "flows": [{"name": "f0", "src": 0, "dst": 2, "packet_bytes": 512,
                   "traffic": {"kind": "cbr", "rate_bps": 100000}, "start_ns": 0, "stop_ns": null}]
    });
    let first = run_with_stdin("sim", &scenario);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let result: Value = serde_json::from_slice(&first.stdout).unwrap();
    let flow = &result["flows"][0];
    assert_eq!(flow["hops"], 2);
    assert!(flow["delivered"].as_u64().unwrap() > 40, "{flow}");
    let again: Value = serde_json::from_slice(&run_with_stdin("sim", &scenario).stdout).unwrap();
    assert_eq!(result["trace_digest"], again["trace_digest"]);

    let mut bad = scenario.clone();
    bad["flows"][0]["src"] = json!(7);
    let out = run_with_stdin("sim", &bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("flows[0].src"), "{}", String::from_utf8_lossy(&out.stderr));
}
