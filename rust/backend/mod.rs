//! Row storage: the ordered byte keyspace a store keeps its latest values, segment rows and
//! metadata in. The versioning logic (`put`, `read`) is written once against [`Backend`];
//! RocksDB and an in-memory map are the two implementations, so both variants of the store share
//! the put and read algorithms. What sits above them changes how fast a store answers and when it
//! writes, never what it answers: the write buffer (both variants keep one), and what only
//! persistent stores have, the caches of latest values and long rows and deferred metadata.
//!
//! Reads hand borrowed bytes to a callback (RocksDB's pinned slices, the map's own values), so a
//! read copies only what it returns. A history row can grow by an *append* (a RocksDB merge
//! operand, `docs/format.md`) without being read: both backends apply appends with
//! [`merge_appends`](crate::format::segment_value::merge_appends), RocksDB lazily at reads and
//! compactions, the map when it is read or when the appends outgrow the row.

use crate::error::Result;
use crate::format::key::StorageKey;
use crate::format::segment_value::{Lookup, lookup};

pub(crate) mod faults;
pub(crate) mod memory;
pub(crate) mod rocks;
pub(crate) mod snapshot;

use snapshot::ScanSource;

/// One key's change in a [`WriteSet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    /// Replace the value.
    Put(Vec<u8>),
    /// Remove the key.
    Delete,
    /// Apply these row appends (concatenated operands) to the stored row.
    Append(Vec<u8>),
}

/// One atomic write: drop the history segments in `drop_segments` (`[from, to)`), then apply
/// `writes`.
///
/// The range starts at the lowest segment actually dropped, not at 0: ranges of successive
/// writes then never overlap, and RocksDB never accumulates a pile of range tombstones over the
/// same keys (each read would have to consult all of them).
#[derive(Debug, Default)]
pub(crate) struct WriteSet {
    pub(crate) drop_segments: Option<(i64, i64)>,
    pub(crate) writes: Vec<(StorageKey, Write)>,
}

/// Receives one read value, borrowed for the duration of the call.
pub(crate) type Visit<'v> = dyn FnMut(Option<&[u8]>) -> Result<()> + 'v;
/// Receives one stored entry, borrowed for the duration of the call.
pub(crate) type VisitEntry<'v> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'v;
/// Receives one stored entry of a pass in key order; returns whether the pass goes on.
pub(crate) type VisitUntil<'v> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'v;
/// Receives the value of key `i` of a batch read.
pub(crate) type VisitIndexed<'v> = dyn FnMut(usize, Option<&[u8]>) -> Result<()> + 'v;
/// Receives what a history row says about one time (`None`: there is no row).
pub(crate) type VisitRow<'v> = dyn FnMut(Option<Lookup<'_>>) -> Result<()> + 'v;

/// An as-of read of one history row: its storage key, the time, and how to name the row in
/// an error.
pub(crate) struct RowRead<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) t: i64,
    pub(crate) location: &'a dyn Fn() -> String,
}

impl RowRead<'_> {
    /// What the row's bytes (`None`: no row) say about `t`.
    pub(crate) fn lookup<'b>(&self, bytes: Option<&'b [u8]>) -> Result<Option<Lookup<'b>>> {
        bytes.map(|b| lookup(b, self.t, self.location)).transpose()
    }
}

