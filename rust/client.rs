//! The client the put algorithm runs against: a write transaction over a [`Backend`].
//!
//! Kafka's `VersionedStoreClient` lets one put algorithm serve live writes and changelog restore.
//! Here that client is [`Txn`]: reads see the transaction's own pending writes first, segment
//! creation and expiry update the live set as they happen, and `commit` turns everything —
//! dropped segments, rows, row appends, latest values and the new observed stream time — into
//! one atomic [`WriteSet`]. A single put, a whole batch and a restore batch are each one
//! transaction, so there is no half-written two-location update to recover from (Kafka's
//! KAFKA-14491 [16/N]).
//!
//! A pending key holds its replacement value, if any, and the row appends made since: appending
//! to a row never reads it, and a row read inside the transaction applies the appends to a copy.
//! The pending writes are an [`Overlay`]; a store whose write-ahead log is off keeps one across
//! calls as a write buffer (Kafka Streams' record cache): each call's transaction runs on it
//! directly, undone from a journal if the call fails, and it is written to RocksDB as one sorted
//! batch when it has grown past its bound, on `flush`, on `checkpoint` and on close. Reads see
//! it first. Without a write-ahead log nothing written since the last flush survives a crash
//! either way, so the buffer loses no guarantee; with the log on, every call is written before
//! it returns.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::backend::{Backend, RowRead, Visit, VisitIndexed, VisitRow, Write, WriteSet};
use crate::changelog::Log;
use crate::config::StoreConfig;
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, segment_of, storage_key};
use crate::format::meta;
use crate::format::segment_value::{Entry, encode_append, merge_appends};
use crate::latest::LatestCache;
use crate::segments::Segments;

/// Reads of storage keys, by the read algorithms: `visit` gets the bytes, borrowed.
pub(crate) trait ReadClient {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()>;
    fn location(&self) -> String;

    /// Calls `visit` with what the history row under `key` says about time `t` (`None`: no
    /// row). Rows nothing pending decides for may come from the backend's row cache.
    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        self.read_with(read.key, &mut |bytes| visit(read.lookup(bytes)?))
    }
}

impl ReadClient for dyn Backend + '_ {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        self.get_with(key, visit)
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        Backend::lookup_row(self, read, visit)
    }

    fn location(&self) -> String {
        Backend::location(self)
    }
}

fn is_latest_key(key: &[u8]) -> bool {
    segment_of(key) == Some(LATEST_SEGMENT)
}

/// Committed state: the backend, with latest-value entries through the cache when there is one.
#[derive(Clone, Copy)]
pub(crate) struct Stored<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) cache: Option<&'a LatestCache>,
}

impl ReadClient for Stored<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let Some(cache) = self.cache.filter(|_| is_latest_key(key)) else {
            return self.backend.get_with(key, visit);
        };
        if let Some(result) = cache.with(key, &mut *visit) {
            return result;
        }
        self.backend.get_with(key, &mut |entry| {
            cache.insert(key.to_vec(), entry.map(<[u8]>::to_vec));
            visit(entry)
        })
    }

    fn location(&self) -> String {
        self.backend.location()
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        self.backend.lookup_row(read, visit)
    }
}

/// What a store's reads see: its write buffer (when it keeps one) over the committed state.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    pub(crate) stored: Stored<'a>,
    pub(crate) buffer: Option<&'a Overlay>,
}

impl<'a> Reader<'a> {
    /// Reads of `backend` through its latest-value `cache`, under the write `buffer` if any.
    pub(crate) fn new(
        backend: &'a dyn Backend,
        cache: Option<&'a LatestCache>,
        buffer: Option<&'a Overlay>,
    ) -> Self {
        Self {
            stored: Stored { backend, cache },
            buffer,
        }
    }

