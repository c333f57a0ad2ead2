//! Radio statistics page of a meshemu node (emulator/README.md, section 5).
//!
//! The medium keeps one small file per node, `run_dir/nodes/<name>/radio`,
//! memory-mapped by any process that wants the node's MAC/PHY counters; a
//! daemon running inside a node finds its own page through
//! `/run/meshemu/by-netns/<inode of its network namespace>` ([`RadioStats::open_own`]).
//!
//! # Layout, version 4
//!
//! Native byte order, which meshemu only builds for little-endian hosts. Every
//! field is 8-byte aligned in 8-byte words, so the page is an array of `u64`
//! words and every word is written and read atomically.
//!
//! | offset | type | field |
//! |---|---|---|
//! | 0 | `[u8; 8]` | magic `MESHSTAT` |
//! | 8 | `u32` | version = 4 |
//! | 12 | `u32` | header size in bytes = offset of the node counters (48) |
//! | 16 | `u64` | seq (sequence lock, odd while the writer is writing) |
//! | 24 | `u64` | model time of the last update, ns |
//! | 32 | `u32` | node index |
//! | 36 | `u32` | number of peer entries after the counters |
//! | 40 | `u64` | waiters: threads blocked in [`RadioStats::wait_for_change`] |
//! | 48 | [`NodeCounters`] | 57 `u64` (456 bytes) |
//! | 496 | [`PeerEntry`] × peer count | 48 bytes each, entry *j* is node index *j* |
//!
//! The node's own entry in the peer table is present and stays zero, so that
//! entry *j* is always node *j*.
//!
//! # Consistency
//!
//! A sequence lock: the writer makes `seq` odd, writes, then makes it even
//! again. A reader copies what it needs and retries if `seq` was odd or changed
//! meanwhile ([`RadioStats::read`]). Readers never write to the page, except
//! the `waiters` word while they wait.
//!
//! # Waiting for a change
//!
//! A daemon that needs to react to its node's radio (e.g. release a packet when
//! the interface queue drains) blocks in [`RadioStats::wait_for_change`]
//! instead of polling: a futex on the low 32 bits of `seq` (shared, not
//! private: the writer and the waiters map the same file). The waiter counts
//! itself in `waiters`, then re-reads `seq` and sleeps only if it is still the
//! value it saw; the writer, after making `seq` even, calls `FUTEX_WAKE` only
//! when `waiters` is non-zero, so a page nobody waits on costs the writer one
//! fence and one load per update. Both sides put a sequentially consistent
//! fence between their store and their load, so either the writer sees the
//! waiter or the waiter sees the new `seq`: no wake-up is lost. A waiter that
//! dies while counted leaves `waiters` too high, which costs the writer
//! needless wake calls, never a missed one. An event loop that cannot block
//! on a futex gets an eventfd from a [`PageWatcher`] instead.
//!
//! # Features
//!
//! The layout (this page's types, [`NodeCounters`] among them) has no I/O and
//! is all the model needs: it counts in [`NodeCounters`] directly. The
//! `page` feature (default) adds the page itself: [`Writer`] for the medium,
//! [`RadioStats`] for readers.

#[cfg(not(target_endian = "little"))]
compile_error!("the radio statistics page is little-endian and read in native byte order");

mod layout;
pub use layout::*;

#[cfg(feature = "page")]
mod page;
#[cfg(feature = "page")]
pub use page::*;
#[cfg(feature = "page")]
mod watch;
#[cfg(feature = "page")]
pub use watch::{PageWatcher, Watched};
