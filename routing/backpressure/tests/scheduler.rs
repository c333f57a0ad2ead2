//! The scheduler with scripted time: what it releases, when, and in which order.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use meshemu_backpressure::downstream::Knowledge;
use meshemu_backpressure::flow::{ClassifyBy, FlowKey};
use meshemu_backpressure::scheduler::{Arrival, Config, ConfigError, Decision, Mode, Scheduler, Verdict};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const NEXT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn config(mode: Mode) -> Config {
    Config {
        mode,
        classify: ClassifyBy::Source,
        flow_limit: 50,
        total_limit: 1000,
        radio_depth: Some(1),
        max_hold: 2_000 * MS,
        flow_idle: 10_000 * MS,
        knowledge: Knowledge::Overhear,
        overhear_timeout: 200 * MS,
    }
}

fn flow(last: u8) -> FlowKey {
    FlowKey::Addr(Ipv4Addr::new(10, 0, 1, last))
}

fn packet(id: u32, from: u8) -> Arrival {
    Arrival { id, flow: flow(from), next_hop: NEXT, next_hop_forwards: true }
}

/// A scheduler with its radio model: `completed` counts frames that left it.
struct Harness {
    scheduler: Scheduler,
    completed: u64,
    out: Vec<Decision>,
}

impl Harness {
    fn new(config: Config) -> Self {
        let mut scheduler = Scheduler::new(config).unwrap();
        let mut out = Vec::new();
        scheduler.handle_radio(0, 0, 0, &mut out);
        Harness { scheduler, completed: 0, out }
    }

    fn arrive(&mut self, now: u64, id: u32, from: u8) {
        self.scheduler.handle_arrival(now, packet(id, from), &mut self.out);
    }

    /// The radio finished `frames` frames.
    fn radio_sent(&mut self, now: u64, frames: u64) {
        self.completed += frames;
        self.scheduler.handle_radio(now, self.completed, 0, &mut self.out);
    }

    fn take(&mut self) -> Vec<(u32, Verdict)> {
        self.out.drain(..).map(|d| (d.id, d.verdict)).collect()
    }

    fn accepted(&mut self) -> Vec<u32> {
        self.take().into_iter().map(|(id, verdict)| {
            assert_eq!(verdict, Verdict::Accept, "packet {id}");
            id
        }).collect()
    }
}

#[test]
fn fifo_accepts_everything_at_once_in_arrival_order() {
    let mut h = Harness::new(config(Mode::Fifo));
    for id in 0..100 {
        h.arrive(id as u64, id, (id % 3) as u8);
    }
    assert_eq!(h.accepted(), (0..100).collect::<Vec<_>>());
    assert_eq!(h.scheduler.held(), 0);
    assert_eq!(h.scheduler.totals().flows.released, 100);
}

#[test]
fn flows_are_served_round_robin_as_the_radio_drains() {
    let mut h = Harness::new(config(Mode::FairQueue));
    // Flow 1 sends a burst of four before flows 2 and 3 send two and one.
    for (id, from) in [(10, 1), (11, 1), (12, 1), (13, 1), (20, 2), (21, 2), (30, 3)] {
        h.arrive(0, id, from);
    }
    assert_eq!(h.accepted(), vec![10], "radio depth 1: one packet below at a time");
    let mut order = vec![10];
    for t in 1..=6 {
        h.radio_sent(t * MS, 1);
        order.extend(h.accepted());
    }
    assert_eq!(order, vec![10, 11, 20, 30, 12, 21, 13]);
    assert!(h.scheduler.wants_radio_updates(), "packet 13 is still in the radio");
    h.radio_sent(7 * MS, 1);
    assert!(h.take().is_empty());
    assert!(!h.scheduler.wants_radio_updates());
}

#[test]
fn a_deeper_radio_takes_that_many_packets_and_an_external_frame_is_absorbed() {
    let mut h = Harness::new(Config { radio_depth: Some(3), ..config(Mode::FairQueue) });
    for id in 0..6 {
        h.arrive(0, id, 1);
    }
    assert_eq!(h.accepted(), vec![0, 1, 2]);
    assert!(h.scheduler.wants_radio_updates());
    // The radio reports a queue longer than what we released (frames of others).
    h.scheduler.handle_radio(MS, 0, 5, &mut h.out);
    assert!(h.take().is_empty());
    h.completed = 2;
    h.scheduler.handle_radio(2 * MS, 2, 1, &mut h.out);
    assert_eq!(h.accepted(), vec![3, 4]);
}

