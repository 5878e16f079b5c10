//! Byte strings held in place when short: storage keys and the write buffer's values.

/// Bytes held in place.
pub(crate) const INLINE: usize = 30;

/// Bytes held in place when short (up to 30), else on the heap: storage keys
/// ([`super::key::StorageKey`]) and the values a write buffer holds. Short ones cost no
/// allocation, and reading them reads the map entry that holds them instead of following a
/// pointer to another cache line. Not `smallvec`'s `SmallVec<[u8; 30]>`: 40 bytes against these
/// 32, and its puts measured slower (the in-memory one-partition profile's `put_batch`, 89-98 ms
/// a task against 75-86, as storage keys).
#[derive(Clone)]
pub(crate) enum ShortBytes {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl ShortBytes {
    /// The concatenation of `head` and `tail`.
    pub(crate) fn from_parts(head: &[u8], tail: &[u8]) -> Self {
        let len = head.len() + tail.len();
        match u8::try_from(len) {
            Ok(short) if len <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..head.len()].copy_from_slice(head);
                bytes[head.len()..len].copy_from_slice(tail);
                Self::Inline { len: short, bytes }
            }
            _ => Self::Heap([head, tail].concat().into_boxed_slice()),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(bytes) => bytes,
        }
    }

    /// The bytes as a `Vec` (no copy of bytes on the heap).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Self::Inline { .. } => self.as_slice().to_vec(),
            Self::Heap(bytes) => bytes.into_vec(),
        }
    }
}

impl From<&[u8]> for ShortBytes {
    fn from(bytes: &[u8]) -> Self {
        Self::from_parts(bytes, &[])
    }
}

impl From<Vec<u8>> for ShortBytes {
    fn from(bytes: Vec<u8>) -> Self {
        if bytes.len() <= INLINE {
            Self::from(bytes.as_slice())
        } else {
            Self::Heap(bytes.into_boxed_slice())
        }
    }
}

impl std::ops::Deref for ShortBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ShortBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Hashes and compares as its bytes, so that maps keyed by it are searched with a `&[u8]`.
impl std::borrow::Borrow<[u8]> for ShortBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::hash::Hash for ShortBytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for ShortBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for ShortBytes {}

impl PartialOrd for ShortBytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShortBytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl std::fmt::Debug for ShortBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}
