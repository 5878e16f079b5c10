//! The in-memory backend: a `BTreeMap` with the same keys and rows as the RocksDB backend.

use std::collections::BTreeMap;

use super::{Backend, WriteSet};
use crate::error::{Error, Result};
use crate::format::key::{segment_of, segment_prefix};

#[derive(Debug, Default)]
pub(crate) struct MemoryBackend {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl MemoryBackend {
    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Self {
        Self {
            map: entries.into_iter().collect(),
        }
    }
}

impl Backend for MemoryBackend {
    fn export(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        Some(
            self.map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.get(key).cloned())
    }

    fn history_segments(&self) -> Result<Vec<i64>> {
        let mut ids = Vec::new();
        let mut from = segment_prefix(0).to_vec();
        while let Some((key, _)) = self.map.range(from..).next() {
            match segment_of(key) {
                Some(id) if id >= 0 => {
                    ids.push(id);
                    let Some(next) = id.checked_add(1) else { break };
                    from = segment_prefix(next).to_vec();
                }
                _ => break,
            }
        }
        Ok(ids)
    }

    fn write(&mut self, batch: WriteSet) -> Result<()> {
        if let Some((from, to)) = batch.drop_segments {
            let mut dropped = self.map.split_off(&segment_prefix(from)[..]);
            let mut kept = dropped.split_off(&segment_prefix(to)[..]);
            self.map.append(&mut kept);
        }
        for (key, value) in batch.writes {
            match value {
                Some(value) => self.map.insert(key, value),
                None => self.map.remove(&key),
            };
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
}