    /// Calls `visit(i, value)` for every `keys[i]` (sorted): what the buffer decides, then the
    /// cache, then one `MultiGet` of the rest. Rows the buffer holds appends for are in that
    /// `MultiGet` too, their appends applied to what it returns: in a micro-batch most rows
    /// read have appends from the same batch, and a `Get` each cost more than their merge.
    pub(crate) fn multi_read(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()> {
        let mut misses: Vec<usize> = Vec::new();
        // Per miss: the buffer's appends to apply to the stored row.
        let mut appends: Vec<Option<&[u8]>> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.buffer.map(|b| (b, b.pended(key))) {
                Some((_, Pended::OnStored(pending))) => {
                    misses.push(i);
                    appends.push(Some(pending));
                    continue;
                }
                Some((buffer, Pended::Decided)) => {
                    buffer.read_with(key, &self.stored, &mut |value| visit(i, value))?;
                    continue;
                }
                Some((_, Pended::Below)) | None => {}
            }
            let cached = self
                .stored
                .cache
                .filter(|_| is_latest_key(key))
                .and_then(|c| c.with(key, |entry| visit(i, entry)));
            if let Some(result) = cached {
                result?;
            } else {
                misses.push(i);
                appends.push(None);
            }
        }
        let to_fetch: Vec<&[u8]> = misses.iter().map(|&i| keys[i]).collect();
        self.stored.backend.multi_get(&to_fetch, &mut |m, value| {
            if let Some(pending) = appends[m] {
                return visit(
                    misses[m],
                    Some(&merge_appends(value, std::iter::once(pending))),
                );
            }
            if let Some(cache) = self.stored.cache.filter(|_| is_latest_key(to_fetch[m])) {
                cache.insert(to_fetch[m].to_vec(), value.map(<[u8]>::to_vec));
            }
            visit(misses[m], value)
        })
    }
}

impl ReadClient for Reader<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        match self.buffer {
            Some(buffer) => buffer.read_with(key, &self.stored, visit),
            None => self.stored.read_with(key, visit),
        }
    }

    fn location(&self) -> String {
        self.stored.location()
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        match self.buffer.filter(|b| b.decides(read.key)) {
            Some(buffer) => buffer.read_with(read.key, &self.stored, &mut |bytes| {
                visit(read.lookup(bytes)?)
            }),
            None => self.stored.lookup_row(read, visit),
        }
    }
}

