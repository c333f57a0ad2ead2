//! Root integration tests of `meshemu-medium tap`: real namespaces, real
//! pings through the emulated medium. Each test has its own lab name and
//! removes its lab on every path (LabGuard). Skipped, with a message, when not
//! root.

mod common;

use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use meshemu_model::phy::{airtime_ns, data_mpdu_bytes, MacTimings};
use meshemu_model::RadioConfig;
use meshemu_radiostats::RadioStats;
use serde_json::json;

/// Minimum RTT of `ping` replies in ms, from its summary line; None if no reply.
fn ping_min_rtt_ms(guard: &LabGuard, from: usize, to: usize, count: u32) -> Option<f64> {
    let count = count.to_string();
    let (ok, out) = guard.exec(from, &["ping", "-n", "-q", "-c", &count, "-i", "0.2", "-W", "2", &node_ip(to)]);
    if !ok {
        return None;
    }
    let summary = out.lines().find(|l| l.contains("min/avg/max"))?;
    summary.split('=').nth(1)?.trim().split('/').next()?.parse().ok()
}

/// Least airtime of one hop of an ICMP echo of `ip_len` bytes: DIFS, then
/// RTS, CTS, DATA, ACK separated by SIFS, with a backoff of zero slots.
fn min_hop_ns(radio: &RadioConfig, ip_len: u32) -> u64 {
    let t = MacTimings::new(radio);
    let data = airtime_ns(radio, data_mpdu_bytes(ip_len), radio.data_rate_bps);
    t.difs + t.rts + t.sifs + t.cts + t.sifs + data + t.sifs + t.ack
}

