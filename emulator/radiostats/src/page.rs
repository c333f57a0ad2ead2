//! The page as a memory-mapped file: the medium's [`Writer`], the readers'
//! [`RadioStats`].

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::layout::*;

/// Words of the page (u64 each) the page code reads and writes by index.
const WORD: usize = 8;
const SEQ_WORD: usize = 2;
const TIME_WORD: usize = 3;
const WAITERS_WORD: usize = 5;

/// Where the medium links each node's namespace inode to its page directory.
pub const BY_NETNS_DIR: &str = "/run/meshemu/by-netns";
/// File name of the page inside a node's directory.
pub const PAGE_FILE_NAME: &str = "radio";
/// Everything that can go wrong opening or reading a page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: not a meshemu radio statistics page: {problem}")]
    Format { path: PathBuf, problem: String },
    #[error(
        "this process's network namespace (inode {inode}) is not a meshemu node: {path} does not exist"
    )]
    NotInNode { inode: u64, path: PathBuf },
    #[error("{path}: the writer kept the page locked (did the medium die while writing?)")]
    Locked { path: PathBuf },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// The page as u64 words that may be shared with other processes.
fn words(bytes: &[u8]) -> &[AtomicU64] {
    assert_eq!(bytes.as_ptr() as usize % WORD, 0, "page mapping is not 8-byte aligned");
    // SAFETY: the mapping is page-aligned (checked above), its length is a
    // multiple of 8 by construction, and every access to it goes through these
    // atomics, so concurrent access by the writer and readers is not a data race.
    // Atomic loads of lock-free sizes are allowed on read-only memory.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<AtomicU64>(), bytes.len() / WORD) }
}

/// The low 32 bits of `seq` (little-endian), the futex word.
fn seq_futex(page: &[AtomicU64]) -> *const u32 {
    std::ptr::from_ref(&page[SEQ_WORD]).cast::<u32>()
}

/// Wakes every thread blocked on the futex at `word`.
fn futex_wake_all(word: *const u32) {
    // SAFETY: `word` points into a live shared mapping; FUTEX_WAKE only uses
    // the address as a key and never dereferences memory we do not own.
    unsafe {
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE, i32::MAX, std::ptr::null::<libc::timespec>());
    }
}

