//! Which keys a scan visits.

use crate::error::{Error, Result};

/// Which keys a scan visits. Keys are compared as unsigned bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KeyRange {
    /// Every key.
    #[default]
    All,
    /// The keys `k` with `start <= k < end`; a missing bound is open.
    Between {
        /// Lowest key (inclusive).
        start: Option<Vec<u8>>,
        /// Bound above every key (exclusive).
        end: Option<Vec<u8>>,
    },
    /// The keys that begin with these bytes (every key for an empty prefix).
    Prefix(Vec<u8>),
}

impl KeyRange {
    /// The range of the Python arguments: `prefix` or `start`/`end`, or none of them.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `prefix` when it comes with `start` or `end`, naming
    /// `end` when `end < start`.
    pub fn new(
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> Result<Self> {
        match (start, end, prefix) {
            (None, None, None) => Ok(Self::All),
            (None, None, Some(prefix)) => Ok(Self::Prefix(prefix)),
            (_, _, Some(_)) => Err(Error::invalid(
                "prefix",
                "prefix cannot be combined with start or end",
            )),
            (Some(start), Some(end), None) if end < start => Err(Error::invalid(
                "end",
                format!(
                    "end ({} bytes) must not sort before start ({} bytes)",
                    end.len(),
                    start.len()
                ),
            )),
            (start, end, None) => Ok(Self::Between { start, end }),
        }
    }

    /// User-key bounds `[lower, upper)`; `upper` is `None` when unbounded.
    pub(super) fn bounds(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            Self::All => (Vec::new(), None),
            Self::Between { start, end } => (start.clone().unwrap_or_default(), end.clone()),
            Self::Prefix(prefix) => {
                // The first key after every key with the prefix: drop trailing 0xFF bytes and
                // increment the last one left; none left means no bound.
                let mut upper = prefix.clone();
                while upper.last() == Some(&0xFF) {
                    upper.pop();
                }
                let upper = match upper.last_mut() {
                    Some(last) => {
                        *last += 1;
                        Some(upper)
                    }
                    None => None,
                };
                (prefix.clone(), upper)
            }
        }
    }
}