/// Reads `key` through `client` and maps the borrowed bytes with `f`.
pub(crate) fn read_map<T>(
    client: &(impl ReadClient + ?Sized),
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Result<T>,
) -> Result<T> {
    let mut f = Some(f);
    let mut out = None;
    client.read_with(key, &mut |value| {
        if let Some(f) = f.take() {
            out = Some(f(value)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| crate::Error::corrupt(client.location(), "a read returned no value"))
}

/// The in-memory part of a store's state, derived from storage on open.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) config: StoreConfig,
    /// Largest timestamp of any accepted write; -1 before the first.
    pub(crate) stream_time: i64,
    pub(crate) segments: Segments,
    /// Number of latest-value entries, kept by persistent stores (`crate::stats`); `None` in
    /// memory, where the map knows it.
    pub(crate) latest_keys: Option<u64>,
}

/// What a pending write replaces a key's stored value with.
#[derive(Debug)]
enum Base {
    /// The stored value (nothing written yet).
    Stored,
    Put(Vec<u8>),
    Deleted,
    /// Nothing is stored (a read found no value): appends then make a new row, written whole
    /// rather than as a merge operand with no base.
    Absent,
}

#[derive(Debug)]
struct Pending {
    base: Base,
    /// Row appends on top of `base`, concatenated.
    appends: Vec<u8>,
    /// The overlay's transaction that made this entry (`Overlay::generation`): a rollback
    /// removes the entries of its own transaction without having listed them.
    born: u64,
}

impl Pending {
    fn new(base: Base, appends: Vec<u8>) -> Self {
        Self {
            base,
            appends,
            born: 0,
        }
    }

    fn bytes(&self, key: &[u8]) -> usize {
        let base = match &self.base {
            Base::Put(v) => v.len(),
            Base::Stored | Base::Deleted | Base::Absent => 0,
        };
        key.len() + base + self.appends.len() + 64
    }
}

/// Pending writes by storage key. A `HashTable` rather than a `HashMap`: a key is hashed once
/// per write, and a write to a key that is already there still owns the key it was given,
/// which the journal then keeps instead of a copy.
#[derive(Debug, Default)]
struct PendingMap {
    table: HashTable<(Vec<u8>, Pending)>,
    hasher: foldhash::fast::RandomState,
}

impl PendingMap {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.table
            .reserve(additional, |(k, _)| hasher.hash_one(k.as_slice()));
    }

    fn get(&self, key: &[u8]) -> Option<&Pending> {
        let found = self
            .table
            .find(self.hash(key), |(k, _)| k.as_slice() == key);
        found.map(|(_, p)| p)
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Pending> {
        self.find_mut(self.hash(key), key)
    }

    fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The pending write under `key`, whose hash is `hash`.
    fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Pending> {
        let found = self.table.find_mut(hash, |(k, _)| k.as_slice() == key);
        found.map(|(_, p)| p)
    }

    /// Adds a pending write under `key`, which has none; `hash` is its hash.
    fn insert_new(&mut self, hash: u64, key: Vec<u8>, pending: Pending) {
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, (key, pending), |(k, _)| hasher.hash_one(k.as_slice()));
    }

    fn insert(&mut self, key: Vec<u8>, pending: Pending) {
        let hash = self.hash(&key);
        match self.find_mut(hash, &key) {
            Some(slot) => *slot = pending,
            None => self.insert_new(hash, key, pending),
        }
    }

    /// Takes every entry out, keeping the table's room.
    fn drain(&mut self) -> impl Iterator<Item = (Vec<u8>, Pending)> {
        self.table.drain()
    }

    fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Pending)> {
        self.table.iter().map(|(k, p)| (k, p))
    }

    fn retain(&mut self, mut keep: impl FnMut(&[u8], &Pending) -> bool) {
        self.table.retain(|(k, p)| keep(k, p));
    }

    fn extract_if(
        &mut self,
        mut take: impl FnMut(&[u8], &Pending) -> bool,
    ) -> impl Iterator<Item = (Vec<u8>, Pending)> {
        self.table.extract_if(move |(k, p)| take(k, p))
    }
}

/// What an overlay does to a read of one key.
enum Pended<'a> {
    /// Nothing: the read goes below.
    Below,
    /// Row appends go on top of the value below (`read_with` reads it and merges them in).
    OnStored(&'a [u8]),
    /// The overlay has the answer: a pending write, or a dropped segment.
    Decided,
}

/// Writes not yet in the backend: per key a replacement value and row appends, the segments
/// dropped, and whether observed stream time moved. A transaction collects its writes in one;
/// a store whose write-ahead log is off keeps one across calls as its write buffer, and runs
/// each call's transaction on it directly (`begin`, then `commit` or `roll_back`).
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    pending: PendingMap,
    /// Segments dropped: `[lowest dropped, lowest live)`.
    dropped: Option<(i64, i64)>,
    stream_time_changed: bool,
    /// The number of latest-value entries to record, when a write changed it.
    latest_keys: Option<u64>,
    /// About how many bytes `pending` holds.
    bytes: usize,
    /// The transaction running on this overlay, counted from 1 (0: none has begun).
    generation: u64,
    /// While a transaction runs on this overlay: how to undo it.
    journal: Option<Journal>,
}

/// How to undo the transaction running on an overlay. Entries the transaction created need
/// no record (they carry its generation); entries it found are saved as they were, the first
/// time and every time it changes them, so that restoring in reverse order ends with the
/// oldest. Saving keeps a write buffer's transaction at one map insert per write: without it,
/// each call collected its writes in a map of its own, then moved every one into the buffer.
#[derive(Debug)]
struct Journal {
    saved: Vec<(Vec<u8>, Saved)>,
    dropped: Option<(i64, i64)>,
    stream_time_changed: bool,
    latest_keys: Option<u64>,
    bytes: usize,
}

