//! Writes not yet in the backend. A transaction collects its writes in an [`Overlay`]: per
//! key a replacement value and the row appends made since (appending to a row never reads it,
//! and a row read through the overlay applies the appends to a copy), the segments dropped, and
//! whether observed stream time or the key count moved.
//!
//! A store whose write-ahead log is off keeps one overlay across calls as a write buffer (Kafka
//! Streams' record cache, [`WriteBuffer`]): each call's transaction runs on it directly, undone
//! from a journal if the call fails (`journal.rs`), and it is written to RocksDB as one sorted
//! batch (`write_set.rs`) when it has grown past its bound, on `flush`, on `checkpoint` and on
//! close. Reads see it first. Without a write-ahead log nothing written since the last flush
//! survives a crash either way, so the buffer loses no guarantee; with the log on, every call is
//! written before it returns. An in-memory store keeps a write buffer too (there is no crash to
//! survive), written to its maps the same way, and before `to_bytes` and `stats`.

use crate::backend::Visit;
use crate::error::Result;
use crate::format::key::{META_SEGMENT, StorageKey, segment_of, storage_key};
use crate::format::short_bytes::ShortBytes;
use crate::format::{latest_value, merge_operands};
use crate::state::KeyCounts;
use crate::view::ReadClient;
use journal::{Journal, Saved};
use pending::{Base, Pending, PendingMap};

mod buffer;
mod journal;
mod pending;
mod saved;
mod write_set;

pub(crate) use buffer::WriteBuffer;
pub(crate) use saved::PendingWrites;
pub use saved::SavedBuffer;

/// What an overlay does to a read of one key.
pub(crate) enum ReadPlan<'a> {
    /// Nothing: the read goes below.
    Below,
    /// Row appends go on top of the value below (`read_with` reads it and merges them in).
    AppendsOnStored(&'a [u8]),
    /// The overlay has the answer: a pending write, or (`None`) a dropped segment. The
    /// answer is read from the plan ([`Overlay::answer`]) without a second lookup.
    Answered(Option<&'a Pending>),
}

/// Writes not yet in the backend: per key a replacement value and row appends, the segments
/// dropped, and whether observed stream time moved. A transaction collects its writes in one;
/// a store whose write-ahead log is off keeps one across calls as its [`WriteBuffer`], and runs
/// each call's transaction on it directly (`begin`, then `commit` or `roll_back`).
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    pending: PendingMap,
    /// Segments dropped: `[lowest dropped, lowest live)`.
    dropped: Option<(i64, i64)>,
    stream_time_changed: bool,
    /// Record the stream time even where the store defers it (`defer_metadata`): it was set by
    /// an advance that stored no version, which an open after a crash could not recompute it
    /// from (`store/metadata.rs`).
    stream_time_kept: bool,
    /// The counts of latest-value entries to record, when a write changed them.
    latest_keys: Option<KeyCounts>,
    /// About how many bytes `pending` holds.
    bytes: usize,
    /// The transaction running on this overlay, counted from 1 (0: none has begun).
    generation: u64,
    /// While a transaction runs on this overlay: how to undo it.
    journal: Option<Journal>,
}

