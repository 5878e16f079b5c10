//! verstore: a versioned key-value state store for stream processing.
//!
//! The store keeps, per key, every version written within a history retention period, with the
//! semantics of Kafka Streams' versioned key-value stores (KIP-889 and successors): point-in-time
//! reads (`get_as_of`), multi-version queries (`versions`), put return codes that tell an
//! in-order update from an out-of-order one, and a grace period equal to the retention. See
//! [`VersionedStore`] for the entry point and `docs/format.md` for the bytes on disk.
//!
//! The core knows no Python: the pyo3 glue lives in `python/` behind the `python` feature.

mod asof;
mod backend;
mod bounded;
mod changelog;
mod config;
mod error;
mod format;
mod latest_cache;
mod memory;
mod order;
mod overlay;
mod put;
mod read;
mod record;
mod scan;
mod segments;
mod spool;
mod state;
mod stats;
mod store;
mod ttl;
mod txn;
mod view;

#[cfg(feature = "python")]
mod python;

pub use asof::{
    Compacted, KernelError, MatchRule, Matches, UpdateColumns, apply_updates, compact_updates,
    lookup_stream_rows,
};
#[doc(hidden)]
pub use backend::rocks::RocksOptions;
pub use backend::rocks::budget::{memory_usage, set_memory_limit};
pub use changelog::{read_changelog, read_changelog_header, verify_changelog};
pub use config::{StoreConfig, default_segment_interval_ms};
pub use error::{Error, Result};
pub use format::changelog::{AttemptId, ChangelogHeader, HEADER_LEN as CHANGELOG_HEADER_LEN};
pub use format::tuple::{TUPLE_ENCODING, TupleCodec, UnsupportedType};
pub use memory::{
    DEFAULT_MEMORY_LIMIT, MIN_MEMORY_LIMIT, MemoryUsage, memory_limit, on_free_memory,
};
pub use order::byte_order;
pub use overlay::SavedBuffer;
pub use read::columns::RecordColumns;
pub use read::{AsOf, ResultOrder};
pub use record::{NOT_PUT, PutOutcome, VALID_TO_UNDEFINED, VersionedRecord};
pub use scan::batches::{BATCH_BYTES, schema as scan_schema};
pub use scan::key_range::KeyRange;
pub use scan::{Scan, ScanVersions};
pub use stats::StoreStats;
pub use store::{MAX_VALUE_LEN, VersionedStore};
pub use ttl::LatestTtl;