#[derive(Debug)]
enum Saved {
    /// The entry as it was before it was replaced or removed.
    Whole(Pending),
    /// The length of its appends before more were added.
    AppendsLen(usize),
}

impl Overlay {
    /// Whether there is nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.dropped.is_none()
            && !self.stream_time_changed
            && self.latest_keys.is_none()
    }

    /// Starts a transaction on this overlay: until `commit`, `roll_back` can undo its writes.
    pub(crate) fn begin(&mut self) {
        self.generation += 1;
        self.journal = Some(Journal {
            saved: Vec::new(),
            dropped: self.dropped,
            stream_time_changed: self.stream_time_changed,
            latest_keys: self.latest_keys,
            bytes: self.bytes,
        });
    }

    /// Keeps the running transaction's writes.
    pub(crate) fn commit(&mut self) {
        self.journal = None;
    }

    /// Undoes the running transaction's writes: the overlay is as it was at `begin`.
    pub(crate) fn roll_back(&mut self) {
        let Some(journal) = self.journal.take() else {
            return;
        };
        let generation = self.generation;
        self.pending.retain(|_, p| p.born != generation);
        for (key, saved) in journal.saved.into_iter().rev() {
            match saved {
                Saved::Whole(pending) => {
                    self.pending.insert(key, pending);
                }
                Saved::AppendsLen(len) => {
                    if let Some(pending) = self.pending.get_mut(&key) {
                        pending.appends.truncate(len);
                    }
                }
            }
        }
        self.dropped = journal.dropped;
        self.stream_time_changed = journal.stream_time_changed;
        self.latest_keys = journal.latest_keys;
        self.bytes = journal.bytes;
    }

    /// Whether the writes change the stream time or the key count.
    pub(crate) fn changes_metadata(&self) -> bool {
        self.stream_time_changed || self.latest_keys.is_some()
    }

    /// Leaves the stream time and the key count out of the write (`store/metadata.rs`).
    pub(crate) fn defer_metadata(&mut self) {
        self.stream_time_changed = false;
        self.latest_keys = None;
    }

    /// Adds a write of the store's metadata entry `name` (`None` removes it).
    pub(crate) fn write_metadata(&mut self, name: &[u8], value: Option<Vec<u8>>) {
        self.write(storage_key(META_SEGMENT, name), value);
    }

    /// About how many bytes the pending writes hold.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    fn is_dropped(&self, key: &[u8]) -> bool {
        match (self.dropped, segment_of(key)) {
            (Some((from, to)), Some(segment)) => (from..to).contains(&segment),
            _ => false,
        }
    }

    /// What this overlay does to a read of `key`, found with one lookup.
    fn pended(&self, key: &[u8]) -> Pended<'_> {
        match self.pending.get(key) {
            Some(p) if matches!(p.base, Base::Stored) && !p.appends.is_empty() => {
                Pended::OnStored(&p.appends)
            }
            Some(_) => Pended::Decided,
            None if self.is_dropped(key) => Pended::Decided,
            None => Pended::Below,
        }
    }

    /// Whether this overlay answers for `key` (a pending write, or a dropped segment).
    fn decides(&self, key: &[u8]) -> bool {
        !matches!(self.pended(key), Pended::Below)
    }

    fn put(&mut self, key: Vec<u8>, mut pending: Pending) {
        let generation = self.generation;
        pending.born = generation;
        self.bytes += pending.bytes(&key);
        let hash = self.pending.hash(&key);
        let Some(slot) = self.pending.find_mut(hash, &key) else {
            self.pending.insert_new(hash, key, pending);
            return;
        };
        let old = std::mem::replace(slot, pending);
        self.bytes = self.bytes.saturating_sub(old.bytes(&[]));
        if let Some(journal) = self.journal.as_mut().filter(|_| old.born != generation) {
            // The key given for the write goes to the journal: no copy.
            journal.saved.push((key, Saved::Whole(old)));
        }
    }

    fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let base = value.map_or(Base::Deleted, Base::Put);
        self.put(key, Pending::new(base, Vec::new()));
    }

    /// Takes `operand` by value: a key's first append becomes its pending appends as it is,
    /// without another allocation and copy (the common case, once per in-order put).
    fn append_encoded(&mut self, key: Vec<u8>, operand: Vec<u8>) {
        self.bytes += operand.len();
        let generation = self.generation;
        let hash = self.pending.hash(&key);
        let Some(slot) = self.pending.find_mut(hash, &key) else {
            self.bytes += key.len() + 64;
            let pending = Pending {
                born: generation,
                ..Pending::new(Base::Stored, operand)
            };
            self.pending.insert_new(hash, key, pending);
            return;
        };
        if let Some(journal) = self.journal.as_mut().filter(|_| slot.born != generation) {
            journal
                .saved
                .push((key, Saved::AppendsLen(slot.appends.len())));
        }
        slot.appends.extend_from_slice(&operand);
    }

    /// Records that `key` holds no value below this overlay (a read found none), unless the
    /// overlay already has a write for it.
    fn note_absent(&mut self, key: &[u8]) {
        if !self.pending.contains_key(key) {
            self.put(key.to_vec(), Pending::new(Base::Absent, Vec::new()));
        }
    }

    /// Records that segments `[from, to)` are dropped, and forgets its writes there.
    fn drop_segments(&mut self, from: i64, to: i64) {
        let start = self.dropped.map_or(from, |(f, _)| f.min(from));
        let end = self.dropped.map_or(to, |(_, t)| t.max(to));
        self.dropped = Some((start, end));
        let before = self.pending.len();
        let generation = self.generation;
        let gone = self
            .pending
            .extract_if(|key, _| segment_of(key).is_some_and(|s| (from..to).contains(&s)))
            .collect::<Vec<_>>();
        match self.journal.as_mut() {
            Some(journal) => journal.saved.extend(
                gone.into_iter()
                    .filter(|(_, p)| p.born != generation)
                    .map(|(key, p)| (key, Saved::Whole(p))),
            ),
            None => drop(gone),
        }
        if self.pending.len() != before {
            self.bytes = self.pending.iter().map(|(k, p)| p.bytes(k)).sum();
        }
    }

    /// `key`'s value as seen through this overlay over `lower`.
    fn read_with(
        &self,
        key: &[u8],
        lower: &(impl ReadClient + ?Sized),
        visit: &mut Visit<'_>,
    ) -> Result<()> {
        let Some(pending) = self.pending.get(key) else {
            if self.is_dropped(key) {
                return visit(None);
            }
            return lower.read_with(key, visit);
        };
        let appends = std::iter::once(&pending.appends[..]);
        match (&pending.base, pending.appends.is_empty()) {
            (Base::Stored, true) => {
                if self.is_dropped(key) {
                    visit(None)
                } else {
                    lower.read_with(key, visit)
                }
            }
            (Base::Put(value), true) => visit(Some(value)),
            (Base::Deleted | Base::Absent, true) => visit(None),
            (Base::Put(value), false) => visit(Some(&merge_appends(Some(value), appends))),
            (Base::Deleted | Base::Absent, false) => visit(Some(&merge_appends(None, appends))),
            (Base::Stored, false) => {
                let mut merged = Vec::new();
                lower.read_with(key, &mut |base| {
                    merged = merge_appends(base, appends.clone());
                    Ok(())
                })?;
                visit(Some(&merged))
            }
        }
    }

    /// The writes as one backend write (sorted when `sorted`) that also records `stream_time`.
    fn take_write_set(&mut self, stream_time: i64, sorted: bool) -> WriteSet {
        let dropped = self.dropped.take();
        let stream_time_changed = std::mem::take(&mut self.stream_time_changed);
        let latest_keys = self.latest_keys.take();
        self.bytes = 0;
        let mut writes: Vec<(Vec<u8>, Write)> = Vec::with_capacity(self.pending.len() + 1);
        for (key, pending) in self.pending.drain() {
            let appends = (!pending.appends.is_empty()).then_some(&pending.appends[..]);
            let write = match (pending.base, appends) {
                (Base::Stored | Base::Absent, None) => continue,
                (Base::Stored, Some(_)) => Write::Append(pending.appends),
                (Base::Put(value), None) => Write::Put(value),
                (Base::Put(value), Some(ops)) => {
                    Write::Put(merge_appends(Some(&value), std::iter::once(ops)))
                }
                (Base::Deleted, None) => Write::Delete,
                (Base::Deleted | Base::Absent, Some(ops)) => {
                    Write::Put(merge_appends(None, std::iter::once(ops)))
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
                Write::Put(meta::encode_latest_keys(count)),
            ));
        }
        if !sorted {
            return WriteSet {
                drop_segments: dropped,
                writes,
            };
        }
        // RocksDB inserts a batch into its memtable skiplist in order, and an insert next to the
        // previous one reuses its search path: sorted, a batch inserts several times faster.
        let mut order: Vec<((u64, u64), usize)> = writes
            .iter()
            .enumerate()
            .map(|(i, (key, _))| (sort_prefix(key), i))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| writes[a.1].0.cmp(&writes[b.1].0))
        });
        let mut slots: Vec<Option<(Vec<u8>, Write)>> = writes.into_iter().map(Some).collect();
        let writes = order
            .iter()
            .filter_map(|&(_, i)| slots.get_mut(i).and_then(Option::take))
            .collect();
        WriteSet {
            drop_segments: dropped,
            writes,
        }
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
                    Write::Put(entry) => cache.insert(key, Some(entry)),
                    Write::Delete => cache.insert(key, None),
                    Write::Append(_) => {}
                }
            }
        }
        Ok(())
    }
}