#[test]
fn a_released_packet_the_radio_never_gets_stops_holding_it_full() {
    // The kernel drops a packet after our verdict (its next hop's ARP failed):
    // no frame ever leaves the radio for it, whose queue stays empty.
    let mut h = Harness::new(Config { max_hold: 60_000 * MS, ..config(Mode::FairQueue) });
    h.arrive(0, 1, 1);
    h.arrive(0, 2, 1);
    assert_eq!(h.accepted(), vec![1]);
    let due = h.scheduler.poll_timeout().expect("the lost packet has a deadline");
    assert!(due > 1_000 * MS && due <= 10_000 * MS, "{due}");
    h.scheduler.handle_timeout(due - 1, &mut h.out);
    assert!(h.take().is_empty(), "a packet may wait seconds for its neighbour's address");
    h.scheduler.handle_timeout(due, &mut h.out);
    assert_eq!(h.accepted(), vec![2], "the radio has room again");
    assert_eq!(h.scheduler.totals().lost_below, 1);
    // A radio that holds frames is trusted to send them: nothing is forgotten.
    h.scheduler.handle_radio(due, 0, 3, &mut h.out);
    h.arrive(due, 3, 1);
    h.scheduler.handle_timeout(due + 10_000 * MS, &mut h.out);
    assert!(h.take().is_empty());
}

#[test]
fn fq_drops_arrivals_beyond_the_flow_limit_and_the_total() {
    let mut h = Harness::new(Config { flow_limit: 3, total_limit: 5, ..config(Mode::FairQueue) });
    h.scheduler.handle_radio(0, 0, 50, &mut h.out); // a full radio: nothing leaves
    for id in 0..5 {
        h.arrive(0, id, 1);
    }
    for id in 10..13 {
        h.arrive(0, id, 2);
    }
    let decisions = h.take();
    assert_eq!(decisions, vec![(3, Verdict::Drop), (4, Verdict::Drop), (12, Verdict::Drop)]);
    let reports = h.scheduler.flow_reports(0);
    assert_eq!((reports[0].counters.dropped_limit, reports[0].queued), (2, 3));
    assert_eq!((reports[1].counters.dropped_full, reports[1].queued), (1, 2), "5 held in all");
    assert_eq!(h.scheduler.totals().flows.enqueued, 8);
}

#[test]
fn backpressure_holds_a_flow_until_the_next_hop_is_heard_forwarding() {
    let mut h = Harness::new(config(Mode::Backpressure { threshold: 1 }));
    h.arrive(0, 1, 1);
    assert_eq!(h.accepted(), vec![1]);
    h.radio_sent(MS, 1);
    h.arrive(2 * MS, 2, 1);
    assert!(h.take().is_empty(), "the next hop holds one packet of the flow");
    h.arrive(2 * MS, 3, 1);
    assert_eq!(h.take(), vec![(3, Verdict::Drop)], "threshold 1 is also the flow's own buffer");
    // Another flow is not held back by it.
    h.arrive(3 * MS, 40, 4);
    assert_eq!(h.accepted(), vec![40]);
    h.radio_sent(4 * MS, 1);
    // The next hop forwards packet 1 (heard twice: a MAC retransmission).
    h.scheduler.handle_overheard(5 * MS, NEXT, flow(1), 0xaaaa, &mut h.out);
    assert_eq!(h.accepted(), vec![2]);
    h.radio_sent(6 * MS, 1);
    h.scheduler.handle_overheard(6 * MS, NEXT, flow(1), 0xaaaa, &mut h.out);
    h.arrive(7 * MS, 5, 1);
    assert!(h.take().is_empty(), "the retransmission did not count as packet 2 forwarded");
    let report = &h.scheduler.flow_reports(8 * MS)[0];
    assert_eq!(report.counters.held_packets, 1);
    assert_eq!(report.counters.held_events, 2);
    assert_eq!(report.counters.held_ns, 3 * MS + MS, "2..5 ms, then 7..8 ms");
    assert_eq!(h.scheduler.downstream_counters().overheard_duplicates, 1);
}

