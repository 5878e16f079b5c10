//! Byte layouts of everything the store writes. Each submodule draws its layout in its own doc;
//! `docs/format.md` collects them. All integers are big-endian.

pub(crate) mod key;
pub(crate) mod latest_value;
pub(crate) mod meta;
pub(crate) mod segment_value;
pub(crate) mod tuple;

/// Reads a big-endian `i64` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_i64(bytes: &[u8], offset: usize) -> Option<i64> {
    let end = offset.checked_add(8)?;
    let chunk: [u8; 8] = bytes.get(offset..end)?.try_into().ok()?;
    Some(i64::from_be_bytes(chunk))
}

/// Reads a big-endian `i32` at `offset`, or `None` when `bytes` is too short.
pub(crate) fn read_i32(bytes: &[u8], offset: usize) -> Option<i32> {
    let end = offset.checked_add(4)?;
    let chunk: [u8; 4] = bytes.get(offset..end)?.try_into().ok()?;
    Some(i32::from_be_bytes(chunk))
}
