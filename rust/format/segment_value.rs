//! Segment rows: all versions of one key whose valid-to falls in one segment, in one value.
//!
//! ```text
//! offset          size   field
//! 0               8      next_timestamp  i64 BE  valid-to of the newest version in the row
//! 8               8      min_timestamp   i64 BE  valid-from of the oldest version in the row
//! 16 + 12·i       8      timestamp_i     i64 BE  valid-from of version i (i = 0 is the newest)
//! 24 + 12·i       4      value_size_i    i32 BE  -1 = tombstone, 0 = empty value, else length
//! 16 + 12·n       Σ      values, OLDEST first, concatenated (the newest value ends the row)
//! ```
//!
//! `n` is not stored: a reader walks the index until an entry's timestamp equals
//! `min_timestamp`. Timestamps strictly decrease along the index. Version `i`'s valid-to is
//! `timestamp_{i-1}`, or `next_timestamp` for `i = 0`.
//!
//! A *degenerate* row is a single tombstone whose timestamp equals both `min_timestamp` and
//! `next_timestamp`. It exists only so that a tombstone with nothing newer can bound later
//! out-of-order writes; it becomes a normal row as soon as a version is inserted into it, the
//! tombstone becoming implicit as that row's `next_timestamp`.
//!
//! Example: `x@3`, tombstone`@5`, `yz@7`, next version at 9 →
//! `[9][3] [7,2] [5,-1] [3,1] "x" "yz"`.
//!
//! This is Kafka's `RocksDBVersionedStoreSegmentValueFormatter` layout, byte for byte. Decoding
//! validates every offset and invariant and reports [`Error::Corrupt`] instead of panicking.
//!
//! A row can also grow by *appends* (format version 2), RocksDB merge operands that add a newest
//! version without reading the row; operands concatenate:
//!
//! ```text
//! offset   size   field
//! 0        8      timestamp    i64 BE  valid-from of the appended version
//! 8        8      valid_to     i64 BE  the row's next_timestamp afterwards
//! 16       4      value_size   i32 BE  -1 = tombstone, else n
//! 20       n      value                (then the next append at 20 + n)
//! ```
//!
//! [`merge_appends`] applies them with [`SegmentRow::append_newest`]'s rule by copying the base's
//! index and values around the new entries (the newest index entries come first and the newest
//! values last, so the base moves in two pieces). It never fails: an inconsistent merge yields
//! a poisoned row that no read decodes. [`lookup`] answers an as-of read from the encoded row
//! without allocating.
//!
//! By role: `validate` checks a row's bytes, `accessor` reads versions out of them, `builder`
//! is the decoded [`SegmentRow`] that a put changes and encodes, `appends` the format-2 appends.
//!
//! [`Error::Corrupt`]: crate::error::Error::Corrupt

mod accessor;
mod appends;
mod builder;
#[cfg(test)]
mod tests;
mod validate;

pub(crate) use accessor::{Lookup, lookup};
pub(crate) use appends::{decode_append, encode_append, lookup_each_appended, merge_appends};
pub(crate) use builder::SegmentRow;

const HEADER_LEN: usize = 16;
const INDEX_ENTRY_LEN: usize = 12;
const TOMBSTONE_SIZE: i32 = -1;

/// One version inside a row: its valid-from and its value (`None` = tombstone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) timestamp: i64,
    pub(crate) value: Option<&'a [u8]>,
}
