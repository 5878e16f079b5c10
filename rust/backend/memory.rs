//! The in-memory backend: the same keys and values as the RocksDB backend, held per segment.
//!
//! The keyspace is split on the 8-byte segment prefix: an ordered map of segment id to a hash
//! map of storage key to value. Point reads and writes cost a hash, not a walk down a tree of byte
//! strings; segment expiry and discovery stay ordered; [`Backend::export`] restores the storage
//! keys in key order.
//!
//! Row appends are kept beside the row they extend and applied when the row is read, or as soon
//! as they are larger than the row itself, so that appending versions to a hot key costs
//! amortized linear time, as in RocksDB.
//!
//! Each segment's map is shared copy-on-write (`Arc`): a scan's snapshot ([`scan`]) is a copy of
//! the segment list, and a write copies a segment's map only while a scan still holds the old
//! one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::snapshot::ScanSource;
use super::{Backend, Usage, Visit, VisitEntry, VisitIndexed, Write, WriteSet};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, StorageKey, segment_of};
use crate::format::read_i64;
use crate::format::segment_value::merge_appends;
use crate::ttl::LatestTtl;

mod scan;

type Hasher = foldhash::fast::RandomState;
/// One segment: storage key to stored value.
type SegmentMap = HashMap<StorageKey, Stored, Hasher>;

/// A stored value: `value` (`None`: none before the appends) and pending `appends`.
#[derive(Debug, Default, Clone)]
struct Stored {
    value: Option<Vec<u8>>,
    appends: Vec<u8>,
}

impl Stored {
    fn merged(&self) -> Vec<u8> {
        merge_appends(self.value.as_deref(), std::iter::once(&self.appends[..]))
    }

    fn visit(&self, visit: &mut dyn FnMut(Option<&[u8]>) -> Result<()>) -> Result<()> {
        if self.appends.is_empty() {
            visit(self.value.as_deref())
        } else {
            visit(Some(&self.merged()))
        }
    }
}

#[derive(Debug)]
pub(crate) struct MemoryBackend {
    segments: BTreeMap<i64, Arc<SegmentMap>>,
    /// A store's latest TTL, and the horizon at which its expired latest values may go.
    ttl: Option<LatestTtl>,
    horizon: i64,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self {
            segments: BTreeMap::new(),
            ttl: None,
            horizon: i64::MIN,
        }
    }
}

impl MemoryBackend {
    /// This backend, dropping the latest values `ttl` expires when asked to reclaim.
    pub(crate) fn with_latest_ttl(self, ttl: Option<LatestTtl>) -> Self {
        Self { ttl, ..self }
    }

    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Self {
        let mut backend = Self::default();
        for (key, value) in entries {
            backend.apply(StorageKey::from(key), Write::Put(value));
        }
        backend
    }

    fn lookup(&self, key: &[u8]) -> Option<&Stored> {
        self.segments.get(&segment_of(key)?)?.get(key)
    }

    fn apply(&mut self, key: StorageKey, write: Write) {
        let Some(segment) = segment_of(&key) else {
            return;
        };
        match write {
            Write::Put(value) => {
                Arc::make_mut(self.segments.entry(segment).or_default()).insert(
                    key,
                    Stored {
                        value: Some(value),
                        appends: Vec::new(),
                    },
                );
            }
            Write::Delete => {
                if let Some(map) = self.segments.get_mut(&segment)
                    && map.contains_key(&key)
                {
                    Arc::make_mut(map).remove(&key);
                    if map.is_empty() {
                        self.segments.remove(&segment);
                    }
                }
            }
            Write::Append(operands) => {
                let stored = Arc::make_mut(self.segments.entry(segment).or_default())
                    .entry(key)
                    .or_default();
                stored.appends.extend_from_slice(&operands);
                // Geometric: a row is rewritten only once its appends outgrow it.
                if stored.appends.len() > stored.value.as_ref().map_or(0, Vec::len) {
                    stored.value = Some(stored.merged());
                    stored.appends.clear();
                }
            }
        }
    }
}