/// Blocks while `*word == expected`, at most `timeout` (spurious returns are fine:
/// the caller re-checks).
fn futex_wait(word: *const u32, expected: u32, timeout: Duration) {
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` points into a live shared mapping of at least 4 bytes;
    // FUTEX_WAIT reads it atomically and sleeps; `timeout` outlives the call.
    unsafe {
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAIT, expected, &timeout as *const libc::timespec);
    }
}

/// The medium's side: creates a node's page and publishes new counters.
pub struct Writer {
    map: MmapMut,
    seq: u64,
}

impl Writer {
    /// Creates (or replaces) the page at `path`, zeroed, readable by everyone.
    /// A page that existed is unlinked first, so readers still mapping it keep
    /// a valid (stale) mapping rather than a truncated one.
    pub fn create(path: &Path, node_index: u32, peer_count: u32) -> Result<Self, Error> {
        match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_error(path)(e)),
            _ => {}
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(path)
            .map_err(io_error(path))?;
        file.set_len(page_size(peer_count) as u64).map_err(io_error(path))?;
        // SAFETY: we just created the file; nobody truncates it while mapped
        // (a new page is always a new file).
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io_error(path))?;
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            header_size: HEADER_SIZE as u32,
            seq: 0,
            time_ns: 0,
            node_index,
            peer_count,
            waiters: 0,
        };
        let writer = Writer { map, seq: 0 };
        let page = words(&writer.map);
        for (word, value) in page.iter().zip(bytemuck::cast_slice::<Header, u64>(&[header])) {
            word.store(*value, Ordering::Relaxed);
        }
        Ok(writer)
    }

    /// Number of peer entries of this page.
    pub fn peer_count(&self) -> usize {
        (self.map.len() - HEADER_SIZE - COUNTERS_SIZE) / PEER_SIZE
    }

    /// Publishes a new consistent state. `peers` must have one entry per node.
    pub fn update(&mut self, time_ns: u64, counters: &NodeCounters, peers: &[PeerEntry]) {
        assert_eq!(peers.len(), self.peer_count(), "peer table size differs from the page's");
        self.publish(time_ns, counters, peers);
    }

    /// Publishes new counters; the peer table stays as last published.
    pub fn update_counters(&mut self, time_ns: u64, counters: &NodeCounters) {
        self.publish(time_ns, counters, &[]);
    }

    /// Writes the counters and the first `peers.len()` peer entries under the sequence lock.
    fn publish(&mut self, time_ns: u64, counters: &NodeCounters, peers: &[PeerEntry]) {
        let page = words(&self.map);
        let seq = &page[SEQ_WORD];
        self.seq += 1;
        seq.store(self.seq, Ordering::Relaxed);
        fence(Ordering::Release);
        page[TIME_WORD].store(time_ns, Ordering::Relaxed);
        let body = &page[HEADER_SIZE / WORD..];
        let new_words = bytemuck::cast_slice::<NodeCounters, u64>(std::slice::from_ref(counters))
            .iter()
            .chain(bytemuck::cast_slice::<PeerEntry, u64>(peers));
        for (word, value) in body.iter().zip(new_words) {
            word.store(*value, Ordering::Relaxed);
        }
        self.seq += 1;
        seq.store(self.seq, Ordering::Release);
        // Pairs with the fence in wait_for_change: we see the waiter, or it sees this seq.
        fence(Ordering::SeqCst);
        if page[WAITERS_WORD].load(Ordering::Relaxed) != 0 {
            futex_wake_all(seq_futex(page));
        }
    }
}

/// A consistent copy of a page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Model time of the update this copy shows, ns.
    pub time_ns: u64,
    pub node_index: u32,
    pub counters: NodeCounters,
    /// One entry per node index.
    pub peers: Vec<PeerEntry>,
}

/// A reader of one node's page (read-only mapping).
pub struct RadioStats {
    map: Mmap,
    /// A writable mapping of the header, made on the first wait (for `waiters`).
    waitable: OnceLock<MmapMut>,
    path: PathBuf,
    node_index: u32,
    peer_count: usize,
    counters_word: usize,
}

/// How many times a read retries before it decides the writer died mid-update.
const MAX_READ_ATTEMPTS: u32 = 1_000_000;

impl RadioStats {
    /// Opens the page of the node the calling thread runs in ([`RadioStats::own_path`]).
    pub fn open_own() -> Result<Self, Error> {
        Self::open(&Self::own_path()?)
    }

    /// The page of the node the calling thread runs in:
    /// `/run/meshemu/by-netns/<inode of /proc/thread-self/ns/net>/radio`.
    pub fn own_path() -> Result<PathBuf, Error> {
        let ns = Path::new("/proc/thread-self/ns/net");
        let inode = fs::metadata(ns).map_err(io_error(ns))?.ino();
        let path = Path::new(BY_NETNS_DIR).join(inode.to_string()).join(PAGE_FILE_NAME);
        if !path.exists() {
            return Err(Error::NotInNode { inode, path });
        }
        Ok(path)
    }

    /// Opens the page at `path` and checks its header.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(io_error(path))?;
        // SAFETY: the medium never truncates a page it created (see Writer::create).
        let map = unsafe { Mmap::map(&file) }.map_err(io_error(path))?;
        let bad = |problem: String| Error::Format { path: path.to_path_buf(), problem };
        if map.len() < HEADER_SIZE || !map.len().is_multiple_of(WORD) {
            return Err(bad(format!("size {} bytes", map.len())));
        }
        let mut header = Header::default();
        let header_words = bytemuck::cast_slice_mut::<Header, u64>(std::slice::from_mut(&mut header));
        for (dst, word) in header_words.iter_mut().zip(words(&map)) {
            *dst = word.load(Ordering::Relaxed);
        }
        if header.magic != MAGIC {
            return Err(bad(format!("magic {:?}", header.magic)));
        }
        if header.version != VERSION {
            return Err(bad(format!("version {}, this reader knows {VERSION}", header.version)));
        }
        let header_size = header.header_size as usize;
        if header_size < HEADER_SIZE || !header_size.is_multiple_of(WORD) {
            return Err(bad(format!("header size {header_size}")));
        }
        let needed = header_size + COUNTERS_SIZE + header.peer_count as usize * PEER_SIZE;
        if map.len() < needed {
            return Err(bad(format!(
                "{} bytes, but {} peers need {needed}",
                map.len(),
                header.peer_count
            )));
        }
        Ok(RadioStats {
            map,
            waitable: OnceLock::new(),
            path: path.to_path_buf(),
            node_index: header.node_index,
            peer_count: header.peer_count as usize,
            counters_word: header_size / WORD,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn node_index(&self) -> u32 {
        self.node_index
    }

    /// Number of peer entries (= nodes in the lab).
    pub fn peer_count(&self) -> usize {
        self.peer_count
    }

    /// The page's sequence number now (odd while the writer is writing):
    /// pass it to [`wait_for_change`](Self::wait_for_change).
    pub fn seq(&self) -> u64 {
        words(&self.map)[SEQ_WORD].load(Ordering::Acquire)
    }

    /// Blocks until the page's sequence number differs from `seen` (the writer
    /// published an update) or `timeout` has passed; returns whether it
    /// changed. Needs write access to the page file for the `waiters` word (a
    /// root daemon in a lab has it); the first call maps it.
    pub fn wait_for_change(&self, seen: u64, timeout: Duration) -> Result<bool, Error> {
        let waiters = self.waiters_word()?;
        let page = words(&self.map);
        waiters.fetch_add(1, Ordering::SeqCst);
        // Pairs with the writer's fence: it sees us counted, or we see its seq.
        fence(Ordering::SeqCst);
        let now = page[SEQ_WORD].load(Ordering::SeqCst);
        if now == seen {
            // The futex compares 32 bits: a change of the whole word by a
            // multiple of 2^32 updates within one wait is not a concern.
            futex_wait(seq_futex(page), seen as u32, timeout);
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
        Ok(self.seq() != seen)
    }

    /// Wakes every thread of any process blocked in
    /// [`wait_for_change`](Self::wait_for_change) on this page: they return
    /// as if the page had changed (a waiter re-checks what it waits for).
    pub fn wake_waiters(&self) {
        futex_wake_all(seq_futex(words(&self.map)));
    }

    fn waiters_word(&self) -> Result<&AtomicU64, Error> {
        if self.waitable.get().is_none() {
            let file = OpenOptions::new().read(true).write(true).open(&self.path).map_err(io_error(&self.path))?;
            // SAFETY: the medium never truncates a page (see Writer::create);
            // only the `waiters` word of this mapping is ever written, atomically.
            let map = unsafe { MmapOptions::new().len(HEADER_SIZE).map_mut(&file) }.map_err(io_error(&self.path))?;
            let _ = self.waitable.set(map);
        }
        let header = self.waitable.get().expect("mapped above");
        Ok(&words(header)[WAITERS_WORD])
    }

    /// A consistent copy of the whole page.
    pub fn read(&self) -> Result<Snapshot, Error> {
        let mut snapshot = Snapshot::default();
        self.read_into(&mut snapshot)?;
        Ok(snapshot)
    }

    /// As [`read`](Self::read), reusing `snapshot`'s peer table allocation.
    pub fn read_into(&self, snapshot: &mut Snapshot) -> Result<(), Error> {
        snapshot.node_index = self.node_index;
        snapshot.peers.resize(self.peer_count, PeerEntry::default());
        let counters = bytemuck::cast_slice_mut::<NodeCounters, u64>(std::slice::from_mut(
            &mut snapshot.counters,
        ));
        let peers = bytemuck::cast_slice_mut::<PeerEntry, u64>(&mut snapshot.peers);
        snapshot.time_ns = self.consistent_copy(&mut [counters, peers])?;
        Ok(())
    }

    /// A consistent copy of the node counters only (no peer table): the
    /// cheapest read, meant to be called per packet. Returns (model time, counters).
    pub fn read_counters(&self) -> Result<(u64, NodeCounters), Error> {
        let mut counters = NodeCounters::default();
        let dst = bytemuck::cast_slice_mut::<NodeCounters, u64>(std::slice::from_mut(&mut counters));
        let time = self.consistent_copy(&mut [dst])?;
        Ok((time, counters))
    }

    /// Copies the words after the header into `parts` (consecutively) under
    /// the sequence lock; returns the page's time of that update.
    fn consistent_copy(&self, parts: &mut [&mut [u64]]) -> Result<u64, Error> {
        let page = words(&self.map);
        let seq = &page[SEQ_WORD];
        for attempt in 0..MAX_READ_ATTEMPTS {
            if attempt > 64 {
                std::thread::yield_now();
            }
            let before = seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let time = page[TIME_WORD].load(Ordering::Relaxed);
            let mut source = page[self.counters_word..].iter();
            for part in parts.iter_mut() {
                for (dst, word) in part.iter_mut().zip(source.by_ref()) {
                    *dst = word.load(Ordering::Relaxed);
                }
            }
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == before {
                return Ok(time);
            }
        }
        Err(Error::Locked { path: self.path.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn counters_all(value: u64) -> NodeCounters {
        let mut c = NodeCounters::default();
        bytemuck::cast_slice_mut::<NodeCounters, u64>(std::slice::from_mut(&mut c)).fill(value);
        c
    }

    fn peer_all(value: u64, mac_last: u8) -> PeerEntry {
        PeerEntry {
            mac_address: [2, 0, 0, 0, 0, mac_last],
            reserved: [0; 2],
            tx_acked: value,
            tx_failed: value,
            tx_failed_data: value,
            rx_frames: value,
            last_rx_power_mdbm: value as i32,
            last_sinr_mdb: value as i32,
        }
    }

    #[test]
    fn layout_matches_the_documented_offsets() {
        assert_eq!(std::mem::offset_of!(Header, seq), 16);
        assert_eq!(std::mem::offset_of!(Header, time_ns), 24);
        assert_eq!(std::mem::offset_of!(Header, peer_count), 36);
        assert_eq!(std::mem::offset_of!(Header, waiters), 40);
        assert_eq!(std::mem::offset_of!(NodeCounters, link_drops), 15 * 8);
        assert_eq!(std::mem::offset_of!(NodeCounters, queue_len_max), 24 * 8);
        assert_eq!(std::mem::offset_of!(NodeCounters, rts_attempts_hist), 25 * 8);
        assert_eq!(std::mem::offset_of!(PeerEntry, tx_acked), 8);
        assert_eq!(std::mem::offset_of!(PeerEntry, tx_failed_data), 24);
        assert_eq!(std::mem::offset_of!(PeerEntry, last_sinr_mdb), 44);
        assert_eq!(page_size(3), 48 + 456 + 144);
    }

    #[test]
    fn written_values_are_read_back_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let mut writer = Writer::create(&path, 7, 3).unwrap();
        let mut counters = NodeCounters { rts_attempts: 5, defers: 9, ..Default::default() };
        counters.data_attempts_hist[15] = 2;
        let peers = [peer_all(1, 1), PeerEntry::default(), peer_all(3, 3)];
        writer.update(123_000, &counters, &peers);

        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[0..8], b"MESHSTAT");
        assert_eq!(u32::from_le_bytes(bytes[32..36].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 2, "seq even after one update");
        assert_eq!(u64::from_le_bytes(bytes[48 + 8 * 8..48 + 9 * 8].try_into().unwrap()), 5);

        let reader = RadioStats::open(&path).unwrap();
        let snap = reader.read().unwrap();
        assert_eq!(snap.time_ns, 123_000);
        assert_eq!(snap.node_index, 7);
        assert_eq!(snap.counters, counters);
        assert_eq!(snap.peers, peers);
        assert_eq!(reader.read_counters().unwrap(), (123_000, counters));
    }

    #[test]
    fn counters_alone_leave_the_peer_table_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let mut writer = Writer::create(&path, 0, 2).unwrap();
        let peers = [PeerEntry::default(), peer_all(4, 4)];
        writer.update(1, &NodeCounters::default(), &peers);
        let counters = NodeCounters { busy_ns: 77, ..Default::default() };
        writer.update_counters(2, &counters);

        let snap = RadioStats::open(&path).unwrap().read().unwrap();
        assert_eq!((snap.time_ns, snap.counters, snap.peers), (2, counters, peers.to_vec()));
        assert_eq!(writer.seq, 4, "each update is one odd-even step of the sequence lock");
    }

    #[test]
    fn a_concurrent_reader_never_sees_a_torn_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let peers = 50;
        let mut writer = Writer::create(&path, 0, peers).unwrap();
        let reader = RadioStats::open(&path).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer_thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut value = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    value += 1;
                    let table: Vec<PeerEntry> = (0..peers).map(|_| peer_all(value, 0)).collect();
                    writer.update(value, &counters_all(value), &table);
                    // A breath between updates, as the medium leaves: a writer
                    // that never stops would lock readers out by design.
                    let pause = std::time::Instant::now();
                    while pause.elapsed() < std::time::Duration::from_micros(1) {
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let mut snapshot = Snapshot::default();
        let mut distinct = std::collections::BTreeSet::new();
        let mut reads = 0;
        // Enough reads and enough different updates seen, however the two
        // threads get scheduled (bounded in time).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while (reads < 20_000 || distinct.len() < 50) && std::time::Instant::now() < deadline {
            reads += 1;
            reader.read_into(&mut snapshot).unwrap();
            let value = snapshot.time_ns;
            if value == 0 {
                continue; // the page as created, before the first update
            }
            assert_eq!(snapshot.counters, counters_all(value), "counters torn");
            assert!(snapshot.peers.iter().all(|p| *p == peer_all(value, 0)), "peers torn");
            let (time, counters) = reader.read_counters().unwrap();
            assert_eq!(counters, counters_all(time), "counters-only read torn");
            distinct.insert(value);
        }
        stop.store(true, Ordering::Relaxed);
        writer_thread.join().unwrap();
        assert!(distinct.len() >= 50, "the reader saw only {} different updates", distinct.len());
    }

    fn waiters(path: &Path) -> u64 {
        let bytes = fs::read(path).unwrap();
        u64::from_le_bytes(bytes[40..48].try_into().unwrap())
    }

    #[test]
    fn a_waiter_wakes_on_an_update_and_times_out_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let mut writer = Writer::create(&path, 0, 2).unwrap();
        let reader = RadioStats::open(&path).unwrap();
        let peers = [PeerEntry::default(); 2];

        // No update: the wait lasts its timeout and reports no change.
        let seen = reader.seq();
        let start = std::time::Instant::now();
        assert!(!reader.wait_for_change(seen, Duration::from_millis(50)).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(45), "returned after {:?}", start.elapsed());
        assert_eq!(waiters(&path), 0, "the waiter uncounted itself");

        // An update made while the reader sleeps wakes it long before its timeout.
        let update_after = Duration::from_millis(100);
        let writer_thread = std::thread::spawn(move || {
            std::thread::sleep(update_after);
            writer.update(1, &NodeCounters { queue_len: 3, ..Default::default() }, &peers);
            writer
        });
        let start = std::time::Instant::now();
        assert!(reader.wait_for_change(seen, Duration::from_secs(30)).unwrap());
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(90) && waited < Duration::from_secs(10), "woke after {waited:?}");
        assert_eq!(reader.read_counters().unwrap().1.queue_len, 3);
        let mut writer = writer_thread.join().unwrap();
        assert_eq!(waiters(&path), 0);

        // A change that happened before the call returns at once.
        let seen = reader.seq();
        writer.update(2, &NodeCounters::default(), &peers);
        let start = std::time::Instant::now();
        assert!(reader.wait_for_change(seen, Duration::from_secs(30)).unwrap());
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn many_waits_against_a_busy_writer_lose_no_wake_up() {
        // Every update is waited for: a lost wake-up would show as a wait
        // that runs into its (long) timeout.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radio");
        let mut writer = Writer::create(&path, 0, 1).unwrap();
        let reader = RadioStats::open(&path).unwrap();
        let updates = 2_000u64;
        let acknowledged = Arc::new(AtomicU64::new(0));
        let writer_thread = {
            let acknowledged = acknowledged.clone();
            std::thread::spawn(move || {
                for value in 1..=updates {
                    // Wait until the reader has seen the previous update, so
                    // each update lands while the reader is (about to be) asleep.
                    while acknowledged.load(Ordering::Acquire) < value - 1 {
                        std::thread::yield_now();
                    }
                    writer.update(value, &NodeCounters::default(), &[PeerEntry::default()]);
                }
            })
        };
        let mut seen = reader.seq();
        for value in 1..=updates {
            while reader.read_counters().unwrap().0 < value {
                let start = std::time::Instant::now();
                reader.wait_for_change(seen, Duration::from_secs(5)).unwrap();
                assert!(start.elapsed() < Duration::from_secs(4), "update {value} did not wake the reader");
                seen = reader.seq();
            }
            acknowledged.store(value, Ordering::Release);
        }
        writer_thread.join().unwrap();
        assert_eq!(waiters(&path), 0);
    }

    #[test]
    fn open_rejects_what_is_not_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk");
        fs::write(&path, vec![0u8; 600]).unwrap();
        let err = RadioStats::open(&path).err().unwrap().to_string();
        assert!(err.contains("junk") && err.contains("magic"), "{err}");

        let short = dir.path().join("short");
        Writer::create(&short, 0, 4).unwrap();
        let file = OpenOptions::new().write(true).open(&short).unwrap();
        file.set_len(page_size(2) as u64).unwrap();
        let err = RadioStats::open(&short).err().unwrap().to_string();
        assert!(err.contains("4 peers"), "{err}");

        let err = RadioStats::open(&dir.path().join("missing")).err().unwrap().to_string();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn peer_entries_serialize_with_a_readable_mac() {
        let json = serde_json::to_value(peer_all(4, 0x1f)).unwrap();
        assert_eq!(json["mac_address"], "02:00:00:00:00:1f");
        assert!(json.get("reserved").is_none());
        assert_eq!(json["tx_acked"], 4);
    }
}
