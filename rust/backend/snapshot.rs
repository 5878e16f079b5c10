//! What a scan reads: a backend's data frozen at one point ([`ScanSource`]), read through one
//! [`Cursor`] per segment range. Storage defines these and implements them for RocksDB and the
//! in-memory maps; the scan machinery above (`crate::scan`) is the [`SnapshotReader`] that a
//! source hands its cursors to.
//!
//! A RocksDB snapshot and its iterators borrow the database, so the source runs the reader on
//! its own stack rather than returning cursors: the reader gets a function that opens them.

use crate::error::Result;
use crate::format::key::{next_prefix, segment_prefix};

/// The storage keys of one segment that a scan reads: `[lower, upper)`, `upper` `None` for the
/// end of the keyspace.
pub(crate) struct SegmentRange {
    pub(crate) segment: i64,
    pub(crate) lower: Vec<u8>,
    pub(crate) upper: Option<Vec<u8>>,
}

impl SegmentRange {
    /// The storage keys of `segment` whose user keys lie in `[lower, upper)` (`upper` `None`:
    /// no bound).
    pub(crate) fn new(segment: i64, lower: &[u8], upper: Option<&[u8]>) -> Self {
        let prefix = segment_prefix(segment);
        let with_prefix = |key: &[u8]| [&prefix[..], key].concat();
        let upper = match upper {
            Some(upper) => Some(with_prefix(upper)),
            // The next segment's prefix, or the end of the keyspace after the last one.
            None => next_prefix(segment).map(|next| next.to_vec()),
        };
        Self {
            segment,
            lower: with_prefix(lower),
            upper,
        }
    }

    /// Whether the storage key `key` is in the range.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        key >= self.lower.as_slice() && self.upper.as_deref().is_none_or(|upper| key < upper)
    }
}

/// One segment's storage keys within a scan's range, ascending, with their values.
pub(crate) trait Cursor {
    /// The storage key the cursor stands on; `None` past the last one.
    fn key(&self) -> Option<&[u8]>;
    /// Its value.
    fn value(&self) -> Option<&[u8]>;
    /// Moves to the next key.
    fn advance(&mut self) -> Result<()>;
}

/// Opens a cursor of the snapshot (which lives for `'s`) over one segment range.
pub(crate) type OpenCursor<'s> = dyn FnMut(SegmentRange) -> Result<Box<dyn Cursor + 's>> + 's;

/// What reads a snapshot, on the thread the source runs on.
pub(crate) trait SnapshotReader: Send {
    /// The snapshot is taken: writes from now on are not in it.
    fn started(&self);
    /// Reads the snapshot through cursors that `open` makes.
    fn read(self: Box<Self>, open: &mut OpenCursor<'_>);
}

/// A backend's data frozen for a scan, moved to the scan's producer thread.
pub(crate) trait ScanSource: Send {
    /// Takes the snapshot, tells `reader` ([`SnapshotReader::started`]), then lets it read
    /// ([`SnapshotReader::read`]).
    fn run(self: Box<Self>, reader: Box<dyn SnapshotReader>);
}
