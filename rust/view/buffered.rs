//! What a store's reads see: its write buffer, when it keeps one, over the committed state.

use super::stored::Stored;
use super::{ReadClient, is_latest_key};
use crate::backend::{Backend, RowRead, Visit, VisitIndexed, VisitRow};
use crate::error::Result;
use crate::format::merge_operands;
use crate::latest_cache::LatestCache;
use crate::overlay::{Overlay, ReadPlan, WriteBuffer};

/// Receives key `i` of a batch read as the value below and the write buffer's row appends on
/// it (`None`: the value is the answer).
pub(crate) type VisitParts<'v> = dyn FnMut(usize, Option<&[u8]>, Option<&[u8]>) -> Result<()> + 'v;

/// What a store's reads see: its write buffer (when it keeps one) over the committed state.
#[derive(Clone, Copy)]
pub(crate) struct BufferedView<'a> {
    pub(crate) stored: Stored<'a>,
    /// The write buffer's pending writes.
    pub(crate) buffer: Option<&'a Overlay>,
}

impl<'a> BufferedView<'a> {
    /// Reads of `backend` through its latest-value `cache`, under the write `buffer` if any.
    pub(crate) fn new(
        backend: &'a dyn Backend,
        cache: Option<&'a LatestCache>,
        buffer: Option<&'a WriteBuffer>,
    ) -> Self {
        Self {
            stored: Stored { backend, cache },
            buffer: buffer.map(WriteBuffer::writes),
        }
    }

    /// Calls `visit(i, value)` for every `keys[i]` (sorted): what the buffer decides, then the
    /// cache, then one `MultiGet` of the rest. Rows the buffer holds appends for are in that
    /// `MultiGet` too, their appends applied to what it returns: in a micro-batch most rows
    /// read have appends from the same batch, and a `Get` each cost more than their merge.
    pub(crate) fn multi_read(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()> {
        self.multi_read_rows(keys, &mut |i, value, appends| match appends {
            Some(appends) => {
                let merged = merge_operands(keys[i], value, std::iter::once(appends));
                visit(i, Some(&merged))
            }
            None => visit(i, value),
        })
    }

    /// [`Self::multi_read`] that hands a row with appends in the buffer over as it is, the
    /// value below and the appends apart (`visit(i, value, Some(appends))`), for a reader that
    /// reads it without merging (`segment_value::lookup_each_appended`).
    pub(crate) fn multi_read_rows(&self, keys: &[&[u8]], visit: &mut VisitParts<'_>) -> Result<()> {
        let mut misses: Vec<usize> = Vec::new();
        // Per miss: the buffer's appends to apply to the stored row.
        let mut appends: Vec<Option<&[u8]>> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.buffer.map(|b| (b, b.read_plan(key))) {
                Some((_, ReadPlan::AppendsOnStored(pending))) => {
                    misses.push(i);
                    appends.push(Some(pending));
                    continue;
                }
                Some((_, ReadPlan::Answered(Some(pending))))
                    if let Some((base, appended)) = pending.appended_row() =>
                {
                    visit(i, base, Some(appended))?;
                    continue;
                }
                Some((buffer, ReadPlan::Answered(answered))) => {
                    let visit_value = &mut |value: Option<&[u8]>| visit(i, value, None);
                    buffer.answer(key, answered, &self.stored, visit_value)?;
                    continue;
                }
                Some((_, ReadPlan::Below)) | None => {}
            }
            let cached = self
                .stored
                .cache
                .filter(|_| is_latest_key(key))
                .and_then(|c| c.with(key, |entry| visit(i, entry, None)));
            if let Some(result) = cached {
                result?;
            } else {
                misses.push(i);
                appends.push(None);
            }
        }
        let to_fetch: Vec<&[u8]> = misses.iter().map(|&i| keys[i]).collect();
        self.stored.backend.multi_get(&to_fetch, &mut |m, value| {
            if let Some(pending) = appends[m] {
                return visit(misses[m], value, Some(pending));
            }
            if let Some(cache) = self.stored.cache.filter(|_| is_latest_key(to_fetch[m])) {
                cache.insert(to_fetch[m].to_vec(), value.map(<[u8]>::to_vec));
            }
            visit(misses[m], value, None)
        })
    }
}

impl ReadClient for BufferedView<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        match self.buffer {
            Some(buffer) => buffer.read_with(key, &self.stored, visit),
            None => self.stored.read_with(key, visit),
        }
    }

    fn location(&self) -> String {
        self.stored.location()
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        match self.buffer.filter(|b| b.decides(read.key)) {
            Some(buffer) => buffer.read_with(read.key, &self.stored, &mut |bytes| {
                visit(read.lookup(bytes)?)
            }),
            None => self.stored.lookup_row(read, visit),
        }
    }
}
