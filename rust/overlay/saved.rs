//! A write buffer's pending writes as a file: how a store handed from one process to another
//! takes its write buffer along instead of writing it into RocksDB (docs/checkpoint.md,
//! "Stores kept open").
//!
//! Writing a buffer of a few micro-batches into RocksDB and flushing the memtables costs a
//! handoff about ten times what writing the same entries out as they are does, and the next
//! process would then read them back from a new level-0 file. The file holds only the
//! pending writes; the segments dropped and the metadata are written to RocksDB before it
//! (`VersionedStore::close_keeping_buffer`), so the store on disk plus the file is the store.
//!
//! ```text
//! "VSWB" 1u8                                       magic and format version
//! per entry: u32 key length, key,
//!            u8 base (1 stored, 2 put, 3 deleted, 4 absent), [u32 length, value when put],
//!            u32 appends length, appends
//! u64 entry count, u32 crc32 of every byte before it   (integers big-endian)
//! ```
//!
//! The file is as hostile as any other: its size and checksum must be the ones recorded when
//! it was written, and every length is checked before it is used.

use std::io::{Read, Write};
use std::path::Path;

use super::WriteBuffer;
use super::pending::{Base, Pending, PendingMap};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, StorageKey, segment_of};
use crate::format::latest_value;
use crate::format::short_bytes::ShortBytes;
use crate::format::{read_i64, read_u32, read_u64};

const MAGIC: &[u8; 5] = b"VSWB\x01";
const TRAILER: usize = 8 + 4;

/// What identifies a saved write buffer: its size and checksum, recorded beside its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedBuffer {
    /// The file's size in bytes.
    pub bytes: u64,
    /// The CRC-32 of the file's bytes before the checksum itself.
    pub crc32: u32,
}

impl WriteBuffer {
    /// Whether every pending write could leave with a saved file: true unless a transaction
    /// runs on the buffer.
    pub(crate) fn can_save(&self) -> bool {
        self.writes.journal.is_none()
    }

    /// The pending writes of latest values, as `(storage key, the new value's timestamp)`
    /// (`None`: the key's latest value is removed). Latest values are written whole.
    pub(crate) fn pending_latest(&self) -> impl Iterator<Item = (&[u8], Option<i64>)> + '_ {
        self.writes.pending.iter().filter_map(|(key, pending)| {
            if segment_of(key) != Some(LATEST_SEGMENT) {
                return None;
            }
            match &pending.base {
                Base::Put(value) => Some((&key[..], read_i64(value, 0))),
                Base::Deleted => Some((&key[..], None)),
                Base::Stored | Base::Absent => None,
            }
        })
    }

    /// Takes the pending writes out, leaving the segments dropped and the metadata to write
    /// (the stream time and key count, and metadata entries such as the format version that
    /// the first read-free put writes).
    pub(crate) fn take_pending(&mut self) -> PendingWrites {
        let mut pending = std::mem::take(&mut self.writes.pending);
        let metadata: Vec<_> = pending
            .extract_if(|key, _| segment_of(key) == Some(META_SEGMENT))
            .collect();
        for (key, entry) in metadata {
            self.writes.pending.insert(key, entry);
        }
        self.writes.bytes = self.writes.pending.iter().map(|(k, p)| p.bytes(k)).sum();
        PendingWrites(pending)
    }

    /// Puts saved pending writes back into the buffer they were taken from.
    pub(crate) fn restore_pending(&mut self, writes: PendingWrites) {
        let mut writes = writes.0;
        if self.writes.pending.is_empty() {
            self.writes.pending = writes;
        } else {
            for (key, entry) in writes.drain() {
                self.writes.pending.insert(key, entry);
            }
        }
        self.writes.bytes = self.writes.pending.iter().map(|(k, p)| p.bytes(k)).sum();
    }

    /// The history segments the pending writes store a row in.
    pub(crate) fn pending_segments(&self) -> impl Iterator<Item = i64> + '_ {
        self.writes.pending.iter().filter_map(|(key, pending)| {
            let stores = matches!(pending.base, Base::Put(_)) || !pending.appends.is_empty();
            segment_of(key).filter(|&s| stores && s >= 0)
        })
    }
}

/// Pending writes taken out of an overlay, to save, or read back from a file.
pub(crate) struct PendingWrites(PendingMap);

