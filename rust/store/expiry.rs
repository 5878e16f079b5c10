//! A store with a latest TTL (docs/semantics.md §2.15): its live-key accounting on open, the
//! durable horizon its backend may drop expired latest values below, and when it does.
//!
//! The horizon is `ST - R` of a stream time storage holds durably: after every write with the
//! write-ahead log on, and in memory; without the log, only at a flush or checkpoint, since
//! memtables without a log die in a crash and the store a crash leaves must not lack an entry
//! visible at its own stream time. It does not move while a scan is open: RocksDB applies
//! compaction filters to data that snapshots still see. [`move_horizon`] is the one way to move
//! it, and takes the proof that no scan is open ([`NoScanOpen`]).

use super::VersionedStore;
use super::kind::StoreKind;
use crate::backend::Backend;
use crate::error::Result;
use crate::format::key::LATEST_SEGMENT;
use crate::format::latest_value;
use crate::scan::pipe::NoScanOpen;
use crate::ttl::LatestBuckets;

/// Moves the durable horizon `backend` may drop expired latest values below: with no scan open,
/// whose snapshot could lose them.
fn move_horizon(backend: &mut dyn Backend, horizon: i64, _no_scan: &NoScanOpen<'_>) {
    backend.set_reclaim_horizon(horizon);
}

impl VersionedStore {
    /// On open: counts the stored latest values into time buckets; the store's state is
    /// durable, so its horizon is the durable one.
    pub(super) fn load_latest_buckets(&mut self) -> Result<()> {
        let Some(ttl) = self.state.config.latest_ttl() else {
            return Ok(());
        };
        let clock = self.state.clock();
        let mut buckets = LatestBuckets::default();
        self.backend
            .visit_segment(LATEST_SEGMENT, &mut |_, entry| {
                let timestamp = latest_value::decode(entry)?.timestamp;
                buckets.count_stored(&ttl, clock, timestamp);
                Ok(())
            })?;
        self.state.latest_buckets = Some(buckets);
        self.state.latest_keys = None;
        // Opening, the store has no scan.
        if let Some(no_scan) = self.scans.none_open() {
            move_horizon(self.backend.as_mut(), clock.horizon, &no_scan);
        }
        Ok(())
    }

    /// A saved write buffer was loaded: its latest values replace the stored ones counted at
    /// the open.
    pub(super) fn count_buffered_latest(&mut self) -> Result<()> {
        let Some(buffer) = self.kind.buffer() else {
            return Ok(());
        };
        if self.state.latest_buckets.is_none() {
            return Ok(());
        }
        let changes: Vec<(Vec<u8>, Option<i64>)> = buffer
            .pending_latest()
            .map(|(key, after)| (key.to_vec(), after))
            .collect();
        for (key, after) in changes {
            let before = self
                .backend
                .get(&key)?
                .map(|bytes| latest_value::decode(&bytes).map(|latest| latest.timestamp))
                .transpose()?;
            self.state.note_latest(before, after);
        }
        Ok(())
    }

    /// After a call that wrote: with the write-ahead log, storage holds the write, and the
    /// durable horizon moves with it. (Without it, a flush or checkpoint moves it; in memory,
    /// the write of the write buffer to the maps.)
    pub(super) fn after_write(&mut self) {
        match self.kind {
            StoreKind::Logged(_) => self.note_durable(),
            StoreKind::Unlogged { .. } | StoreKind::Memory { .. } => {}
        }
    }

    /// Storage holds every accepted write: the durable horizon moves to the store's horizon
    /// (unless a scan is open), and a reclamation starts once as many entries are reclaimable
    /// as keys are live.
    pub(super) fn note_durable(&mut self) {
        let horizon = self.state.clock().horizon;
        let (Some(ttl), Some(buckets)) = (
            self.state.config.latest_ttl(),
            self.state.latest_buckets.as_mut(),
        ) else {
            return;
        };
        let Some(no_scan) = self.scans.none_open() else {
            return;
        };
        move_horizon(self.backend.as_mut(), horizon, &no_scan);
        let min = self.tuning.min_reclaim;
        if buckets.settle(&ttl, horizon, min) && self.backend.reclaim_latest(false) {
            buckets.started();
        }
    }

    /// Drops the latest values that the TTL has expired below the horizon from storage now, in
    /// bulk; reads are the same before and after (docs/semantics.md §2.15). A store without a
    /// write-ahead log is flushed first, so that its horizon is durable (in memory, its write
    /// buffer is written to the maps). Does nothing without
    /// a TTL, or while a scan is open. The store does this by itself, on a thread of RocksDB's,
    /// once as many entries are reclaimable as keys are live; this is for tests and operators.
    ///
    /// # Errors
    /// [`crate::Error::Failed`] for a failed store; storage errors of the flush.
    pub fn reclaim_expired(&mut self) -> Result<()> {
        self.check_usable()?;
        let Some(ttl) = self.state.config.latest_ttl() else {
            return Ok(());
        };
        match self.kind {
            StoreKind::Logged(_) => {}
            StoreKind::Unlogged { .. } => self.flush()?,
            StoreKind::Memory { .. } => self.write_buffer()?,
        }
        let Some(no_scan) = self.scans.none_open() else {
            return Ok(());
        };
        let horizon = self.state.clock().horizon;
        move_horizon(self.backend.as_mut(), horizon, &no_scan);
        if let Some(buckets) = self.state.latest_buckets.as_mut() {
            buckets.settle(&ttl, horizon, self.tuning.min_reclaim);
            buckets.started();
        }
        self.backend.reclaim_latest(true);
        Ok(())
    }
}
