//! Taking and replaying changelogs: the accepted writes of a checkpointed store, as files
//! (laid out in `format/changelog.rs`). A client of the store: it starts and stops the store's
//! recording, takes what its spool (`crate::spool`) holds, and replays changelogs with the
//! store's put algorithm.
//!
//! [`VersionedStore::take_changelog_to`] moves the spool file to a path the caller uploads,
//! [`VersionedStore::take_changelog`] returns the bytes (for small changelogs).
//!
//! Replay reads a changelog in chunks ([`VersionedStore::apply_changelog_file`]): records are
//! decoded in place in the read buffer, at most `chunk_records` and about [`CHUNK_BYTES`] at a
//! time, and each chunk is one atomic write, so memory is bounded by a chunk whatever the size of
//! the file. The body checksum is computed as the file is read and checked at its end: a damaged
//! file raises `Corrupt` after the chunks before the damage were applied, like any failure of a
//! later chunk, and the store then holds no committed version (a partition store's local copy is
//! marked dirty before replay, `docs/checkpoint.md`). [`VersionedStore::apply_changelog`] of
//! bytes in memory verifies the whole file first and applies nothing of a damaged one.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{BinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::format::changelog::{
    self, ATTEMPT_LEN, AttemptId, ChangelogHeader, HEADER_LEN, Put, Record, StoredHeader,
};
use crate::spool::Spool;
use crate::store::{VersionedStore, check_write};

/// How much a replay reads from its file at a time.
const READ_SIZE: usize = 1 << 20;
/// About how many bytes of records a replay decodes and applies as one write.
pub(crate) const CHUNK_BYTES: usize = 8 << 20;

/// An attempt id from its bytes.
fn attempt_id(bytes: &[u8], argument: &'static str) -> Result<AttemptId> {
    bytes.try_into().map_err(|_| {
        Error::invalid(
            argument,
            format!(
                "{argument} must be {ATTEMPT_LEN} bytes, got {}",
                bytes.len()
            ),
        )
    })
}

/// Reads a changelog in chunks of records decoded in place, computing the body checksum on the
/// way.
struct ChunkReader<R> {
    source: R,
    /// The file, for i/o errors.
    path: PathBuf,
    /// The changelog's name, for corruption errors.
    location: String,
    header: StoredHeader,
    /// Read bytes; `buf[start..]` are not decoded yet.
    buf: Vec<u8>,
    start: usize,
    /// Body bytes dropped from the front of `buf`.
    dropped: usize,
    crc: crc32fast::Hasher,
    records: u64,
    eof: bool,
}

impl<R: Read> ChunkReader<R> {
    fn open(mut source: R, path: &Path, location: &str) -> Result<Self> {
        let mut head = Vec::with_capacity(HEADER_LEN);
        (&mut source)
            .take(HEADER_LEN as u64)
            .read_to_end(&mut head)
            .map_err(Error::io(path))?;
        let header = changelog::decode_header(&head, location)?;
        Ok(Self {
            source,
            path: path.to_owned(),
            location: location.to_owned(),
            header,
            buf: Vec::new(),
            start: 0,
            dropped: 0,
            crc: crc32fast::Hasher::new(),
            records: 0,
            eof: false,
        })
    }

    fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Reads the next piece of the body, after dropping what was decoded.
    fn fill(&mut self) -> Result<()> {
        self.buf.drain(..self.start);
        self.dropped += self.start;
        self.start = 0;
        let old = self.buf.len();
        self.buf.resize(old + READ_SIZE, 0);
        let read = loop {
            match self
                .source
                .read(self.buf.get_mut(old..).unwrap_or_default())
            {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path)(e)),
            }
        };
        self.buf.truncate(old + read);
        self.crc.update(self.buf.get(old..).unwrap_or_default());
        self.eof = read == 0;
        Ok(())
    }

    /// Hands the next chunk to `apply` (with the index of its first record); `Ok(false)` once
    /// the body is exhausted and verified.
    fn next_chunk(
        &mut self,
        max_records: usize,
        apply: impl FnOnce(&[Record<'_>], u64) -> Result<()>,
    ) -> Result<bool> {
        loop {
            while !self.eof && self.pending() < CHUNK_BYTES {
                self.fill()?;
            }
            let mut records = Vec::new();
            let mut at = self.start;
            while records.len() < max_records.max(1) && at - self.start < CHUNK_BYTES {
                let rest = self.buf.get(at..).unwrap_or_default();
                match changelog::split_record(rest, self.header.format) {
                    Ok(Some((record, len))) => {
                        records.push(record);
                        at += len;
                    }
                    Ok(None) => break,
                    Err(detail) => {
                        let offset = HEADER_LEN + self.dropped + at;
                        return Err(Error::corrupt(
                            &self.location,
                            format!("{detail} at byte {offset}"),
                        ));
                    }
                }
            }
            if !records.is_empty() {
                let count = records.len() as u64;
                apply(&records, self.records)?;
                self.start = at;
                self.records += count;
                return Ok(true);
            }
            if self.eof {
                self.finish()?;
                return Ok(false);
            }
            // A record longer than a chunk: read on.
            self.fill()?;
        }
    }

    fn finish(&self) -> Result<()> {
        let corrupt = |detail: String| Error::corrupt(&self.location, detail);
        if self.crc.clone().finalize() != self.header.body_crc {
            return Err(corrupt(
                "body checksum mismatch (truncated or modified)".to_owned(),
            ));
        }
        if self.pending() > 0 {
            let offset = HEADER_LEN + self.dropped + self.start;
            return Err(corrupt(format!(
                "record runs past the end at byte {offset}"
            )));
        }
        changelog::check_count(&self.header.fields, self.records, &self.location)
    }
}

/// Verifies a changelog file's header (cheap: for listings and chain checks).
///
/// # Errors
/// [`Error::Corrupt`] naming `location` when the header is short, or has a bad magic, format
/// version or checksum.
pub fn read_changelog_header(bytes: &[u8], location: &str) -> Result<ChangelogHeader> {
    changelog::decode_header(bytes, location).map(|stored| stored.fields)
}

/// Verifies a whole changelog file (both checksums, the record framing and count).
///
/// # Errors
/// [`Error::Corrupt`] naming `location` for any truncation, checksum or count mismatch.
pub fn verify_changelog(bytes: &[u8], location: &str) -> Result<ChangelogHeader> {
    changelog::decode(bytes, location).map(|(header, _)| header)
}

/// The change feed of one changelog file: its header and its writes, verified as
/// [`verify_changelog`] does, as one Arrow batch in the order the writes were applied:
/// `key` (binary), `value` (binary, null for a tombstone) and `timestamp` (int64). Stream-time
/// records (`VersionedStore::advance_stream_time`) change no key and are left out, so the
/// batch may have fewer rows than the header's record count.
///
/// # Errors
/// [`Error::Corrupt`] naming `location` for any truncation, checksum or count mismatch.
pub fn read_changelog(bytes: &[u8], location: &str) -> Result<(ChangelogHeader, RecordBatch)> {
    let (header, records) = changelog::decode(bytes, location)?;
    let writes: Vec<Put<'_>> = records
        .iter()
        .filter_map(|r| match r {
            Record::Put(put) => Some(*put),
            Record::StreamTime(_) => None,
        })
        .collect();
    let keys = BinaryArray::from_iter_values(writes.iter().map(|w| w.key));
    let values: BinaryArray = writes.iter().map(|w| w.value).collect();
    let times = Int64Array::from_iter_values(writes.iter().map(|w| w.timestamp));
    let batch = RecordBatch::try_new(
        changes_schema(),
        vec![Arc::new(keys), Arc::new(values), Arc::new(times)],
    )
    .map_err(|e| Error::corrupt(location, format!("cannot build its records' batch: {e}")))?;
    Ok((header, batch))
}

/// The schema of [`read_changelog`]'s batch.
fn changes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("value", DataType::Binary, true),
        Field::new("timestamp", DataType::Int64, false),
    ]))
}

