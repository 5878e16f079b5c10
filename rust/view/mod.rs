//! What a read sees: storage keys read through layers of state, each a [`ReadClient`]. The
//! committed state ([`stored::Stored`]: the backend, latest values through their cache), a
//! store's write buffer over it ([`buffered::BufferedView`]), and, for the put algorithm, a
//! transaction's own writes over that (`crate::txn`). The read algorithms (`crate::read`) run
//! unchanged against any of them, and against a scan's cursors.

use crate::backend::{Backend, RowRead, Visit, VisitRow};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, segment_of};

pub(crate) mod buffered;
pub(crate) mod stored;

/// Reads of storage keys, by the read algorithms: `visit` gets the bytes, borrowed.
pub(crate) trait ReadClient {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()>;
    fn location(&self) -> String;

    /// Calls `visit` with what the history row under `key` says about time `t` (`None`: no
    /// row). Rows nothing pending decides for may come from the backend's row cache.
    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        self.read_with(read.key, &mut |bytes| visit(read.lookup(bytes)?))
    }
}

impl ReadClient for dyn Backend + '_ {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        self.get_with(key, visit)
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        Backend::lookup_row(self, read, visit)
    }

    fn location(&self) -> String {
        Backend::location(self)
    }
}

pub(crate) fn is_latest_key(key: &[u8]) -> bool {
    segment_of(key) == Some(LATEST_SEGMENT)
}

/// Reads `key` through `client` and maps the borrowed bytes with `f`.
pub(crate) fn read_map<T>(
    client: &(impl ReadClient + ?Sized),
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Result<T>,
) -> Result<T> {
    let mut f = Some(f);
    let mut out = None;
    client.read_with(key, &mut |value| {
        if let Some(f) = f.take() {
            out = Some(f(value)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| Error::corrupt(client.location(), "a read returned no value"))
}
