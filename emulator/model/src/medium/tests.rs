//! Scripted tests of the medium in virtual time: a few nodes on a line, frames
//! handed down at chosen times, and the actions checked against the timings
//! the standard (and the project's choices) prescribe.

use super::*;
use crate::config::{MacConfig, MobilityConfig, NodeConfig};
use crate::phy::tests::wavelan;
use crate::phy::{airtime_ns, data_mpdu_bytes, mw_to_dbm};

const US: Time = 1_000;
const MS: Time = 1_000_000;

fn node_at(i: usize, x: f64, radio: &RadioConfig) -> NodeConfig {
    NodeConfig {
        name: format!("n{i}"),
        mac_address: crate::MacAddr([2, 0, 0, 0, 0, i as u8 + 1]),
        position: [x, 0.0, 0.0],
        promiscuous: false,
        mobility: MobilityConfig::Static,
        radio: radio.clone(),
    }
}

fn config(xs: &[f64], radio: &RadioConfig) -> MediumConfig {
    MediumConfig { seed: 1, mac: MacConfig::Dcf, nodes: xs.iter().enumerate().map(|(i, &x)| node_at(i, x, radio)).collect(), links: vec![] }
}

/// Carrier-sense range = receive range (250 m): hidden terminals are easy.
fn short_sense() -> RadioConfig {
    let mut r = wavelan();
    r.cs_threshold_dbm = r.rx_threshold_dbm;
    r
}

fn no_rts() -> RadioConfig {
    let mut r = wavelan();
    r.rts_threshold_bytes = 3000;
    r
}

fn unicast(to: NodeId, id: u32) -> Frame<u32> {
    Frame { dst: Dest::Node(to), len: 1460, carries: PacketKind::Data, payload: id }
}

fn broadcast(id: u32) -> Frame<u32> {
    Frame { dst: Dest::Broadcast, len: 1460, carries: PacketKind::Data, payload: id }
}

fn medium(cfg: MediumConfig) -> Medium<u32> {
    let mut m = Medium::new(cfg).expect("valid config");
    m.set_air_capture(true);
    m
}

/// (time, transmitter, kind) of every transmission.
fn air(actions: &[Action<u32>]) -> Vec<(Time, NodeId, FrameKind)> {
    actions.iter().filter_map(|a| if let Action::Air { time, node, frame } = a { Some((*time, *node, frame.kind)) } else { None }).collect()
}

/// (time, receiver, payload, overheard) of every delivery.
fn delivered(actions: &[Action<u32>]) -> Vec<(Time, NodeId, u32, bool)> {
    actions
        .iter()
        .filter_map(|a| if let Action::Deliver { time, node, payload, overheard, .. } = a { Some((*time, *node, *payload, *overheard)) } else { None })
        .collect()
}

fn outcomes(actions: &[Action<u32>]) -> Vec<(NodeId, u32, TxOutcome)> {
    actions.iter().filter_map(|a| if let Action::TxDone { node, payload, outcome, .. } = a { Some((*node, *payload, *outcome)) } else { None }).collect()
}

fn data_airtime(r: &RadioConfig) -> Time {
    airtime_ns(r, data_mpdu_bytes(1460), r.data_rate_bps)
}

/// Broadcast data frames go at the basic rate.
fn broadcast_airtime(r: &RadioConfig) -> Time {
    airtime_ns(r, data_mpdu_bytes(1460), r.basic_rate_bps)
}

fn delay(d: f64) -> Time {
    phy::propagation_delay_ns(d)
}

#[test]
fn frame_to_medium_idle_for_difs_is_sent_at_once_then_post_backoff_drawn() {
    let r = no_rts();
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 7), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let t = m.nodes[0].radio.timings;
    let ack_at = MS + data_airtime(&r) + delay(100.0) + t.sifs;
    assert_eq!(air(&out), vec![(MS, 0, FrameKind::Data), (ack_at, 1, FrameKind::Ack)]);
    assert_eq!(outcomes(&out), vec![(0, 7, TxOutcome::Acked { rts_attempts: 0, data_attempts: 1 })]);
    assert_eq!(delivered(&out), vec![(MS + data_airtime(&r) + delay(100.0), 1, 7, false)]);
    // The only backoff is the post-backoff after the success.
    assert_eq!(m.stats(0).backoffs, 1);
    assert_eq!(m.stats(0).defers, 0);
}

