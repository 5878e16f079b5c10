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
                    Write::Put(entry) => cache.insert_key(&key, Some(entry)),
                    Write::Delete => cache.insert_key(&key, None),
                    Write::Append(pushes) => cache.apply_pushes(&key, &pushes),
                }
            }
        }
        Ok(())
    }
}

/// `writes` sorted by key. RocksDB inserts a batch into its memtable skiplist in order, and an
/// insert next to the previous one reuses its search path: sorted, a batch inserts several times
/// faster. Sorted in place: a buffer's batch is hundreds of thousands of writes, and a sorted
/// copy of them doubled its memory while it was written. What is sorted is each write's first 16
/// storage key bytes (as two integers) with its index, 24 bytes a write, the rest of the keys
/// compared only where those are equal; the writes then move to their places in one pass over
/// the permutation's cycles. Sorting the writes themselves (their keys read through at every
/// comparison) was a sixth of a batch put's time on the calling thread (BENCHMARKS.md, "Small
/// state (issue 43)"). Equal keys keep their order.
fn in_key_order(mut writes: Vec<(StorageKey, Write)>) -> Vec<(StorageKey, Write)> {
    let mut order: Vec<(u64, u64, usize)> = writes
        .iter()
        .enumerate()
        .map(|(index, (key, _))| {
            let (high, low) = sort_prefix(key);
            (high, low, index)
        })
        .collect();
    order.sort_unstable_by(|a, b| {
        (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| {
            writes[a.2]
                .0
                .as_slice()
                .cmp(writes[b.2].0.as_slice())
                .then(a.2.cmp(&b.2))
        })
    });
    let mut from: Vec<usize> = order.into_iter().map(|(_, _, index)| index).collect();
    // Position `i` takes the write at `from[i]`: follow each cycle, swapping the write due at
    // one position into it; a position done points at itself.
    for start in 0..from.len() {
        let mut at = start;
        loop {
            let next = from[at];
            from[at] = at;
            if next == start || next == at {
                break;
            }
            writes.swap(at, next);
            at = next;
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::in_key_order;
    use crate::backend::Write;
    use crate::format::key::{StorageKey, storage_key};

    /// A small generator of distinct-enough keys, with shared 16-byte prefixes and repeats.
    fn keys(seed: u64, n: usize) -> Vec<StorageKey> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let segment = i64::try_from(state >> 62).unwrap_or(0);
                let length = usize::try_from((state >> 20) % 24).unwrap_or(0);
                let byte = u8::try_from((state >> 40) % 3).unwrap_or(0);
                let mut key = vec![7u8; length];
                if let Some(last) = key.last_mut() {
                    *last = byte;
                }
                storage_key(segment, &key)
            })
            .collect()
    }

    #[test]
    fn sorts_like_a_stable_sort_of_the_keys() {
        for (seed, n) in [(1, 0), (2, 1), (3, 2), (4, 17), (5, 1000), (6, 5000)] {
            let writes: Vec<(StorageKey, Write)> = keys(seed, n)
                .into_iter()
                .enumerate()
                .map(|(i, key)| (key, Write::Put(i.to_le_bytes().to_vec())))
                .collect();
            let mut expected: Vec<(Vec<u8>, Vec<u8>)> = writes
                .iter()
                .map(|(key, write)| match write {
                    Write::Put(value) => (key.to_vec(), value.clone()),
                    _ => unreachable!(),
                })
                .collect();
            expected.sort_by(|a, b| a.0.cmp(&b.0));
            let sorted: Vec<(Vec<u8>, Vec<u8>)> = in_key_order(writes)
                .into_iter()
                .map(|(key, write)| match write {
                    Write::Put(value) => (key.to_vec(), value),
                    _ => unreachable!(),
                })
                .collect();
            assert_eq!(sorted, expected, "seed {seed}, {n} writes");
        }
    }
}
