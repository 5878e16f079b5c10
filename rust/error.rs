//! The one error type of the core.
//!
//! Every fallible call returns [`Result`]. Variants carry structured fields so that callers (the
//! Python glue above all) can map them to their own hierarchy without parsing messages. Messages
//! are lowercase, name the store path, segment or timestamp involved, and never print value bytes.

use std::path::PathBuf;

/// Errors raised by the versioned store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is out of range; `argument` names it as the caller spelled it.
    #[error("{message}")]
    InvalidArgument {
        /// The argument's name, e.g. `timestamp` or `history_retention_ms`.
        argument: &'static str,
        /// The whole message, naming the argument, e.g. `timestamp must be >= 0, got -1`.
        message: String,
    },
    /// The store was closed; no call is possible any more.
    #[error("the store is closed")]
    Closed,
    /// Another store object or process holds the store directory.
    #[error("store at {path} is already open in another store object or process")]
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// The store on disk was created with another configuration.
    #[error(
        "store at {path} was created with {setting}={}, cannot reopen it with {setting}={}{}",
        setting_value(*.stored),
        setting_value(*.requested),
        setting_rule(setting)
    )]
    IncompatibleConfig {
        /// The store directory.
        path: PathBuf,
        /// The setting that differs.
        setting: &'static str,
        /// The value recorded in the store (`None`: not set).
        stored: Option<i64>,
        /// The value asked for at open (`None`: not set).
        requested: Option<i64>,
    },
    /// The store on disk uses a format version this build cannot read.
    #[error(
        "store at {path} has format version {found}, this build reads versions {oldest} to {supported}"
    )]
    IncompatibleFormat {
        /// The store directory.
        path: PathBuf,
        /// The stored format version.
        found: u32,
        /// The oldest version this build reads (and upgrades on open).
        oldest: u32,
        /// The version this build writes.
        supported: u32,
    },
    /// Stored bytes do not decode, or RocksDB found its files damaged (a checksum or size
    /// mismatch, a missing file); `location` names the file, key or segment.
    #[error("corrupt data in {location}: {detail}")]
    Corrupt {
        /// Where the bad bytes are (store path, segment and key length, file name).
        location: String,
        /// What check failed.
        detail: String,
    },
    /// RocksDB reported an error.
    #[error("storage error at {path}: {source}")]
    Storage {
        /// The store directory.
        path: PathBuf,
        /// The underlying RocksDB error.
        #[source]
        source: rocksdb::Error,
    },
    /// A write to storage failed after the store had accepted writes it was holding (the write
    /// buffer of a store without a write-ahead log): those writes are lost from this store
    /// object, so it refuses every call until it is reopened from what storage holds.
    #[error(
        "store at {path} has failed and must be reopened: a write to storage failed ({cause}), \
         losing the writes it held since its last successful write to storage"
    )]
    Failed {
        /// The store directory.
        path: PathBuf,
        /// The error of the write that failed.
        cause: String,
    },
    /// A filesystem call failed.
    #[error("i/o error at {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The core's result alias.
/// A setting's value in a message: the number, or `none`.
fn setting_value(value: Option<i64>) -> String {
    value.map_or_else(|| "none".to_owned(), |value| value.to_string())
}

/// What a message adds about which changes a setting allows.
fn setting_rule(setting: &str) -> &'static str {
    if setting == "latest_ttl_ms" {
        " (a TTL may be added or lowered, never raised or removed: the entries it dropped \
         cannot come back; docs/semantics.md §2.15)"
    } else {
        ""
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid(argument: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            argument,
            message: message.into(),
        }
    }

    /// Makes an i/o failure on `path` an [`Error::Io`] (for `map_err`).
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn corrupt(location: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::Corrupt {
            location: location.into(),
            detail: detail.into(),
        }
    }
}