impl PendingWrites {
    /// Writes the entries that change the store into the new file `path`; a write that
    /// fails removes what it wrote (never a file that was there: the name must be new).
    pub(crate) fn save(&self, path: &Path) -> Result<SavedBuffer> {
        let bytes = self.encode()?;
        let crc32 = read_u32(&bytes, bytes.len() - 4).unwrap_or_default();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(Error::io(path))?;
        // Not synced: the caller records the size and checksum where it records that the file
        // is the store's (synced), so a file that a crash of the machine cut short or emptied is
        // found at load, and the copy it belongs to rebuilt.
        if let Err(e) = file.write_all(&bytes) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(Error::io(path)(e));
        }
        Ok(SavedBuffer {
            bytes: bytes.len() as u64,
            crc32,
        })
    }

    /// The file's bytes: encoded whole, then written at once (a write per field, each
    /// checksummed apart, cost several times as much).
    fn encode(&self) -> Result<Vec<u8>> {
        let size: usize = self.0.iter().map(|(k, p)| p.bytes(k)).sum();
        let mut out = Vec::with_capacity(size + MAGIC.len() + TRAILER);
        out.extend_from_slice(MAGIC);
        let mut count = 0u64;
        for (key, pending) in self.0.iter() {
            if matches!(pending.base, Base::Stored | Base::Absent) && pending.appends.is_empty() {
                continue; // reads' notes of what is below, which the next process reads again
            }
            put_field(&mut out, key)?;
            match &pending.base {
                Base::Stored => out.push(1),
                Base::Put(value) => {
                    out.push(2);
                    put_field(&mut out, value)?;
                }
                Base::Deleted => out.push(3),
                Base::Absent => out.push(4),
            }
            put_field(&mut out, &pending.appends)?;
            count += 1;
        }
        out.extend_from_slice(&count.to_be_bytes());
        let crc32 = crc32fast::hash(&out);
        out.extend_from_slice(&crc32.to_be_bytes());
        Ok(out)
    }

    /// Reads the file `path` that was saved as `expected`, if it is at most `max_bytes`.
    pub(crate) fn load(path: &Path, expected: SavedBuffer, max_bytes: u64) -> Result<Self> {
        let corrupt = |detail: String| Error::corrupt(format!("{}", path.display()), detail);
        if expected.bytes > max_bytes {
            return Err(corrupt(format!(
                "the saved write buffer is recorded as {} bytes, more than this store saves \
                 ({max_bytes} at most)",
                expected.bytes
            )));
        }
        let file = open_regular(path).map_err(|e| match e {
            Opened::Missing => corrupt("the saved write buffer is missing".into()),
            Opened::NotAFile => corrupt("the saved write buffer is not a file".into()),
            Opened::Io(e) => Error::io(path)(e),
        })?;
        let size = file.metadata().map_err(Error::io(path))?.len();
        if size != expected.bytes {
            return Err(corrupt(format!(
                "the saved write buffer has {size} bytes, {} were written",
                expected.bytes
            )));
        }
        let mut bytes = Vec::new();
        if bytes
            .try_reserve_exact(usize::try_from(size).unwrap_or(usize::MAX))
            .is_err()
        {
            return Err(corrupt(format!(
                "the saved write buffer's {size} bytes do not fit in memory"
            )));
        }
        // At most the bytes recorded, should the file have grown since it was looked at.
        file.take(size)
            .read_to_end(&mut bytes)
            .map_err(Error::io(path))?;
        let body_len = bytes.len().checked_sub(4).filter(|&n| n >= MAGIC.len() + 8);
        let Some(body_len) = body_len else {
            return Err(corrupt("the saved write buffer is too short".into()));
        };
        let crc = crc32fast::hash(&bytes[..body_len]);
        if crc != expected.crc32 || read_u32(&bytes, body_len) != Some(crc) {
            return Err(corrupt(
                "the saved write buffer's checksum does not match".into(),
            ));
        }
        if !bytes.starts_with(MAGIC) {
            return Err(corrupt(
                "not a saved write buffer of this format version".into(),
            ));
        }
        decode(
            &bytes[MAGIC.len()..bytes.len() - TRAILER],
            read_u64(&bytes, body_len - 8),
        )
        .map_err(|detail| corrupt(detail.into()))
    }
}

