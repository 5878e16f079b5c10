//! Scans of the in-memory backend: a snapshot is the list of segment maps (shared, copy-on-write),
//! and a cursor walks one segment's keys in the scan's range, sorted when it is opened.
//!
//! The maps are hash maps, so a cursor first collects and sorts references to the keys in its
//! range: memory proportional to the number of keys scanned (16 bytes each), not to their bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{SegmentMap, Stored};
use crate::backend::snapshot::{Cursor, ScanSource, SegmentRange, SnapshotReader};
use crate::error::Result;
use crate::format::segment_value::merge_appends;

/// The segments of an in-memory store at one point.
pub(crate) struct Snapshot {
    segments: BTreeMap<i64, Arc<SegmentMap>>,
}

impl Snapshot {
    pub(super) fn new(segments: BTreeMap<i64, Arc<SegmentMap>>) -> Self {
        Self { segments }
    }
}

impl ScanSource for Snapshot {
    fn run(self: Box<Self>, reader: Box<dyn SnapshotReader>) {
        // The snapshot was taken when the source was made, under the store's lock.
        reader.started();
        reader.read(&mut |range| Ok(Box::new(MemoryCursor::open(&self.segments, &range))));
    }
}

/// One segment's entries in a range, in key order.
struct MemoryCursor<'a> {
    entries: Vec<(&'a [u8], &'a Stored)>,
    position: usize,
    /// The current row with its appends applied, when it has appends.
    merged: Option<Vec<u8>>,
}

impl<'a> MemoryCursor<'a> {
    fn open(segments: &'a BTreeMap<i64, Arc<SegmentMap>>, range: &SegmentRange) -> Self {
        let mut entries: Vec<(&[u8], &Stored)> = segments
            .get(&range.segment)
            .map(|map| {
                map.iter()
                    .map(|(key, stored)| (key.as_slice(), stored))
                    .filter(|(key, _)| range.contains(key))
                    .collect()
            })
            .unwrap_or_default();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut cursor = Self {
            entries,
            position: 0,
            merged: None,
        };
        cursor.load();
        cursor
    }

    fn load(&mut self) {
        self.merged = self
            .entries
            .get(self.position)
            .filter(|(_, stored)| !stored.appends.is_empty())
            .map(|(_, stored)| {
                merge_appends(
                    stored.value.as_deref(),
                    std::iter::once(&stored.appends[..]),
                )
            });
    }
}

impl Cursor for MemoryCursor<'_> {
    fn key(&self) -> Option<&[u8]> {
        self.entries.get(self.position).map(|(key, _)| *key)
    }

    fn value(&self) -> Option<&[u8]> {
        match &self.merged {
            Some(merged) => Some(merged),
            None => self
                .entries
                .get(self.position)
                .and_then(|(_, stored)| stored.value.as_deref()),
        }
    }

    fn advance(&mut self) -> Result<()> {
        self.position += 1;
        self.load();
        Ok(())
    }
}
