//! Recording accepted writes for the next changelog (laid out in `format/changelog.rs`).
//!
//! A store that records appends every accepted write, encoded as a changelog record, to a
//! *spool* as the write commits: a transaction collects its accepted writes in a [`Log`], and
//! the store appends the log of each committed transaction to its [`Spool`]. A persistent store
//! spools to a file beside its data (`changelog.spool` in its directory), so that a
//! micro-batch's writes wait on disk rather than in memory; an in-memory store to a buffer. The
//! spool keeps the running record count and body checksum, so taking a changelog only puts the
//! header in front of the body: moved to a path the caller uploads, or returned as bytes (for
//! small changelogs). A spool that fails to take a write fails every later take: a changelog
//! never misses a write the store made.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::changelog::{self, AttemptId, ChangelogHeader, Format, HEADER_LEN, Put, Record};

/// The spool file's name in a persistent store's directory.
pub(crate) const SPOOL_FILE: &str = "changelog.spool";
/// The spool file's write buffer.
const SPOOL_BUFFER: usize = 256 << 10;

/// The accepted writes of one transaction, encoded as changelog records.
#[derive(Debug)]
pub(crate) struct Log {
    bytes: Vec<u8>,
    records: u64,
    /// The changelog format the records need.
    format: Format,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            bytes: Vec::new(),
            records: 0,
            format: Format::Writes,
        }
    }
}

impl Log {
    /// Logs the accepted write of `value` (`None`: a tombstone) for `key` at `timestamp`.
    pub(crate) fn push(&mut self, key: &[u8], value: Option<&[u8]>, timestamp: i64) {
        self.push_record(Record::Put(Put {
            key,
            value,
            timestamp,
        }));
    }

    /// Logs an advance of observed stream time to `timestamp` by a call that stored no version.
    pub(crate) fn push_stream_time(&mut self, timestamp: i64) {
        self.push_record(Record::StreamTime(timestamp));
    }

    fn push_record(&mut self, record: Record<'_>) {
        self.bytes.reserve(record.encoded_len());
        changelog::encode_record(record, &mut self.bytes);
        self.records += 1;
        self.format = self.format.with(record);
    }
}

/// Where a spool keeps its body.
enum Sink {
    Memory(Vec<u8>),
    /// A file that starts with `HEADER_LEN` bytes of room for the header.
    File {
        path: PathBuf,
        out: BufWriter<File>,
    },
}

/// The body of the changelog being recorded, with its record count and checksum.
pub(crate) struct Spool {
    sink: Sink,
    records: u64,
    /// The format of the changelog recorded so far: version 2 once it holds a stream-time
    /// record, so that changelogs of writes alone keep version 1's bytes.
    format: Format,
    crc: crc32fast::Hasher,
    /// What went wrong when a write could not be spooled: every later take fails with it.
    broken: Option<String>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

/// A new spool file at `path`: room for the header, no records.
fn create_spool_file(path: &Path) -> Result<BufWriter<File>> {
    let mut out =
        BufWriter::with_capacity(SPOOL_BUFFER, File::create(path).map_err(Error::io(path))?);
    out.write_all(&[0; HEADER_LEN]).map_err(Error::io(path))?;
    Ok(out)
}

impl Spool {
    /// A spool in `dir` (a persistent store's directory), or in memory.
    pub(crate) fn open(dir: Option<&Path>) -> Result<Self> {
        let sink = match dir {
            Some(dir) => {
                let path = dir.join(SPOOL_FILE);
                let out = create_spool_file(&path)?;
                Sink::File { path, out }
            }
            None => Sink::Memory(Vec::new()),
        };
        Ok(Self {
            sink,
            records: 0,
            format: Format::Writes,
            crc: crc32fast::Hasher::new(),
            broken: None,
        })
    }

    /// Appends a committed transaction's log. A failure cannot undo the write it logs, which
    /// is in the store already: it breaks the spool instead.
    pub(crate) fn append(&mut self, log: &Log) {
        if self.broken.is_some() || log.records == 0 {
            return;
        }
        let written = match &mut self.sink {
            Sink::Memory(body) => {
                body.extend_from_slice(&log.bytes);
                Ok(())
            }
            Sink::File { out, .. } => out.write_all(&log.bytes),
        };
        match written {
            Ok(()) => {
                self.crc.update(&log.bytes);
                self.records += log.records;
                self.format = self.format.max(log.format);
            }
            Err(e) => self.broken = Some(e.to_string()),
        }
    }

    fn path(&self) -> PathBuf {
        match &self.sink {
            Sink::File { path, .. } => path.clone(),
            Sink::Memory(_) => PathBuf::from("in-memory changelog spool"),
        }
    }