#[test]
fn frame_arriving_before_difs_elapsed_backs_off_in_whole_slots_after_difs() {
    let r = no_rts();
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    // The medium counts as idle from time 0: DIFS ends at 50 µs.
    m.send(10 * US, 0, broadcast(1), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let (t0, _, _) = air(&out)[0];
    let difs = m.nodes[0].radio.timings.difs;
    assert!(t0 >= difs && (t0 - difs).is_multiple_of(r.slot_ns), "sent at {t0}");
    assert!((t0 - difs) / r.slot_ns <= r.cw_min as u64);
    assert_eq!(m.stats(0).backoffs, 2, "the access backoff and the post-backoff");
}

/// Sends a broadcast from node 0 at 10 µs (so it backs off) and, if given,
/// a broadcast from node 1 at `other_at`; returns node 0's transmit time,
/// the end of node 1's frame at node 0, and node 0's stats.
fn backoff_run(seed: u64, other_at: Option<Time>) -> (Time, Time, NodeCounters) {
    let r = no_rts();
    let mut cfg = config(&[0.0, 100.0], &r);
    cfg.seed = seed;
    let mut m = medium(cfg);
    let mut out = Vec::new();
    m.send(10 * US, 0, broadcast(1), &mut out);
    if let Some(at) = other_at {
        m.send(at, 1, broadcast(2), &mut out);
    }
    m.handle_timeout(100 * MS, &mut out);
    let sent = air(&out).into_iter().find(|a| a.1 == 0).expect("node 0 sent").0;
    let other_end = other_at.map_or(0, |at| at + broadcast_airtime(&r) + delay(100.0));
    (sent, other_end, *m.stats(0))
}

#[test]
fn backoff_freezes_while_medium_busy_and_resumes_after_difs() {
    let slot = 20 * US;
    let difs = 50 * US;
    // A seed whose first backoff is long enough to be interrupted.
    let (seed, alone) = (1..100).map(|s| (s, backoff_run(s, None).0)).find(|&(_, t)| t >= difs + 10 * slot).expect("some seed draws >= 10 slots");
    let slots = (alone - difs) / slot;
    // Node 1 (idle medium for it: sends at once) starts 3.5 slots into the countdown.
    let other_at = difs + 3 * slot + slot / 2;
    let (sent, other_end, stats) = backoff_run(seed, Some(other_at));
    let counted = 3; // whole idle slots before node 1's signal arrived
    assert_eq!(sent, other_end + difs + (slots - counted) * slot);
    assert_eq!(stats.defers, 1);
}

#[test]
fn undecodable_reception_makes_the_next_access_wait_eifs() {
    // Node 2 at 400 m from node 0: senses node 0's frames (550 m) but cannot
    // decode them (250 m).
    let r = no_rts();
    let run = |x2: f64| {
        let mut m = medium(config(&[0.0, 100.0, x2], &r));
        let mut out = Vec::new();
        m.send(MS, 0, broadcast(1), &mut out);
        // Node 2's frame arrives while node 0's is on the air: it backs off.
        m.send(2 * MS, 2, broadcast(2), &mut out);
        m.handle_timeout(100 * MS, &mut out);
        let sent = air(&out).into_iter().find(|a| a.1 == 2).expect("node 2 sent").0;
        (sent - (MS + broadcast_airtime(&r) + delay(x2)), *m.stats(2))
    };
    let t = MacTimings::new(&r);
    let (after_weak, stats) = run(400.0);
    assert_eq!(stats.rx_weak, 1);
    assert!(after_weak >= t.eifs && (after_weak - t.eifs).is_multiple_of(r.slot_ns), "{after_weak}");
    let (after_good, stats) = run(200.0);
    assert_eq!(stats.rx_frames, 1);
    assert!(after_good >= t.difs && (after_good - t.difs).is_multiple_of(r.slot_ns), "{after_good}");
    // Same backoff draw (same seed and node): the gap differs by EIFS - DIFS.
    assert_eq!(after_weak - after_good, t.eifs - t.difs);
}

#[test]
fn rts_cts_exchange_has_standard_timing_and_durations() {
    let r = wavelan();
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 1), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let t = MacTimings::new(&r);
    let d = delay(100.0);
    let frames: Vec<_> = out.iter().filter_map(|a| if let Action::Air { time, frame, .. } = a { Some((*time, frame.kind, frame.duration_us)) } else { None }).collect();
    let cts_at = MS + t.rts + d + t.sifs;
    let data_at = cts_at + t.cts + d + t.sifs;
    let ack_at = data_at + data_airtime(&r) + d + t.sifs;
    let data_us = data_airtime(&r) / US;
    assert_eq!(
        frames,
        vec![
            (MS, FrameKind::Rts, ((3 * t.sifs + t.cts + t.ack) / US + data_us) as u16),
            (cts_at, FrameKind::Cts, ((2 * t.sifs + t.ack) / US + data_us) as u16),
            (data_at, FrameKind::Data, ((t.sifs + t.ack) / US) as u16),
            (ack_at, FrameKind::Ack, 0),
        ]
    );
    assert_eq!(m.stats(0).rts_attempts_hist[0], 1);
    assert_eq!(m.stats(1).cts_sent, 1);
}

