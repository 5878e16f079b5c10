//! What reads return and what writes report.

/// One version of a key's value: the value bytes, its valid-from timestamp and its valid-to
/// (`None` for the key's newest version). Tombstones are never returned by reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionedRecord {
    /// The value bytes (possibly empty; an empty value is not a tombstone).
    pub value: Vec<u8>,
    /// Valid-from, in milliseconds.
    pub timestamp: i64,
    /// Valid-to (exclusive), or `None` when this is the newest version.
    pub valid_to: Option<i64>,
}

/// Kafka's put return code for "the new version is the latest one".
pub const VALID_TO_UNDEFINED: i64 = -1;
/// Kafka's put return code for "rejected: older than the grace period".
pub const NOT_PUT: i64 = i64::MIN;

/// The outcome of a put (or of the tombstone write of a delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The version was stored; `valid_to` is `None` when it became the newest version.
    Stored {
        /// The stored version's valid-to.
        valid_to: Option<i64>,
    },
    /// The write was older than the grace period and was dropped; nothing changed.
    Expired,
}

impl PutOutcome {
    /// Kafka's `long` return code: the valid-to, [`VALID_TO_UNDEFINED`] or [`NOT_PUT`].
    #[must_use]
    pub fn code(self) -> i64 {
        match self {
            Self::Stored { valid_to: Some(t) } => t,
            Self::Stored { valid_to: None } => VALID_TO_UNDEFINED,
            Self::Expired => NOT_PUT,
        }
    }
}