impl Overlay {
    /// Whether there is nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.dropped.is_none()
            && !self.stream_time_changed
            && self.latest_keys.is_none()
    }

    /// Whether the writes change the stream time or the key count.
    pub(crate) fn changes_metadata(&self) -> bool {
        self.stream_time_changed || self.latest_keys.is_some()
    }

    /// Leaves the stream time (unless kept) and the key count out of the write
    /// (`store/metadata.rs`).
    pub(crate) fn defer_metadata(&mut self) {
        self.stream_time_changed &= self.stream_time_kept;
        self.latest_keys = None;
    }

    /// Adds a write of the store's metadata entry `name` (`None` removes it).
    pub(crate) fn write_metadata(&mut self, name: &[u8], value: Option<Vec<u8>>) {
        self.write(storage_key(META_SEGMENT, name), value.map(ShortBytes::from));
    }

    /// About how many bytes the pending writes hold.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Makes room for the writes of `rows` puts (at most two keys each).
    pub(crate) fn reserve(&mut self, rows: usize) {
        self.pending.reserve(rows.saturating_mul(2));
    }

    /// Records that observed stream time moved: the write carries the new one.
    pub(crate) fn note_stream_time_changed(&mut self) {
        self.stream_time_changed = true;
    }

    /// Records that observed stream time moved without a version that shows it: the write
    /// carries the new one even when the store defers its metadata.
    pub(crate) fn keep_stream_time(&mut self) {
        self.stream_time_changed = true;
        self.stream_time_kept = true;
    }

    /// Records the new counts of latest-value entries with the writes.
    pub(crate) fn note_latest_keys(&mut self, counts: Option<KeyCounts>) {
        self.latest_keys = counts;
    }

    fn is_dropped(&self, key: &[u8]) -> bool {
        match (self.dropped, segment_of(key)) {
            (Some((from, to)), Some(segment)) => (from..to).contains(&segment),
            _ => false,
        }
    }

    /// What this overlay does to a read of `key`, found with one lookup.
    pub(crate) fn read_plan(&self, key: &[u8]) -> ReadPlan<'_> {
        match self.pending.get(key) {
            Some(p) if matches!(p.base, Base::Stored) && !p.appends.is_empty() => {
                ReadPlan::AppendsOnStored(&p.appends)
            }
            Some(p) => ReadPlan::Answered(Some(p)),
            None if self.is_dropped(key) => ReadPlan::Answered(None),
            None => ReadPlan::Below,
        }
    }

    /// How many pushes (`format::latest_value`) this overlay holds for the latest-value entry
    /// under `key` on top of what is stored (`Some(0)`: none, the stored entry is the answer),
    /// or `None` when it knows the entry without reading below (a write replaced it).
    pub(crate) fn pushes_on_stored(&self, key: &[u8]) -> Option<usize> {
        match self.pending.get(key) {
            None => Some(0),
            Some(p) if matches!(p.base, Base::Stored) => {
                Some(latest_value::pushes(&p.appends).count())
            }
            Some(_) => None,
        }
    }

    /// Whether this overlay answers for `key` (a pending write, or a dropped segment).
    pub(crate) fn decides(&self, key: &[u8]) -> bool {
        !matches!(self.read_plan(key), ReadPlan::Below)
    }

    fn put(&mut self, key: StorageKey, mut pending: Pending) {
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

    pub(crate) fn write(&mut self, key: StorageKey, value: Option<ShortBytes>) {
        let base = value.map_or(Base::Deleted, Base::Put);
        self.put(key, Pending::new(base, Vec::new()));
    }

    /// Takes `operand` by value: a key's first append becomes its pending appends as it is,
    /// without another allocation and copy (the common case, once per in-order put).
    pub(crate) fn append_encoded(&mut self, key: StorageKey, operand: Vec<u8>) {
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
    pub(crate) fn note_absent(&mut self, key: &[u8]) {
        if !self.pending.contains_key(key) {
            self.put(
                StorageKey::from(key),
                Pending::new(Base::Absent, Vec::new()),
            );
        }
    }

    /// Records that segments `[from, to)` are dropped, and forgets its writes there.
    pub(crate) fn drop_segments(&mut self, from: i64, to: i64) {
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
    pub(crate) fn read_with(
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
        self.read_pending(key, pending, lower, visit)
    }

    /// The read of `key` that a plan found [`ReadPlan::Answered`], over `lower`.
    pub(crate) fn answer(
        &self,
        key: &[u8],
        answered: Option<&Pending>,
        lower: &(impl ReadClient + ?Sized),
        visit: &mut Visit<'_>,
    ) -> Result<()> {
        match answered {
            Some(pending) => self.read_pending(key, pending, lower, visit),
            None => visit(None),
        }
    }

    /// `key`'s value as seen through its `pending` write over `lower`.
    fn read_pending(
        &self,
        key: &[u8],
        pending: &Pending,
        lower: &(impl ReadClient + ?Sized),
        visit: &mut Visit<'_>,
    ) -> Result<()> {
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
            (Base::Put(value), false) => visit(Some(&merge_operands(key, Some(value), appends))),
            (Base::Deleted | Base::Absent, false) => {
                visit(Some(&merge_operands(key, None, appends)))
            }
            (Base::Stored, false) => {
                let mut merged = Vec::new();
                lower.read_with(key, &mut |base| {
                    merged = merge_operands(key, base, appends.clone());
                    Ok(())
                })?;
                visit(Some(&merged))
            }
        }
    }
}