impl VersionedStore {
    /// Starts or stops recording accepted writes for [`VersionedStore::take_changelog`]. A
    /// persistent store spools them to a file in its directory.
    ///
    /// # Errors
    /// [`Error::Io`] when the spool file cannot be created.
    pub fn set_record_changes(&mut self, record: bool) -> Result<()> {
        self.check_usable()?;
        match (record, self.spool.is_some()) {
            (true, false) => self.spool = Some(Spool::open(self.path())?),
            (false, true) => self.spool = None,
            _ => {}
        }
        Ok(())
    }

    /// The accepted writes since the last take (none when not recording), as the bytes of the
    /// changelog that makes `version` on top of `parent_attempt`'s commit.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an attempt id that is not 16 bytes; [`Error::Io`] when
    /// the spool failed.
    pub fn take_changelog(
        &mut self,
        version: i64,
        attempt: &[u8],
        parent_attempt: &[u8],
    ) -> Result<Vec<u8>> {
        // A failed store's spool holds writes that its storage lost.
        self.check_usable()?;
        let attempt = attempt_id(attempt, "attempt_id")?;
        let parent = attempt_id(parent_attempt, "parent_attempt_id")?;
        match &mut self.spool {
            Some(spool) => spool.take(version, attempt, parent),
            None => Ok(changelog::encode(version, attempt, parent, [])),
        }
    }

    /// [`VersionedStore::take_changelog`] into the new file `path`, without holding the
    /// changelog in memory; returns its header.
    ///
    /// # Errors
    /// As [`VersionedStore::take_changelog`]; [`Error::Io`] when `path` exists or cannot be
    /// written.
    pub fn take_changelog_to(
        &mut self,
        path: &Path,
        version: i64,
        attempt: &[u8],
        parent_attempt: &[u8],
    ) -> Result<ChangelogHeader> {
        self.check_usable()?;
        let attempt = attempt_id(attempt, "attempt_id")?;
        let parent = attempt_id(parent_attempt, "parent_attempt_id")?;
        match &mut self.spool {
            Some(spool) => spool.take_to(path, version, attempt, parent),
            None => Spool::open(None)?.take_to(path, version, attempt, parent),
        }
    }

    /// Verifies a whole changelog held in memory, then replays its records with the normal put
    /// algorithm, `chunk_records` per atomic write (see [`crate::changelog`]). The result
    /// equals applying them one by one; replayed writes are not recorded again.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `location` for a damaged file, [`Error::InvalidArgument`] for
    /// a record with a negative timestamp (nothing applied for either); storage errors.
    pub fn apply_changelog(
        &mut self,
        bytes: &[u8],
        location: &str,
        chunk_records: usize,
    ) -> Result<ChangelogHeader> {
        let (header, records) = changelog::decode(bytes, location)?;
        for (index, record) in records.iter().enumerate() {
            check_record(record, index)?;
        }
        self.replaying(|store| {
            records
                .chunks(chunk_records.max(1))
                .try_for_each(|chunk| store.replay_chunk(chunk, 0))
        })?;
        Ok(header)
    }

    /// Replays the changelog file at `path` chunk by chunk, in bounded memory (see
    /// [`crate::changelog`]); `location` names it in errors.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `location` for a damaged file, [`Error::InvalidArgument`] for
    /// a record with a negative timestamp: the chunks before it are applied; [`Error::Io`];
    /// storage errors.
    pub fn apply_changelog_file(
        &mut self,
        path: &Path,
        location: &str,
        chunk_records: usize,
    ) -> Result<ChangelogHeader> {
        let file = File::open(path).map_err(Error::io(path))?;
        let mut reader = ChunkReader::open(file, path, location)?;
        self.replaying(|store| {
            while reader.next_chunk(chunk_records, |chunk, first| {
                store.replay_chunk(chunk, first)
            })? {}
            Ok(())
        })?;
        Ok(reader.header.fields)
    }

    /// Runs `replay` with recording suspended.
    fn replaying(&mut self, replay: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let spool = self.spool.take();
        let result = replay(self);
        self.spool = spool;
        result
    }

