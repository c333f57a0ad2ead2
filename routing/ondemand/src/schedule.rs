//! When the event loop does its own work, sans-IO (time is an input, as in
//! the protocol cores): every job has a deadline computed from what
//! happened, none a fixed period, so a node where nothing happens sleeps.
//!
//! - route use is read while routes are installed (there is nothing to keep
//!   alive otherwise), every `route_use_every`, and before every protocol
//!   timer, so a route in use is never expired unseen;
//! - link-layer counters are read when they changed (the radio page's
//!   watcher says so), at most once per `feedback_every`;
//! - the status file is written when its content changed, at most once per
//!   `status_every`.
//!
//! [`Schedule::wake_at`] coalesces: a job that may run late (route use, by
//! [`ROUTE_USE_SLACK`]) rides along with an earlier wake-up rather than
//! taking one of its own.

use std::time::Duration;

/// How late a read of route use may run to share a wake-up: a route is
/// refreshed at most this much later than with a read of its own, against a
/// lifetime of seconds.
pub const ROUTE_USE_SLACK: Duration = Duration::from_millis(100);

/// Something written when it changes, at most once per interval.
#[derive(Debug)]
pub struct OnChange<T> {
    every: Duration,
    /// What was written last, and when.
    written: Option<(T, Duration)>,
    due: Option<Duration>,
}

impl<T: PartialEq> OnChange<T> {
    pub fn new(every: Duration) -> OnChange<T> {
        OnChange { every, written: None, due: None }
    }

    /// The content is now `current`: when it must be written (None: what
    /// was written last is still right).
    pub fn update(&mut self, now: Duration, current: &T) -> Option<Duration> {
        self.due = match &self.written {
            Some((last, _)) if last == current => None,
            Some((_, at)) => Some(self.due.unwrap_or((*at + self.every).max(now))),
            None => Some(now),
        };
        self.due
    }

    pub fn due(&self) -> Option<Duration> {
        self.due
    }

    /// `current` was written at `now`.
    pub fn wrote(&mut self, now: Duration, current: T) {
        self.written = Some((current, now));
        self.due = None;
    }
}

/// The loop's deadlines besides the protocol's.
#[derive(Debug)]
pub struct Schedule {
    route_use_every: Duration,
    /// None: there is no link layer to read.
    feedback_every: Option<Duration>,
    /// The next read of route use; None while no route is installed.
    route_use: Option<Duration>,
    /// The next read of the link layer; None until its counters change.
    feedback: Option<Duration>,
    last_feedback: Option<Duration>,
}

impl Schedule {
    /// A link layer (read at most every `feedback_every`) is read at once:
    /// its first counters are the baseline.
    pub fn new(route_use_every: Duration, feedback_every: Option<Duration>) -> Schedule {
        let feedback = feedback_every.map(|_| Duration::ZERO);
        Schedule { route_use_every, feedback_every, route_use: None, feedback, last_feedback: None }
    }

    /// Routes are installed (or not) now. True when the reads of route use
    /// start: the first read is a baseline, what it shows was used before
    /// any route of now existed.
    pub fn routes_installed(&mut self, now: Duration, installed: bool) -> bool {
        match (installed, self.route_use) {
            (true, None) => {
                self.route_use = Some(now + self.route_use_every);
                true
            }
            (false, Some(_)) => {
                self.route_use = None;
                false
            }
            _ => false,
        }
    }

    /// Whether route use must be read before the work due at `now`, with
    /// `protocol_due`: a protocol timer is due (it may expire a route). A
    /// read due within the slack is done now, on this wake-up.
    pub fn route_use_due(&self, now: Duration, protocol_due: bool) -> bool {
        self.route_use.is_some_and(|at| at <= now + ROUTE_USE_SLACK || protocol_due)
    }

    pub fn route_use_read(&mut self, now: Duration) {
        if self.route_use.is_some() {
            self.route_use = Some(now + self.route_use_every);
        }
    }

    /// The link layer's counters changed (its watcher woke the loop).
    pub fn link_changed(&mut self, now: Duration) {
        let Some(every) = self.feedback_every else { return };
        let earliest = self.last_feedback.map_or(now, |last| (last + every).max(now));
        self.feedback = Some(self.feedback.map_or(earliest, |at| at.min(earliest)));
    }

    /// No read is scheduled: the loop waits for the link layer to change.
    pub fn awaiting_change(&self) -> bool {
        self.feedback.is_none()
    }

    pub fn feedback_due(&self, now: Duration) -> bool {
        self.feedback.is_some_and(|at| at <= now)
    }

    /// Read at `now`; the next read waits for the next change.
    pub fn feedback_read(&mut self, now: Duration) {
        self.last_feedback = Some(now);
        self.feedback = None;
    }

