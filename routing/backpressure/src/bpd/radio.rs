//! The node's radio as the daemon sees it: the medium's statistics page
//! (emulator/README.md section 5), read directly, and a helper thread
//! (radiostats' `PageWatcher`) that sleeps on the page's futex while the
//! daemon waits for the radio to drain and wakes the event loop through an
//! eventfd when it has; otherwise it sleeps until asked.

use std::os::fd::BorrowedFd;
use std::path::Path;

use anyhow::Context;
use meshemu_radiostats::{NodeCounters, PageWatcher, RadioStats};

/// Frames that have left the radio's queue: acknowledged, broadcast, dropped
/// at the retry limit or refused by a full queue.
pub fn completed(counters: &NodeCounters) -> u64 {
    counters.tx_data_frames + counters.tx_broadcast_frames + counters.retry_drops + counters.queue_drops
}

pub struct Radio {
    watcher: PageWatcher,
    /// Times the event loop asked to be woken by a radio change.
    pub waits: u64,
}

impl Radio {
    /// The page of the node this thread runs in, or the page at `path`.
    pub fn open(path: Option<&Path>) -> anyhow::Result<Radio> {
        let page = match path {
            Some(path) => RadioStats::open(path),
            None => RadioStats::open_own(),
        }
        .context("opening the radio statistics page (use --radio none on a node without one)")?;
        let watcher = PageWatcher::spawn(page, |page| page.read_counters().map(|(_, counters)| completed(&counters)))
            .context("watching the radio statistics page")?;
        Ok(Radio { watcher, waits: 0 })
    }

    /// (frames completed, queue length) now.
    pub fn read(&self) -> anyhow::Result<(u64, u64)> {
        let (_, counters) = self.watcher.page().read_counters()?;
        Ok((completed(&counters), counters.queue_len))
    }

    /// Asks for a wake-up (the eventfd) once `completed` differs from `seen`
    /// (a value just read).
    pub fn wake_when_completed_changes(&mut self, seen: u64) {
        self.waits += 1;
        self.watcher.arm(seen);
    }

    /// Clears the eventfd after it woke the loop.
    pub fn acknowledge(&self) {
        self.watcher.acknowledge();
    }

    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.watcher.wake_fd()
    }
}