#[test]
fn a_next_hop_that_is_the_destination_never_holds_the_flow() {
    let mut h = Harness::new(config(Mode::Backpressure { threshold: 1 }));
    for (t, id) in [(0, 1), (1, 2), (2, 3)] {
        let packet = Arrival { id, flow: flow(1), next_hop: NEXT, next_hop_forwards: false };
        h.scheduler.handle_arrival(t * MS, packet, &mut h.out);
        assert_eq!(h.accepted(), vec![id]);
        h.radio_sent(t * MS + 1, 1);
    }
}

#[test]
fn a_missed_overhearing_blocks_the_flow_only_until_the_timeout() {
    let mut h = Harness::new(config(Mode::Backpressure { threshold: 1 }));
    h.arrive(0, 1, 1);
    h.radio_sent(MS, 1);
    h.arrive(2 * MS, 2, 1);
    assert_eq!(h.accepted(), vec![1]);
    assert_eq!(h.scheduler.poll_timeout(), Some(200 * MS));
    h.scheduler.handle_timeout(199 * MS, &mut h.out);
    assert!(h.take().is_empty());
    h.scheduler.handle_timeout(200 * MS, &mut h.out);
    assert_eq!(h.accepted(), vec![2]);
    assert_eq!(h.scheduler.downstream_counters().overhear_timeouts, 1);
}

#[test]
fn the_overhearing_timeout_adapts_to_the_forwarding_delay() {
    let mut h = Harness::new(config(Mode::Backpressure { threshold: 1 }));
    // Ten packets, each heard forwarded 10 ms after its release.
    let mut now = 0;
    for id in 0..10 {
        h.arrive(now, id, 1);
        assert_eq!(h.accepted(), vec![id]);
        h.radio_sent(now + MS, 1);
        now += 10 * MS;
        h.scheduler.handle_overheard(now, NEXT, flow(1), u64::from(id), &mut h.out);
    }
    // The next forward is missed: the flow waits about the usual delay, not 200 ms.
    h.arrive(now, 10, 1);
    h.radio_sent(now + MS, 1);
    h.arrive(now + MS, 11, 1);
    assert_eq!(h.accepted(), vec![10]);
    let deadline = h.scheduler.poll_timeout().unwrap() - now;
    assert!((10 * MS..50 * MS).contains(&deadline), "timeout {deadline} ns after release");
    h.scheduler.handle_timeout(now + deadline, &mut h.out);
    assert_eq!(h.accepted(), vec![11]);
}

#[test]
fn a_report_corrects_the_overhearing_estimate_both_ways() {
    let mut h = Harness::new(Config { radio_depth: None, ..config(Mode::Backpressure { threshold: 2 }) });
    h.arrive(0, 1, 1);
    h.arrive(0, 2, 1);
    h.arrive(0, 3, 1);
    assert_eq!(h.accepted(), vec![1, 2]);
    // Missed overhearing: the neighbour reports it holds none of the flow.
    h.scheduler.handle_report(MS, NEXT, &[], true, &mut h.out);
    assert_eq!(h.accepted(), vec![3]);
    // Another upstream feeds it too: it reports 5, more than we sent.
    h.scheduler.handle_report(2 * MS, NEXT, &[(flow(1), 5)], false, &mut h.out);
    h.arrive(2 * MS, 4, 1);
    h.scheduler.handle_overheard(3 * MS, NEXT, flow(1), 1, &mut h.out);
    assert!(h.take().is_empty(), "still 4 there");
    assert_eq!(h.scheduler.downstream_counters().corrections, 2);
}

#[test]
fn beacon_knowledge_counts_what_we_sent_since_the_report() {
    let mut h = Harness::new(Config { knowledge: Knowledge::Beacon, ..config(Mode::Backpressure { threshold: 2 }) });
    h.arrive(0, 1, 1);
    h.radio_sent(MS, 1);
    h.arrive(MS, 2, 1);
    h.radio_sent(2 * MS, 1);
    h.arrive(2 * MS, 3, 1);
    assert_eq!(h.accepted(), vec![1, 2], "two sent since the last report");
    h.scheduler.handle_report(3 * MS, NEXT, &[(flow(1), 1)], true, &mut h.out);
    assert_eq!(h.accepted(), vec![3]);
    // Overheard transmissions mean nothing to beacon knowledge.
    h.arrive(4 * MS, 4, 1);
    h.scheduler.handle_overheard(5 * MS, NEXT, flow(1), 7, &mut h.out);
    assert!(h.take().is_empty());
    assert_eq!(h.scheduler.downstream_wanted(), vec![(NEXT, flow(1))]);
}

