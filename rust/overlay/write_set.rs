//! An overlay's writes as one backend write.

use super::Overlay;
use super::pending::Base;
use crate::backend::{Backend, Write, WriteSet};
use crate::error::Result;
use crate::format::key::{META_SEGMENT, StorageKey, sort_prefix, storage_key};
use crate::format::merge_operands;
use crate::format::meta;
use crate::latest_cache::LatestCache;
use crate::view::is_latest_key;

impl Overlay {
    /// The writes as one backend write (sorted when `sorted`) that also records `stream_time`.
    fn take_write_set(&mut self, stream_time: i64, sorted: bool) -> WriteSet {
        let drop_segments = self.dropped.take();
        let writes = self.take_writes(stream_time);
        WriteSet {
            drop_segments,
            writes: if sorted { in_key_order(writes) } else { writes },
        }
    }

    /// Every pending write and changed metadata entry, in no order; the overlay keeps none.
    fn take_writes(&mut self, stream_time: i64) -> Vec<(StorageKey, Write)> {
        let stream_time_changed = std::mem::take(&mut self.stream_time_changed);
        self.stream_time_kept = false;
        let latest_keys = self.latest_keys.take();
        self.bytes = 0;
        let mut writes: Vec<(StorageKey, Write)> = Vec::with_capacity(self.pending.len() + 1);
        for (key, pending) in self.pending.drain() {
            let appends = (!pending.appends.is_empty()).then_some(&pending.appends[..]);
            let write = match (pending.base, appends) {
                (Base::Stored | Base::Absent, None) => continue,
                (Base::Stored, Some(_)) => Write::Append(pending.appends),
                (Base::Put(value), None) => Write::Put(value.into_vec()),
                (Base::Put(value), Some(ops)) => {
                    Write::Put(merge_operands(&key, Some(&value), std::iter::once(ops)))
                }
                (Base::Deleted, None) => Write::Delete,
                (Base::Deleted | Base::Absent, Some(ops)) => {
                    Write::Put(merge_operands(&key, None, std::iter::once(ops)))
                }
            };
            writes.push((key, write));
        }
        if stream_time_changed {
            writes.push((
                storage_key(META_SEGMENT, meta::STREAM_TIME_KEY),
                Write::Put(meta::encode_stream_time(stream_time)),
            ));
        }
        if let Some(count) = latest_keys {
            writes.push((
                storage_key(META_SEGMENT, meta::LATEST_KEYS_KEY),
                Write::Put(meta::encode_key_counts(count)),
            ));
        }
        writes
    }

    /// Writes everything to `backend` atomically (with `stream_time`) and updates `cache`.
    /// The overlay is empty afterwards, even when the write failed (a store whose write buffer
    /// failed to write refuses every later call: `VersionedStore::write_buffer`), and keeps its
    /// map's room: a write buffer refills to about the same size.
    pub(crate) fn write_to(
        &mut self,
        backend: &mut dyn Backend,
        cache: Option<&LatestCache>,
        stream_time: i64,
    ) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut batch = self.take_write_set(stream_time, backend.sorted_writes());
        backend.write(&mut batch)?;
        if let Some(cache) = cache {
            for (key, write) in batch.writes {
                match write {
                    _ if !is_latest_key(&key) => {}
                    Write::Put(entry) => cache.insert(key.into_vec(), Some(entry)),
                    Write::Delete => cache.insert(key.into_vec(), None),
                    Write::Append(pushes) => cache.apply_pushes(&key, &pushes),
                }
            }
        }
        Ok(())
    }
}

/// `writes` sorted by key. RocksDB inserts a batch into its memtable skiplist in order, and an
/// insert next to the previous one reuses its search path: sorted, a batch inserts several times
/// faster. Sorted in place, by each key's first 16 bytes (as two integers) and then the rest:
/// a buffer's batch is hundreds of thousands of writes, and a sorted copy of them doubled its
/// memory while it was written.
fn in_key_order(mut writes: Vec<(StorageKey, Write)>) -> Vec<(StorageKey, Write)> {
    writes.sort_unstable_by(|a, b| {
        sort_prefix(&a.0)
            .cmp(&sort_prefix(&b.0))
            .then_with(|| a.0.cmp(&b.0))
    });
    writes
}
