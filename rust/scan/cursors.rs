//! A scan's cursors as a [`ReadClient`].

use crate::backend::Visit;
use crate::backend::snapshot::Cursor;
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, PREFIX_LEN, segment_of};
use crate::view::ReadClient;

/// The cursors of a scan: the latest-value store's and those of history segments, newest first.
/// As a [`ReadClient`] it answers a read of a storage key from the cursor of its segment when
/// that cursor stands on it, so the point-read algorithms run unchanged.
pub(super) struct Cursors<'l, 's> {
    pub(super) latest: Box<dyn Cursor + 's>,
    pub(super) rows: Vec<(i64, Box<dyn Cursor + 's>)>,
    pub(super) location: &'l str,
}

impl Cursors<'_, '_> {
    fn all(&self) -> impl Iterator<Item = &dyn Cursor> {
        std::iter::once(self.latest.as_ref()).chain(self.rows.iter().map(|(_, c)| c.as_ref()))
    }

    /// The smallest user key any cursor stands on.
    pub(super) fn smallest(&self) -> Option<&[u8]> {
        self.all()
            .filter_map(|c| c.key().and_then(|k| k.get(PREFIX_LEN..)))
            .min()
    }

    /// The latest-value entry of `key` (the user key), if the latest cursor stands on it.
    pub(super) fn latest_value(&self, key: &[u8]) -> Option<&[u8]> {
        let here = self.latest.key()?.get(PREFIX_LEN..)?;
        (here == key).then(|| self.latest.value()).flatten()
    }

    /// Moves every cursor standing on `key` (the user key) to its next key.
    pub(super) fn advance_past(&mut self, key: &[u8]) -> Result<()> {
        let cursors = std::iter::once(&mut self.latest).chain(self.rows.iter_mut().map(|(_, c)| c));
        for cursor in cursors {
            if cursor.key().and_then(|k| k.get(PREFIX_LEN..)) == Some(key) {
                cursor.advance()?;
            }
        }
        Ok(())
    }
}

impl ReadClient for Cursors<'_, '_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let cursor = match segment_of(key) {
            Some(LATEST_SEGMENT) => Some(&self.latest),
            Some(segment) => self
                .rows
                .iter()
                .find_map(|(s, c)| (*s == segment).then_some(c)),
            None => None,
        };
        match cursor {
            Some(cursor) if cursor.key() == Some(key) => visit(cursor.value()),
            // Segments the scan does not read hold nothing the read can use (`segments`).
            _ => visit(None),
        }
    }

    fn location(&self) -> String {
        self.location.to_owned()
    }
}