#[test]
fn packets_towards_a_vanished_neighbour_are_dropped_after_max_hold() {
    let mut h = Harness::new(Config { knowledge: Knowledge::Oracle, ..config(Mode::Backpressure { threshold: 1 }) });
    h.scheduler.handle_report(0, NEXT, &[(flow(1), 0)], true, &mut h.out);
    h.arrive(0, 1, 1);
    h.radio_sent(MS, 1);
    h.scheduler.handle_report(MS, NEXT, &[(flow(1), 1)], true, &mut h.out);
    h.arrive(10 * MS, 2, 1);
    assert_eq!(h.accepted(), vec![1]);
    assert_eq!(h.scheduler.poll_timeout(), Some(2_010 * MS));
    h.scheduler.handle_timeout(2_009 * MS, &mut h.out);
    assert!(h.take().is_empty());
    h.scheduler.handle_timeout(2_010 * MS, &mut h.out);
    assert_eq!(h.take(), vec![(2, Verdict::Drop)]);
    let report = &h.scheduler.flow_reports(2_010 * MS)[0];
    assert_eq!((report.counters.dropped_age, report.queued, report.blocked), (1, 0, false));
    assert_eq!(report.counters.held_ns, 2_000 * MS);
}

#[test]
fn idle_flows_are_forgotten_and_their_counters_stay_in_the_totals() {
    let mut h = Harness::new(Config { flow_idle: 100 * MS, ..config(Mode::FairQueue) });
    h.arrive(0, 1, 1);
    h.arrive(0, 2, 2);
    h.radio_sent(MS, 1);
    h.radio_sent(2 * MS, 1);
    assert_eq!(h.accepted(), vec![1, 2]);
    h.scheduler.handle_timeout(50 * MS, &mut h.out); // looks for idle flows now, next at 150 ms
    h.arrive(60 * MS, 3, 2);
    h.radio_sent(61 * MS, 1);
    assert_eq!(h.accepted(), vec![3]);
    assert_eq!(h.scheduler.poll_timeout(), Some(150 * MS));
    h.scheduler.handle_timeout(150 * MS, &mut h.out);
    let left: Vec<FlowKey> = h.scheduler.flow_reports(150 * MS).iter().map(|r| r.flow).collect();
    assert_eq!(left, vec![flow(2)], "flow 2 was active 90 ms ago");
    h.scheduler.handle_timeout(250 * MS, &mut h.out);
    assert!(h.scheduler.flow_reports(250 * MS).is_empty());
    assert_eq!(h.scheduler.totals().flows_expired, 2);
    assert_eq!(h.scheduler.totals().flows.released, 3);
    assert_eq!(h.scheduler.poll_timeout(), None);
}

#[test]
fn shutdown_gives_every_held_packet_a_verdict() {
    let mut h = Harness::new(config(Mode::FairQueue));
    for id in 0..10 {
        h.arrive(0, id, (id % 4) as u8);
    }
    assert_eq!(h.accepted(), vec![0]);
    h.scheduler.shutdown(MS, Verdict::Drop, &mut h.out);
    let mut ids: Vec<u32> = h.take().into_iter().map(|(id, verdict)| {
        assert_eq!(verdict, Verdict::Drop);
        id
    }).collect();
    ids.sort();
    assert_eq!(ids, (1..10).collect::<Vec<_>>());
    assert_eq!((h.scheduler.held(), h.scheduler.totals().shutdown_dropped), (0, 9));
}

#[test]
fn own_queues_are_advertised_with_what_is_still_in_the_radio() {
    let mut h = Harness::new(config(Mode::FairQueue));
    h.arrive(0, 1, 1);
    h.arrive(0, 2, 1);
    h.arrive(0, 3, 2);
    let mut advertisement = h.scheduler.advertisement();
    advertisement.sort();
    assert_eq!(advertisement, vec![(flow(1), 2), (flow(2), 1)]);
    h.radio_sent(MS, 1);
    h.radio_sent(2 * MS, 1);
    h.radio_sent(3 * MS, 1);
    assert!(h.scheduler.advertisement().is_empty());
}

