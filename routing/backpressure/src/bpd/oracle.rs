//! The oracle table: the paper's "virtual, globally accessible array" of
//! every node's per-flow queue lengths, as a shared file that every daemon
//! of a lab maps. Each daemon owns one row (claimed under an flock, found by
//! its IPv4 address) and writes it under a per-row sequence lock; it reads
//! its neighbours' rows.
//!
//! Layout (native byte order, 8-byte words):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `BPORACLE` |
//! | 8 | u32 version = 1, u32 rows |
//! | 16 | u32 entries per row, u32 reserved |
//! | 24 + r × ROW | row r: u64 seq; u32 owner IPv4 (0 = free), u32 entries used; then entries: u32 flow IPv4, u32 length |

use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use anyhow::{bail, Context};
use memmap2::MmapMut;
use meshemu_backpressure::flow::FlowKey;
use nix::fcntl::{Flock, FlockArg};

const MAGIC: u64 = u64::from_le_bytes(*b"BPORACLE");
const VERSION: u64 = 1;
pub const ROWS: usize = 1024;
pub const ENTRIES: usize = 64;
const HEADER_WORDS: usize = 3;
const ROW_WORDS: usize = 2 + ENTRIES;
const SIZE: usize = (HEADER_WORDS + ROWS * ROW_WORDS) * 8;

pub struct Oracle {
    map: MmapMut,
    own_row: usize,
    /// Row of each neighbour seen so far.
    rows: std::collections::HashMap<Ipv4Addr, usize>,
    /// What our row says now (None before the first write).
    last_written: Option<Vec<(u32, u32)>>,
}

fn words(map: &MmapMut) -> &[AtomicU64] {
    // SAFETY: the mapping is page-aligned and SIZE bytes long (checked at
    // open), a multiple of 8; all access goes through atomics, so the other
    // daemons' concurrent access is not a data race.
    unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<AtomicU64>(), map.len() / 8) }
}

fn row_start(row: usize) -> usize {
    HEADER_WORDS + row * ROW_WORDS
}

