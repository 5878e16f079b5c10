//! Running a call as one transaction: on the write buffer, or written to storage at its end.

use super::VersionedStore;
use super::kind::StoreKind;
use crate::error::Result;
use crate::format::key::PREFIX_LEN;
use crate::memory;
use crate::spool::Log;
use crate::txn::Txn;
use crate::view::buffered::BufferedView;

impl VersionedStore {
    /// Runs `work` in one transaction and commits it: into the write buffer, or to RocksDB.
    /// On any error nothing is written and the in-memory state (stream time, live segments)
    /// is as before, but for one: a failed write of the write buffer at the end of the call
    /// (the process's write buffers past their share), after which the call's writes stand
    /// in the state and the store refuses every call (its `failure`). So too on a panic, which pyo3 raises in Python as an exception after
    /// which the store is used on: the panic goes on once the state is restored (and the
    /// transaction, dropped unfinished, has rolled back the write buffer).
    pub(crate) fn transaction<T>(
        &mut self,
        work: impl FnOnce(&mut Txn<'_>) -> Result<T>,
    ) -> Result<T> {
        // Entries a merge found with long unsettled history are settled first, in the same
        // transaction (`store/settle.rs`); a failed call leaves them to a later merge.
        let long = self.backend.take_long_histories();
        let work = move |txn: &mut Txn<'_>| {
            for key in &long {
                txn.settle_key(key.get(PREFIX_LEN..).unwrap_or_default())?;
            }
            work(txn)
        };
        let before = self.state.begin_call();
        let run = std::panic::AssertUnwindSafe(|| self.run_transaction(work));
        let ran = std::panic::catch_unwind(run);
        self.charge_buffer();
        let value = match ran {
            Ok(Ok(value)) => value,
            Ok(Err(error)) => {
                self.state.undo_call(before);
                return Err(error);
            }
            Err(panic) => {
                self.state.undo_call(before);
                std::panic::resume_unwind(panic)
            }
        };
        self.state.end_call();
        if memory::BUFFERS.is_over() && self.buffer_is_full() {
            // The write buffers of the process are past their share: this store writes its
            // own now rather than at its next call, which may be long in coming (a store of
            // another partition, kept for later) while it holds the memory.
            self.write_buffer()?;
        }
        self.after_write();
        Ok(value)
    }

    fn run_transaction<T>(&mut self, work: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.check_usable()?;
        // A full buffer is written before the call's transaction runs on it, so a failed write
        // fails the call before any of its work. The buffer may outgrow its bound by one call.
        if self.buffer_is_full() {
            self.write_buffer()?;
        }
        let log = self.spool.is_some().then(Log::default);
        let (cache, buffer) = match &mut self.kind {
            StoreKind::Logged(logged) => {
                let reader =
                    BufferedView::new(self.backend.as_ref(), Some(&logged.disk.cache), None);
                let mut txn = Txn::begin(reader, &mut self.state);
                txn.log = log;
                let value = work(&mut txn)?;
                let (mut writes, log) = txn.finish();
                let marks = logged.defer_metadata_of(&mut writes);
                let cache = Some(&logged.disk.cache);
                writes.write_to(self.backend.as_mut(), cache, self.state.stream_time)?;
                logged.marked |= marks;
                self.record(log.as_ref());
                return Ok(value);
            }
            StoreKind::Unlogged { disk, buffer } => (Some(&disk.cache), buffer),
            StoreKind::Memory { buffer } => (None, buffer),
        };
        // The transaction runs on the buffer itself, so its reads go straight to storage.
        let reader = BufferedView::new(self.backend.as_ref(), cache, None);
        let mut txn = Txn::begin_on(reader, &mut self.state, buffer);
        txn.log = log;
        let value = work(&mut txn);
        let log = txn.finish_on_buffer(value.is_ok());
        let value = value?;
        self.record(log.as_ref());
        Ok(value)
    }

    /// Appends a committed transaction's log to the spool, when recording.
    fn record(&mut self, log: Option<&Log>) {
        if let (Some(spool), Some(log)) = (&mut self.spool, log) {
            spool.append(log);
        }
    }
}