#[test]
fn bad_configurations_are_refused_with_the_reason() {
    let hop = Config { classify: ClassifyBy::NextHop, ..config(Mode::Backpressure { threshold: 1 }) };
    assert_eq!(Scheduler::new(hop).err(), Some(ConfigError::LocalClassification("next-hop")));
    let zero = config(Mode::Backpressure { threshold: 0 });
    assert_eq!(Scheduler::new(zero).err().unwrap().to_string(), "threshold must be at least 1");
    let depth = Config { radio_depth: Some(0), ..config(Mode::FairQueue) };
    assert_eq!(Scheduler::new(depth).err(), Some(ConfigError::Zero("radio depth")));
    assert!(Scheduler::new(Config { classify: ClassifyBy::PreviousHop, ..config(Mode::FairQueue) }).is_ok());
}

#[derive(Clone, Debug)]
enum Step {
    Arrive { from: u8, forwards: bool },
    RadioSent(u8),
    Overheard(u8),
    Report { from: u8, length: u8 },
    Advance(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..5u8, any::<bool>()).prop_map(|(from, forwards)| Step::Arrive { from, forwards }),
        2 => (0..4u8).prop_map(Step::RadioSent),
        1 => (0..5u8).prop_map(Step::Overheard),
        1 => (0..5u8, 0..4u8).prop_map(|(from, length)| Step::Report { from, length }),
        1 => (0..500u16).prop_map(Step::Advance),
    ]
}

proptest! {
    /// Whatever happens, every packet gets exactly one verdict, no more are
    /// held than the limits allow, and the counters add up.
    #[test]
    fn every_packet_gets_exactly_one_verdict(
        steps in prop::collection::vec(step(), 1..300),
        threshold in 1..4u32,
        knowledge in prop_oneof![Just(Knowledge::Overhear), Just(Knowledge::Beacon), Just(Knowledge::Oracle)],
        bp in any::<bool>(),
    ) {
        let mode = if bp { Mode::Backpressure { threshold } } else { Mode::FairQueue };
        let cfg = Config { flow_limit: 3, total_limit: 8, radio_depth: Some(2), max_hold: 300 * MS,
                           flow_idle: 500 * MS, knowledge, overhear_timeout: 100 * MS, ..config(mode) };
        let limit = cfg.per_flow_limit() as usize;
        let mut h = Harness::new(cfg);
        let mut now = 0;
        let mut next_id = 0;
        let mut verdicts: HashMap<u32, Verdict> = HashMap::new();
        let mut record = |h: &mut Harness| {
            for (id, verdict) in h.take() {
                prop_assert!(verdicts.insert(id, verdict).is_none(), "packet {} got two verdicts", id);
            }
            Ok(())
        };
        for step in steps {
            match step {
                Step::Arrive { from, forwards } => {
                    let arrival = Arrival { id: next_id, flow: flow(from), next_hop: NEXT, next_hop_forwards: forwards };
                    next_id += 1;
                    h.scheduler.handle_arrival(now, arrival, &mut h.out);
                }
                Step::RadioSent(frames) => h.radio_sent(now, u64::from(frames)),
                Step::Overheard(from) => h.scheduler.handle_overheard(now, NEXT, flow(from), now ^ u64::from(from), &mut h.out),
                Step::Report { from, length } => {
                    h.scheduler.handle_report(now, NEXT, &[(flow(from), u32::from(length))], false, &mut h.out)
                }
                Step::Advance(ms) => {
                    now += u64::from(ms) * MS;
                    h.scheduler.handle_timeout(now, &mut h.out);
                }
            }
            record(&mut h)?;
            prop_assert!(h.scheduler.held() <= 8);
            for report in h.scheduler.flow_reports(now) {
                prop_assert!(report.queued as usize <= limit);
            }
            if let Some(deadline) = h.scheduler.poll_timeout() {
                prop_assert!(deadline > now || h.scheduler.held() == 0 || deadline <= now + 1,
                             "a deadline in the past after poll");
            }
        }
        let held = h.scheduler.held();
        h.scheduler.shutdown(now, Verdict::Accept, &mut h.out);
        record(&mut h)?;
        prop_assert_eq!(verdicts.len() as u32, next_id);
        let t = *h.scheduler.totals();
        prop_assert_eq!(t.shutdown_accepted, u64::from(held));
        prop_assert_eq!(t.flows.enqueued, u64::from(next_id));
        prop_assert_eq!(t.flows.enqueued,
            t.flows.released + t.flows.dropped_limit + t.flows.dropped_full + t.flows.dropped_age + t.shutdown_accepted);
    }
}
