//! The node's radio as the daemon sees it: the medium's statistics page
//! (emulator/README.md section 5), read directly, and a helper thread that
//! sleeps on the page's futex while the daemon waits for the radio to drain
//! and wakes the event loop through an eventfd when it has.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use meshemu_radiostats::{NodeCounters, RadioStats};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// Frames that have left the radio's queue: acknowledged, broadcast, dropped
/// at the retry limit or refused by a full queue.
pub fn completed(counters: &NodeCounters) -> u64 {
    counters.tx_data_frames + counters.tx_broadcast_frames + counters.retry_drops + counters.queue_drops
}

struct Shared {
    page: RadioStats,
    /// The event loop waits for `completed` to differ from `seen`.
    armed: AtomicBool,
    seen: AtomicU64,
    stop: AtomicBool,
    wake: EventFd,
}

pub struct Radio {
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
    /// Times the event loop asked to be woken by a radio change.
    pub waits: u64,
}

/// How long the helper sleeps at most before it looks again (the medium may
/// be gone; stopping the daemon must not wait on it).
const WAIT_SLICE: Duration = Duration::from_millis(50);

impl Radio {
    /// The page of the node this thread runs in, or the page at `path`.
    pub fn open(path: Option<&Path>) -> anyhow::Result<Radio> {
        let page = match path {
            Some(path) => RadioStats::open(path),
            None => RadioStats::open_own(),
        }
        .context("opening the radio statistics page (use --radio none on a node without one)")?;
        let wake = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC).context("eventfd")?;
        let shared = Arc::new(Shared {
            page,
            armed: AtomicBool::new(false),
            seen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake,
        });
        let helper = {
            let shared = shared.clone();
            std::thread::Builder::new().name("radio-wait".into()).spawn(move || wait_loop(&shared))?
        };
        Ok(Radio { shared, helper: Some(helper), waits: 0 })
    }

    /// (frames completed, queue length) now.
    pub fn read(&self) -> anyhow::Result<(u64, u64)> {
        let (_, counters) = self.shared.page.read_counters()?;
        Ok((completed(&counters), counters.queue_len))
    }

    /// Asks for a wake-up (the eventfd) once `completed` differs from `seen`.
    pub fn wake_when_completed_changes(&mut self, seen: u64) {
        self.waits += 1;
        self.shared.seen.store(seen, Ordering::Release);
        self.shared.armed.store(true, Ordering::Release);
        if let Some(helper) = &self.helper {
            helper.thread().unpark();
        }
    }

    /// Clears the eventfd after it woke the loop.
    pub fn acknowledge(&self) {
        let _ = self.shared.wake.read();
    }

    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.shared.wake.as_fd()
    }
}

impl Drop for Radio {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(helper) = self.helper.take() {
            helper.thread().unpark();
            let _ = helper.join();
        }
    }
}

fn wait_loop(shared: &Shared) {
    while !shared.stop.load(Ordering::Acquire) {
        if !shared.armed.load(Ordering::Acquire) {
            std::thread::park_timeout(Duration::from_secs(1));
            continue;
        }
        let seq = shared.page.seq();
        let now = match shared.page.read_counters() {
            Ok((_, counters)) => completed(&counters),
            Err(_) => {
                std::thread::sleep(WAIT_SLICE);
                continue;
            }
        };
        if now != shared.seen.load(Ordering::Acquire) {
            shared.armed.store(false, Ordering::Release);
            let _ = shared.wake.write(1);
            continue;
        }
        if shared.page.wait_for_change(seq, WAIT_SLICE).is_err() {
            std::thread::sleep(WAIT_SLICE);
        }
    }
}