/// A write transaction: its own writes over the store's buffer and committed state, plus the
/// state changes they imply. `finish` hands the writes back to the store, which writes them,
/// or ends the transaction on the write buffer it ran on.
pub(crate) struct Txn<'s> {
    reader: Reader<'s>,
    pub(crate) state: &'s mut State,
    overlay: Overlay,
    /// The write buffer `overlay` was taken from, to go back to (`begin_on`).
    home: Option<&'s mut Overlay>,
    /// Accepted writes, in order, when the store records a changelog.
    pub(crate) log: Option<Log>,
    /// `state.latest_keys` when the transaction began.
    latest_keys_before: Option<u64>,
}

impl<'s> Txn<'s> {
    pub(crate) fn begin(reader: Reader<'s>, state: &'s mut State) -> Self {
        Self {
            reader,
            latest_keys_before: state.latest_keys,
            state,
            overlay: Overlay::default(),
            home: None,
            log: None,
        }
    }

    /// A transaction that runs on the write buffer `buffer` instead of collecting its writes
    /// apart; `finish` keeps or rolls back its writes there.
    pub(crate) fn begin_on(
        reader: Reader<'s>,
        state: &'s mut State,
        buffer: &'s mut Overlay,
    ) -> Self {
        let mut overlay = std::mem::take(buffer);
        overlay.begin();
        Self {
            reader,
            latest_keys_before: state.latest_keys,
            state,
            overlay,
            home: Some(buffer),
            log: None,
        }
    }

