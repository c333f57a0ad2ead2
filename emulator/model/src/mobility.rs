//! Node movement: positions are piecewise linear in time. Scripted kinds
//! (waypoints, ns-2 setdest) become a list of knots once; random waypoint
//! appends knots as time goes on, from the node's own random stream.

use rand::RngExt;
use serde::Serialize;

use crate::config::{Area, MobilityConfig, Range};
use crate::rng::{self, Purpose, Stream};
use crate::Time;

/// A point of a piecewise-linear trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Knot {
    t: Time,
    pos: [f64; 3],
}

/// Knots kept behind the current time by random waypoint before pruning.
const RWP_KEEP_KNOTS: usize = 32;

#[derive(Debug, Clone)]
enum Path {
    Static([f64; 3]),
    /// Straight lines between knots; the first is held before its time, the
    /// last after.
    Knots(Vec<Knot>),
    RandomWaypoint(Box<RandomWaypoint>),
}

#[derive(Debug, Clone)]
struct RandomWaypoint {
    area: Area,
    speed_mps: Range,
    pause_ns: Range,
    z: f64,
    rng: Stream,
    /// Generated so far; the last knot is the end of a pause (the node is
    /// about to leave it for a new waypoint).
    knots: Vec<Knot>,
}

/// One node's movement: its path, evaluated on the path's own clock.
#[derive(Debug, Clone)]
pub(crate) struct Mobility {
    path: Path,
    clock: PathClock,
}

/// Time along the path as a function of model time: it stands at `at`
/// while paused and, once running, until model time `since`, then goes on
/// with model time. A lab whose nodes wait for a run's time 0 is paused at
/// 0 and resumed from that time, so that its motion and its traffic share
/// one time axis, as in a simulator.
#[derive(Debug, Clone, Copy)]
struct PathClock {
    running: bool,
    since: Time,
    at: Time,
}

impl PathClock {
    const FROM_ZERO: PathClock = PathClock { running: true, since: 0, at: 0 };

    fn time(&self, now: Time) -> Time {
        if self.running {
            self.at + now.saturating_sub(self.since)
        } else {
            self.at
        }
    }
}

impl Mobility {
    pub fn new(cfg: &MobilityConfig, position: [f64; 3], seed: u64, node: usize) -> Self {
        let path = match cfg {
            MobilityConfig::Static => Path::Static(position),
            MobilityConfig::Waypoints { points } => Path::Knots(points.iter().map(|p| Knot { t: p.t_ns, pos: p.position }).collect()),
            MobilityConfig::Setdest { moves } => {
                let mut knots = vec![Knot { t: 0, pos: position }];
                for mv in moves {
                    let from = knots_at(&knots, mv.t_ns);
                    // The new move replaces whatever was still ahead.
                    knots.retain(|k| k.t < mv.t_ns);
                    knots.push(Knot { t: mv.t_ns, pos: from });
                    let dur = travel_ns(from, mv.target, mv.speed_mps);
                    knots.push(Knot { t: mv.t_ns + dur, pos: mv.target });
                }
                Path::Knots(knots)
            }
            MobilityConfig::RandomWaypoint { area, speed_mps, pause_ns, steady_state } => {
                let mut rwp = RandomWaypoint {
                    area: *area,
                    speed_mps: *speed_mps,
                    pause_ns: *pause_ns,
                    z: position[2],
                    rng: rng::stream(seed, Purpose::Mobility, node as u64, 0),
                    knots: Vec::new(),
                };
                rwp.start(*steady_state);
                Path::RandomWaypoint(Box::new(rwp))
            }
        };
        Mobility { path, clock: PathClock::FROM_ZERO }
    }

    fn path_time(&self, now: Time) -> Time {
        self.clock.time(now)
    }

    /// Position at `now` (meaningful for `now` at or after the last time the
    /// owner advanced this trajectory to).
    pub fn position(&self, now: Time) -> [f64; 3] {
        let t = self.path_time(now);
        match &self.path {
            Path::Static(p) => *p,
            Path::Knots(k) => knots_at(k, t),
            Path::RandomWaypoint(rwp) => {
                if rwp.knots.last().is_some_and(|k| k.t >= t) {
                    knots_at(&rwp.knots, t)
                } else {
                    let mut ahead = rwp.clone();
                    ahead.extend_to(t);
                    knots_at(&ahead.knots, t)
                }
            }
        }
    }

