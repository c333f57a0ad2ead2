//! Model time on the host's clocks and the loop's wake-ups: model time is
//! CLOCK_MONOTONIC since the ready line; a timerfd is armed for the model's
//! next event, early by `realtime.spin_ns`: an event due within that is
//! waited for by polling, not by the timer. The thread's timer slack is 1 ns
//! and it runs under SCHED_FIFO as `realtime.sched_fifo` asks.

use std::io;

use anyhow::Context;
use meshemu_model::Time;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId as TimerClock, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId};

use crate::config::SchedFifo;

/// Priority of the event loop with `realtime.sched_fifo`.
const FIFO_PRIORITY: i32 = 50;

fn monotonic_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// The wall clock (for capture timestamps).
pub fn realtime_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_REALTIME).expect("CLOCK_REALTIME");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Model time.
#[derive(Default)]
pub struct Clock {
    /// CLOCK_MONOTONIC at model time 0.
    t0: u64,
}

impl Clock {
    /// Model time 0 is now.
    pub fn start(&mut self) {
        self.t0 = monotonic_ns();
    }

    pub fn now(&self) -> Time {
        monotonic_ns().saturating_sub(self.t0)
    }

    /// CLOCK_MONOTONIC at model time `t`.
    fn monotonic(&self, t: Time) -> u64 {
        self.t0 + t
    }
}

/// The timerfd that wakes the loop for the model's next event.
pub struct DeadlineTimer {
    fd: TimerFd,
    /// Model deadline the timer is armed for.
    armed: Option<Time>,
    spin_ns: u64,
}

impl DeadlineTimer {
    pub fn new(spin_ns: u64) -> anyhow::Result<Self> {
        let fd = TimerFd::new(TimerClock::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)
            .context("timerfd")?;
        Ok(DeadlineTimer { fd, armed: None, spin_ns })
    }

    pub fn fd(&self) -> &TimerFd {
        &self.fd
    }

    /// Arms the timer for the model's next event (early by `spin_ns`).
    pub fn arm(&mut self, clock: &Clock, next_event: Option<Time>) -> anyhow::Result<()> {
        let deadline = next_event.map(|t| t.saturating_sub(self.spin_ns));
        if deadline == self.armed {
            return Ok(());
        }
        match deadline {
            Some(t) => {
                let at = clock.monotonic(t);
                let spec = TimeSpec::new((at / 1_000_000_000) as _, (at % 1_000_000_000) as _);
                self.fd.set(Expiration::OneShot(spec), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
            }
            None => self.fd.unset()?,
        }
        self.armed = deadline;
        Ok(())
    }

    /// The timer fired: it is spent, arm it again whatever comes next.
    /// Returns the deadline it was armed for.
    pub fn expired(&mut self) -> Option<Time> {
        let mut expirations = [0u8; 8];
        let _ = nix::unistd::read(&self.fd, &mut expirations);
        self.armed.take()
    }

    /// Whether the next event is due within `spin_ns` of `now`: then the loop
    /// polls for it instead of arming the timer. Arming costs more than a
    /// short wait on a virtual machine, where programming the host's timer
    /// is a VM exit (8-15 µs for a deadline under 100 µs away, measured on
    /// the machine of emulator/README.md section 4).
    pub fn is_close(&self, next_event: Option<Time>, now: Time) -> bool {
        self.spin_ns > 0 && next_event.is_some_and(|next| next.saturating_sub(now) <= self.spin_ns)
    }
}

/// Sets the calling thread's timer slack to 1 ns (timers fire when due, not
/// up to 50 µs later) and its scheduling as `sched_fifo` asks; returns
/// whether it runs under SCHED_FIFO.
pub fn set_up_thread(sched_fifo: SchedFifo) -> anyhow::Result<bool> {
    nix::sys::prctl::set_timerslack(1).context("setting the timer slack")?;
    Ok(match sched_fifo {
        SchedFifo::Off => false,
        SchedFifo::On => {
            enter_sched_fifo().context("realtime.sched_fifo on: sched_setscheduler")?;
            true
        }
        SchedFifo::Auto => match enter_sched_fifo() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("meshemu-medium: SCHED_FIFO refused ({e}); running with normal scheduling, expect late events");
                false
            }
        },
    })
}

/// Puts the calling thread under SCHED_FIFO at [`FIFO_PRIORITY`].
fn enter_sched_fifo() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: FIFO_PRIORITY };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