/// Why [`open_regular`] found no file to read.
enum Opened {
    Missing,
    NotAFile,
    Io(std::io::Error),
}

/// `path` opened for reading if it is a regular file. A link is not followed and a pipe not
/// waited on (a link to a device that never ends, say, is not a file the store wrote), and the
/// kind is that of the file opened, not of whatever the name pointed at a moment before.
fn open_regular(path: &Path) -> std::result::Result<std::fs::File, Opened> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Opened::Missing),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(Opened::NotAFile),
        Err(e) => return Err(Opened::Io(e)),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() => Ok(file),
        Ok(_) => Err(Opened::NotAFile),
        Err(e) => Err(Opened::Io(e)),
    }
}

/// The entries of a file's body, `count` of them.
fn decode(body: &[u8], count: Option<u64>) -> std::result::Result<PendingWrites, &'static str> {
    // The count is checked against the entries below; here it only sizes the table, as far as
    // the body could hold that many entries (9 bytes at least each).
    let mut map = PendingMap::default();
    let room = count.and_then(|c| usize::try_from(c).ok()).unwrap_or(0);
    map.reserve(room.min(body.len() / 9));
    let mut entries = Vec::with_capacity(room.min(body.len() / 9));
    let mut at = Cursor { bytes: body, at: 0 };
    while at.at < body.len() {
        let key = StorageKey::from(at.bytes_field()?);
        let base = match at.byte()? {
            1 => Base::Stored,
            2 => Base::Put(ShortBytes::from(at.bytes_field()?)),
            3 => Base::Deleted,
            4 => Base::Absent,
            _ => return Err("an entry has an unknown base"),
        };
        let appends = at.bytes_field()?.to_vec();
        check_kind(&key, &base, &appends)?;
        entries.push((map.hash(&key), key, Pending::new(base, appends)));
    }
    if count != Some(entries.len() as u64) {
        return Err("the entry count does not match the entries");
    }
    // In the order of the slots they land in: the table is then written front to back, not at
    // a random place (a cache miss) per entry.
    let slots = map.slots_mask();
    let slots = u64::try_from(slots).unwrap_or(u64::MAX);
    entries.sort_unstable_by_key(|(hash, _, _)| *hash & slots);
    for (hash, key, pending) in entries {
        if map.find_mut(hash, &key).is_some() {
            return Err("a key appears twice");
        }
        map.insert_new(hash, key, pending);
    }
    Ok(PendingWrites(map))
}

/// An entry a write buffer can hold: a latest value written whole, or pushes onto the stored
/// one (`format::latest_value`), or a history row. Metadata is written to RocksDB before a
/// buffer is saved, never in it.
fn check_kind(key: &[u8], base: &Base, appends: &[u8]) -> std::result::Result<(), &'static str> {
    match segment_of(key) {
        None => Err("a key is shorter than its segment"),
        Some(META_SEGMENT) => Err("an entry is the store's metadata"),
        Some(LATEST_SEGMENT) if matches!(base, Base::Stored) => {
            let pushes = latest_value::pushes(appends);
            if appends.is_empty() || pushes.into_iter().any(|push| push.is_none()) {
                return Err("an entry pushes nothing decodable onto a latest value");
            }
            Ok(())
        }
        Some(LATEST_SEGMENT) if !appends.is_empty() => Err("an entry appends to a latest value"),
        Some(segment) if segment < LATEST_SEGMENT => Err("an entry is in no segment"),
        Some(_) => Ok(()),
    }
}

/// The bytes of a saved buffer's entries, read front to back.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> std::result::Result<u8, &'static str> {
        let byte = *self.bytes.get(self.at).ok_or("an entry is cut short")?;
        self.at += 1;
        Ok(byte)
    }

    fn bytes_field(&mut self) -> std::result::Result<&'a [u8], &'static str> {
        let len = read_u32(self.bytes, self.at).ok_or("an entry is cut short")?;
        let start = self.at + 4;
        let end = start
            .checked_add(len as usize)
            .ok_or("an entry is cut short")?;
        let field = self.bytes.get(start..end).ok_or("an entry is cut short")?;
        self.at = end;
        Ok(field)
    }
}

