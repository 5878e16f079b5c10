//! The pyo3 glue: argument conversion, GIL release and error mapping around the core API. Every
//! decision about what a call does is the core's (and reachable by a Rust test); what is left here
//! is how Python values become arguments and results.
#![expect(
    clippy::needless_pass_by_value,
    reason = "pyo3 hands extracted arguments over by value"
)]

use pyo3::prelude::*;

/// The extension's allocations (rows, keys and values staged per write) go to mimalloc: glibc's
/// malloc spent a fifth of a batch write in its own bookkeeping. Python's and RocksDB's own
/// allocations are not affected.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod arrow;
mod asof;
mod changelog;
mod columns;
mod errors;
mod handle;
mod history;
mod memory;
mod record;
mod scan;
mod store;
mod times;

/// Gives mimalloc's free memory back to the system: it keeps freed pages for reuse, and the
/// process's memory budget (`crate::memory`) counts what it keeps. A forced collection purges
/// at once what mimalloc would purge after its delay, a delay that ends only at a later call
/// into the allocator (an idle process kept 85-134 MiB after its last store closed). A delay of
/// 0 throughout would do the same but made the in-memory store's batch puts and reads 25-30%
/// slower (pages given back at every free, faulted in again at the next allocation).
fn give_back_memory() {
    #[expect(
        unsafe_code,
        reason = "mi_collect has no safe wrapper; it takes no pointer"
    )]
    // SAFETY: mi_collect only returns this thread's and abandoned free pages to the system.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

/// mimalloc's `mi_option_purge_delay` (mimalloc.h; the sys crate names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps freed pages before it purges them, in ms (mimalloc 3's default:
/// 1 000). A Spark worker's store frees a call's vectors and allocates them again at its next
/// call, often more than a second later: purged in between, they were faulted in again (with
/// no forced collection after a buffer's write, about a tenth of a batch read's CPU on top of
/// the huge pages' fifth; BENCHMARKS.md, "Freed pages kept for the next call"). What stays
/// unused longer is purged at a later allocation; the budget's and the last close's forced
/// collection (`give_back_memory`) go on giving back at once. `MIMALLOC_PURGE_DELAY` (or its
/// old name) in the environment wins: mimalloc's own setting for those who tune it.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

fn keep_freed_pages_for_reuse() {
    if ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some())
    {
        return;
    }
    #[expect(
        unsafe_code,
        reason = "mi_option_set has no safe wrapper; it takes no pointer"
    )]
    // SAFETY: mi_option_set stores an option's value; mimalloc reads the purge delay afresh
    // each time it schedules a purge, so changing it after mimalloc started is supported.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    keep_freed_pages_for_reuse();
    crate::on_free_memory(give_back_memory);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("VALID_TO_UNDEFINED", crate::VALID_TO_UNDEFINED)?;
    m.add("NOT_PUT", crate::NOT_PUT)?;
    m.add("DEFAULT_MEMORY_LIMIT_MB", crate::DEFAULT_MEMORY_LIMIT >> 20)?;
    m.add("TUPLE_ENCODING", crate::TUPLE_ENCODING)?;
    m.add_class::<store::PyVersionedStore>()?;
    m.add_class::<record::PyVersionedRecord>()?;
    m.add_class::<history::PyGroupHistory>()?;
    m.add_class::<scan::PyScan>()?;
    m.add_class::<scan::PyStoreStats>()?;
    m.add_class::<memory::PyMemoryUsage>()?;
    m.add_function(wrap_pyfunction!(memory::set_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(memory::memory_usage, m)?)?;
    m.add_function(wrap_pyfunction!(columns::encode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(columns::decode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(columns::sort_indices, m)?)?;
    m.add_function(wrap_pyfunction!(asof::asof_compact, m)?)?;
    m.add_function(wrap_pyfunction!(asof::asof_apply, m)?)?;
    m.add_function(wrap_pyfunction!(asof::asof_lookup, m)?)?;
    m.add_function(wrap_pyfunction!(default_segment_interval_ms, m)?)?;
    m.add_function(wrap_pyfunction!(_fail_storage_writes, m)?)?;
    changelog::register(m)?;
    errors::register(m)
}

/// Kafka's default segment interval for a history retention.
#[pyfunction]
fn default_segment_interval_ms(history_retention_ms: i64) -> PyResult<i64> {
    crate::StoreConfig::new(history_retention_ms, None)
        .map(|c| c.segment_interval_ms())
        .map_err(errors::to_py)
}

/// Test hook: after `after` more storage writes (under `under`), every later one fails.
///
/// Internal (the leading underscore; not in the Rust crate's public API). The shipped extension
/// carries it because the writes it fails are RocksDB's, inside this extension, made by stores
/// that the checkpoint protocol and Spark's Python workers open deep inside their own steps: a
/// test reaches them through this process-wide switch only, and a test build with the hook
/// would test another binary than the one shipped. Unset, a write pays one relaxed atomic load
/// (`backend/faults.rs`).
#[pyfunction]
#[pyo3(signature = (after, under = None))]
fn _fail_storage_writes(after: Option<u64>, under: Option<std::path::PathBuf>) {
    crate::backend::faults::fail_storage_writes(after, under.as_deref());
}