    /// Speed at `now`, m/s (0 while paused or stopped).
    #[cfg(test)]
    pub fn speed(&mut self, now: Time) -> f64 {
        self.advance_to(now);
        if !self.clock.running || now < self.clock.since {
            return 0.0;
        }
        let t = self.path_time(now);
        let knots = match &self.path {
            Path::Static(_) => return 0.0,
            Path::Knots(k) => k,
            Path::RandomWaypoint(rwp) => &rwp.knots,
        };
        let i = knots.partition_point(|k| k.t <= t);
        if i == 0 || i == knots.len() {
            return 0.0;
        }
        let (a, b) = (knots[i - 1], knots[i]);
        crate::phy::distance(a.pos, b.pos) / ((b.t - a.t) as f64 * 1e-9)
    }

    /// Generates random-waypoint legs up to `now`, forgets old ones, and turns
    /// a finished script into a static position. Returns whether the node can
    /// still move by itself.
    pub fn advance_to(&mut self, now: Time) -> bool {
        let t = self.path_time(now);
        match &mut self.path {
            Path::Static(_) => false,
            Path::Knots(k) => {
                if k.last().is_none_or(|last| last.t <= t) {
                    let pos = k.last().map_or([0.0; 3], |last| last.pos);
                    self.path = Path::Static(pos);
                    false
                } else {
                    true
                }
            }
            Path::RandomWaypoint(rwp) => {
                rwp.extend_to(t);
                let behind = rwp.knots.partition_point(|k| k.t <= t);
                if behind > 2 * RWP_KEEP_KNOTS {
                    rwp.knots.drain(..behind - RWP_KEEP_KNOTS);
                }
                if rwp.is_degenerate() {
                    self.path = Path::Static(rwp.knots[0].pos);
                    return false;
                }
                true
            }
        }
    }

    /// Whether the node stays where it is until something changes its
    /// mobility (static, finished script, or paused). A node resumed from a
    /// later time is not: it starts by itself.
    pub fn is_stationary(&self) -> bool {
        !self.clock.running || matches!(self.path, Path::Static(_))
    }

    pub fn teleport(&mut self, pos: [f64; 3]) {
        *self = Mobility { path: Path::Static(pos), clock: PathClock::FROM_ZERO };
    }

    /// Stops the node where it is at `now`.
    pub fn pause(&mut self, now: Time) {
        if self.clock.running {
            self.clock = PathClock { running: false, since: now, at: self.clock.time(now) };
        }
    }

    /// A paused node goes on from where it stopped at model time `from`
    /// (or `now`, if that is later), standing until then; a running node
    /// is left as it is.
    pub fn resume(&mut self, now: Time, from: Time) {
        if !self.clock.running {
            self.clock = PathClock { running: true, since: from.max(now), at: self.clock.at };
        }
    }
}

/// A point of an exported trajectory: the node is at `position` at `t_ns`
/// and moves in a straight line to the next point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrajectoryPoint {
    pub t_ns: Time,
    pub position: [f64; 3],
}

/// Where a node is at time 0, as the model starts it from its configured
/// `position` (random waypoint and waypoints start elsewhere).
pub fn start_position(cfg: &MobilityConfig, position: [f64; 3], seed: u64, node: usize) -> [f64; 3] {
    Mobility::new(cfg, position, seed, node).position(0)
}

/// The path a node follows from time 0 until at least `until`, exactly as
/// the model moves it (random waypoint: the same legs from the same seed),
/// for exporting the movement to another simulator (ns-2 setdest commands).
/// The first point is held before its time and the last after it.
pub fn trajectory(cfg: &MobilityConfig, position: [f64; 3], seed: u64, node: usize, until: Time) -> Vec<TrajectoryPoint> {
    let points = |knots: &[Knot]| knots.iter().map(|k| TrajectoryPoint { t_ns: k.t, position: k.pos }).collect();
    match Mobility::new(cfg, position, seed, node).path {
        Path::Static(pos) => vec![TrajectoryPoint { t_ns: 0, position: pos }],
        Path::Knots(knots) => points(&knots),
        Path::RandomWaypoint(mut rwp) => {
            // Extended without the pruning of `advance_to`: every leg from time 0.
            rwp.extend_to(until);
            points(&rwp.knots)
        }
    }
}