#[test]
fn two_hop_ping_over_static_routes_costs_at_least_the_airtime_and_is_counted() {
    if !have_root("two_hop_ping") {
        return;
    }
    let guard = LabGuard::start(lab_config("mt-ping", &chain(3, 200.0), "static"));
    let links = guard.ready["links"].as_array().unwrap();
    assert!(links.iter().any(|l| l["a"] == 0 && l["b"] == 1 && l["in_rx_range"] == true));
    assert!(links.iter().any(|l| l["a"] == 0 && l["b"] == 2 && l["in_rx_range"] == false), "400 m is beyond 250 m");

    let (_, routes) = guard.exec(0, &["ip", "-4", "route", "show"]);
    assert!(routes.contains("10.0.0.3 via 10.0.0.2 dev wlan0"), "static route to n2 via n1: {routes}");

    let rtt_ms = ping_min_rtt_ms(&guard, 0, 2, 5).expect("n0 pings n2 across two hops");
    let radio: RadioConfig = serde_json::from_value(wavelan_radio()).unwrap();
    // Echo request and reply, two hops each: four RTS/CTS/DATA/ACK exchanges of 84 bytes.
    let floor_ms = 4.0 * min_hop_ns(&radio, 84) as f64 / 1e6;
    assert!(rtt_ms > floor_ms, "RTT {rtt_ms} ms below the model's minimum {floor_ms} ms");
    assert!(rtt_ms < 10.0 * floor_ms, "RTT {rtt_ms} ms on an idle medium");

    // n1 forwarded 5 requests and 5 replies (and answered ARP): its page counts them.
    let page = RadioStats::open(&guard.page("n1")).unwrap();
    let snapshot = page.read().unwrap();
    assert_eq!(snapshot.node_index, 1);
    assert!(snapshot.counters.rts_attempts >= 10, "{:?}", snapshot.counters);
    assert!(snapshot.counters.data_attempts >= 10, "{:?}", snapshot.counters);
    assert!(snapshot.counters.tx_data_frames >= 10, "{:?}", snapshot.counters);
    assert!(snapshot.peers[0].rx_frames >= 5 && snapshot.peers[2].rx_frames >= 5, "{:?}", snapshot.peers);
    assert!(snapshot.peers[1] == Default::default(), "own entry stays empty");
    assert!(snapshot.time_ns > 0);

    // A thread inside n1's namespace finds the same page on its own.
    let netns = std::fs::File::open(Path::new("/run/netns").join(&guard.namespaces[1])).unwrap();
    let own = std::thread::spawn(move || {
        nix::sched::setns(netns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        RadioStats::open_own().map(|p| p.node_index())
    })
    .join()
    .unwrap();
    assert_eq!(own.unwrap(), 1);
}

#[test]
fn events_waited_for_by_polling_are_not_carried_out_early() {
    if !have_root("polling") {
        return;
    }
    // With spin_ns at its 1 ms limit nearly every event of an exchange is
    // waited for by polling, not by the timer.
    let mut config = lab_config("mt-poll", &chain(3, 200.0), "static");
    config["realtime"]["spin_ns"] = json!(1_000_000);
    let guard = LabGuard::start(config);
    let rtt_ms = ping_min_rtt_ms(&guard, 0, 2, 5).expect("n0 pings n2 across two hops");
    let radio: RadioConfig = serde_json::from_value(wavelan_radio()).unwrap();
    let floor_ms = 4.0 * min_hop_ns(&radio, 84) as f64 / 1e6;
    assert!(rtt_ms > floor_ms, "RTT {rtt_ms} ms below the model's minimum {floor_ms} ms");
    assert!(rtt_ms < 10.0 * floor_ms, "RTT {rtt_ms} ms on an idle medium");
    let lateness = guard.control().request(json!({"op": "lateness"}));
    assert!(lateness["count"].as_u64().unwrap() > 0, "{lateness}");
}

#[test]
fn control_socket_answers_requests_and_explains_bad_ones() {
    if !have_root("control_socket") {
        return;
    }
    let guard = LabGuard::start(lab_config("mt-ctl", &chain(3, 200.0), "static"));
    // Pages exist with their peer addresses as soon as the lab is ready.
    let page = RadioStats::open(&guard.page("n2")).unwrap().read().unwrap();
    assert_eq!(page.peers[0].mac_address, [2, 0, 0, 0, 0, 1]);
    assert_eq!(page.peers[2].mac_address, [0; 6], "own entry");
    let mut control = guard.control();
    let mut events = guard.control();
    assert_eq!(events.request(json!({"op": "subscribe", "events": ["rx"]}))["ok"], true);

    let status = control.request(json!({"op": "status"}));
    assert_eq!(status["ok"], true, "{status}");
    assert_eq!(status["nodes"], 3);
    assert!(status["time_ns"].as_u64().unwrap() > 0);

    let positions = control.request(json!({"op": "positions"}));
    assert_eq!(positions["nodes"]["n2"], json!([400.0, 0.0, 0.0]));

    assert!(ping_min_rtt_ms(&guard, 0, 1, 1).is_some());
    let stats = control.request(json!({"op": "stats", "node": "n0"}));
    let n0 = &stats["nodes"]["n0"];
    assert!(n0["rts_attempts"].as_u64().unwrap() >= 1, "{stats}");
    // n1 only: n2 is out of n0's range, so they exchanged nothing.
    assert_eq!(n0["peers"].as_array().unwrap().len(), 1, "{stats}");
    assert_eq!(n0["peers"][0]["node"], "n1");
    assert_eq!(n0["peers"][0]["mac_address"], "02:00:00:00:00:02");
    assert_eq!(control.request(json!({"op": "stats"}))["nodes"].as_object().unwrap().len(), 3);
    let counters_only = control.request(json!({"op": "stats", "peers": false}));
    assert!(counters_only["nodes"]["n0"]["rts_attempts"].as_u64().unwrap() >= 1, "{counters_only}");
    assert!(counters_only["nodes"]["n0"].get("peers").is_none(), "{counters_only}");

    // The subscriber saw the echo arrive at n1 (after ARP traffic, maybe).
    let rx = (0..20).map(|_| events.read()).find(|e| e["node"] == "n1" && e["from"] == "n0").unwrap();
    assert_eq!(rx["event"], "rx");
    assert!(rx["rx_power_dbm"].as_f64().unwrap() < -60.0);

    let links = control.request(json!({"op": "links"}));
    assert_eq!(links["links"].as_array().unwrap().len(), 6);
    let lateness = control.request(json!({"op": "lateness"}));
    assert!(lateness["count"].as_u64().unwrap() > 0, "{lateness}");
    assert_eq!(lateness["buckets"].as_array().unwrap().len(), 62);
    let wakeups = &lateness["timer_wakeup"];
    assert!(wakeups["count"].as_u64().unwrap() > 0, "{lateness}");
    assert!(wakeups["p50_ns"].as_u64().unwrap() <= wakeups["max_ns"].as_u64().unwrap(), "{lateness}");

    for (line, expected) in [
        ("not json", "not JSON"),
        ("{\"op\": \"fly\"}", "unknown variant `fly`"),
        ("{\"op\": \"stats\", \"node\": \"n9\"}", "unknown node \"n9\""),
        ("{\"op\": \"move\", \"node\": \"n1\"}", "missing field `position`"),
        ("{\"op\": \"set_radio\", \"node\": \"n1\", \"radio\": {\"cw_min\": -3}}", "radio.cw_min"),
        ("{\"op\": \"set_link\", \"a\": \"n1\", \"b\": \"n1\"}", "different nodes"),
        ("{\"op\": \"capture\", \"run\": true, \"path\": \"rel.pcap\"}", "not absolute"),
        ("{\"op\": \"capture\", \"run\": false}", "no capture is running"),
    ] {
        let reply = control.send_line(line);
        assert_eq!(reply["ok"], false, "{line}: {reply}");
        let error = reply["error"].as_str().unwrap();
        assert!(error.contains(expected), "{line}: {error}");
    }
    assert_eq!(control.request(json!({"op": "set_radio", "node": "n1", "radio": {"cw_min": 15}}))["ok"], true);
    // Still serving after all that.
    assert_eq!(control.request(json!({"op": "status"}))["ok"], true);

    // Past the file mode (opened up here), a peer that is not root is refused.
    let python = Path::new("/usr/bin/python3");
    if python.exists() && Command::new("setpriv").arg("--version").output().is_ok() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(guard.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
        let script = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(5)\ns.connect(sys.argv[1])\nprint(s.makefile().readline())";
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(python)
            .args(["-c", script])
            .arg(guard.socket())
            .output()
            .unwrap();
        let reply = String::from_utf8_lossy(&out.stdout);
        assert!(reply.contains("serves root only"), "{reply} {}", String::from_utf8_lossy(&out.stderr));
    } else {
        println!("not testing the SO_PEERCRED check: needs setpriv and /usr/bin/python3");
    }
}

#[test]
fn a_node_moved_out_of_range_is_unreachable_until_it_comes_back() {
    if !have_root("move_out_of_range") {
        return;
    }
    let guard = LabGuard::start(lab_config("mt-move", &chain(3, 200.0), "static"));
    assert!(ping_min_rtt_ms(&guard, 0, 2, 2).is_some(), "reachable at first");
    let mut control = guard.control();
    let moved = control.request(json!({"op": "move", "node": "n2", "position": [2000.0, 0.0, 0.0]}));
    assert_eq!(moved["ok"], true, "{moved}");
    assert!(ping_min_rtt_ms(&guard, 0, 2, 3).is_none(), "n2 at 2 km answers pings");
    let stats = control.request(json!({"op": "stats", "node": "n1"}));
    assert!(stats["nodes"]["n1"]["retry_drops"].as_u64().unwrap() >= 1, "n1 gave up on n2: {stats}");

    control.request(json!({"op": "move", "node": "n2", "position": [400.0, 0.0, 0.0]}));
    assert!(ping_min_rtt_ms(&guard, 0, 2, 2).is_some(), "reachable again");
}

#[test]
fn air_capture_decodes_in_tshark_as_rts_cts_data_ack() {
    if !have_root("air_capture") {
        return;
    }
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipping air_capture: tshark is not installed");
        return;
    }
    let guard = LabGuard::start(lab_config("mt-pcap", &chain(3, 200.0), "static"));
    let path = guard.run_dir.join("air.pcap");
    let mut control = guard.control();
    let started = control.request(json!({"op": "capture", "path": path, "run": true}));
    assert_eq!(started["ok"], true, "{started}");
    assert!(ping_min_rtt_ms(&guard, 0, 2, 2).is_some());
    let stopped = control.request(json!({"op": "capture", "run": false}));
    assert!(stopped["frames"].as_u64().unwrap() >= 16, "{stopped}");

    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args(["-T", "fields", "-e", "wlan.fc.type_subtype", "-e", "wlan.ta", "-e", "ip.dst", "-e", "radiotap.datarate"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let subtype = |row: &Vec<&str>| u32::from_str_radix(row[0].trim_start_matches("0x"), 16).unwrap();
    for (name, value) in [("RTS", 0x1b), ("CTS", 0x1c), ("ACK", 0x1d), ("Data", 0x20)] {
        assert!(rows.iter().any(|r| subtype(r) == value), "no {name} frame decoded in:\n{text}");
    }
    // Data frames decode down to IP: the echo to n2, sent by n0 and by n1.
    let data_to_n2: Vec<&Vec<&str>> = rows.iter().filter(|r| subtype(r) == 0x20 && r[2] == "10.0.0.3").collect();
    assert!(data_to_n2.iter().any(|r| r[1] == "02:00:00:00:00:01"), "{text}");
    assert!(data_to_n2.iter().any(|r| r[1] == "02:00:00:00:00:02"), "{text}");
    assert!(data_to_n2.iter().all(|r| r[3] == "2"), "data at 2 Mbit/s: {text}");
}

#[test]
fn sigterm_takes_everything_down() {
    if !have_root("sigterm_teardown") {
        return;
    }
    let mut guard = LabGuard::start(lab_config("mt-term", &chain(3, 200.0), "static"));
    let inodes: Vec<u64> = guard
        .namespaces
        .iter()
        .map(|ns| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(Path::new("/run/netns").join(ns)).unwrap()))
        .collect();
    for inode in &inodes {
        assert!(Path::new("/run/meshemu/by-netns").join(inode.to_string()).is_symlink());
    }
    assert!(guard.socket().exists());

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(guard.pid()), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut guard.child, Duration::from_secs(10)).expect("the medium exits after SIGTERM");
    assert!(status.success(), "exit status {status}: {}", guard.take_stderr());
    for ns in &guard.namespaces {
        assert!(!Path::new("/run/netns").join(ns).exists(), "namespace {ns} left behind");
    }
    for inode in &inodes {
        assert!(!Path::new("/run/meshemu/by-netns").join(inode.to_string()).exists(), "by-netns link left");
    }
    assert!(!guard.socket().exists(), "control socket left");
    assert!(guard.page("n0").exists(), "the final statistics stay for the control plane");
}