    /// Counts a latest-value entry created (`+1`) or removed (`-1`) by the put algorithm.
    pub(crate) fn count_latest(&mut self, change: i64) {
        if let Some(count) = &mut self.state.latest_keys {
            *count = count.saturating_add_signed(change);
        }
    }

    /// Makes room for the writes of `rows` puts (at most two keys each) in a transaction of its
    /// own. A write buffer is left to grow as it fills (and keeps its room when written):
    /// sized for two keys a row, a micro-batch that writes each key several times would get a
    /// table several times too large, sparse and slower to read.
    pub(crate) fn reserve(&mut self, rows: usize) {
        if self.overlay.journal.is_none() {
            self.overlay.pending.reserve(rows.saturating_mul(2));
        }
    }

    /// A read of `key` copied out (the put algorithm edits what it reads).
    pub(crate) fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read_map(self, key, |value| Ok(value.map(<[u8]>::to_vec)))
    }

    /// A read of a history row copied out; a row found missing is remembered as such, so that
    /// a version appended to it later is written as a whole new row.
    pub(crate) fn read_row(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let row = self.read(key)?;
        if row.is_none() {
            self.overlay.note_absent(key);
        }
        Ok(row)
    }

    /// Stages a write (`None` deletes). A row in a history segment registers that segment.
    pub(crate) fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        if let Some(segment) = segment_of(&key).filter(|&s| s >= 0 && value.is_some()) {
            self.state.segments.insert(segment);
        }
        self.overlay.write(key, value);
    }

    /// Stages a row append: `entry`, valid until `valid_to`, becomes the newest version of the
    /// row under `key` (a new row when there is none), without reading it.
    pub(crate) fn append(&mut self, key: Vec<u8>, entry: Entry<'_>, valid_to: i64) {
        let mut operand = Vec::new();
        encode_append(entry, valid_to, &mut operand);
        self.append_encoded(key, operand);
    }

    /// [`Txn::append`] of an operand made by `encode_append`.
    pub(crate) fn append_encoded(&mut self, key: Vec<u8>, operand: Vec<u8>) {
        if let Some(segment) = segment_of(&key).filter(|&s| s >= 0) {
            self.state.segments.insert(segment);
        }
        self.overlay.append_encoded(key, operand);
    }

    /// Advances observed stream time and drops the segments it expires (Kafka: once per
    /// accepted write, with the new stream time).
    pub(crate) fn advance_stream_time(&mut self, timestamp: i64) {
        if timestamp <= self.state.stream_time {
            return;
        }
        self.state.stream_time = timestamp;
        self.overlay.stream_time_changed = true;
        let config = self.state.config;
        let horizon = timestamp.saturating_sub(config.history_retention_ms());
        let lowest_live = config.segment_id(horizon);
        if let Some(lowest_dropped) = self.state.segments.drop_below(lowest_live) {
            self.overlay.drop_segments(lowest_dropped, lowest_live);
        }
    }

    /// The transaction's writes and the accepted writes it logged.
    pub(crate) fn finish(mut self) -> (Overlay, Option<Log>) {
        self.note_latest_keys();
        (std::mem::take(&mut self.overlay), self.log.take())
    }

    /// Ends a transaction begun with `begin_on`: the write buffer keeps its writes when `ok`
    /// and rolls them back otherwise. Returns the accepted writes it logged.
    pub(crate) fn finish_on_buffer(mut self, ok: bool) -> Option<Log> {
        self.note_latest_keys();
        self.hand_back(ok);
        self.log.take()
    }

    /// Gives a transaction begun with `begin_on` back to its write buffer: committed when
    /// `keep`, rolled back otherwise (a no-op once given back).
    fn hand_back(&mut self, keep: bool) {
        if let Some(home) = self.home.take() {
            let mut overlay = std::mem::take(&mut self.overlay);
            if keep {
                overlay.commit();
            } else {
                overlay.roll_back();
            }
            *home = overlay;
        }
    }

    /// Records the new count of latest-value entries with the writes, when it changed.
    fn note_latest_keys(&mut self) {
        if self.state.latest_keys != self.latest_keys_before {
            self.overlay.latest_keys = self.state.latest_keys;
        }
    }
}