/// Appends a length-prefixed field.
fn put_field(out: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| Error::invalid("buffer", "a pending write is larger than 4 GiB"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `entries` (raw entry bytes) claiming `count` of them, checksummed right.
    fn file(dir: &Path, entries: &[&[u8]], count: u64) -> (std::path::PathBuf, SavedBuffer) {
        let mut bytes = MAGIC.to_vec();
        for entry in entries {
            bytes.extend_from_slice(entry);
        }
        bytes.extend_from_slice(&count.to_be_bytes());
        let crc32 = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc32.to_be_bytes());
        let path = dir.join("buffer");
        std::fs::write(&path, &bytes).expect("write");
        let saved = SavedBuffer {
            bytes: bytes.len() as u64,
            crc32,
        };
        (path, saved)
    }

    /// `loaded` is `Error::Corrupt` whose detail says `says`.
    fn assert_corrupt(loaded: Result<PendingWrites>, says: &str) {
        let err = loaded.err().expect("a corruption error");
        assert!(
            matches!(&err, Error::Corrupt { detail, .. } if detail.contains(says)),
            "{err:?}"
        );
    }

    fn entry(key: &[u8], base: u8, appends: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_field(&mut out, key).expect("key");
        out.push(base);
        put_field(&mut out, appends).expect("appends");
        out
    }

    #[test]
    fn entries_that_do_not_add_up_are_corruption_even_with_a_good_checksum() {
        use crate::format::key::storage_key;
        let dir = tempfile::tempdir().expect("tempdir");
        let a = entry(&storage_key(0, b"a"), 1, b"x");
        let b = entry(&storage_key(LATEST_SEGMENT, b"b"), 3, b"");
        let odd = entry(&storage_key(0, b"c"), 9, b"");
        let short = entry(b"k", 1, b"x");
        let metadata = entry(&storage_key(META_SEGMENT, b"stream_time"), 3, b"");
        let latest_appended = entry(&storage_key(LATEST_SEGMENT, b"a"), 1, b"x");
        let nowhere = entry(&storage_key(-3, b"a"), 3, b"");
        let cases: [(&str, Vec<&[u8]>, u64); 8] = [
            ("twice", vec![&a, &a], 2),
            ("count", vec![&a, &b], 3),
            ("unknown base", vec![&odd], 1),
            ("cut short", vec![&a[..a.len() - 1]], 1),
            ("short key", vec![&short], 1),
            ("metadata", vec![&metadata], 1),
            ("appends on a latest value", vec![&latest_appended], 1),
            ("no segment", vec![&nowhere], 1),
        ];
        for (name, entries, count) in cases {
            let (path, saved) = file(dir.path(), &entries, count);
            let err = PendingWrites::load(&path, saved, u64::MAX)
                .err()
                .expect(name);
            assert!(matches!(err, Error::Corrupt { .. }), "{name}: {err:?}");
        }
        let (path, saved) = file(dir.path(), &[&a, &b], 2);
        let loaded = PendingWrites::load(&path, saved, u64::MAX).expect("a good file");
        assert_eq!(loaded.0.len(), 2);
    }

    /// A recorded size past what the store saves is refused before anything is read: a sparse
    /// file of terabytes would otherwise be read whole into memory.
    #[test]
    fn a_size_past_the_limit_is_refused_unread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("buffer");
        let huge = 1u64 << 40;
        let sparse = std::fs::File::create(&path).expect("create");
        sparse.set_len(huge).expect("a sparse file");
        let saved = SavedBuffer {
            bytes: huge,
            crc32: 0,
        };
        assert_corrupt(PendingWrites::load(&path, saved, 1 << 30), "more than");
    }

    /// A pipe in place of the file is not waited on.
    #[test]
    fn a_pipe_in_place_of_the_file_is_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("buffer");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.expect("mkfifo").success(), "mkfifo failed");
        let saved = SavedBuffer { bytes: 0, crc32: 0 };
        assert_corrupt(PendingWrites::load(&fifo, saved, u64::MAX), "not a file");
    }

    #[test]
    fn a_link_in_place_of_the_file_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("buffer");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        let saved = SavedBuffer { bytes: 0, crc32: 0 };
        assert_corrupt(PendingWrites::load(&link, saved, u64::MAX), "not a file");
    }
}