    /// Applies the records of one chunk (record `first` of the changelog first) as one write.
    fn replay_chunk(&mut self, records: &[Record<'_>], first: u64) -> Result<()> {
        let first = usize::try_from(first).unwrap_or(usize::MAX);
        for (i, record) in records.iter().enumerate() {
            check_record(record, first.saturating_add(i))?;
        }
        let replayed = self.transaction(|txn| {
            txn.reserve(records.len());
            txn.read_latest_ahead(records.iter().filter_map(|record| match record {
                Record::Put(w) => Some(w.key),
                Record::StreamTime(_) => None,
            }))?;
            records.iter().try_for_each(|record| match record {
                Record::Put(w) => txn.put(w.key, w.value, w.timestamp).map(drop),
                Record::StreamTime(timestamp) => {
                    txn.advance_stream_time_alone(*timestamp);
                    Ok(())
                }
            })
        });
        self.end_read_ahead();
        replayed
    }
}

/// Checks record `index` of a changelog as the call that made it checked its arguments.
fn check_record(record: &Record<'_>, index: usize) -> Result<()> {
    match record {
        Record::Put(w) => check_write(w.value, w.timestamp, Some(index)),
        Record::StreamTime(timestamp) => check_write(None, *timestamp, Some(index)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StoreConfig;

    const ATTEMPT: [u8; ATTEMPT_LEN] = [1; ATTEMPT_LEN];
    const PARENT: [u8; ATTEMPT_LEN] = [2; ATTEMPT_LEN];

    fn config() -> StoreConfig {
        StoreConfig::new(1_000, Some(10)).expect("config")
    }

    /// Writes that a reader of `chunk` records splits in many ways: values larger than a read,
    /// tombstones, empty keys.
    fn write_some(store: &mut VersionedStore) {
        let big = vec![0x5A; READ_SIZE + 17];
        for i in 0..300i64 {
            let key = format!("k{}", i % 7).into_bytes();
            let value = match i % 5 {
                0 => None,
                1 => Some(big.as_slice()),
                _ => Some(&b"v"[..]),
            };
            store.put(&key, value, i * 3 % 500).expect("put");
        }
        store.delete(b"", 400).expect("delete");
    }

    fn same_reads(a: &VersionedStore, b: &VersionedStore) {
        assert_eq!(a.observed_stream_time(), b.observed_stream_time());
        for k in 0..7 {
            let key = format!("k{k}").into_bytes();
            for t in (0..1_000).step_by(7) {
                assert_eq!(
                    a.get_as_of(&key, t).ok(),
                    b.get_as_of(&key, t).ok(),
                    "{k} {t}"
                );
            }
        }
    }

    #[test]
    fn a_spooled_changelog_replays_from_a_file_in_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut recorded = VersionedStore::open(dir.path().join("db"), config()).expect("open");
        recorded.set_record_changes(true).expect("record");
        write_some(&mut recorded);
        let path = dir.path().join("1.changelog");
        let header = recorded
            .take_changelog_to(&path, 1, &ATTEMPT, &PARENT)
            .expect("take");
        assert_eq!(header.record_count, 301);
        assert!(
            dir.path()
                .join("db")
                .join(crate::spool::SPOOL_FILE)
                .exists()
        );
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(verify_changelog(&bytes, "1.changelog").ok(), Some(header));
        for chunk in [1, 7, 100_000] {
            let mut replayed = VersionedStore::in_memory(config());
            let applied = replayed
                .apply_changelog_file(&path, "1.changelog", chunk)
                .expect("replay");
            assert_eq!(applied, header);
            same_reads(&recorded, &replayed);
        }
        // the spool started over: the next changelog is empty
        let next = recorded.take_changelog(2, &PARENT, &ATTEMPT).expect("take");
        assert_eq!(
            read_changelog_header(&next, "2")
                .map(|h| h.record_count)
                .ok(),
            Some(0)
        );
        drop(recorded);
        assert!(
            !dir.path()
                .join("db")
                .join(crate::spool::SPOOL_FILE)
                .exists()
        );
    }

    #[test]
    fn bytes_from_memory_and_file_spools_are_identical() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut on_disk = VersionedStore::open(dir.path(), config()).expect("open");
        let mut in_memory = VersionedStore::in_memory(config());
        for store in [&mut on_disk, &mut in_memory] {
            store.set_record_changes(true).expect("record");
            write_some(store);
            // a rejected write is not recorded
            store.put(b"late", Some(b"x"), 0).expect("put");
        }
        let a = on_disk.take_changelog(5, &ATTEMPT, &PARENT).expect("take");
        let b = in_memory
            .take_changelog(5, &ATTEMPT, &PARENT)
            .expect("take");
        assert_eq!(a, b);
        let mut replayed = VersionedStore::in_memory(config());
        replayed.apply_changelog(&a, "5", 64).expect("replay");
        same_reads(&in_memory, &replayed);
        let target = dir.path().join("empty.changelog");
        let header = in_memory
            .take_changelog_to(&target, 6, &ATTEMPT, &PARENT)
            .expect("take");
        assert_eq!(header.record_count, 0);
        let err = in_memory
            .take_changelog_to(&target, 6, &ATTEMPT, &PARENT)
            .expect_err("exists");
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
    }

    #[test]
    fn a_take_that_fails_half_way_breaks_a_file_spool_for_good() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = VersionedStore::open(dir.path().join("db"), config()).expect("open");
        store.set_record_changes(true).expect("record");
        store.put(b"k", Some(b"v"), 1).expect("put");
        let nowhere = dir.path().join("missing").join("1.changelog");
        let err = store
            .take_changelog_to(&nowhere, 1, &ATTEMPT, &PARENT)
            .expect_err("no such directory");
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        // the writes of the failed take are not lost silently: no changelog is ever taken again
        store.put(b"k", Some(b"w"), 2).expect("put");
        let err = store
            .take_changelog(1, &ATTEMPT, &PARENT)
            .expect_err("broken");
        assert!(err.to_string().contains("changelog spool"), "{err}");
        // an in-memory spool is intact after a failed take
        let mut memory = VersionedStore::in_memory(config());
        memory.set_record_changes(true).expect("record");
        memory.put(b"k", Some(b"v"), 1).expect("put");
        assert!(
            memory
                .take_changelog_to(&nowhere, 1, &ATTEMPT, &PARENT)
                .is_err()
        );
        let bytes = memory.take_changelog(1, &ATTEMPT, &PARENT).expect("take");
        assert_eq!(
            verify_changelog(&bytes, "1").map(|h| h.record_count).ok(),
            Some(1)
        );
    }