impl Drop for Txn<'_> {
    /// A transaction on a write buffer that ends without `finish` (a panic in the put
    /// algorithm, which Python sees as an exception) rolls back and gives the buffer back:
    /// the writes of earlier calls stay.
    fn drop(&mut self) {
        self.hand_back(false);
    }
}

/// The first 16 bytes of a storage key as an integer pair that orders like the bytes: most
/// comparisons in a sort of storage keys end there.
pub(crate) fn sort_prefix(key: &[u8]) -> (u64, u64) {
    let word = |offset: usize| {
        let mut chunk = [0u8; 8];
        let bytes = key.get(offset..).unwrap_or_default();
        let n = bytes.len().min(8);
        chunk[..n].copy_from_slice(&bytes[..n]);
        u64::from_be_bytes(chunk)
    };
    (word(0), word(8))
}

impl ReadClient for Txn<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        self.overlay.read_with(key, &self.reader, visit)
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        if self.overlay.decides(read.key) {
            return self.read_with(read.key, &mut |bytes| visit(read.lookup(bytes)?));
        }
        self.reader.lookup_row(read, visit)
    }

    fn location(&self) -> String {
        self.reader.location()
    }
}

#[cfg(test)]
mod tests {
    //! A transaction run on a write buffer: committed, it has the effect of the same writes in
    //! a fresh overlay; rolled back, it leaves the buffer exactly as it was.

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Change {
        Write(i64, u8, Option<u8>),
        Append(i64, u8, u8),
        NoteAbsent(i64, u8),
        Drop(i64, i64),
    }