fn knots_at(knots: &[Knot], t: Time) -> [f64; 3] {
    let i = knots.partition_point(|k| k.t <= t);
    if i == 0 {
        return knots.first().map_or([0.0; 3], |k| k.pos);
    }
    if i == knots.len() {
        return knots[i - 1].pos;
    }
    let (a, b) = (knots[i - 1], knots[i]);
    let f = (t - a.t) as f64 / (b.t - a.t) as f64;
    [0, 1, 2].map(|k| a.pos[k] + f * (b.pos[k] - a.pos[k]))
}

fn travel_ns(from: [f64; 3], to: [f64; 3], speed_mps: f64) -> Time {
    (crate::phy::distance(from, to) / speed_mps * 1e9).round() as Time
}

/// Mean distance between two independent uniform points of an a×b rectangle.
fn mean_distance_in_rectangle(a: f64, b: f64) -> f64 {
    let (a, b) = if a >= b { (a, b) } else { (b, a) };
    if b == 0.0 {
        return a / 3.0;
    }
    let d = (a * a + b * b).sqrt();
    (a.powi(3) / (b * b) + b.powi(3) / (a * a) + d * (3.0 - a * a / (b * b) - b * b / (a * a))) / 15.0
        + (b * b / a * ((a + d) / b).ln() + a * a / b * ((b + d) / a).ln()) / 6.0
}

impl RandomWaypoint {
    fn uniform_point(&mut self) -> [f64; 3] {
        let [x0, y0] = self.area.min;
        let [x1, y1] = self.area.max;
        let x = x0 + (x1 - x0) * self.rng.random::<f64>();
        let y = y0 + (y1 - y0) * self.rng.random::<f64>();
        [x, y, self.z]
    }

    fn uniform_in(&mut self, r: Range) -> f64 {
        r.min + (r.max - r.min) * self.rng.random::<f64>()
    }

    fn is_degenerate(&self) -> bool {
        self.area.min == self.area.max && self.pause_ns.max == 0.0
    }

    /// The initial knots at t = 0.
    fn start(&mut self, steady_state: bool) {
        if !steady_state {
            // Plain start: uniform position, leaving at once (the speed decays).
            let p = self.uniform_point();
            self.knots.push(Knot { t: 0, pos: p });
            return;
        }
        // Stationary distribution (Navidi & Camp 2004): the node is paused with
        // probability E[pause] / (E[pause] + E[travel]), E[travel] = E[L]·E[1/V].
        let [x0, y0] = self.area.min;
        let [x1, y1] = self.area.max;
        let (vmin, vmax) = (self.speed_mps.min, self.speed_mps.max);
        let mean_inverse_speed = if vmax > vmin { (vmax / vmin).ln() / (vmax - vmin) } else { 1.0 / vmin };
        let mean_travel_s = mean_distance_in_rectangle(x1 - x0, y1 - y0) * mean_inverse_speed;
        let mean_pause_s = (self.pause_ns.min + self.pause_ns.max) / 2.0 * 1e-9;
        let p_paused = if mean_pause_s + mean_travel_s > 0.0 { mean_pause_s / (mean_pause_s + mean_travel_s) } else { 1.0 };
        if self.rng.random::<f64>() < p_paused {
            // Paused at a uniform waypoint; the pause in progress is
            // length-biased (density ∝ p) and we are uniformly inside it.
            let p = self.uniform_point();
            let (pmin, pmax) = (self.pause_ns.min, self.pause_ns.max);
            let total = (pmin * pmin + self.rng.random::<f64>() * (pmax * pmax - pmin * pmin)).sqrt();
            let left = (total * self.rng.random::<f64>()).round() as Time;
            self.knots.push(Knot { t: 0, pos: p });
            self.knots.push(Knot { t: left, pos: p });
        } else {
            // Moving: the leg is length-biased (rejection on its length), the
            // node uniformly along it, the speed has density ∝ 1/v.
            let diag = ((x1 - x0).powi(2) + (y1 - y0).powi(2)).sqrt();
            let (from, to) = loop {
                let a = self.uniform_point();
                let b = self.uniform_point();
                if diag == 0.0 || self.rng.random::<f64>() * diag <= crate::phy::distance(a, b) {
                    break (a, b);
                }
            };
            let f = self.rng.random::<f64>();
            let here = [0, 1, 2].map(|k| from[k] + f * (to[k] - from[k]));
            let v = if vmax > vmin { vmin * (vmax / vmin).powf(self.rng.random::<f64>()) } else { vmin };
            self.knots.push(Knot { t: 0, pos: here });
            let arrive = travel_ns(here, to, v);
            self.knots.push(Knot { t: arrive, pos: to });
            let pause = self.uniform_in(self.pause_ns).round() as Time;
            self.knots.push(Knot { t: arrive + pause, pos: to });
        }
    }