    /// When to wake up next given the protocol's and the status file's
    /// deadlines (None: nothing is due, sleep until an event).
    pub fn wake_at(&self, protocol: Option<Duration>, status: Option<Duration>) -> Option<Duration> {
        let exact = [protocol, status, self.feedback].into_iter().flatten().min();
        let route_use = self.route_use.map(|at| match exact {
            // Read on the earlier wake-up if it comes within the slack.
            Some(earlier) if earlier >= at.saturating_sub(ROUTE_USE_SLACK) && earlier <= at + ROUTE_USE_SLACK => earlier,
            _ => at,
        });
        [exact, route_use].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_status_is_written_first_at_once_then_only_when_it_changes_and_at_most_once_per_interval() {
        let mut status = OnChange::new(ms(1000));
        assert_eq!(status.update(ms(0), &1), Some(ms(0)), "never written: now");
        status.wrote(ms(0), 1);
        assert_eq!(status.update(ms(400), &1), None, "unchanged: no write, no wake-up");
        assert_eq!(status.update(ms(500), &2), Some(ms(1000)), "changed within the interval: at its end");
        assert_eq!(status.update(ms(700), &3), Some(ms(1000)), "more changes do not push it later");
        assert_eq!(status.update(ms(800), &1), None, "changed back: what is on disk is right");
        assert_eq!(status.update(ms(5000), &4), Some(ms(5000)), "long after the last write: now");
        assert_eq!(status.due(), Some(ms(5000)));
        status.wrote(ms(5000), 4);
        assert_eq!(status.due(), None);
    }

    #[test]
    fn route_use_is_read_only_while_routes_are_installed_and_before_protocol_timers() {
        let mut schedule = Schedule::new(ms(500), Some(ms(50)));
        assert!(!schedule.route_use_due(ms(0), true), "no route: nothing to keep alive");
        assert_eq!(schedule.wake_at(None, None), Some(ms(0)), "only the first link-layer read");
        schedule.feedback_read(ms(0));
        assert_eq!(schedule.wake_at(None, None), None, "idle: no wake-up at all");

        assert!(schedule.routes_installed(ms(1000), true), "the first read is a baseline");
        assert!(!schedule.routes_installed(ms(1200), true));
        assert!(!schedule.route_use_due(ms(1200), false));
        assert!(schedule.route_use_due(ms(1200), true), "a protocol timer may expire a route: look first");
        assert!(schedule.route_use_due(ms(1400), false), "within the slack: on this wake-up");
        assert!(schedule.route_use_due(ms(1500), false));
        schedule.route_use_read(ms(1500));
        assert_eq!(schedule.wake_at(None, None), Some(ms(2000)));
        assert!(!schedule.routes_installed(ms(1700), false));
        assert_eq!(schedule.wake_at(None, None), None);
    }

    #[test]
    fn without_a_link_layer_an_idle_loop_never_wakes() {
        let mut schedule = Schedule::new(ms(500), None);
        assert!(!schedule.feedback_due(ms(0)));
        schedule.link_changed(ms(10));
        assert_eq!(schedule.wake_at(None, None), None);
        assert_eq!(schedule.wake_at(Some(ms(1000)), None), Some(ms(1000)), "the protocol's timers alone");
    }

    #[test]
    fn the_link_layer_is_read_after_a_change_at_most_once_per_interval() {
        let mut schedule = Schedule::new(ms(500), Some(ms(50)));
        assert!(schedule.feedback_due(ms(0)));
        schedule.feedback_read(ms(0));
        assert!(!schedule.feedback_due(ms(10_000)), "no change: no read");
        schedule.link_changed(ms(20));
        assert_eq!(schedule.wake_at(None, None), Some(ms(50)), "changed 20 ms after a read: 50 ms after it");
        schedule.feedback_read(ms(50));
        schedule.link_changed(ms(300));
        assert!(schedule.feedback_due(ms(300)), "changed long after the last read: at once");
    }

    #[test]
    fn a_read_of_route_use_rides_along_with_a_wake_up_within_its_slack() {
        let mut schedule = Schedule::new(ms(500), Some(ms(50)));
        schedule.feedback_read(ms(0));
        schedule.routes_installed(ms(0), true);
        assert_eq!(schedule.wake_at(Some(ms(450)), None), Some(ms(450)), "a protocol timer 50 ms early takes it along");
        assert!(schedule.route_use_due(ms(450), false));
        assert_eq!(schedule.wake_at(Some(ms(580)), None), Some(ms(580)), "80 ms late: the read waits for it");
        assert_eq!(schedule.wake_at(Some(ms(700)), None), Some(ms(500)), "beyond the slack: a wake-up of its own");
        assert_eq!(schedule.wake_at(Some(ms(300)), None), Some(ms(300)), "far earlier timers are separate");
        assert!(!schedule.route_use_due(ms(300), false));
        assert_eq!(schedule.wake_at(None, Some(ms(560))), Some(ms(560)), "the status write takes it along");
    }
}