#[test]
fn cts_sets_nav_of_a_node_hidden_from_the_sender() {
    // Node 2 hears node 1 (200 m) but not node 0 (400 m, beyond sensing).
    let r = short_sense();
    let mut m = medium(config(&[0.0, 200.0, 400.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 1), &mut out);
    // Node 2 wants to send while node 0's DATA is on the air.
    m.send(3 * MS, 2, broadcast(2), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let frames = air(&out);
    let ack_end = frames.iter().find(|f| f.2 == FrameKind::Ack).map(|f| f.0).unwrap() + MacTimings::new(&r).ack;
    let n2_at = frames.iter().find(|f| f.1 == 2).unwrap().0;
    assert!(n2_at >= ack_end, "node 2 sent at {n2_at}, inside the protected exchange ending {ack_end}");
    assert_eq!(outcomes(&out)[0], (0, 1, TxOutcome::Acked { rts_attempts: 1, data_attempts: 1 }));
    assert!(m.stats(2).defers >= 1);
}

#[test]
fn unacknowledged_frame_doubles_cw_and_drops_after_short_retry_limit() {
    let r = no_rts();
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, Frame { dst: Dest::Unknown, len: 1460, carries: PacketKind::Data, payload: 9 }, &mut out);
    let mut cws = Vec::new();
    while let Some(t) = m.poll_timeout() {
        m.handle_timeout(t, &mut out);
        if cws.last() != Some(&m.nodes[0].dcf.cw) {
            cws.push(m.nodes[0].dcf.cw);
        }
    }
    // Short frame (MPDU below the RTS threshold): short retry limit, 7 attempts.
    assert_eq!(outcomes(&out), vec![(0, 9, TxOutcome::RetryDrop { rts_attempts: 0, data_attempts: 7 })]);
    assert_eq!(cws, vec![31, 63, 127, 255, 511, 1023, 31]);
    let s = m.stats(0);
    assert_eq!((s.ack_timeouts, s.retry_drops, s.data_attempts, s.data_attempts_hist[6]), (7, 1, 7, 1));
    assert_eq!(air(&out).iter().filter(|f| f.2 == FrameKind::Data).count(), 7);
}

#[test]
fn rts_without_cts_is_retried_up_to_short_retry_limit() {
    let mut r = wavelan();
    r.short_retry_limit = 3;
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, Frame { dst: Dest::Unknown, len: 1460, carries: PacketKind::Data, payload: 9 }, &mut out);
    m.handle_timeout(10_000 * MS, &mut out);
    assert_eq!(outcomes(&out), vec![(0, 9, TxOutcome::RetryDrop { rts_attempts: 3, data_attempts: 0 })]);
    assert_eq!(m.stats(0).cts_timeouts, 3);
    // The timeout: SIFS + slot + PHY-RX-START after the RTS, then DIFS + backoff.
    let rts: Vec<Time> = air(&out).iter().map(|f| f.0).collect();
    let t = MacTimings::new(&r);
    for w in rts.windows(2) {
        let gap = w[1] - w[0] - t.rts - t.response_timeout - t.difs;
        assert_eq!(gap % r.slot_ns, 0);
    }
}

#[test]
fn duplicate_after_lost_ack_is_acked_but_not_delivered_again() {
    // Node 0 cannot decode node 1's ACKs (receive threshold too high), so it
    // retries; node 1 decodes every retry.
    let r = no_rts();
    let mut cfg = config(&[0.0, 100.0], &r);
    cfg.nodes[0].radio.rx_threshold_dbm = -30.0;
    let mut m = medium(cfg);
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 5), &mut out);
    m.handle_timeout(10_000 * MS, &mut out);
    assert_eq!(delivered(&out).len(), 1);
    let s1 = m.stats(1);
    assert_eq!((s1.rx_frames, s1.rx_duplicates, s1.acks_sent), (1, 6, 7));
    assert_eq!(m.stats(0).rx_weak, 7);
    assert_eq!(outcomes(&out), vec![(0, 5, TxOutcome::RetryDrop { rts_attempts: 0, data_attempts: 7 })]);
}

