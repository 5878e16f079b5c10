//! The process's memory budget: one limit for the memory verstore allocates natively, shared by
//! every store the process holds.
//!
//! Stream processors hold many stores in one process (a Spark Python worker keeps the partition
//! stores of its last tasks open), inside containers whose memory is capped. Limits per store
//! add up to no limit, so there is one budget per process, split by what holds the memory:
//!
//! | share | what | bounded by |
//! |---|---|---|
//! | 1/16 | write buffers of every store | a store writes its buffer to RocksDB when the total is past its share |
//! | 1/16 | caches of latest values and of long history rows, every store's | a cache leaves new entries out, then forgets half of itself, when the total is past its share |
//! | 3/8 | RocksDB's block cache: data, index and filter blocks, and the memtables charged to it (up to 1/4) | RocksDB's LRU cache (`backend/rocks/budget.rs`) |
//! | 1/2 | headroom: what a write buffer's write copies (RocksDB's write batch, then its memtable: about twice the buffer), RocksDB's uncharged memory (table readers, iterators, flushes and compactions), a batch's read-ahead, results on their way to the caller, the allocator's slack | measured, not enforced |
//!
//! The headroom is half of the limit because that is what the process was measured to need
//! beside the rest (`benches/test_bench_large_state.py`): with a quarter for write buffers, a
//! process with a 256 MiB limit peaked at 615 MiB over its baseline, twice as much as with the
//! shares above.
//!
//! The shares are pools: any store may use what the others leave of one. Past a pool's share the
//! store that adds to it gives back its own (a buffer write, a cache's half); what an idle
//! store holds is given back by its holder ([`VersionedStore::release_memory`], which the
//! checkpoint's keeper calls under pressure). The limit changes at any time; the RocksDB part
//! follows at once, the pools as their stores next add to them.
//!
//! [`VersionedStore::release_memory`]: crate::VersionedStore::release_memory

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// The budget of a process that never set one.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// The smallest budget accepted: below it RocksDB's fixed costs alone would be over it.
pub const MIN_MEMORY_LIMIT: usize = 16 << 20;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MEMORY_LIMIT);

/// The write buffers of every store.
pub(crate) static BUFFERS: Pool = Pool::new(16);
/// The caches of latest values and long history rows of every store.
pub(crate) static CACHES: Pool = Pool::new(16);

/// The process's memory limit in bytes.
#[must_use]
pub fn memory_limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Sets the process's memory limit (the RocksDB part is applied by the backend's budget).
pub(crate) fn set_limit(bytes: usize) -> Result<()> {
    if bytes < MIN_MEMORY_LIMIT {
        return Err(Error::invalid(
            "memory_limit_mb",
            format!(
                "memory_limit_mb must be at least {}, got {}",
                MIN_MEMORY_LIMIT >> 20,
                bytes >> 20
            ),
        ));
    }
    LIMIT.store(bytes, Ordering::Relaxed);
    Ok(())
}

/// The part of the limit for RocksDB's block cache, memtables included.
pub(crate) fn rocksdb_share(limit: usize) -> usize {
    limit / 8 * 3
}

/// The part of RocksDB's share that memtables may take before the store being written flushes.
///
/// A quarter: a store's memtable (half of it) then holds 32 MiB at the default budget. Each
/// flush makes one level-0 file that covers the whole key range of random keys, and each
/// compaction of level 0 rewrites the base level it overlaps, so the memtable's size sets how
/// often a bulk load rewrites the base level: at 4 million keys × 4 versions, 16 MiB memtables
/// (an eighth) made compactions write 3.7 GB and slowed writes 30% of the load's time, 32 MiB
/// 2.6 GB (BENCHMARKS.md, "Large state"); at 8 MiB the reads after such a burst were 1.3 times
/// as slow. Memtables are charged to the block cache, so this moves no bound of the budget.
pub(crate) fn memtable_share(limit: usize) -> usize {
    limit / 4
}

/// Bytes held by one kind of memory of every store, against its share of the limit.
pub(crate) struct Pool {
    used: AtomicUsize,
    /// The pool's share of the limit: `limit / divisor`.
    divisor: usize,
}

impl Pool {
    const fn new(divisor: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            divisor,
        }
    }

    /// The pool's share of the current limit.
    pub(crate) fn share(&self) -> usize {
        memory_limit() / self.divisor
    }

    /// Bytes held in the pool.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the pool holds more than its share.
    pub(crate) fn is_over(&self) -> bool {
        self.used() > self.share()
    }

    /// Moves a holder's charge from `before` to `after` bytes.
    pub(crate) fn recharge(&self, before: usize, after: usize) {
        if after >= before {
            self.used.fetch_add(after - before, Ordering::Relaxed);
        } else {
            // Never below zero: a charge is only given back by the holder that made it.
            let _ = self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                    Some(used.saturating_sub(before - after))
                });
        }
    }
}

