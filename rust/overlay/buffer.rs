//! The write buffer of a store without a write-ahead log (and of an in-memory store): an
//! [`Overlay`] kept across calls, with what only a buffer has, a bound and a charge to the
//! process's pool of write buffers (`crate::memory::BUFFERS`).
//!
//! Each call's transaction runs on the buffer's writes directly: [`WriteBuffer::lend`] hands
//! them to the transaction with a journal begun, [`WriteBuffer::take_back`] keeps or undoes the
//! transaction's writes. A transaction on a buffer does not size the buffer's table for its
//! rows (`Txn::reserve`): sized for two keys a row, a micro-batch that writes each key several
//! times would get a table several times too large, sparse and slower to read; a buffer grows
//! as it fills and keeps its room when written, refilling to about the same size.

use super::Overlay;
use super::pending::PendingMap;
use crate::backend::Backend;
use crate::error::Result;
use crate::latest_cache::LatestCache;
use crate::memory;

/// A store's write buffer: its pending writes, the bytes it holds before it is written, and
/// what it is charged to the process's pool of write buffers (given back when it is dropped).
pub(crate) struct WriteBuffer {
    pub(super) writes: Overlay,
    /// The buffer's own bound in bytes; the process's share for write buffers may be less.
    limit: usize,
    /// What the buffer is charged to `memory::BUFFERS`.
    charge: usize,
}

impl WriteBuffer {
    /// An empty buffer written once it holds `limit` bytes (or its share of the process's).
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            writes: Overlay::default(),
            limit,
            charge: 0,
        }
    }

    /// The pending writes, as reads see them.
    pub(crate) fn writes(&self) -> &Overlay {
        &self.writes
    }

    /// Whether there is nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// About how many bytes the pending writes hold.
    pub(crate) fn bytes(&self) -> usize {
        self.writes.bytes()
    }

    /// Writes everything to `backend` as one sorted batch (`Overlay::write_to`): empty
    /// afterwards, even when the write failed. The buffer keeps its table's room for the next
    /// writes, unless the process's write buffers are past their share, and is charged for what
    /// it keeps.
    pub(crate) fn write_to(
        &mut self,
        backend: &mut dyn Backend,
        cache: Option<&LatestCache>,
        stream_time: i64,
    ) -> Result<()> {
        let written = self.writes.write_to(backend, cache, stream_time);
        if memory::BUFFERS.is_over() {
            // The room an emptied buffer keeps for the next writes is memory others need now.
            self.release_room();
        }
        self.recharge();
        written
    }

    /// The bytes the buffer holds before it is written: its own bound, and the share of the
    /// process's budget for write buffers.
    pub(crate) fn bound(&self) -> usize {
        self.limit.min(memory::BUFFERS.share())
    }

    /// Whether the buffer is due to be written before the next call: past its bound, or the
    /// write buffers of the process are past their share and this one holds enough to be worth
    /// a write.
    pub(crate) fn is_full(&self) -> bool {
        /// A buffer smaller than this is not written for the process's sake alone.
        const WORTH_WRITING: usize = 64 << 10;
        let bytes = self.writes.bytes();
        bytes > self.bound() || (memory::BUFFERS.is_over() && bytes > WORTH_WRITING)
    }

    /// About how much memory the buffer holds: its pending writes, or the room its table keeps
    /// for them when that is more (a written buffer keeps its room for the next writes).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.writes.bytes.max(self.writes.pending.room_bytes())
    }

    /// Gives back the room of an empty buffer's table.
    pub(crate) fn release_room(&mut self) {
        if self.writes.pending.is_empty() {
            self.writes.pending = PendingMap::default();
        }
    }

    /// Moves the buffer's charge to the process's pool to what it holds now.
    pub(crate) fn recharge(&mut self) {
        let held = self.memory_bytes();
        memory::BUFFERS.recharge(self.charge, held);
        self.charge = held;
    }

    /// Hands the pending writes to a transaction that runs on them, its journal begun; the
    /// buffer is empty until [`WriteBuffer::take_back`].
    pub(crate) fn lend(&mut self) -> Overlay {
        let mut writes = std::mem::take(&mut self.writes);
        writes.begin();
        writes
    }

    /// Takes back the writes lent to a transaction: its writes kept when `keep`, rolled back
    /// otherwise.
    pub(crate) fn take_back(&mut self, mut writes: Overlay, keep: bool) {
        if keep {
            writes.commit();
        } else {
            writes.roll_back();
        }
        self.writes = writes;
    }
}

impl Drop for WriteBuffer {
    /// Gives the buffer's charge back to the process's pool.
    fn drop(&mut self) {
        memory::BUFFERS.recharge(self.charge, 0);
    }
}