#[test]
fn broadcast_goes_once_at_basic_rate_to_everyone_in_range() {
    let r = wavelan();
    let mut m = medium(config(&[0.0, 100.0, 200.0, 300.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, broadcast(3), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let frames: Vec<_> = out.iter().filter_map(|a| if let Action::Air { frame, .. } = a { Some((frame.kind, frame.rate_bps)) } else { None }).collect();
    assert_eq!(frames, vec![(FrameKind::Data, r.basic_rate_bps)]);
    let rx: Vec<NodeId> = delivered(&out).iter().map(|d| d.1).collect();
    assert_eq!(rx, vec![1, 2], "node 3 at 300 m is out of receive range");
    assert_eq!(outcomes(&out), vec![(0, 3, TxOutcome::Broadcast)]);
}

/// Two broadcasts from opposite sides of node 0, hidden from each other,
/// overlapping at node 0: which (if any) does node 0 decode?
fn overlap(first_x: f64, second_x: f64, capture_restart: bool) -> Vec<u32> {
    let mut r = short_sense();
    r.capture_restart = capture_restart;
    let mut m = medium(config(&[0.0, first_x, second_x], &r));
    let mut out = Vec::new();
    m.send(MS, 1, broadcast(1), &mut out);
    m.send(MS + 500 * US, 2, broadcast(2), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    delivered(&out).iter().filter(|d| d.1 == 0).map(|d| d.2).collect()
}

#[test]
fn capture_stronger_first_frame_survives_a_weaker_overlap() {
    // 50 m vs 240 m: SINR far above 10 dB.
    assert_eq!(overlap(-50.0, 240.0, false), vec![1]);
}

#[test]
fn capture_fails_below_threshold_and_both_frames_are_lost() {
    // 200 m vs 240 m: SINR about 3 dB, under the 10 dB threshold.
    assert_eq!(overlap(-200.0, 240.0, false), Vec::<u32>::new());
    assert_eq!(overlap(-200.0, 240.0, true), Vec::<u32>::new());
}

#[test]
fn capture_late_stronger_frame_needs_capture_restart() {
    // The weak frame comes first: ns-2 stays locked on it (and loses it);
    // with capture_restart the strong frame takes the receiver over.
    assert_eq!(overlap(240.0, -50.0, false), Vec::<u32>::new());
    assert_eq!(overlap(240.0, -50.0, true), vec![2]);
}

#[test]
fn interface_queue_drops_tail_and_puts_priority_frames_first() {
    let mut r = no_rts();
    r.queue_len = 3;
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    // Frame 1 goes on the air at once; 2, 3, 4 fill the queue; 5 is dropped;
    // then the queue has room for nothing more until frame 1 is done.
    for id in 1..=5 {
        m.send(MS, 0, unicast(1, id), &mut out);
    }
    assert_eq!(outcomes(&out), vec![(0, 5, TxOutcome::QueueDrop)]);
    out.clear();
    m.handle_timeout(MS + 10 * MS, &mut out);
    // Frame 1 acknowledged and frame 2 in service: the priority frame
    // jumps ahead of the queued 3 and 4.
    m.send(MS + 10 * MS, 0, Frame { dst: Dest::Node(1), len: 100, carries: PacketKind::Routing, payload: 6 }, &mut out);
    m.handle_timeout(1000 * MS, &mut out);
    let order: Vec<u32> = delivered(&out).iter().map(|d| d.2).collect();
    assert_eq!(order, vec![1, 2, 6, 3, 4]);
    assert_eq!(m.stats(0).queue_drops, 1);
    assert_eq!(m.stats(0).queue_len_max, 3);
}

#[test]
fn priority_frame_finding_the_queue_full_pushes_the_last_frame_out() {
    // ns-2's PriQueue: routing packets are never refused; the tail makes room.
    let mut r = no_rts();
    r.queue_len = 3;
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    for id in 1..=4 {
        m.send(MS, 0, unicast(1, id), &mut out);
    }
    let prio = |id| Frame { dst: Dest::Node(1), len: 100, carries: PacketKind::Routing, payload: id };
    m.send(MS, 0, prio(5), &mut out);
    assert_eq!(outcomes(&out), vec![(0, 4, TxOutcome::QueueDrop)]);
    m.send(MS, 0, prio(6), &mut out);
    m.send(MS, 0, prio(7), &mut out);
    // Now the queue holds priority frames only: the next one is refused.
    m.send(MS, 0, prio(8), &mut out);
    assert_eq!(outcomes(&out), vec![(0, 4, TxOutcome::QueueDrop), (0, 3, TxOutcome::QueueDrop), (0, 2, TxOutcome::QueueDrop), (0, 8, TxOutcome::QueueDrop)]);
    m.handle_timeout(1000 * MS, &mut out);
    let order: Vec<u32> = delivered(&out).iter().map(|d| d.2).collect();
    assert_eq!(order, vec![1, 5, 6, 7]);
    assert_eq!(m.stats(0).queue_drops, 4);
}

#[test]
fn promiscuous_node_overhears_unicast_data_for_others() {
    let r = wavelan();
    let mut cfg = config(&[0.0, 100.0, 150.0], &r);
    cfg.nodes[2].promiscuous = true;
    let mut m = medium(cfg);
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 4), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let d = delivered(&out);
    assert_eq!(d.iter().map(|x| (x.1, x.3)).collect::<Vec<_>>(), vec![(1, false), (2, true)]);
    assert_eq!(m.stats(2).overheard_frames, 1);
}

#[test]
fn bit_errors_lose_frames_at_the_packet_error_rate() {
    let mut r = no_rts();
    r.bit_error_rate = 1e-4;
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    let n = 2000;
    for i in 0..n {
        m.send(i as Time * 20 * MS, 0, broadcast(i), &mut out);
    }
    m.handle_timeout(n as Time * 20 * MS + MS, &mut out);
    let got = delivered(&out).len() as f64 / n as f64;
    let expected = (1.0 - 1e-4f64).powf(8.0 * data_mpdu_bytes(1460) as f64);
    assert!((got - expected).abs() < 0.03, "delivered {got}, expected {expected}");
    assert_eq!(m.stats(1).rx_errors as usize + delivered(&out).len(), n as usize);
}

#[test]
fn teleported_node_out_of_range_stops_receiving() {
    let r = wavelan();
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, broadcast(1), &mut out);
    m.handle_timeout(20 * MS, &mut out);
    m.set_position(20 * MS, 1, [1000.0, 0.0, 0.0]);
    m.send(20 * MS, 0, broadcast(2), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    assert_eq!(delivered(&out).iter().map(|d| d.2).collect::<Vec<_>>(), vec![1]);
    assert_eq!(m.position(1, 30 * MS), [1000.0, 0.0, 0.0]);
}

#[test]
fn links_report_receive_and_sense_ranges() {
    let r = wavelan();
    let m = medium(config(&[0.0, 200.0, 500.0, 2000.0], &r));
    let links = m.links(0);
    let find = |a, b| links.iter().find(|l| l.a == a && l.b == b).copied();
    let l01 = find(0, 1).unwrap();
    assert!(l01.in_rx_range && l01.in_cs_range);
    let l02 = find(0, 2).unwrap();
    assert!(!l02.in_rx_range && l02.in_cs_range);
    assert!(find(0, 3).is_none(), "2 km is below the interference floor");
    assert!((l01.rx_power_dbm - mw_to_dbm(281.83815 * 1.5f64.powi(4) / 200f64.powi(4))).abs() < 1e-9);
}

#[test]
fn tdma_nodes_send_only_at_the_start_of_their_own_slots() {
    let r = no_rts();
    let mut cfg = config(&[0.0, 100.0, 200.0], &r);
    cfg.mac = MacConfig::Tdma { slot_ns: 0 };
    let mut m = medium(cfg);
    let slot = m.tdma_slot_ns();
    assert_eq!(slot, phy::tdma_exchange_ns(&r, 1500));
    let mut out = Vec::new();
    m.send(US, 2, unicast(0, 1), &mut out);
    m.send(US, 1, unicast(0, 2), &mut out);
    m.send(US, 1, unicast(0, 3), &mut out);
    m.handle_timeout(10 * slot, &mut out);
    let data: Vec<(Time, NodeId)> = air(&out).into_iter().filter(|f| f.2 == FrameKind::Data).map(|f| (f.0, f.1)).collect();
    // Node 1 owns slots 1, 4, 7...; node 2 owns 2, 5, 8...
    assert_eq!(data, vec![(slot, 1), (2 * slot, 2), (4 * slot, 1)]);
    assert_eq!(outcomes(&out).len(), 3);
    assert!(outcomes(&out).iter().all(|o| matches!(o.2, TxOutcome::Acked { data_attempts: 1, .. })));
}

#[test]
fn same_seed_gives_identical_actions_and_other_seed_differs() {
    let run = |seed| {
        let mut cfg = config(&[0.0, 10.0, 20.0, 30.0], &no_rts());
        cfg.seed = seed;
        let mut m = medium(cfg);
        let mut out = Vec::new();
        for i in 0..50 {
            for src in 1..4 {
                m.send(i * MS, src, unicast(0, i as u32), &mut out);
            }
        }
        m.handle_timeout(2000 * MS, &mut out);
        out
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn stats_of_changed_nodes_are_reported_once() {
    let mut m = medium(config(&[0.0, 100.0, 5000.0], &wavelan()));
    let mut out = Vec::new();
    m.send(MS, 0, broadcast(1), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let mut touched = Vec::new();
    m.take_touched(&mut touched);
    touched.sort_by_key(|t| t.node);
    // The receiver's peer figures (node 0's power) changed; the sender's
    // did not: a broadcast counts no peer.
    assert_eq!(touched, vec![Touched { node: 0, peers: false }, Touched { node: 1, peers: true }],
               "node 2 is far away and saw nothing");
    touched.clear();
    m.take_touched(&mut touched);
    assert!(touched.is_empty());
}

#[test]
fn peer_figures_are_reported_changed_only_for_the_nodes_of_an_exchange() {
    // 0 sends to 1; 2 hears both, but the frames are not for it and it is not
    // promiscuous: only its counters (busy time) change.
    let mut m = medium(config(&[0.0, 100.0, 200.0], &wavelan()));
    let mut out = Vec::new();
    m.send(MS, 0, unicast(1, 1), &mut out);
    m.handle_timeout(100 * MS, &mut out);
    let mut touched = Vec::new();
    m.take_touched(&mut touched);
    touched.sort_by_key(|t| t.node);
    assert_eq!(
        touched,
        vec![Touched { node: 0, peers: true }, Touched { node: 1, peers: true }, Touched { node: 2, peers: false }]
    );
}

#[test]
fn moving_node_is_heard_until_it_leaves_receive_range() {
    // Node 1 walks from 100 m to 400 m over 30 s; node 0 broadcasts every
    // second. Receive range is 250 m: reached at 15 s.
    let r = wavelan();
    let mut cfg = config(&[0.0, 100.0], &r);
    cfg.nodes[1].mobility = MobilityConfig::Waypoints {
        points: vec![
            crate::config::Waypoint { t_ns: 0, position: [100.0, 0.0, 0.0] },
            crate::config::Waypoint { t_ns: 30_000 * MS, position: [400.0, 0.0, 0.0] },
        ],
    };
    let mut m = medium(cfg);
    let mut out = Vec::new();
    for s in 0..30 {
        m.send(s * 1000 * MS + 100 * MS, 0, broadcast(s as u32), &mut out);
    }
    m.handle_timeout(31_000 * MS, &mut out);
    let got: Vec<u32> = delivered(&out).iter().map(|d| d.2).collect();
    assert_eq!(got, (0..15).collect::<Vec<u32>>());
    assert_eq!(m.position(1, 20_000 * MS), [300.0, 0.0, 0.0]);
}

#[test]
fn an_explicit_mpdu_size_decides_airtime_and_rts_but_len_still_counts_bytes() {
    // RTS/CTS above 100 bytes: a 30-byte management frame goes without RTS,
    // a 120-byte one with RTS, though both claim a 0-byte network packet.
    let mut r = wavelan();
    r.rts_threshold_bytes = 100;
    let mut m = medium(config(&[0.0, 100.0], &r));
    let mut out = Vec::new();
    let frame = |id| Frame { dst: Dest::Node(1), len: 0, carries: PacketKind::Data, payload: id };
    m.send_mpdu(MS, 0, frame(1), 30, &mut out);
    m.handle_timeout(50 * MS, &mut out);
    m.send_mpdu(60 * MS, 0, frame(2), 120, &mut out);
    m.handle_timeout(200 * MS, &mut out);
    let sent: Vec<(FrameKind, u32, Time)> = out
        .iter()
        .filter_map(|a| match a {
            Action::Air { node: 0, frame, .. } => Some((frame.kind, frame.bytes, frame.airtime_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        vec![
            (FrameKind::Data, 30, airtime_ns(&r, 30, r.data_rate_bps)),
            (FrameKind::Rts, phy::RTS_BYTES, airtime_ns(&r, phy::RTS_BYTES, r.basic_rate_bps)),
            (FrameKind::Data, 120, airtime_ns(&r, 120, r.data_rate_bps)),
        ]
    );
    assert_eq!(outcomes(&out).len(), 2);
    assert!(outcomes(&out).iter().all(|(_, _, o)| matches!(o, TxOutcome::Acked { .. })));
    assert_eq!(m.stats(0).tx_bytes, 0, "len counts, not the MPDU");
    // `send` is `send_mpdu` with the data frame size of `len`.
    let mut m2 = medium(config(&[0.0, 100.0], &no_rts()));
    let mut out2 = Vec::new();
    m2.send(MS, 0, unicast(1, 3), &mut out2);
    m2.handle_timeout(50 * MS, &mut out2);
    assert!(out2.iter().any(|a| matches!(a, Action::Air { frame, .. } if frame.kind == FrameKind::Data && frame.bytes == data_mpdu_bytes(1460))));
}

/// ns-2 quirks (radio fields that the ns2-wavelan profile turns on).
fn ns2_radio(eifs_nav: bool, receive_during_tx: bool, responses_need_idle: bool) -> RadioConfig {
    let mut r = wavelan();
    r.eifs_nav = eifs_nav;
    r.receive_during_tx = receive_during_tx;
    r.responses_need_idle = responses_need_idle;
    r
}

fn cts_times(out: &[Action<u32>]) -> Vec<Time> {
    air(out).iter().filter(|f| f.2 == FrameKind::Cts).map(|f| f.0).collect()
}

#[test]
fn eifs_nav_a_captured_weaker_frame_sets_the_nav_and_withholds_the_cts() {
    // Node 1 decodes node 0's RTS (200 m) while node 2's frame (450 m:
    // sensed, 12 dB weaker) overlaps it; node 0 and node 2 cannot sense each
    // other (650 m). ns-2's capture() sets the NAV to the end of the weaker
    // frame plus EIFS, so node 1 does not answer.
    let run = |eifs_nav: bool| {
        let r = ns2_radio(eifs_nav, false, false);
        let mut m = medium(config(&[0.0, 200.0, 650.0], &r));
        let mut out = Vec::new();
        m.send(MS, 0, unicast(1, 1), &mut out);
        m.send(MS + 100 * US, 2, broadcast(2), &mut out);
        m.handle_timeout(200 * MS, &mut out);
        (out, m)
    };
    let t = MacTimings::new(&wavelan());
    let (out, m) = run(false);
    assert_eq!(cts_times(&out)[0], MS + t.rts + delay(200.0) + t.sifs, "standard: CTS after SIFS");
    assert_eq!(m.stats(0).cts_timeouts, 0);
    let (out, m) = run(true);
    let weak_end = MS + 100 * US + broadcast_airtime(&wavelan()) + delay(450.0);
    assert!(cts_times(&out)[0] > weak_end + t.eifs, "first CTS {:?}, NAV until {}", cts_times(&out), weak_end + t.eifs);
    assert!(m.stats(0).cts_timeouts >= 1);
    assert_eq!(outcomes(&out).iter().filter(|o| matches!(o.2, TxOutcome::Acked { .. })).count(), 1);
}

#[test]
fn eifs_nav_a_failed_reception_waits_eifs_then_difs() {
    // As undecodable_reception_makes_the_next_access_wait_eifs, with ns-2's
    // EIFS: a NAV of EIFS, then DIFS before the countdown.
    let r = {
        let mut r = no_rts();
        r.eifs_nav = true;
        r
    };
    let run = |x2: f64| {
        let mut m = medium(config(&[0.0, 100.0, x2], &r));
        let mut out = Vec::new();
        m.send(MS, 0, broadcast(1), &mut out);
        m.send(2 * MS, 2, broadcast(2), &mut out);
        m.handle_timeout(100 * MS, &mut out);
        air(&out).into_iter().find(|a| a.1 == 2).expect("node 2 sent").0 - (MS + broadcast_airtime(&r) + delay(x2))
    };
    let t = MacTimings::new(&r);
    assert_eq!(run(400.0) - run(200.0), t.eifs);
}

#[test]
fn receive_during_tx_a_frame_arriving_while_sending_deafens_the_receiver() {
    // Nodes 1 and 2 (400 m apart, sensing each other) start broadcasts at
    // the same instant; node 1's is short, node 2's long. Node 0 (200 m from
    // node 1, 600 m from node 2) then sends node 1 a frame while node 2's is
    // still arriving there. Standard: node 1 locks on it (12 dB above node
    // 2's signal) and ACKs. ns-2: node 1 is still receiving node 2's frame,
    // which began during its own transmission, and loses node 0's.
    let run = |receive_during_tx: bool| {
        let mut r = no_rts();
        r.receive_during_tx = receive_during_tx;
        let mut m = medium(config(&[-200.0, 0.0, 400.0], &r));
        let mut out = Vec::new();
        m.send(MS, 1, Frame { dst: Dest::Broadcast, len: 40, carries: PacketKind::Data, payload: 1 }, &mut out);
        m.send(MS, 2, broadcast(2), &mut out);
        m.send(MS + 10 * US, 0, unicast(1, 3), &mut out);
        m.handle_timeout(300 * MS, &mut out);
        *m.stats(0)
    };
    let standard = run(false);
    assert_eq!((standard.ack_timeouts, standard.tx_data_frames), (0, 1));
    let ns2 = run(true);
    assert!(ns2.ack_timeouts >= 1, "{ns2:?}");
    assert_eq!(ns2.tx_data_frames, 1, "acknowledged once node 2's frame is over");
}

#[test]
fn responses_need_idle_no_cts_while_a_frame_arrives_in_the_sifs() {
    // Node 2 (450 m from node 1: sensed; 650 m from node 0: not) starts a
    // frame that reaches node 1 inside the SIFS after node 0's RTS.
    let run = |responses_need_idle: bool| {
        let r = ns2_radio(false, false, responses_need_idle);
        let mut m = medium(config(&[0.0, 200.0, 650.0], &r));
        let mut out = Vec::new();
        let t = MacTimings::new(&r);
        m.send(MS, 0, unicast(1, 1), &mut out);
        let rts_end_at_1 = MS + t.rts + delay(200.0);
        m.send(rts_end_at_1 + 2 * US - delay(450.0), 2, broadcast(2), &mut out);
        m.handle_timeout(200 * MS, &mut out);
        (cts_times(&out), rts_end_at_1 + t.sifs)
    };
    let (cts, due) = run(false);
    assert_eq!(cts[0], due);
    let (cts, due) = run(true);
    assert!(cts[0] > due, "{cts:?}");
}

#[test]
fn retry_drop_flush_takes_the_queued_frames_to_the_same_receiver() {
    // Node 1 is out of range: every frame to it fails. Node 2 is near.
    let run = |flush: bool| {
        let mut r = no_rts();
        r.retry_drop_flush = flush;
        let mut m = medium(config(&[0.0, 1000.0, 100.0], &r));
        let mut out = Vec::new();
        m.send(MS, 0, unicast(1, 1), &mut out);
        m.send(MS, 0, unicast(1, 2), &mut out);
        m.send(MS, 0, unicast(2, 3), &mut out);
        m.send(MS, 0, Frame { dst: Dest::Node(1), len: 100, carries: PacketKind::Routing, payload: 4 }, &mut out);
        m.send(MS, 0, unicast(1, 5), &mut out);
        m.handle_timeout(10_000 * MS, &mut out);
        let mut o: Vec<(u32, TxOutcome)> = outcomes(&out).into_iter().map(|(_, id, oc)| (id, oc)).collect();
        o.sort_by_key(|x| x.0);
        (o, m.stats(0).link_drops, m.stats(0).retry_drops)
    };
    let drop7 = TxOutcome::RetryDrop { rts_attempts: 0, data_attempts: 7 };
    let acked = TxOutcome::Acked { rts_attempts: 0, data_attempts: 1 };
    let (o, links, retries) = run(false);
    assert_eq!(o, vec![(1, drop7), (2, drop7), (3, acked), (4, drop7), (5, drop7)]);
    assert_eq!((links, retries), (0, 4));
    // Frame 1's failure takes every queued frame to node 1 with it, the
    // (queued) priority frame included, as ns-2's ifqueue->filter does.
    let (o, links, retries) = run(true);
    assert_eq!(o, vec![(1, drop7), (2, TxOutcome::LinkDrop), (3, acked), (4, TxOutcome::LinkDrop), (5, TxOutcome::LinkDrop)]);
    assert_eq!((links, retries), (3, 1));
}

#[test]
fn a_requested_flush_takes_only_the_queued_frames_to_that_receiver() {
    // Without retry_drop_flush nothing leaves the queue by itself; a daemon's
    // request takes what waits for node 1, not the frame on the air.
    let mut m = medium(config(&[0.0, 1000.0, 100.0], &no_rts()));
    let mut out = Vec::new();
    for (to, id) in [(1, 1), (1, 2), (2, 3), (1, 4)] {
        m.send(MS, 0, unicast(to, id), &mut out);
    }
    assert_eq!(m.flush_queue(2 * MS, 0, 1, &mut out), 2);
    assert_eq!(m.flush_queue(2 * MS, 0, 1, &mut out), 0);
    m.handle_timeout(10_000 * MS, &mut out);
    let mut o: Vec<(u32, TxOutcome)> = outcomes(&out).into_iter().map(|(_, id, oc)| (id, oc)).collect();
    o.sort_by_key(|x| x.0);
    let drop7 = TxOutcome::RetryDrop { rts_attempts: 0, data_attempts: 7 };
    let acked = TxOutcome::Acked { rts_attempts: 0, data_attempts: 1 };
    assert_eq!(o, vec![(1, drop7), (2, TxOutcome::LinkDrop), (3, acked), (4, TxOutcome::LinkDrop)]);
    assert_eq!((m.stats(0).link_drops, m.stats(0).queue_len), (2, 0));
}

#[test]
fn only_data_frames_report_a_link_failure() {
    // ns-2's AODV hears of the failures of the packets it routed only: a
    // routing packet or an ARP frame that fails is dropped alone, flushes
    // nothing and is not counted in the peer's `tx_failed_data`.
    let mut r = no_rts();
    r.retry_drop_flush = true;
    let mut m = medium(config(&[0.0, 1000.0], &r));
    let mut out = Vec::new();
    m.send(MS, 0, Frame { dst: Dest::Node(1), len: 100, carries: PacketKind::Routing, payload: 1 }, &mut out);
    m.send(MS, 0, Frame { dst: Dest::Node(1), len: 28, carries: PacketKind::Arp, payload: 2 }, &mut out);
    m.send(MS, 0, unicast(1, 3), &mut out);
    m.handle_timeout(10_000 * MS, &mut out);
    let drop7 = TxOutcome::RetryDrop { rts_attempts: 0, data_attempts: 7 };
    assert_eq!(outcomes(&out), vec![(0, 1, drop7), (0, 2, drop7), (0, 3, drop7)]);
    assert_eq!(m.stats(0).link_drops, 0);
    let peer = m.peer_stats(0, 1);
    assert_eq!((peer.tx_failed, peer.tx_failed_data), (3, 1));
}