    #[test]
    fn a_damaged_file_is_corrupt_and_a_bad_attempt_id_invalid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = VersionedStore::in_memory(config());
        store.set_record_changes(true).expect("record");
        write_some(&mut store);
        let bytes = store.take_changelog(1, &ATTEMPT, &PARENT).expect("take");
        let path = dir.path().join("damaged");
        for damage in [bytes.len() - 1, bytes.len() / 2, HEADER_LEN + 3, 40] {
            let mut damaged = bytes.clone();
            damaged[damage] ^= 0x40;
            for data in [&damaged[..], &bytes[..damage]] {
                std::fs::write(&path, data).expect("write");
                let mut fresh = VersionedStore::in_memory(config());
                let err = fresh
                    .apply_changelog_file(&path, "1.changelog", 50)
                    .expect_err("damaged");
                assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
                assert!(err.to_string().contains("1.changelog"), "{err}");
                let err = fresh
                    .apply_changelog(data, "1.changelog", 50)
                    .expect_err("damaged");
                assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
            }
        }
        let err = store
            .take_changelog(1, b"short", &PARENT)
            .expect_err("short id");
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    argument: "attempt_id",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_negative_timestamp_in_a_forged_changelog_is_refused() {
        let record = Record::Put(Put {
            key: b"k",
            value: Some(b"v"),
            timestamp: -1,
        });
        let bytes = changelog::encode(1, ATTEMPT, PARENT, [record]);
        let mut store = VersionedStore::in_memory(config());
        let err = store
            .apply_changelog(&bytes, "1", 10)
            .expect_err("negative");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert_eq!(store.observed_stream_time(), -1);
    }
}
