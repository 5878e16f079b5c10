//! Byte layouts of everything the store writes. Each submodule draws its layout in its own doc;
//! `docs/format.md` collects them. All integers are big-endian.

pub(crate) mod changelog;
pub(crate) mod history;
pub(crate) mod key;
pub(crate) mod latest_value;
pub(crate) mod meta;
pub(crate) mod segment_value;
pub(crate) mod short_bytes;
pub(crate) mod tuple;

/// The `N` bytes at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_array<const N: usize>(bytes: &[u8], offset: usize) -> Option<[u8; N]> {
    let end = offset.checked_add(N)?;
    bytes.get(offset..end)?.try_into().ok()
}

/// Reads a big-endian `i64` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_i64(bytes: &[u8], offset: usize) -> Option<i64> {
    read_array(bytes, offset).map(i64::from_be_bytes)
}

/// Reads a big-endian `u64` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    read_array(bytes, offset).map(u64::from_be_bytes)
}

/// Reads a big-endian `i32` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_i32(bytes: &[u8], offset: usize) -> Option<i32> {
    read_array(bytes, offset).map(i32::from_be_bytes)
}

/// Reads a big-endian `u32` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    read_array(bytes, offset).map(u32::from_be_bytes)
}

/// What `operands` (merge operands, in write order) make of `base` under the storage key `key`:
/// pushes onto a latest-value entry (`latest_value::merge`), row appends onto a history row
/// (`segment_value::merge_appends`). Never fails: inputs that do not fit give a value every read
/// reports as corrupt.
pub(crate) fn merge_operands<'o>(
    key: &[u8],
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]> + Clone,
) -> Vec<u8> {
    if key::segment_of(key) == Some(key::LATEST_SEGMENT) {
        latest_value::merge(base, operands).bytes
    } else {
        segment_value::merge_appends(base, operands)
    }
}
