//! Waiting for a page to change from an event loop: a futex cannot be
//! polled, so a helper thread sleeps on it ([`RadioStats::wait_for_change`])
//! and makes an eventfd readable when a value read from the page differs
//! from the one the loop saw. Between changes the helper never wakes: no
//! time slices, no parking with a timeout; [`Drop`] wakes it through the
//! futex.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::page::{Error, RadioStats};

/// What the watcher compares: a value read from the page (its sequence
/// number, or a counter) that changes when the reader has something to do.
pub type Watched = fn(&RadioStats) -> Result<u64, Error>;

/// Waits longer than any lab lives; only a change or [`Drop`] ends a wait.
const WAIT: Duration = Duration::from_secs(24 * 3600);
/// After a failed read (the medium died mid-update), look again this much later.
const RETRY: Duration = Duration::from_millis(100);

struct Shared {
    page: RadioStats,
    watched: Watched,
    /// The loop waits for `watched` to differ from `seen`.
    armed: AtomicBool,
    seen: AtomicU64,
    stop: AtomicBool,
    wake: OwnedFd,
}

/// A page and its helper thread.
pub struct PageWatcher {
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
}

impl PageWatcher {
    pub fn spawn(page: RadioStats, watched: Watched) -> io::Result<PageWatcher> {
        // SAFETY: eventfd has no memory arguments; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared =
            Arc::new(Shared { page, watched, armed: AtomicBool::new(false), seen: AtomicU64::new(0), stop: AtomicBool::new(false), wake });
        let helper = {
            let shared = shared.clone();
            std::thread::Builder::new().name("radio-watch".into()).spawn(move || watch(&shared))?
        };
        Ok(PageWatcher { shared, helper: Some(helper) })
    }

    pub fn page(&self) -> &RadioStats {
        &self.shared.page
    }

    /// Asks for one wake-up (the descriptor becomes readable) once the
    /// watched value differs from `seen`.
    pub fn arm(&self, seen: u64) {
        self.shared.seen.store(seen, Ordering::Release);
        self.shared.armed.store(true, Ordering::Release);
        if let Some(helper) = &self.helper {
            helper.thread().unpark();
        }
    }

    /// Clears the descriptor after it woke the loop.
    pub fn acknowledge(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a local buffer from our own non-blocking eventfd.
        unsafe { libc::read(self.shared.wake.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }

    /// Readable when the watched value changed after an [`arm`](Self::arm).
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.shared.wake.as_fd()
    }
}

impl Drop for PageWatcher {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let Some(helper) = self.helper.take() else { return };
        // The helper may be about to sleep on the futex: wake it until it has seen `stop`.
        while !helper.is_finished() {
            helper.thread().unpark();
            self.shared.page.wake_waiters();
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = helper.join();
    }
}

fn watch(shared: &Shared) {
    // Signals are the event loop's (a signalfd there): never delivered here.
    // SAFETY: sigfillset and pthread_sigmask only touch the local set and this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    while !shared.stop.load(Ordering::Acquire) {
        if !shared.armed.load(Ordering::Acquire) {
            std::thread::park();
            continue;
        }
        let seq = shared.page.seq();
        let value = match (shared.watched)(&shared.page) {
            Ok(value) => value,
            Err(_) => {
                std::thread::sleep(RETRY);
                continue;
            }
        };
        if value != shared.seen.load(Ordering::Acquire) {
            shared.armed.store(false, Ordering::Release);
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a local buffer to our own eventfd.
            unsafe { libc::write(shared.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
            continue;
        }
        if shared.page.wait_for_change(seq, WAIT).is_err() {
            std::thread::sleep(RETRY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{NodeCounters, PeerEntry};
    use crate::page::Writer;

    fn readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> bool {
        let mut poll = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd on the stack.
        unsafe { libc::poll(&mut poll, 1, timeout_ms) == 1 }
    }

    #[test]
    fn the_descriptor_becomes_readable_once_per_arming_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let mut writer = Writer::create(&path, 0, 1).unwrap();
        let watcher = PageWatcher::spawn(RadioStats::open(&path).unwrap(), |page| Ok(page.seq())).unwrap();
        let peers = [PeerEntry::default()];

        // Not armed: a change wakes nobody.
        writer.update(1, &NodeCounters::default(), &peers);
        assert!(!readable(watcher.wake_fd(), 100));

        // Armed with what the page shows: quiet until the next change, then readable.
        watcher.arm(watcher.page().seq());
        assert!(!readable(watcher.wake_fd(), 100));
        writer.update(2, &NodeCounters::default(), &peers);
        assert!(readable(watcher.wake_fd(), 10_000));
        watcher.acknowledge();

        // One wake-up per arming: later changes wait for the next.
        writer.update(3, &NodeCounters::default(), &peers);
        assert!(!readable(watcher.wake_fd(), 100));
        watcher.arm(watcher.page().seq() - 2);
        assert!(readable(watcher.wake_fd(), 10_000), "armed with an older value: a change already");
        watcher.acknowledge();

        // Dropping a watcher whose helper sleeps on the futex returns.
        watcher.arm(watcher.page().seq());
        std::thread::sleep(Duration::from_millis(50));
        drop(watcher);
    }
}