impl Backend for MemoryBackend {
    fn export(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        for map in self.segments.values() {
            for (key, stored) in map.iter() {
                let value = if stored.appends.is_empty() {
                    stored.value.clone()
                } else {
                    Some(stored.merged())
                };
                if let Some(value) = value {
                    out.push((key.to_vec(), value));
                }
            }
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(out)
    }

    fn get_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        match self.lookup(key) {
            Some(stored) => stored.visit(visit),
            None => visit(None),
        }
    }

    fn multi_get(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()> {
        for (i, key) in keys.iter().enumerate() {
            match self.lookup(key) {
                Some(stored) => stored.visit(&mut |value| visit(i, value))?,
                None => visit(i, None)?,
            }
        }
        Ok(())
    }

    fn is_empty_of(&self, segment: i64) -> Result<bool> {
        Ok(self.segments.get(&segment).is_none_or(|map| map.is_empty()))
    }

    fn sorted_writes(&self) -> bool {
        false
    }

    fn history_segments(&self) -> Result<Vec<i64>> {
        Ok(self
            .segments
            .iter()
            .filter(|(id, map)| **id >= 0 && !map.is_empty())
            .map(|(id, _)| *id)
            .collect())
    }

    fn write(&mut self, batch: &mut WriteSet) -> Result<()> {
        if let Some((from, to)) = batch.drop_segments {
            let mut dropped = self.segments.split_off(&from);
            let mut kept = dropped.split_off(&to);
            self.segments.append(&mut kept);
        }
        for (key, write) in batch.writes.drain(..) {
            self.apply(key, write);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn location(&self) -> String {
        "in-memory store".to_owned()
    }

    fn checkpoint(&self, _dir: &std::path::Path) -> Result<()> {
        Err(Error::invalid(
            "path",
            "an in-memory store cannot be checkpointed",
        ))
    }

    fn scan_source(&self) -> Box<dyn ScanSource> {
        Box::new(scan::Snapshot::new(self.segments.clone()))
    }

    fn count_keys(&self, segment: i64) -> Result<u64> {
        Ok(self
            .segments
            .get(&segment)
            .map_or(0, |map| map.len() as u64))
    }

    fn visit_segment(&self, segment: i64, visit: &mut VisitEntry<'_>) -> Result<()> {
        for (key, stored) in self
            .segments
            .get(&segment)
            .into_iter()
            .flat_map(|map| map.iter())
        {
            stored.visit(&mut |value| value.map_or(Ok(()), |value| visit(key, value)))?;
        }
        Ok(())
    }

    fn usage(&self) -> Result<Usage> {
        let history = self
            .segments
            .range(0..)
            .map(|(_, map)| map.len() as u64)
            .sum();
        Ok(Usage {
            exact: Some((self.count_keys(LATEST_SEGMENT)?, history)),
            ..Usage::default()
        })
    }

    fn set_reclaim_horizon(&mut self, horizon: i64) {
        self.horizon = self.horizon.max(horizon);
    }

    /// One pass over the latest values, run only once the store counts as many reclaimable
    /// as live (amortized constant time per write). Open scans keep their copy of the map.
    fn reclaim_latest(&mut self, _wait: bool) -> bool {
        let (Some(ttl), horizon) = (self.ttl, self.horizon) else {
            return false;
        };
        if let Some(map) = self.segments.get_mut(&LATEST_SEGMENT) {
            Arc::make_mut(map).retain(|_, stored| {
                let timestamp = stored.value.as_deref().and_then(|v| read_i64(v, 0));
                !timestamp.is_some_and(|t| ttl.reclaimable(t, horizon))
            });
            if map.is_empty() {
                self.segments.remove(&LATEST_SEGMENT);
            }
        }
        true
    }
}