    /// Appends legs (travel, then pause) until the knots reach past `t`.
    fn extend_to(&mut self, t: Time) {
        if self.is_degenerate() {
            return;
        }
        while let Some(&last) = self.knots.last().filter(|k| k.t <= t) {
            let to = self.uniform_point();
            let v = self.uniform_in(self.speed_mps);
            let arrive = last.t + travel_ns(last.pos, to, v);
            let pause = self.uniform_in(self.pause_ns).round() as Time;
            self.knots.push(Knot { t: arrive, pos: to });
            self.knots.push(Knot { t: arrive + pause, pos: to });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SetdestMove, Waypoint};

    const S: Time = 1_000_000_000;

    #[test]
    fn waypoints_interpolate_and_hold_the_ends() {
        let cfg = MobilityConfig::Waypoints {
            points: vec![Waypoint { t_ns: 10 * S, position: [0.0, 0.0, 0.0] }, Waypoint { t_ns: 20 * S, position: [100.0, 0.0, 0.0] }],
        };
        let m = Mobility::new(&cfg, [5.0, 5.0, 0.0], 1, 0);
        assert_eq!(m.position(0), [0.0, 0.0, 0.0]);
        assert_eq!(m.position(15 * S), [50.0, 0.0, 0.0]);
        assert_eq!(m.position(99 * S), [100.0, 0.0, 0.0]);
    }

    #[test]
    fn setdest_move_starts_from_current_position_and_later_move_replaces_it() {
        let cfg = MobilityConfig::Setdest {
            moves: vec![
                SetdestMove { t_ns: S, target: [100.0, 0.0, 0.0], speed_mps: 10.0 },
                // Halfway (at 6 s the node is at x = 50) it turns north.
                SetdestMove { t_ns: 6 * S, target: [50.0, 50.0, 0.0], speed_mps: 5.0 },
            ],
        };
        let m = Mobility::new(&cfg, [0.0, 0.0, 0.0], 1, 0);
        assert_eq!(m.position(S / 2), [0.0, 0.0, 0.0]);
        assert_eq!(m.position(6 * S), [50.0, 0.0, 0.0]);
        assert_eq!(m.position(11 * S), [50.0, 25.0, 0.0]);
        assert_eq!(m.position(100 * S), [50.0, 50.0, 0.0]);
    }

    /// From the origin along x at 10 m/s for 10 s.
    fn along_x_at_10_mps() -> Mobility {
        let cfg = MobilityConfig::Waypoints {
            points: vec![Waypoint { t_ns: 0, position: [0.0, 0.0, 0.0] }, Waypoint { t_ns: 10 * S, position: [100.0, 0.0, 0.0] }],
        };
        Mobility::new(&cfg, [0.0; 3], 1, 0)
    }

    #[test]
    fn paused_mobility_freezes_and_resumes_where_it_was() {
        let mut m = along_x_at_10_mps();
        m.pause(2 * S);
        assert_eq!(m.position(7 * S), [20.0, 0.0, 0.0]);
        m.resume(7 * S, 7 * S);
        assert_eq!(m.position(8 * S), [30.0, 0.0, 0.0]);
    }

    #[test]
    fn a_node_held_from_time_zero_follows_its_path_from_the_resume_time() {
        let mut m = along_x_at_10_mps();
        m.pause(0);
        // Resumed ahead of time: it stands until 5 s, then moves as it would have from 0.
        m.resume(S, 5 * S);
        assert!(!m.is_stationary(), "it must start by itself at 5 s");
        assert_eq!(m.position(4 * S), [0.0, 0.0, 0.0]);
        assert_eq!(m.speed(4 * S), 0.0);
        assert_eq!(m.position(8 * S), [30.0, 0.0, 0.0]);
        assert_eq!(m.speed(8 * S), 10.0);
        // A second resume of a running node changes nothing.
        m.resume(8 * S, 9 * S);
        assert_eq!(m.position(9 * S), [40.0, 0.0, 0.0]);
    }

    #[test]
    fn exported_trajectory_is_the_path_the_model_follows() {
        let cases = [
            MobilityConfig::RandomWaypoint {
                area: Area { min: [0.0, 0.0], max: [500.0, 300.0] },
                speed_mps: Range { min: 1.0, max: 20.0 },
                pause_ns: Range { min: 0.0, max: 5e9 },
                steady_state: true,
            },
            MobilityConfig::Setdest {
                moves: vec![
                    SetdestMove { t_ns: S, target: [100.0, 0.0, 0.0], speed_mps: 10.0 },
                    SetdestMove { t_ns: 6 * S, target: [50.0, 50.0, 0.0], speed_mps: 5.0 },
                ],
            },
            MobilityConfig::Waypoints {
                points: vec![Waypoint { t_ns: 2 * S, position: [0.0, 0.0, 0.0] }, Waypoint { t_ns: 9 * S, position: [70.0, 0.0, 0.0] }],
            },
            MobilityConfig::Static,
        ];
        let until = 300 * S;
        for cfg in &cases {
            let points = trajectory(cfg, [3.0, 4.0, 0.0], 11, 2, until);
            let knots: Vec<Knot> = points.iter().map(|p| Knot { t: p.t_ns, pos: p.position }).collect();
            assert!(knots.windows(2).all(|w| w[0].t <= w[1].t), "{cfg:?}: times must not decrease");
            // The model advances step by step (pruning old legs on the way); the export must agree everywhere.
            let mut model = Mobility::new(cfg, [3.0, 4.0, 0.0], 11, 2);
            let mut t = 0;
            while t <= until {
                model.advance_to(t);
                let (a, b) = (model.position(t), knots_at(&knots, t));
                assert!((0..3).all(|k| (a[k] - b[k]).abs() < 1e-6), "{cfg:?} at {t}: model {a:?}, export {b:?}");
                t += S / 4;
            }
        }
    }

    #[test]
    fn mean_distance_formula_matches_known_values() {
        // Unit square: 0.521405...; a segment of length a: a/3.
        assert!((mean_distance_in_rectangle(1.0, 1.0) - 0.521_405_433).abs() < 1e-6);
        assert!((mean_distance_in_rectangle(3.0, 0.0) - 1.0).abs() < 1e-12);
    }

    /// Mean speed over many random-waypoint nodes in a time window.
    fn mean_speed(steady_state: bool, from: Time, to: Time) -> f64 {
        let cfg = MobilityConfig::RandomWaypoint {
            area: Area { min: [0.0, 0.0], max: [1000.0, 1000.0] },
            speed_mps: Range { min: 0.5, max: 20.0 },
            pause_ns: Range { min: 0.0, max: 0.0 },
            steady_state,
        };
        let mut total = 0.0;
        let mut samples = 0;
        for node in 0..400 {
            let mut m = Mobility::new(&cfg, [0.0; 3], 7, node);
            let mut t = from;
            while t <= to {
                total += m.speed(t);
                samples += 1;
                t += 10 * S;
            }
        }
        total / samples as f64
    }

    #[test]
    fn random_waypoint_steady_state_mean_speed_does_not_decay() {
        // Stationary mean speed with no pause: (vmax - vmin) / ln(vmax / vmin).
        let stationary = 19.5 / (20.0f64 / 0.5).ln();
        let early = mean_speed(true, 0, 100 * S);
        let late = mean_speed(true, 3000 * S, 3100 * S);
        assert!((early - stationary).abs() / stationary < 0.08, "early {early} vs {stationary}");
        assert!((late - stationary).abs() / stationary < 0.08, "late {late} vs {stationary}");
    }

    #[test]
    fn random_waypoint_uniform_start_mean_speed_decays() {
        let stationary = 19.5 / (20.0f64 / 0.5).ln();
        let early = mean_speed(false, 0, 100 * S);
        let late = mean_speed(false, 3000 * S, 3100 * S);
        // Uniform start: about (vmin + vmax) / 2 = 10.25 m/s at first.
        assert!(early > 1.5 * stationary, "early {early} vs stationary {stationary}");
        assert!(late < 1.2 * stationary, "late {late} vs stationary {stationary}");
    }
}
