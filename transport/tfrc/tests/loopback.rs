//! Real sockets over loopback: the receiver's test options give a
//! deterministic lossy path (drop every 100th packet) with 20 ms of delay.

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::thread;
use std::time::Duration;

use meshemu_tfrc::equation;
use meshemu_tfrc::net::{
    FlowEnd, FlowSummary, ReceiverBinding, RecvOptions, SendOptions, SenderBinding, SenderSummary,
};
use meshemu_tfrc::packet::Feedback;
use meshemu_tfrc::re::{PhyParams, ReConfig};

const PACKET: usize = 1000;

fn receiver_options(drop_every: u64) -> RecvOptions {
    RecvOptions {
        bind: "127.0.0.1:0".parse().unwrap(),
        once: true,
        idle_timeout: Duration::from_secs(5),
        history_discounting: true,
        report_interval: None,
        trace: None,
        trace_packets: false,
        drop_every: Some(drop_every),
        feedback_delay: Duration::from_millis(20),
        stop_after: Some(Duration::from_secs(60)),
    }
}

fn sender_options(peer: SocketAddr, seconds: u64, re: Option<ReConfig>) -> SendOptions {
    SendOptions {
        peer,
        bind: None,
        duration: Duration::from_secs(seconds),
        packet_size: PACKET,
        max_rate_bps: None,
        re,
        session: 42,
        report_interval: Some(Duration::from_secs(1)),
        trace: None,
        trace_packets: false,
        linger: Duration::from_secs(2),
    }
}

/// Runs one flow; `during` runs in parallel with the sender's address.
fn flow(
    receiver: RecvOptions,
    seconds: u64,
    re: Option<ReConfig>,
    during: impl FnOnce(SocketAddr, SocketAddr) + Send + 'static,
) -> (SenderSummary, FlowSummary) {
    let rx = ReceiverBinding::bind(receiver).unwrap();
    let rx_addr = rx.local_addr().unwrap();
    let rx_thread = thread::spawn(move || rx.run(|_| {}, |_| {}).unwrap());
    let tx = SenderBinding::bind(sender_options(rx_addr, seconds, re)).unwrap();
    let tx_addr = SocketAddr::new(rx_addr.ip(), tx.local_addr().unwrap().port());
    let helper = thread::spawn(move || during(tx_addr, rx_addr));
    let sent = tx.run(|_| {}).unwrap();
    helper.join().unwrap();
    let mut flows = rx_thread.join().unwrap();
    assert_eq!(flows.len(), 1);
    (sent, flows.remove(0))
}

/// Sending rate and mean RTT over the reports from `from_s` on.
fn steady_state(summary: &SenderSummary, from_s: f64) -> (f64, Duration) {
    let lines: Vec<_> = summary
        .intervals
        .iter()
        .filter(|l| l.start_s >= from_s)
        .collect();
    let seconds: f64 = lines.iter().map(|l| l.end_s - l.start_s).sum();
    let bits: f64 = lines
        .iter()
        .map(|l| l.sending_rate_bps * (l.end_s - l.start_s))
        .sum();
    let rtts: Vec<f64> = lines.iter().filter_map(|l| l.rtt_ms).collect();
    let rtt_ms = rtts.iter().sum::<f64>() / rtts.len() as f64;
    (bits / 8.0 / seconds, Duration::from_secs_f64(rtt_ms / 1e3))
}

fn assert_near_equation(name: &str, summary: &SenderSummary) {
    let (rate, rtt) = steady_state(summary, 3.0);
    let p = summary.loss_event_rate;
    let expected = equation::throughput(PACKET as f64, rtt, p);
    let error = (rate - expected) / expected;
    println!(
        "{name}: sending {:.0} B/s, equation {:.0} B/s for p = {p:.5}, RTT = {:.2} ms ({:+.2} %)",
        rate,
        expected,
        rtt.as_secs_f64() * 1e3,
        100.0 * error
    );
    assert!(
        error.abs() < 0.10,
        "{name}: {:+.1} % off the equation",
        100.0 * error
    );
}

#[test]
fn tfrc_converges_to_the_equation_over_real_sockets() {
    let (sent, received) = flow(receiver_options(100), 10, None, |_, _| {});
    assert!(
        (sent.loss_event_rate - 0.01).abs() < 1e-4,
        "p = {}",
        sent.loss_event_rate
    );
    assert_near_equation("TFRC, 1 % loss, 20 ms", &sent);
    // Both ends agree on what happened.
    assert_eq!(received.ended_by, FlowEnd::Fin);
    assert!(sent.final_counts);
    assert_eq!(sent.received_packets, Some(received.packets));
    assert_eq!(received.sent_packets, Some(sent.sent_packets));
    // Every drop is declared lost, except one so close to the end that
    // fewer than three packets followed it.
    assert!(
        received.lost_packets <= received.test_drops
            && received.test_drops <= received.lost_packets + 1
    );
    assert!(
        (received.loss_fraction - 0.01).abs() < 0.002,
        "loss {}",
        received.loss_fraction
    );
    assert_eq!(received.hops, Some(1), "loopback is one hop");
}