impl Oracle {
    /// Opens (creating it if needed) the table at `path` and claims the row of `own`.
    pub fn open(path: &Path, own: Ipv4Addr) -> anyhow::Result<Oracle> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .with_context(|| format!("oracle table {}", path.display()))?;
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .with_context(|| format!("locking oracle table {}", path.display()))?;
        let length = lock.metadata()?.len();
        let fresh = length == 0;
        if fresh {
            lock.set_len(SIZE as u64)?;
        } else if length != SIZE as u64 {
            bail!("{}: {length} bytes, not an oracle table of this version ({SIZE} bytes)", path.display());
        }
        let file: &File = &lock;
        // SAFETY: the file has its final size (set above under the lock) and
        // is never truncated by another daemon (they check the size).
        let map = unsafe { MmapMut::map_mut(file) }.with_context(|| format!("mapping {}", path.display()))?;
        let page = words(&map);
        if fresh {
            page[1].store(VERSION | ((ROWS as u64) << 32), Ordering::Relaxed);
            page[2].store(ENTRIES as u64, Ordering::Relaxed);
            page[0].store(MAGIC, Ordering::Release);
        } else if page[0].load(Ordering::Acquire) != MAGIC || page[1].load(Ordering::Relaxed) != VERSION | ((ROWS as u64) << 32) {
            bail!("{}: not an oracle table of version {VERSION}", path.display());
        }
        let own_value = u64::from(u32::from(own));
        let owner = |row: usize| page[row_start(row) + 1].load(Ordering::Relaxed) & 0xffff_ffff;
        let own_row = (0..ROWS)
            .find(|row| owner(*row) == own_value)
            .or_else(|| (0..ROWS).find(|row| owner(*row) == 0))
            .with_context(|| format!("{}: all {ROWS} rows are taken", path.display()))?;
        page[row_start(own_row) + 1].store(own_value, Ordering::Release);
        drop(lock);
        let mut oracle = Oracle { map, own_row, rows: Default::default(), last_written: None };
        oracle.write(&[]);
        Ok(oracle)
    }

    /// Publishes our queue lengths (at most ENTRIES flows, the longest first;
    /// MAC-named flows cannot be advertised).
    pub fn write(&mut self, advertisement: &[(FlowKey, u32)]) {
        let mut entries: Vec<(u32, u32)> = advertisement
            .iter()
            .filter_map(|(flow, length)| match flow {
                FlowKey::Addr(addr) => Some((u32::from(*addr), *length)),
                FlowKey::Mac(_) => None,
            })
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        entries.truncate(ENTRIES);
        if self.last_written.as_ref() == Some(&entries) {
            return;
        }
        let page = words(&self.map);
        let start = row_start(self.own_row);
        let seq = &page[start];
        let before = seq.load(Ordering::Relaxed);
        seq.store(before + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let owner = page[start + 1].load(Ordering::Relaxed) & 0xffff_ffff;
        page[start + 1].store(owner | ((entries.len() as u64) << 32), Ordering::Relaxed);
        for (slot, (flow, length)) in entries.iter().enumerate() {
            page[start + 2 + slot].store(u64::from(*flow) | (u64::from(*length) << 32), Ordering::Relaxed);
        }
        seq.store(before + 2, Ordering::Release);
        self.last_written = Some(entries);
    }

    /// Packets of `flow` that `neighbour` holds (0 when it has no row: it runs no daemon).
    pub fn read(&mut self, neighbour: Ipv4Addr, flow: FlowKey) -> u32 {
        let FlowKey::Addr(flow) = flow else { return 0 };
        let Some(row) = self.row_of(neighbour) else { return 0 };
        let page = words(&self.map);
        let start = row_start(row);
        for _ in 0..1000 {
            let before = page[start].load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let used = ((page[start + 1].load(Ordering::Relaxed) >> 32) as usize).min(ENTRIES);
            let length = (0..used)
                .map(|slot| page[start + 2 + slot].load(Ordering::Relaxed))
                .find(|entry| (*entry & 0xffff_ffff) as u32 == u32::from(flow))
                .map_or(0, |entry| (entry >> 32) as u32);
            fence(Ordering::Acquire);
            if page[start].load(Ordering::Relaxed) == before {
                return length;
            }
        }
        0 // its writer is stuck mid-update (it died): it holds nothing we can know
    }

    fn row_of(&mut self, neighbour: Ipv4Addr) -> Option<usize> {
        let page = words(&self.map);
        let wanted = u64::from(u32::from(neighbour));
        if let Some(row) = self.rows.get(&neighbour) {
            if page[row_start(*row) + 1].load(Ordering::Relaxed) & 0xffff_ffff == wanted {
                return Some(*row);
            }
        }
        let row = (0..ROWS).find(|row| page[row_start(*row) + 1].load(Ordering::Relaxed) & 0xffff_ffff == wanted)?;
        self.rows.insert(neighbour, row);
        Some(row)
    }
}

impl Drop for Oracle {
    /// Frees our row: an empty, unowned row (a stopped daemon holds nothing).
    fn drop(&mut self) {
        self.write(&[]);
        let page = words(&self.map);
        page[row_start(self.own_row) + 1].store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_claimed_written_read_and_freed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oracle");
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let flow = FlowKey::Addr(Ipv4Addr::new(10, 0, 0, 9));
        let mut first = Oracle::open(&path, a).unwrap();
        let mut second = Oracle::open(&path, b).unwrap();
        assert_ne!(first.own_row, second.own_row);
        first.write(&[(flow, 3), (FlowKey::Mac([2, 0, 0, 0, 0, 1]), 5)]);
        assert_eq!(second.read(a, flow), 3);
        assert_eq!(second.read(a, FlowKey::Addr(b)), 0);
        assert_eq!(first.read(Ipv4Addr::new(10, 0, 0, 77), flow), 0, "no such daemon");
        first.write(&[]);
        assert_eq!(second.read(a, flow), 0);
        first.write(&[(flow, 1)]);
        drop(first);
        assert_eq!(second.read(a, flow), 0, "a stopped daemon's row is free");
        let again = Oracle::open(&path, a).unwrap();
        assert_eq!(again.own_row, 0, "the freed row is reused");
    }

    #[test]
    fn a_file_of_another_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oracle");
        std::fs::write(&path, b"not a table").unwrap();
        let err = Oracle::open(&path, Ipv4Addr::new(10, 0, 0, 1)).err().unwrap().to_string();
        assert!(err.contains("11 bytes") && err.contains("oracle"), "{err}");
    }
}