/// An ordered keyspace with atomic multi-key writes.
pub(crate) trait Backend: Send {
    /// Calls `visit` with the value stored under `key`.
    fn get_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()>;
    /// Calls `visit` with what the history row `read.key` says about time `read.t`.
    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        self.get_with(read.key, &mut |bytes| visit(read.lookup(bytes)?))
    }
    /// Calls `visit(i, value)` for every `keys[i]`, in order; `keys` are sorted ascending.
    fn multi_get(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()>;
    /// Whether no key has the prefix of `segment`.
    fn is_empty_of(&self, segment: i64) -> Result<bool>;
    /// Ids of every history segment (id >= 0) that holds at least one key, ascending.
    fn history_segments(&self) -> Result<Vec<i64>>;
    /// Applies `batch` atomically. The backend may take the keys and values it keeps out of
    /// `batch`; what it leaves is the caller's.
    fn write(&mut self, batch: &mut WriteSet) -> Result<()>;
    /// Whether a batch should come in key order (RocksDB's memtable inserts it faster).
    fn sorted_writes(&self) -> bool {
        true
    }
    /// Makes written data durable in the backend's own files (no-op in memory).
    fn flush(&self) -> Result<()>;
    /// Empties the backend's own caches (the memory budget wants their memory back).
    fn release_caches(&self) {}
    /// Bytes in active and unflushed memtables (none in memory): what a flush would write.
    fn memtable_bytes(&self) -> Result<u64> {
        Ok(0)
    }
    /// Where the data lives, for messages.
    fn location(&self) -> String;
    /// Writes a consistent copy of the data into the new directory `dir` (RocksDB checkpoint:
    /// SST files hard-linked, memtables flushed first).
    fn checkpoint(&self, dir: &std::path::Path) -> Result<()>;
    /// Every entry in key order, for backends that can be serialized whole (in memory).
    fn export(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        None
    }
    /// The data as it is now, for a scan to read on its own thread (`crate::scan`).
    fn scan_source(&self) -> Box<dyn ScanSource>;
    /// How many keys have the prefix of `segment` (one pass over them).
    fn count_keys(&self, segment: i64) -> Result<u64>;
    /// Calls `visit(key, value)` for every key with the prefix of `segment`, in no particular
    /// order; a row's value has its appends applied, as a read returns it.
    fn visit_segment(&self, segment: i64, visit: &mut VisitEntry<'_>) -> Result<()>;
    /// Calls `visit(key, value)` for the keys with the prefix of `segment` from `from` on
    /// (inclusive; `None`: the first), in key order, until `visit` returns `false`.
    fn visit_segment_from(
        &self,
        segment: i64,
        from: Option<&[u8]>,
        visit: &mut VisitUntil<'_>,
    ) -> Result<()> {
        let mut entries = Vec::new();
        self.visit_segment(segment, &mut |key, value| {
            if from.is_none_or(|from| key >= from) {
                entries.push((key.to_vec(), value.to_vec()));
            }
            Ok(())
        })?;
        entries.sort_unstable();
        for (key, value) in &entries {
            if !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }
    /// Storage keys of latest-value entries whose unsettled history merged long since the last
    /// call (`backend/rocks/histories.rs`), for the store to settle.
    fn take_long_histories(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
    /// Sizes for the store's statistics (`crate::stats`).
    fn usage(&self) -> Result<Usage>;
    /// The durable horizon of a store with a latest TTL moved to `horizon`: latest values
    /// wholly expired below it may be dropped (`crate::ttl`). Called only by the store's
    /// `move_horizon` (`store/expiry.rs`), with no scan open.
    fn set_reclaim_horizon(&mut self, _horizon: i64) {}
    /// Drops the latest values reclaimable at the durable horizon, in bulk: now when `wait`,
    /// else whenever the backend gets to it. Returns whether it started (not while the last
    /// one still runs).
    fn reclaim_latest(&mut self, _wait: bool) -> bool {
        false
    }
    /// Waits for a reclamation that runs on a thread of its own to end.
    #[cfg(test)]
    fn await_reclamation(&mut self) {}
}

/// What a backend knows about its size, cheaply.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    /// Keys in the latest-value store and in history segments, when known exactly (in memory).
    pub(crate) exact: Option<(u64, u64)>,
    /// The backend's estimate of all its keys (RocksDB's `rocksdb.estimate-num-keys`).
    pub(crate) keys_estimate: u64,
    /// SST and write-ahead-log files.
    pub(crate) disk_bytes: u64,
    /// Active and unflushed memtables.
    pub(crate) memtable_bytes: u64,
}

impl dyn Backend + '_ {
    /// The value stored under `key`, copied.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.get_with(key, &mut |value| {
            out = value.map(<[u8]>::to_vec);
            Ok(())
        })?;
        Ok(out)
    }
}