#[test]
fn re_tfrc_with_hops_from_the_ttl_runs_at_the_equation_when_not_overloaded() {
    // One hop from the TTL: r(1) ≈ 15 ms < the 20 ms path, so r_opt is the
    // measured minimum and a steady 20 ms RTT is no overload.
    let re = ReConfig::new(PhyParams::dsss(), PACKET);
    let (sent, _) = flow(receiver_options(100), 10, Some(re), |_, _| {});
    let re = sent.re.expect("RE summary");
    assert_eq!(re.hops, Some(1));
    assert!(
        re.r_model_ms.is_some_and(|r| (r - 14.67).abs() < 0.1),
        "{:?}",
        re.r_model_ms
    );
    assert!(re.increases > 0);
    assert_near_equation("RE-TFRC, 1 % loss, 20 ms", &sent);
}

#[test]
fn garbage_is_counted_and_ignored() {
    let garbage = |tx: SocketAddr, rx: SocketAddr| {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let wrong_session = Feedback {
            session: 7,
            echo_timestamp_us: 0,
            elapsed_us: 0,
            x_recv: 1,
            loss_event_rate: 0.9,
            highest_seq: 0,
            received_packets: 0,
            received_bytes: 0,
            jitter_us: 0,
            hops: 0,
            flags: 0,
        }
        .to_bytes();
        thread::sleep(Duration::from_millis(500));
        for i in 0..200u32 {
            let junk: Vec<u8> = (0..(i % 90)).map(|j| (i * 31 + j * 7) as u8).collect();
            socket.send_to(&junk, tx).unwrap();
            socket.send_to(&junk, rx).unwrap();
            socket.send_to(b"TF\x01\x02 too short", tx).unwrap();
            thread::sleep(Duration::from_millis(10));
        }
        // Valid bytes from the wrong address, and a feedback from the right
        // address but another session, cannot steer the sender either.
        socket.send_to(&wrong_session, tx).unwrap();
    };
    let (sent, received) = flow(receiver_options(100), 6, None, garbage);
    assert!(sent.feedback.malformed >= 400, "{:?}", sent.feedback);
    assert!(sent.feedback.unexpected >= 1, "{:?}", sent.feedback);
    assert!(
        received.malformed_packets >= 190,
        "{}",
        received.malformed_packets
    );
    // The flow itself is as without garbage.
    assert!((sent.loss_event_rate - 0.01).abs() < 1e-4);
    assert!(sent.feedback.accepted > 100);
}

fn tfrc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tfrc"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_tool_end_to_end() {
    let dir = std::env::temp_dir().join(format!("tfrc-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rx_json = dir.join("rx.json");
    let tx_json = dir.join("tx.json");
    let trace = dir.join("tx.trace");
    // Find a free port, then let the receiver take it.
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let rx = Command::new(env!("CARGO_BIN_EXE_tfrc"))
        .args([
            "recv",
            "--bind",
            &bind,
            "--once",
            "--drop-every",
            "50",
            "--feedback-delay",
            "10ms",
            "--stop-after",
            "30s",
            "-q",
        ])
        .arg("--json")
        .arg(&rx_json)
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    let out = Command::new(env!("CARGO_BIN_EXE_tfrc"))
        .args([
            "send", &bind, "-t", "3s", "--mode", "re-tfrc", "--hops", "4", "-q",
        ])
        .arg("--json")
        .arg(&tx_json)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(rx.wait_with_output().unwrap().status.success());
    let sent: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&tx_json).unwrap()).unwrap();
    let received: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rx_json).unwrap()).unwrap();
    assert_eq!(sent["mode"], "re-tfrc");
    assert_eq!(sent["re"]["hops"], 4);
    assert_eq!(received["ended_by"], "fin");
    assert_eq!(sent["received_packets"], received["packets"]);
    assert!(sent["rtt_samples_ms"].as_array().unwrap().len() > 10);
    for key in [
        "throughput_bps",
        "sending_rate_bps",
        "loss_event_rate",
        "loss_fraction",
        "jitter_ms",
        "rtt_ms",
    ] {
        assert!(!sent[key].is_null(), "sender summary lacks {key}");
    }
    // The trace is JSON lines with a feedback line per accepted feedback.
    let lines = std::fs::read_to_string(&trace).unwrap();
    let feedback_lines = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "feedback")
        .count();
    assert_eq!(
        feedback_lines as u64,
        sent["feedback"]["accepted"].as_u64().unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_gets_a_clear_error() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["send", "127.0.0.1:9", "-t", "10"],
            "bad duration '10': the unit is missing",
        ),
        (
            &["send", "127.0.0.1:9", "--max-rate", "5Mbit"],
            "unknown unit",
        ),
        (
            &["send", "127.0.0.1"],
            "bad receiver address '127.0.0.1' (expected HOST:PORT)",
        ),
        (
            &["send", "127.0.0.1:9", "--size", "10"],
            "packet size 10 is outside 36..=65507",
        ),
        (
            &["send", "127.0.0.1:9", "--hops", "3"],
            "--hops only applies to --mode re-tfrc",
        ),
        (
            &["send", "127.0.0.1:9", "--mode", "re-tfrc", "--hops", "0"],
            "hop count must be at least 1",
        ),
        (
            &[
                "send",
                "127.0.0.1:9",
                "--mode",
                "re-tfrc",
                "--re-tolerance",
                "2",
            ],
            "tolerance 2 is outside 0..1",
        ),
        (
            &["recv", "--drop-every", "1"],
            "drop-every must be at least 2",
        ),
        (
            &[
                "recv",
                "--bind",
                "127.0.0.1:1",
                "--json",
                "/nonexistent/dir/x.json",
            ],
            "cannot create JSON output",
        ),
    ];
    for (args, expected) in cases {
        let out = tfrc(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr.contains(expected),
            "{args:?}: stderr {stderr:?} lacks {expected:?}"
        );
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    }
}
