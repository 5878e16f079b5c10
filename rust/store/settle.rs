//! Settling unsettled history: the replaced versions that read-free puts left in latest-value
//! entries (`format/latest_value.rs`, docs/semantics.md §2.16) moved to the history rows the
//! put algorithm would have appended them to.
//!
//! A put that reads an entry settles it on the way (`Txn::settle_history`). Two more paths:
//!
//! * entries whose history merged long (`backend/rocks/histories.rs`) are settled by the next
//!   write call, in its transaction (`store/transaction.rs`): a read of each, once per several
//!   puts of the key;
//! * [`VersionedStore::settle`] settles every entry in one pass over the latest values, and
//!   counts them: `latest_keys` is exact again (read-free puts cannot tell a new key from an
//!   existing one, so they leave it uncounted).

use super::VersionedStore;
use super::kind::StoreKind;
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, PREFIX_LEN};
use crate::format::{latest_value, meta};
use crate::txn::Txn;

/// Bytes of entries with history a pass collects before it settles them in one transaction.
const PASS_CHUNK_BYTES: usize = 4 << 20;

/// A step of the pass: the entries with unsettled history (storage key, entry), and the key
/// the next step starts at (`None`: the pass is done).
struct Chunk {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    next: Option<Vec<u8>>,
}

impl VersionedStore {
    /// Moves every replaced version still held in a latest-value entry to its history row, and
    /// counts the latest values: afterwards `stats().latest_keys` is exact and
    /// `stats().unsettled_puts` is 0. One pass over the latest values, settled in transactions
    /// of a few MiB each (a crash between two leaves each entry settled or not, never half).
    /// Reads answer the same before and after.
    ///
    /// # Errors
    /// [`Error::Failed`](crate::Error::Failed) for a failed store; storage errors;
    /// [`Error::Corrupt`](crate::Error::Corrupt) for an entry that does not decode.
    pub fn settle(&mut self) -> Result<()> {
        self.check_usable()?;
        if let StoreKind::Memory { .. } = self.kind {
            return Ok(()); // in memory nothing is pushed, and the maps count exactly
        }
        self.write_buffer()?;
        let mut from: Option<Vec<u8>> = None;
        let mut count = 0u64;
        loop {
            let chunk = self.unsettled_entries(from.as_deref(), &mut count)?;
            self.transaction(|txn| settle_all(txn, &chunk.entries))?;
            match chunk.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        let counted = self.state.latest_keys.is_some();
        self.transaction(|txn| {
            if counted {
                txn.state.latest_keys = Some(count);
            }
            txn.state.unsettled_puts = 0;
            Ok(())
        })
    }

    /// At the open of a format-5 store with a latest TTL: settles it and records format 4. A
    /// store with a TTL takes no read-free put (its puts report the TTL's end and count the
    /// values that end), and its reclamation drops whole latest-value entries.
    pub(super) fn settle_for_latest_ttl(&mut self) -> Result<()> {
        if self.state.config.latest_ttl().is_none()
            || self.state.format_version != meta::FORMAT_VERSION
        {
            return Ok(());
        }
        self.settle()?;
        self.transaction(|txn| {
            let version = meta::encode_format_version(meta::FORMAT_WITH_TTL);
            txn.write_metadata(meta::FORMAT_VERSION_KEY, version);
            txn.state.format_version = meta::FORMAT_WITH_TTL;
            Ok(())
        })
    }

    /// From storage key `from` on: the latest-value entries with unsettled history, up to
    /// about [`PASS_CHUNK_BYTES`] of them, and the key the next chunk starts at (`None`: none).
    /// `count` counts every entry passed.
    fn unsettled_entries(&self, from: Option<&[u8]>, count: &mut u64) -> Result<Chunk> {
        let mut chunk = Vec::new();
        let (mut bytes, mut next) = (0, None);
        self.backend
            .visit_segment_from(LATEST_SEGMENT, from, &mut |key, entry| {
                if bytes >= PASS_CHUNK_BYTES {
                    next = Some(key.to_vec());
                    return Ok(false);
                }
                *count += 1;
                if latest_value::is_marked(entry) {
                    bytes += key.len() + entry.len();
                    chunk.push((key.to_vec(), entry.to_vec()));
                }
                Ok(true)
            })?;
        Ok(Chunk {
            entries: chunk,
            next,
        })
    }
}

/// Settles `entries` (storage key, latest-value entry, as the pass read them) in `txn`.
///
/// An entry the transaction already holds a write of was written after the pass read it: the
/// transaction's start settled it (an entry a merge found long, `store/transaction.rs`), or an
/// earlier chunk's did, into the write buffer this one runs on. Its history then is in its
/// rows already, and settling what the pass read would append it a second time (a row that
/// merges inconsistently, read as corrupt): it is read again through the transaction.
fn settle_all(txn: &mut Txn<'_>, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
    for (key, entry) in entries {
        let user_key = key.get(PREFIX_LEN..).unwrap_or_default();
        if txn.holds_write_of(key) {
            txn.settle_key(user_key)?;
        } else {
            txn.settle_history(user_key, entry)?;
        }
    }
    Ok(())
}
