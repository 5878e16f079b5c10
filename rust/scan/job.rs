//! A scan's work on its producer thread: merge the cursors of the snapshot by key, answer each
//! key with the point-read algorithms, send the batches.

use std::sync::Arc;

use super::Kind;
use super::batches::Batches;
use super::cursors::Cursors;
use super::key_range::KeyRange;
use super::pipe::Pipe;
use crate::backend::snapshot::{OpenCursor, SegmentRange, SnapshotReader};
use crate::error::Result;
use crate::format::key::LATEST_SEGMENT;
use crate::format::latest_value;
use crate::read;
use crate::state::State;

/// A scan's work, done on its producer thread.
pub(crate) struct ScanJob {
    /// The store's state when the scan started.
    pub(super) state: State,
    pub(super) keys: KeyRange,
    pub(super) kind: Kind,
    pub(super) batch_rows: usize,
    pub(super) location: String,
    pub(super) pipe: Arc<Pipe>,
}

impl SnapshotReader for ScanJob {
    /// The snapshot is taken: the scan may be handed to its caller.
    fn started(&self) {
        self.pipe.mark_started();
    }

    /// Reads the scan through cursors that `open` makes and sends its batches.
    fn read(self: Box<Self>, open: &mut OpenCursor<'_>) {
        if let Err(error) = self.produce(open) {
            self.pipe.send(Err(error));
        }
    }
}

impl ScanJob {
    /// The history segments to read, newest first.
    fn segments(&self) -> Vec<i64> {
        let config = self.state.config;
        let horizon = self
            .state
            .stream_time
            .saturating_sub(config.history_retention_ms());
        let live = self.state.segments.newest_first();
        match self.kind {
            Kind::AsOf(None) => Vec::new(),
            Kind::AsOf(Some(t)) if t < horizon => Vec::new(),
            Kind::AsOf(Some(t)) => {
                let lowest = config.segment_id(t).max(0);
                live.take_while(|&s| s >= lowest).collect()
            }
            Kind::Versions { to, .. } if to < horizon => Vec::new(),
            Kind::Versions {
                tombstones: true, ..
            } => live.collect(),
            Kind::Versions { from, .. } => {
                // Segment `s` holds valid-tos up to `(s + 1)·I − 1`: below `from` + 1 nothing
                // in it (or older) is selected, and `versions` would read nothing there.
                let interval = i128::from(config.segment_interval_ms());
                live.take_while(|&s| (i128::from(s) + 1) * interval - 1 > i128::from(from))
                    .collect()
            }
        }
    }

    fn produce(&self, open: &mut OpenCursor<'_>) -> Result<()> {
        let (lower, upper) = self.keys.bounds();
        let range = |segment| SegmentRange::new(segment, &lower, upper.as_deref());
        let mut cursors = Cursors {
            latest: open(range(LATEST_SEGMENT))?,
            rows: Vec::new(),
            location: &self.location,
        };
        for segment in self.segments() {
            cursors.rows.push((segment, open(range(segment))?));
        }
        let mut out = Batches::new(self.batch_rows, self.kind.has_tombstones(), &self.pipe);
        let mut key = Vec::new();
        while let Some(next) = cursors.smallest() {
            if self.pipe.is_ended() {
                return Ok(());
            }
            key.clear();
            key.extend_from_slice(next);
            if !self.emit(&cursors, &key, &mut out)? {
                return Ok(());
            }
            cursors.advance_past(&key)?;
        }
        out.flush()?;
        Ok(())
    }

    /// Adds `key`'s records to `out`; `false` when the scan was ended meanwhile.
    fn emit(&self, cursors: &Cursors<'_, '_>, key: &[u8], out: &mut Batches) -> Result<bool> {
        let latest = cursors.latest_value(key);
        match self.kind {
            Kind::AsOf(as_of) => {
                let mut history = false;
                if let Some(bytes) = latest {
                    let latest = latest_value::decode(bytes)?;
                    let (timestamp, value) = (latest.timestamp, latest.value);
                    if as_of.is_none_or(|t| timestamp <= t) {
                        return match read::ttl_point(&self.state, timestamp, None, as_of) {
                            read::Seen::ValidTo(valid_to) => {
                                out.push(key, Some(value), timestamp, valid_to)
                            }
                            read::Seen::Ended => Ok(true),
                        };
                    }
                    history = latest.has_history();
                }
                match as_of {
                    Some(t) if history || !cursors.rows.is_empty() => {
                        match read::as_of(cursors, &self.state, key, t)? {
                            Some(record) => out.push_record(key, &record),
                            None => Ok(true),
                        }
                    }
                    _ => Ok(true),
                }
            }
            Kind::Versions {
                from,
                to,
                order,
                tombstones: false,
            } => {
                for record in read::versions(cursors, &self.state, key, from, to, order)? {
                    if !out.push_record(key, &record)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Kind::Versions {
                from,
                to,
                order,
                tombstones: true,
            } => {
                let versions =
                    read::versions_with_tombstones(cursors, &self.state, key, from, to, order)?;
                for v in versions {
                    if !out.push(key, v.value.as_deref(), v.timestamp, v.valid_to)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }
}