    fn arb_change() -> impl Strategy<Value = Change> {
        let segment = -1i64..4;
        let key = 0u8..4;
        prop_oneof![
            3 => (segment.clone(), key.clone(), proptest::option::of(any::<u8>()))
                .prop_map(|(s, k, v)| Change::Write(s, k, v)),
            3 => (segment.clone(), key.clone(), any::<u8>())
                .prop_map(|(s, k, v)| Change::Append(s, k, v)),
            1 => (segment, key).prop_map(|(s, k)| Change::NoteAbsent(s, k)),
            1 => (0i64..4, 1i64..3).prop_map(|(from, n)| Change::Drop(from, from + n)),
        ]
    }

    fn apply(overlay: &mut Overlay, changes: &[Change]) {
        for change in changes {
            match *change {
                Change::Write(s, k, v) => overlay.write(storage_key(s, &[k]), v.map(|v| vec![v])),
                Change::Append(s, k, v) => overlay.append_encoded(storage_key(s, &[k]), vec![v; 3]),
                Change::NoteAbsent(s, k) => overlay.note_absent(&storage_key(s, &[k])),
                Change::Drop(from, to) => overlay.drop_segments(from, to),
            }
        }
    }

    /// Everything an overlay holds, in a comparable form (`born` left out: it only tells
    /// transactions apart).
    fn snapshot(overlay: &Overlay) -> String {
        let mut pending: Vec<_> = overlay
            .pending
            .iter()
            .map(|(k, p)| format!("{k:?}={:?}+{:?}", p.base, p.appends))
            .collect();
        pending.sort();
        format!(
            "{pending:?} dropped={:?} st={} keys={:?} bytes={}",
            overlay.dropped, overlay.stream_time_changed, overlay.latest_keys, overlay.bytes
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn a_rolled_back_transaction_leaves_the_buffer_as_it_was(
            earlier in proptest::collection::vec(prop::collection::vec(arb_change(), 0..8), 0..3),
            failed in prop::collection::vec(arb_change(), 0..12),
            meta in (any::<bool>(), proptest::option::of(0u64..9)),
        ) {
            let mut buffer = Overlay::default();
            for changes in &earlier {
                buffer.begin();
                apply(&mut buffer, changes);
                buffer.commit();
            }
            let before = snapshot(&buffer);
            buffer.begin();
            apply(&mut buffer, &failed);
            buffer.stream_time_changed |= meta.0;
            buffer.latest_keys = meta.1.or(buffer.latest_keys);
            buffer.roll_back();
            prop_assert_eq!(snapshot(&buffer), before);
        }

        #[test]
        fn a_committed_transaction_has_the_effect_of_its_writes(
            earlier in prop::collection::vec(arb_change(), 0..8),
            later in prop::collection::vec(arb_change(), 0..12),
        ) {
            let mut buffer = Overlay::default();
            buffer.begin();
            apply(&mut buffer, &earlier);
            buffer.commit();
            buffer.begin();
            apply(&mut buffer, &later);
            buffer.commit();
            let mut plain = Overlay::default();
            apply(&mut plain, &earlier);
            apply(&mut plain, &later);
            prop_assert_eq!(snapshot(&buffer), snapshot(&plain));
        }
    }
}
