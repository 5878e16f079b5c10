//! Undoing a transaction that runs on a write buffer.

use super::Overlay;
use super::pending::Pending;
use crate::format::key::StorageKey;
use crate::state::KeyCounts;

/// How to undo the transaction running on an overlay. Entries the transaction created need
/// no record (they carry its generation); entries it found are saved as they were, the first
/// time and every time it changes them, so that restoring in reverse order ends with the
/// oldest. Saving keeps a write buffer's transaction at one map insert per write: without it,
/// each call collected its writes in a map of its own, then moved every one into the buffer.
#[derive(Debug)]
pub(super) struct Journal {
    pub(super) saved: Vec<(StorageKey, Saved)>,
    dropped: Option<(i64, i64)>,
    stream_time_changed: bool,
    latest_keys: Option<KeyCounts>,
    bytes: usize,
}

#[derive(Debug)]
pub(super) enum Saved {
    /// The entry as it was before it was replaced or removed.
    Whole(Pending),
    /// The length of its appends before more were added.
    AppendsLen(usize),
}

impl Overlay {
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
}

#[cfg(test)]
mod tests {
    //! A transaction run on a write buffer: committed, it has the effect of the same writes in
    //! a fresh overlay; rolled back, it leaves the buffer exactly as it was.

    use proptest::prelude::*;

    use super::super::Overlay;
    use super::KeyCounts;
    use crate::format::key::storage_key;
    use crate::format::short_bytes::ShortBytes;

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
                Change::Write(s, k, v) => {
                    overlay.write(storage_key(s, &[k]), v.map(|v| ShortBytes::from(&[v][..])));
                }
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
            meta in (any::<bool>(), proptest::option::of((0u64..9, 0u64..3))),
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
            let counts = meta.1.map(|(latest_keys, unsettled_puts)| KeyCounts { latest_keys, unsettled_puts });
            buffer.latest_keys = counts.or(buffer.latest_keys);
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
