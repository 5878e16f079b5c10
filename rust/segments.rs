//! The set of live history segments.
//!
//! Segment `k` holds the versions whose valid-to lies in `[k·I, (k+1)·I)`. The set is kept in
//! memory so that reads and writes visit only segments that exist; it is rediscovered from the
//! storage keys on open (Kafka forgets it on restart, docs/semantics.md §Q4). Once observed stream
//! time `ST` advances, every segment below `segment_id(ST − R)` is dropped whole (§5): a version
//! therefore stays readable through `versions()` until `ST − R` reaches the start of the segment
//! after the one holding its valid-to.

use std::collections::BTreeSet;
use std::sync::Arc;

/// Live history segment ids, shared copy-on-write: a clone (the state a transaction may roll
/// back to, `store/transaction.rs`) allocates nothing, and only a change of the set copies it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Segments {
    ids: Arc<BTreeSet<i64>>,
}

impl Segments {
    pub(crate) fn from_ids(ids: impl IntoIterator<Item = i64>) -> Self {
        Self {
            ids: Arc::new(ids.into_iter().collect()),
        }
    }

    /// The newest live segment in `[lowest, upper]`.
    pub(crate) fn newest_at_most(&self, upper: i64, lowest: i64) -> Option<i64> {
        if upper < lowest {
            return None;
        }
        self.ids.range(lowest..=upper).next_back().copied()
    }

    /// All live segments, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = i64> + '_ {
        self.ids.iter().rev().copied()
    }

    /// Adds segment `id`; a write into a live segment (the common case) changes nothing.
    pub(crate) fn insert(&mut self, id: i64) {
        if !self.ids.contains(&id) {
            Arc::make_mut(&mut self.ids).insert(id);
        }
    }

    /// Drops every segment below `lowest_live`; returns the lowest one that was live.
    pub(crate) fn drop_below(&mut self, lowest_live: i64) -> Option<i64> {
        // Called on every advance of stream time; a new set allocates, so only when it drops.
        if self.ids.first().is_none_or(|&lowest| lowest >= lowest_live) {
            return None;
        }
        let lowest_dropped = self.ids.first().copied();
        self.ids = Arc::new(self.ids.range(lowest_live..).copied().collect());
        lowest_dropped
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_whole_segments_below_the_horizon() {
        let mut segments = Segments::from_ids([0, 1, 3, 7]);
        assert_eq!(segments.drop_below(0), None);
        assert_eq!(segments.drop_below(3), Some(0));
        assert_eq!(segments.newest_first().collect::<Vec<_>>(), vec![7, 3]);
        assert_eq!(segments.newest_at_most(6, 0), Some(3));
        assert_eq!(segments.newest_at_most(7, 4), Some(7));
        assert_eq!(segments.newest_at_most(6, 4), None);
        assert_eq!(segments.newest_at_most(2, 4), None);
    }
}
