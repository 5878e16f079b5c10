//! Committed state: what the backend holds, latest values through their cache.

use super::{ReadClient, is_latest_key};
use crate::backend::{Backend, RowRead, Visit, VisitRow};
use crate::error::Result;
use crate::latest_cache::LatestCache;

/// Committed state: the backend, with latest-value entries through the cache when there is one.
#[derive(Clone, Copy)]
pub(crate) struct Stored<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) cache: Option<&'a LatestCache>,
}

impl ReadClient for Stored<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let Some(cache) = self.cache.filter(|_| is_latest_key(key)) else {
            return self.backend.get_with(key, visit);
        };
        if let Some(result) = cache.with(key, &mut *visit) {
            return result;
        }
        self.backend.get_with(key, &mut |entry| {
            cache.insert(key.to_vec(), entry.map(<[u8]>::to_vec));
            visit(entry)
        })
    }

    fn location(&self) -> String {
        self.backend.location()
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        self.backend.lookup_row(read, visit)
    }
}