    /// The header of the changelog recorded so far, or the error that broke the spool.
    fn header(
        &self,
        version: i64,
        attempt: AttemptId,
        parent: AttemptId,
    ) -> Result<ChangelogHeader> {
        if let Some(broken) = &self.broken {
            return Err(Error::Io {
                path: self.path(),
                source: std::io::Error::other(format!(
                    "a write could not be recorded in the changelog spool: {broken}"
                )),
            });
        }
        Ok(ChangelogHeader {
            version,
            attempt,
            parent_attempt: parent,
            record_count: self.records,
        })
    }

    /// Ends a take: the spool starts over, or, when the take failed half way through the spool
    /// file, it is broken (its state is unknown).
    fn finish<T>(&mut self, taken: Result<T>) -> Result<T> {
        match &taken {
            Ok(_) => {
                self.records = 0;
                self.format = Format::Writes;
                self.crc = crc32fast::Hasher::new();
            }
            Err(e) if matches!(self.sink, Sink::File { .. }) => {
                self.broken = Some(e.to_string());
            }
            Err(_) => {}
        }
        taken
    }

    /// The changelog recorded so far, as bytes; the spool starts over.
    pub(crate) fn take(
        &mut self,
        version: i64,
        attempt: AttemptId,
        parent: AttemptId,
    ) -> Result<Vec<u8>> {
        let fields = self.header(version, attempt, parent)?;
        let header = changelog::encode_header(&fields, self.format, self.crc.clone().finalize());
        let taken = match &mut self.sink {
            Sink::Memory(body) => {
                let mut bytes = Vec::with_capacity(HEADER_LEN + body.len());
                bytes.extend_from_slice(&header);
                bytes.append(body);
                Ok(bytes)
            }
            Sink::File { path, out } => read_spool_file(path, out, &header),
        };
        self.finish(taken)
    }

    /// Writes the changelog recorded so far to the new file `target` (the spool file itself
    /// moves there when it can); the spool starts over.
    pub(crate) fn take_to(
        &mut self,
        target: &Path,
        version: i64,
        attempt: AttemptId,
        parent: AttemptId,
    ) -> Result<ChangelogHeader> {
        let fields = self.header(version, attempt, parent)?;
        let header = changelog::encode_header(&fields, self.format, self.crc.clone().finalize());
        if target.exists() {
            return Err(Error::io(target)(std::io::ErrorKind::AlreadyExists.into()));
        }
        let taken = match &mut self.sink {
            Sink::Memory(body) => write_file(target, &[&header, body]).map(|()| body.clear()),
            Sink::File { path, out } => move_spool_file(path, out, &header, target),
        };
        self.finish(taken).map(|()| fields)
    }
}

/// Writes `parts` to the new file `path`.
fn write_file(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let mut file = File::create_new(path).map_err(Error::io(path))?;
    parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .map_err(Error::io(path))
}

/// The spool file's changelog, with `header`, as bytes; the file keeps room for a header only.
fn read_spool_file(path: &Path, out: &mut BufWriter<File>, header: &[u8]) -> Result<Vec<u8>> {
    out.flush().map_err(Error::io(path))?;
    let mut bytes = std::fs::read(path).map_err(Error::io(path))?;
    if let Some(slot) = bytes.get_mut(..HEADER_LEN) {
        slot.copy_from_slice(header);
    }
    let file = out.get_mut();
    file.set_len(HEADER_LEN as u64).map_err(Error::io(path))?;
    file.seek(SeekFrom::End(0)).map_err(Error::io(path))?;
    Ok(bytes)
}

/// Puts `header` in front of the spool file, moves it to `target` (copies it, across
/// filesystems), and starts a new spool file.
fn move_spool_file(
    path: &Path,
    out: &mut BufWriter<File>,
    header: &[u8],
    target: &Path,
) -> Result<()> {
    out.flush().map_err(Error::io(path))?;
    let file = out.get_mut();
    file.seek(SeekFrom::Start(0)).map_err(Error::io(path))?;
    file.write_all(header).map_err(Error::io(path))?;
    if std::fs::rename(path, target).is_err() {
        std::fs::copy(path, target).map_err(Error::io(target))?;
    }
    *out = create_spool_file(path)?;
    Ok(())
}

impl Drop for Spool {
    /// The spool holds the writes of a session only: a later open starts a new one.
    fn drop(&mut self) {
        if let Sink::File { path, .. } = &self.sink {
            let _ = std::fs::remove_file(path);
        }
    }
}
