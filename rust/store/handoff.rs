//! A store handed from one process to another with its write buffer: closed into a saved
//! buffer file, and opened again with it (`overlay/saved.rs`; docs/checkpoint.md, "Stores kept
//! open"). The close flushes RocksDB's memtables on the path of the process waiting for the
//! store; the holder of an idle store can flush them ahead of it, leaving the write buffer to
//! the store's next task ([`VersionedStore::flush_memtables`]).

use std::path::Path;

use super::VersionedStore;
use super::kind::StoreKind;
use crate::error::{Error, Result};
use crate::overlay::{PendingWrites, SavedBuffer, WriteBuffer};

impl VersionedStore {
    /// Closes the store, leaving its write buffer's pending writes in the new file `path`
    /// instead of writing them to RocksDB. The segments dropped and the metadata are written and
    /// the memtables flushed first, then the file, so the directory and the file together hold
    /// every accepted write: [`VersionedStore::load_buffer`] on the next open of the directory
    /// restores the store. When either step fails the file is removed (or never made) and the
    /// store closes as when dropped, writing the pending writes into RocksDB; unless the write
    /// of the directory failed, which fails the store and loses them, as it does for `close`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a store without a write buffer (in memory, or with a
    /// write-ahead log); [`Error::Failed`] for a failed store; storage and i/o errors.
    pub fn close_keeping_buffer(mut self, path: &Path) -> Result<SavedBuffer> {
        self.check_usable()?;
        let pending = match &mut self.kind {
            StoreKind::Unlogged { buffer, .. } if buffer.can_save() => buffer.take_pending(),
            _ => return Err(no_buffer()),
        };
        let saved = self
            .write_buffer()
            .and_then(|()| self.settle_metadata())
            .and_then(|()| self.backend.flush())
            .and_then(|()| pending.save(path));
        if saved.is_err() {
            if let StoreKind::Unlogged { buffer, .. } = &mut self.kind {
                buffer.restore_pending(pending); // dropping the store writes them
            }
            return saved;
        }
        // Freeing a buffer of a few micro-batches entry by entry takes about as long as saving
        // it; the next process, waiting for this store, need not wait for that too.
        let freed = std::thread::Builder::new().name("verstore-free".into());
        if let Err(e) = freed.spawn(move || drop(pending)) {
            drop(e); // no thread to spare: freed here, as it would have been
        }
        saved
    }

    /// Flushes RocksDB's memtables to SST files and leaves the write buffer as it is: for the
    /// holder of an idle store, so that a later [`VersionedStore::close_keeping_buffer`] finds
    /// little to flush, while the store's next task still finds its writes in the buffer (where
    /// its reads are cheapest) and its caches warm. The deferred metadata is settled first, as
    /// a flush does. Writes still in the buffer are in no file: the directory holds less than
    /// the store, as before the call (a crash loses them either way; durability is the
    /// caller's, with `flush` or a changelog).
    ///
    /// # Errors
    /// [`Error::Failed`] for a failed store; storage errors.
    pub fn flush_memtables(&mut self) -> Result<()> {
        self.check_usable()?;
        self.settle_metadata()?;
        self.backend.flush()?;
        if self.kind.buffer().is_none_or(WriteBuffer::is_empty) {
            // Storage holds every accepted write, as after `flush`: the durable horizon moves.
            // Otherwise the buffer's writes (its stream time among them) are not durable yet.
            self.note_durable();
        }
        Ok(())
    }

    /// Restores the write buffer that [`VersionedStore::close_keeping_buffer`] saved as
    /// `expected` in `path`, right after the open of the directory it was saved with, before
    /// any other call.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the file when its size, checksum or entries are not what was
    /// saved; [`Error::InvalidArgument`] for a store without a write buffer or one that already
    /// holds writes; i/o errors.
    pub fn load_buffer(&mut self, path: &Path, expected: SavedBuffer) -> Result<()> {
        self.check_usable()?;
        let bound = match self.kind.buffer() {
            Some(buffer) if buffer.can_save() && buffer.is_empty() => buffer.bound(),
            Some(_) => {
                return Err(Error::invalid(
                    "buffer",
                    "a saved write buffer loads only into a store just opened",
                ));
            }
            None => return Err(no_buffer()),
        };
        // A store saves about its buffer's bound, past it by one call's writes at most; a size
        // recorded far beyond that is not one it saved (and would be read whole into memory).
        let limit = u64::try_from(bound).unwrap_or(u64::MAX);
        let writes = PendingWrites::load(path, expected, limit.saturating_mul(4).max(1 << 30))?;
        let Some(buffer) = self.kind.buffer_mut() else {
            return Err(no_buffer());
        };
        buffer.restore_pending(writes);
        for segment in buffer.pending_segments() {
            self.state.segments.insert(segment);
        }
        buffer.recharge();
        self.count_buffered_latest()?;
        // Over its bound (opened with less memory than it was saved from), the buffer is written
        // by the next call, as a buffer that a call took past its bound is: written here, a crash
        // before the caller marked the copy as moved past the saved file would apply it twice.
        Ok(())
    }
}

fn no_buffer() -> Error {
    Error::invalid(
        "buffer",
        "only a persistent store without a write-ahead log has a write buffer to save or load",
    )
}