#[test]
fn shutdown_request_takes_everything_down() {
    if !have_root("shutdown_request") {
        return;
    }
    let mut guard = LabGuard::start(lab_config("mt-shut", &chain(2, 100.0), "none"));
    let (_, routes) = guard.exec(0, &["ip", "-4", "route", "show"]);
    assert_eq!(routes.lines().count(), 1, "routing none: only the subnet route: {routes}");
    let reply = guard.control().request(json!({"op": "shutdown"}));
    assert_eq!(reply["ok"], true);
    let status = wait_exit(&mut guard.child, Duration::from_secs(10)).expect("the medium exits");
    assert!(status.success());
    assert!(guard.namespaces.iter().all(|ns| !Path::new("/run/netns").join(ns).exists()));
    assert!(!guard.socket().exists());
}

#[test]
fn a_failed_bring_up_names_the_node_and_step_and_leaves_nothing() {
    if !have_root("failed_bring_up") {
        return;
    }
    let config = lab_config("mt-fail", &chain(4, 100.0), "static");
    // Somebody else's namespace name is taken by node 2.
    let taken = Path::new("/run/netns/mt-fail-n2");
    std::fs::create_dir_all("/run/netns").unwrap();
    std::fs::write(taken, b"").unwrap();
    struct RemoveTaken;
    impl Drop for RemoveTaken {
        fn drop(&mut self) {
            let _ = std::fs::remove_file("/run/netns/mt-fail-n2");
        }
    }
    let _remove = RemoveTaken;

    let error = LabGuard::try_start(config.clone()).err().expect("bring-up must fail");
    assert!(error.contains("node n2 (namespace mt-fail-n2): creating the network namespace"), "{error}");
    assert!(error.contains("exists already"), "{error}");
    assert!(taken.exists(), "what was not ours stays");
    for i in [0, 1, 3] {
        assert!(!Path::new(&format!("/run/netns/mt-fail-n{i}")).exists(), "n{i}'s namespace left behind");
    }
}

#[test]
fn bad_configurations_are_refused_with_the_field_named() {
    let dir = std::env::temp_dir().join(format!("meshemu-medium-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = lab_config("mt-bad", &chain(2, 100.0), "static");
    config["nodes"][1]["prefix_len"] = json!(40);
    let path = dir.join("lab.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let out = Command::new(medium_program()).arg("tap").arg("--config").arg(&path).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nodes[1].prefix_len: 40 is not in 1..=32"), "{stderr}");
    assert!(!Path::new("/run/netns/mt-bad-n0").exists());
}

fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}
