//! RocksDB's part of the process's memory budget (`crate::memory`): one block cache for every
//! store of the process, which holds index and filter blocks as well as data blocks and which
//! memtables are charged to (a `WriteBufferManager` over the cache, as Spark's
//! `boundedMemoryUsage` does). Both are sized from the limit and follow it when it changes.
//!
//! While no store is open the cache is emptied: the memory of blocks no one will read again
//! goes back to the process (a closed store's blocks stay in an LRU cache otherwise, at its
//! full size, for the life of the process).

use std::sync::{Mutex, MutexGuard, PoisonError};

use rocksdb::{Cache, WriteBufferManager};

use crate::error::Result;
use crate::memory::{self, MemoryUsage};

/// The cache and the write buffer manager every store shares, and how many stores use them.
struct Shared {
    cache: Cache,
    memtables: WriteBufferManager,
    open_stores: usize,
}

static SHARED: Mutex<Option<Shared>> = Mutex::new(None);

fn shared() -> MutexGuard<'static, Option<Shared>> {
    // Nothing a panic could leave half-done is kept under the lock.
    SHARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A store's hold on the shared cache: taken when it opens, given back when it is dropped.
pub(crate) struct Hold {
    pub(crate) cache: Cache,
    pub(crate) memtables: WriteBufferManager,
}

impl Hold {
    /// Takes a hold, creating the cache at the first open and refilling an emptied one.
    pub(crate) fn take() -> Self {
        let limit = memory::memory_limit();
        let mut guard = shared();
        let shared = guard.get_or_insert_with(|| {
            let cache = Cache::new_lru_cache(memory::rocksdb_share(limit));
            let memtables = WriteBufferManager::new_write_buffer_manager_with_cache(
                memory::memtable_share(limit),
                false,
                cache.clone(),
            );
            Shared {
                cache,
                memtables,
                open_stores: 0,
            }
        });
        if shared.open_stores == 0 {
            shared.cache.set_capacity(memory::rocksdb_share(limit));
        }
        shared.open_stores += 1;
        Self {
            cache: shared.cache.clone(),
            memtables: shared.memtables.clone(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut guard = shared();
        if let Some(shared) = guard.as_mut() {
            shared.open_stores = shared.open_stores.saturating_sub(1);
            if shared.open_stores == 0 {
                shared.cache.set_capacity(0);
                memory::return_free_memory();
            }
        }
    }
}

/// The block cache's bytes per open store (the whole cache while none is open).
pub(crate) fn cache_share_per_store() -> usize {
    let open = shared().as_ref().map_or(0, |shared| shared.open_stores);
    memory::rocksdb_share(memory::memory_limit()) / open.max(1)
}

/// Sets the process's memory limit; the shared cache and memtable bound follow at once.
///
/// # Errors
/// [`crate::Error::InvalidArgument`] for a limit below [`memory::MIN_MEMORY_LIMIT`].
pub fn set_memory_limit(bytes: usize) -> Result<()> {
    let mut guard = shared();
    memory::set_limit(bytes)?;
    if let Some(shared) = guard.as_mut() {
        if shared.open_stores > 0 {
            shared.cache.set_capacity(memory::rocksdb_share(bytes));
        }
        shared
            .memtables
            .set_buffer_size(memory::memtable_share(bytes));
    }
    Ok(())
}

/// The size of one store's memtable: half of what memtables may take in all (so that one
/// store's full memtable and the one it flushes fit), within RocksDB's sensible range.
pub(crate) fn memtable_bytes() -> usize {
    (memory::memtable_share(memory::memory_limit()) / 2).clamp(1 << 20, 64 << 20)
}

/// What the budget's holders use now.
#[must_use]
pub fn memory_usage() -> MemoryUsage {
    let guard = shared();
    let (rocksdb_bytes, memtable_bytes, open_stores) = guard.as_ref().map_or((0, 0, 0), |shared| {
        (
            shared.cache.get_usage(),
            shared.memtables.get_usage(),
            shared.open_stores,
        )
    });
    MemoryUsage {
        limit_bytes: memory::memory_limit(),
        rocksdb_bytes,
        memtable_bytes,
        write_buffer_bytes: memory::BUFFERS.used(),
        cache_bytes: memory::CACHES.used(),
        open_stores,
    }
}