/// Gives the allocators' free memory back to the system: glibc's (RocksDB's,
/// [`return_rocksdb_free_memory`]) and the embedding program's (the hook of [`on_free_memory`]:
/// the Python extension's mimalloc). Called when a store gives back its memory (all of it, or
/// its write buffer's) and when the last store closes: the memory the budget asks back, or an
/// idle process's.
pub(crate) fn return_free_memory() {
    if let Some(hook) = FREE_MEMORY_HOOK.get() {
        hook();
    }
    return_rocksdb_free_memory();
}

/// Gives glibc's free memory back to the system.
///
/// RocksDB allocates through glibc's `malloc`, which keeps what it frees in its arenas for
/// reuse: after puts of a million keys with a 64 MiB budget it held 100-145 MiB free, and kept
/// it after the last store closed. Called after a write buffer's write, when RocksDB has just
/// freed the memtable's predecessor and the write batch. The extension's own allocator is left
/// out there: what a call freed is what the store's next call allocates again, and giving it
/// back after every write had the next calls fault it in again (BENCHMARKS.md, "Freed pages
/// kept for the next call"); it purges what stays unused past its delay at a later allocation.
pub(crate) fn return_rocksdb_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[expect(
            unsafe_code,
            reason = "malloc_trim has no safe wrapper; it takes no pointer and touches no memory of ours"
        )]
        // SAFETY: malloc_trim(3) is thread-safe (it takes each arena's lock) and only returns
        // free pages to the system.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

static FREE_MEMORY_HOOK: OnceLock<fn()> = OnceLock::new();

/// Has `hook` called wherever the store gives free memory back to the system: an allocator the
/// embedding program chose (the Python extension's) gives back its own there. Set once.
#[doc(hidden)]
pub fn on_free_memory(hook: fn()) {
    let _ = FREE_MEMORY_HOOK.set(hook);
}

/// What the budget's holders use now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryUsage {
    /// The process's limit.
    pub limit_bytes: usize,
    /// RocksDB's block cache: data, index and filter blocks and the memtables charged to it.
    pub rocksdb_bytes: usize,
    /// RocksDB's memtables (inside `rocksdb_bytes`).
    pub memtable_bytes: usize,
    /// Write buffers of every store.
    pub write_buffer_bytes: usize,
    /// Caches of latest values and long history rows of every store.
    pub cache_bytes: usize,
    /// Persistent stores open in the process.
    pub open_stores: usize,
}

impl MemoryUsage {
    /// Whether the holders together use more than the limit allows them (the headroom aside):
    /// the time to give back what idle stores hold.
    #[must_use]
    pub fn under_pressure(&self) -> bool {
        self.write_buffers_over() || self.caches_over() || self.rocksdb_over()
    }

    /// The write buffers' share of the limit, in bytes.
    #[must_use]
    pub fn write_buffer_share(&self) -> usize {
        self.limit_bytes / BUFFERS.divisor
    }

    /// Whether the write buffers of every store hold more than their share.
    #[must_use]
    pub fn write_buffers_over(&self) -> bool {
        self.write_buffer_bytes > self.write_buffer_share()
    }

    /// Whether the caches of every store hold more than their share.
    #[must_use]
    pub fn caches_over(&self) -> bool {
        self.cache_bytes > CACHES.share()
    }

    /// Whether RocksDB's block cache, memtables included, holds more than its share.
    #[must_use]
    pub fn rocksdb_over(&self) -> bool {
        self.rocksdb_bytes > rocksdb_share(self.limit_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_charged_and_given_back_by_its_holders() {
        let pool = Pool::new(4);
        pool.recharge(0, 100);
        pool.recharge(100, 40);
        assert_eq!(pool.used(), 40);
        pool.recharge(40, 0);
        assert_eq!(pool.used(), 0);
        // never below zero
        pool.recharge(10, 0);
        assert_eq!(pool.used(), 0);
        assert_eq!(pool.share(), memory_limit() / 4);
    }

    #[test]
    fn a_limit_below_the_minimum_is_refused() {
        let before = memory_limit();
        let error = set_limit(1 << 20).expect_err("too small");
        assert!(error.to_string().contains("memory_limit_mb"), "{error}");
        assert_eq!(memory_limit(), before);
    }
}
