//! Row storage: the ordered byte keyspace a store keeps its latest values, segment rows and
//! metadata in. The versioning logic (`put`, `read`) is written once against [`Backend`];
//! RocksDB and an in-memory map are the two implementations, so both variants of the store share
//! every line of semantics.

use crate::error::Result;

pub(crate) mod memory;
pub(crate) mod rocks;

/// One atomic write: drop the history segments in `drop_segments` (`[from, to)`), then apply
/// `writes` (`None` deletes the key).
///
/// The range starts at the lowest segment actually dropped, not at 0: ranges of successive
/// writes then never overlap, and RocksDB never accumulates a pile of range tombstones over the
/// same keys (each read would have to consult all of them).
#[derive(Debug, Default)]
pub(crate) struct WriteSet {
    pub(crate) drop_segments: Option<(i64, i64)>,
    pub(crate) writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// An ordered keyspace with atomic multi-key writes.
pub(crate) trait Backend: Send {
    /// The value stored under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Ids of every history segment (id >= 0) that holds at least one key, ascending.
    fn history_segments(&self) -> Result<Vec<i64>>;
    /// Applies `batch` atomically.
    fn write(&mut self, batch: WriteSet) -> Result<()>;
    /// Makes written data durable in the backend's own files (no-op in memory).
    fn flush(&self) -> Result<()>;
    /// Where the data lives, for messages.
    fn location(&self) -> String;
    /// Writes a consistent copy of the data into the new directory `dir` (RocksDB checkpoint:
    /// SST files hard-linked, memtables flushed first).
    fn checkpoint(&self, dir: &std::path::Path) -> Result<()>;
    /// Every entry in key order, for backends that can be serialized whole (in memory).
    fn export(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        None
    }
}
