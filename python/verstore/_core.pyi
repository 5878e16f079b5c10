"""The compiled core of verstore: the API reference.

Times are ``int`` milliseconds. Keys and values are ``bytes``; a value of ``None`` is a
tombstone. Semantics follow Kafka Streams' versioned key-value stores, as specified in
docs/semantics.md: a version's validity is ``[timestamp, valid_to)``; the history retention is
also the grace period for writes.
"""

import os
from typing import Any, Final, Self, TypeAlias, final

import pyarrow as pa

__version__: Final[str]

VALID_TO_UNDEFINED: Final[int]
"""``put()`` result: the new version became the key's newest version (``-1``)."""

NOT_PUT: Final[int]
"""``put()`` result: rejected because older than the grace period (``-(2**63)``)."""

def _fail_storage_writes(after: int | None, under: str | os.PathLike[str] | None = None) -> None:
    """Test hook, internal: injects storage failures, process-wide (why the shipped extension
    carries it: ``rust/python/mod.rs``).

    After ``after`` more successful storage writes of RocksDB stores whose directory is under
    ``under`` (every store when ``None``; each write batch, memtable flush or checkpoint counts
    once), every later one raises ``StorageError`` ("injected I/O error") until this is called
    with ``after=None``. Production code never calls it.
    """

def default_segment_interval_ms(history_retention_ms: int) -> int:
    """Kafka's default segment interval for a history retention.

    Args:
        history_retention_ms: The history retention, >= 0.

    Returns:
        ``max(R/3, 2 s)`` up to 1 min, ``max(R/5, 20 s)`` up to 5 min, ``max(R/12, 1 min)`` up
        to 1 h, else ``max(R/24, 5 min)``.

    Raises:
        ValueError: ``history_retention_ms`` is negative.
    """

@final
class VersionedRecord:
    """One version of a key's value; immutable, equal by all three fields."""

    def __new__(cls, value: bytes, timestamp: int, valid_to: int | None = None) -> Self: ...
    value: Final[bytes]
    """The value bytes (possibly empty: an empty value is not a tombstone)."""
    timestamp: Final[int]
    """Valid-from, in milliseconds."""
    valid_to: Final[int | None]
    """Valid-to (exclusive), or ``None`` when this is the key's newest version."""
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes, int, int | None]]: ...

_ArrowBinaryLike: TypeAlias = Any
"""Anything with ``__arrow_c_array__``/``__arrow_c_stream__`` of binary type, or a sequence of
``bytes`` (``None`` allowed where a null is meaningful)."""

_ArrowInt64Like: TypeAlias = Any
"""Times of a batch: anything with ``__arrow_c_array__``/``__arrow_c_stream__`` of an integer
type, a numpy integer array, or a list or tuple of ``int``. Narrower and unsigned integer types
are widened to int64 (an Arrow ``int32`` array and a numpy ``int32`` array are both accepted; a
``uint64`` value beyond ``2**63 - 1`` is a ``ValueError``); floats are refused, as arrays
(``TypeError`` naming the argument) and as list items (``TypeError`` naming the row, e.g.
``timestamps[2]``), as are bools; list items follow the rules of a single call's time."""

@final
class VersionedStore:
    """A versioned key-value store, persistent (RocksDB) or in memory.

    Persistent stores live in a directory (created if missing); reopening it restores every
    version and ``observed_stream_time``. The store records its configuration and refuses to
    reopen with another one. A directory can be open in one store object at a time. Use as a
    context manager or call :meth:`close`; calls after close raise ``StoreClosedError``.

    A store without a write-ahead log whose write buffer cannot be written (a full disk, an
    I/O error) has *failed*: the writes it held are lost from it, so every later call,
    reads included, raises ``StorageError`` until it is closed and reopened, which gives back
    the state storage holds. With the log on, a failed write fails only its own call.

    **Which puts read first** (docs/semantics.md §2.16). Kafka's put reads the key's newest
    version before it writes. A persistent store skips that read for a value put at or after
    ``observed_stream_time`` whose key's newest version its cache of latest values does not
    know, once the latest values outgrow that cache: such a put is the key's newest version
    whatever the key holds, so :meth:`put` and :meth:`put_batch` return
    ``VALID_TO_UNDEFINED`` for it exactly, and the version it replaces stays beside the new
    one until a put reads the key, a long enough history of the key is merged, or
    :meth:`settle`. Every read answers the same either way. The read-free path is taken by
    :meth:`put`, :meth:`put_batch`, changelog replay (:meth:`apply_changelog`) and the Spark
    helpers' table sides; :meth:`put_batch_with_previous`, deletes, tombstones, writes below
    ``observed_stream_time``, stores with ``latest_ttl_ms`` and in-memory stores always read.
    A read-free put cannot tell a new key from an existing one: ``stats().latest_keys`` counts
    the keys it creates only once the store is settled (``stats().unsettled_puts``).
    """

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        write_ahead_log: bool = True,
        record_changes: bool = False,
        memory_limit_mb: int | None = None,
        latest_ttl_ms: int | None = None,
    ) -> Self:
        """Opens or creates a persistent store.

        Args:
            path: The store directory.
            history_retention_ms: How far behind observed stream time reads stay exact; also
                the grace period for writes. >= 0.
            segment_interval_ms: Width of the history segments, >= 1; ``None`` applies Kafka's
                default rule (:func:`default_segment_interval_ms`).
            write_ahead_log: RocksDB's WAL (on: every returned write survives a process crash).
                On, the observed stream time and key count are recorded by :meth:`flush` and
                :meth:`close`, not by every write; the first open after a crash recomputes them
                from the data (it reads every latest value once).
                Checkpointed partition stores turn it off: their durability is the checkpoint.
                Off, writes also gather in an in-memory write buffer (as Kafka Streams' record
                cache) that reads see first, written to RocksDB as one sorted batch when it
                outgrows its bound (half of ``memory_limit_mb``, and the write buffers of the
                process past their share of its memory budget: :func:`set_memory_limit`), on
                :meth:`flush`, :meth:`create_checkpoint` and :meth:`close`; without a WAL,
                nothing written since the last flush survives a crash either way.
            record_changes: Record accepted writes for :meth:`take_changelog`, spooled to a
                file in the store directory (not held in memory).
            memory_limit_mb: A cap on the memory this store keeps for itself, within the
                process's memory budget (:func:`set_memory_limit`), which every store of the
                process shares and which bounds them all first: half for the write buffer
                (without a WAL), three eighths for its cache of latest values and an eighth for
                its cache of long history rows, which single as-of reads answer from. ``None``:
                no cap of its own; the budget decides.
            latest_ttl_ms: A time-to-live for keys that stopped changing, in event time
                (docs/semantics.md §2.15): a key whose newest version is a value at ``t``
                reads as ended at ``t + latest_ttl_ms`` once ``observed_stream_time`` has
                reached that, and its entry is dropped from storage in bulk later. >= 1;
                ``None``: keys never expire (Kafka's rule). A store records it: reopening may
                add or lower it, never raise or remove it.

        Raises:
            ValueError: A negative retention, an interval below 1 or a ``latest_ttl_ms``
                below 1.
            TypeError: ``latest_ttl_ms`` is neither an int nor None.
            StoreLockedError: The directory is open in another store object or process.
            IncompatibleConfigError: The store was created with another retention or
                interval, or with a higher ``latest_ttl_ms``, or with one when none is given.
            IncompatibleFormatError: The directory holds a format version this build does
                not read (it reads versions 2 to 4, and upgrades 2 to 3 on open; 4 is a
                store with a latest TTL).
            CorruptionError: RocksDB found the store's files damaged (a size or checksum
                mismatch, a missing file); the message names the file.
            StorageError: RocksDB or the filesystem failed.
        """
    @staticmethod
    def in_memory(
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        latest_ttl_ms: int | None = None,
    ) -> VersionedStore:
        """An in-memory store with the same semantics; its data dies with it.

        Args:
            history_retention_ms: As for the persistent store.
            segment_interval_ms: As for the persistent store.
            latest_ttl_ms: As for the persistent store.

        Raises:
            ValueError: A negative retention, an interval below 1 or a ``latest_ttl_ms``
                below 1.
            TypeError: ``latest_ttl_ms`` is neither an int nor None.
        """
    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """Stores a version (``value=None`` writes a tombstone).

        Args:
            key: The key.
            value: The value, or ``None`` for a tombstone.
            timestamp: The version's valid-from, >= 0.

        Returns:
            The stored version's valid-to; ``VALID_TO_UNDEFINED`` when it became the newest
            version; ``NOT_PUT`` when ``timestamp < observed_stream_time - history_retention_ms``
            (nothing changed).

        Raises:
            TypeError: ``key`` is not bytes, ``value`` is neither bytes nor None, or
                ``timestamp`` is not an int (a bool is not a time).
            ValueError: ``timestamp`` is negative or beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def get(self, key: bytes, as_of: int | None = None) -> VersionedRecord | None:
        """The newest version, or the one valid at ``as_of`` (inclusive).

        Args:
            key: The key.
            as_of: ``None`` for the newest version. Below the retention horizon only the newest
                version can be returned (if it is a value at or before ``as_of``).

        Returns:
            The record, or ``None`` when no value is valid (unknown key, tombstone).

        Raises:
            TypeError: ``key`` is not bytes, or ``as_of`` is not an int.
            ValueError: ``as_of`` is beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def delete(self, key: bytes, timestamp: int) -> VersionedRecord | None:
        """Writes a tombstone at ``timestamp``.

        Args:
            key: The key.
            timestamp: The tombstone's timestamp, >= 0.

        Returns:
            The record valid at ``timestamp`` before the delete (its valid-to as it was), or
            ``None`` when there was none or the delete was older than the grace period (then
            nothing is written).

        Raises:
            TypeError: ``key`` is not bytes, or ``timestamp`` is not an int.
            ValueError: ``timestamp`` is negative or beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def advance_stream_time(self, timestamp: int) -> int:
        """Raises ``observed_stream_time`` to ``timestamp`` if that is higher; otherwise does
        nothing.

        A write that stores no version (docs/semantics.md §2.14): it drops the history segments
        a put at ``timestamp`` would expire, so that writes older than ``timestamp -
        history_retention_ms`` are rejected from then on, and a store opened with
        ``record_changes=True`` records it for :meth:`take_changelog` (a changelog holding it
        is format version 2), so that replaying the changelog reproduces it. Meant for copying
        a store's history into new stores (repartitioning): put every version in timestamp order,
        then advance to the source's ``observed_stream_time``.

        Args:
            timestamp: The new observed stream time, >= 0.

        Returns:
            The observed stream time after the call.

        Raises:
            TypeError: ``timestamp`` is not an int (a bool is not a time).
            ValueError: ``timestamp`` is negative or beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def versions(
        self,
        key: bytes,
        from_time: int | None = None,
        to_time: int | None = None,
        ascending: bool = False,
    ) -> list[VersionedRecord]:
        """Every value version whose validity interval meets ``[from_time, to_time]``.

        Args:
            key: The key.
            from_time: Lower bound (inclusive); ``None`` is unbounded.
            to_time: Upper bound (inclusive); ``None`` is unbounded. Below the retention horizon
                only the newest version can be returned.
            ascending: Oldest first if true; newest first by default.

        Returns:
            The versions still stored (history is dropped a whole segment at a time).

        Raises:
            TypeError: ``key`` is not bytes, or a bound is not an int.
            ValueError: ``from_time > to_time``, or a bound beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def put_batch(
        self, keys: _ArrowBinaryLike, values: _ArrowBinaryLike, timestamps: _ArrowInt64Like
    ) -> pa.Int64Array:
        """``put()`` row by row in order, in one atomic write, without the GIL.

        Args:
            keys: Binary keys, no nulls.
            values: Binary values; a null is a tombstone.
            timestamps: Non-negative integer timestamps (see ``_ArrowInt64Like``).

        Returns:
            Element ``i`` is ``put()``'s result for row ``i``.

        Raises:
            TypeError: Wrong Arrow types, a null key, or a time that is not an integer (a
                float or bool, naming the row when given as a list).
            ValueError: Lengths differ; a negative, null or beyond-64-bit timestamp; a list of
                keys or values totalling more than 2 GiB (pass a ``large_binary`` array).
                Nothing is written.
            StoreClosedError: The store is closed.
        """
    def put_batch_with_previous(
        self, keys: _ArrowBinaryLike, values: _ArrowBinaryLike, timestamps: _ArrowInt64Like
    ) -> tuple[pa.Int64Array, pa.RecordBatch]:
        """:meth:`put_batch`, with each row's previous record: the one valid at the row's
        timestamp just before its write (the rows before it included), as ``get(key,
        as_of=timestamp)`` would have returned it then (with a latest TTL: as of the stream
        time before the write). For KIP-914 operators that forward the value a change
        replaces (``verstore.spark.latest_by_timestamp(previous=True)``).

        Returns:
            ``put()``'s result per row, and a batch of ``value``, ``timestamp`` and
            ``valid_to`` (as :meth:`get_batch`; a null ``value`` where there was no record, or
            the row was older than the grace period).

        Raises:
            As :meth:`put_batch`.
        """
    def get_batch(
        self, keys: _ArrowBinaryLike, as_of: int | _ArrowInt64Like | None = None
    ) -> pa.RecordBatch:
        """``get()`` for every key, without the GIL. Keys are read in key order, each distinct
        key once, with one RocksDB ``MultiGet`` per round of lookups.

        Args:
            keys: Binary keys, no nulls.
            as_of: ``None`` (latest for every key), one time for all keys, or times aligned
                with ``keys``.

        Returns:
            Columns ``value`` (binary), ``timestamp`` (int64), ``valid_to`` (int64); all null
            where ``get()`` returns None; ``valid_to`` null for newest versions.

        Raises:
            TypeError: Wrong Arrow types, a null key, or an ``as_of`` that is not an integer
                (a float or bool).
            ValueError: ``as_of`` and ``keys`` lengths differ; a time beyond 64 bits; the found
                values total more than 2 GiB (read fewer keys per call).
            StoreClosedError: The store is closed.
        """
    def delete_batch(self, keys: _ArrowBinaryLike, timestamps: _ArrowInt64Like) -> pa.RecordBatch:
        """``delete()`` row by row in order, in one atomic write, without the GIL.

        Args:
            keys: Binary keys, no nulls.
            timestamps: Non-negative integer timestamps (see ``_ArrowInt64Like``).

        Returns:
            The deleted records, with the columns of :meth:`get_batch`.

        Raises:
            TypeError: Wrong Arrow types, a null key, or a time that is not an integer.
            ValueError: Lengths differ, or a negative or null timestamp (nothing is written).
            StoreClosedError: The store is closed.
        """
    def scan(
        self,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        as_of: int | None = None,
        batch_rows: int = 65536,
    ) -> Scan:
        """Every key's record as of a time (or its newest), in key order, as Arrow batches.

        Each key's row is exactly what :meth:`get` returns for it (retention horizon
        included); keys for which :meth:`get` returns ``None`` are left out. Keys come in
        ascending byte order, so the order-preserving keys of :func:`encode_rows` scan by
        typed ranges. The scan reads the store as it was when ``scan`` returned: writes made
        afterwards, from any thread, are not seen (a RocksDB snapshot; a store without a
        write-ahead log first writes its write buffer to RocksDB). It runs on a thread of its
        own, without the GIL, one batch ahead of the caller, and holds at most three batches
        however large the store. An open scan keeps the data it may still read (RocksDB's
        snapshot), so close it when done: use it as a context manager.

        Args:
            start: Lowest key (inclusive); ``None``: from the first key.
            end: Bound above every key (exclusive); ``None``: to the last key.
            prefix: Only keys that begin with these bytes (not with ``start``/``end``).
            as_of: ``None`` for each key's newest version, else the version valid at this time.
            batch_rows: Rows per batch, >= 1 (a batch also ends before its keys or its values
                pass 64 MiB).

        Returns:
            An iterator of ``pyarrow.RecordBatch`` with columns ``key`` (binary), ``value``
            (binary), ``timestamp`` (int64, valid-from) and ``valid_to`` (int64, null for a
            newest version).

        Raises:
            TypeError: A key bound is not bytes, ``as_of`` or ``batch_rows`` is not an int.
            ValueError: ``prefix`` with ``start`` or ``end``, ``end`` before ``start``,
                ``batch_rows < 1``, or a time beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def scan_versions(
        self,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
        ascending: bool = False,
        tombstones: bool = False,
        batch_rows: int = 65536,
    ) -> Scan:
        """:meth:`versions` for every key, in key order, as Arrow batches.

        Each key's rows are exactly what :meth:`versions` returns for it, newest first (oldest
        first with ``ascending``); keys come in ascending byte order. Consistent, lazy and
        bounded as :meth:`scan`; a key's versions may span two batches.

        With ``tombstones=True`` each key's rows also hold the tombstones still stored, each a
        row with a null ``value`` in its place in the key's order, selected by the bounds as a
        value is, with a ``valid_to`` as a value's (the next version's timestamp, null for the
        newest). A tombstone is stored until the segment that holds it is dropped
        (docs/semantics.md §2.12). Putting every row of a full scan with ``tombstones=True``
        (``None`` for a null value) into an empty store in timestamp order, then calling
        :meth:`advance_stream_time` with this store's ``observed_stream_time``, gives a store
        with the same reads and the same results for later writes.

        Args:
            start: Lowest key (inclusive); ``None``: from the first key.
            end: Bound above every key (exclusive); ``None``: to the last key.
            prefix: Only keys that begin with these bytes (not with ``start``/``end``).
            from_time: Lower bound (inclusive) of the validity; ``None`` is unbounded.
            to_time: Upper bound (inclusive); ``None`` is unbounded. Below the retention
                horizon only each key's newest version can be returned.
            ascending: Each key's versions oldest first if true; newest first by default.
            tombstones: Return tombstones too, as rows with a null ``value``.
            batch_rows: Rows per batch, >= 1.

        Returns:
            An iterator of ``pyarrow.RecordBatch`` with the columns of :meth:`scan`; with
            ``tombstones=True`` the ``value`` column is nullable.

        Raises:
            TypeError: A key bound is not bytes, a time or ``batch_rows`` is not an int.
            ValueError: ``prefix`` with ``start`` or ``end``, ``end`` before ``start``,
                ``from_time > to_time``, ``batch_rows < 1``, or a time beyond 64 bits.
            StoreClosedError: The store is closed.
        """
    def stats(self) -> StoreStats:
        """The store's size and memory use, cheap enough to read after every micro-batch
        (counters the store keeps and RocksDB properties; nothing is scanned).

        Raises:
            StoreClosedError: The store is closed.
            StorageError: RocksDB or the filesystem failed.
        """
    observed_stream_time: Final[int]
    """Largest timestamp of any accepted write; -1 before the first."""
    history_retention_ms: Final[int]
    """The history retention (= grace period)."""
    segment_interval_ms: Final[int]
    """The segment interval in effect."""
    latest_ttl_ms: Final[int | None]
    """The time-to-live of keys' newest versions (docs/semantics.md §2.15); ``None``: none."""
    path: Final[str | None]
    """The store directory, ``None`` in memory."""
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
    def take_changelog(
        self,
        path: str | os.PathLike[str],
        version: int,
        attempt_id: bytes,
        parent_attempt_id: bytes,
    ) -> ChangelogHeader:
        """Writes the accepted writes since the last take as the new changelog file ``path``.

        The writes were spooled as they were accepted; the file is the spool with its header
        (the spool file itself moves to ``path`` when it is on the same filesystem), so taking
        holds no write in memory. Recording starts over.

        Args:
            path: The changelog file to create (it must not exist).
            version: The version the changelog produces.
            attempt_id: 16 bytes identifying the writing attempt.
            parent_attempt_id: 16 bytes: the attempt that wrote ``version - 1``.

        Returns:
            The file's header; no records unless the store was opened with
            ``record_changes=True``. The layout is in docs/format.md.

        Raises:
            ValueError: An attempt id is not 16 bytes.
            StorageError: ``path`` exists or cannot be written, or the spool failed to take a
                write (the store then never yields a changelog again: reopen it).
        """
    def apply_changelog(
        self, path: str | os.PathLike[str], *, name: str = "changelog", chunk_records: int = 65536
    ) -> ChangelogHeader:
        """Replays a changelog file; the result equals applying its writes (and advances of
        stream time, :meth:`advance_stream_time`) in order.

        The file is read in chunks of at most ``chunk_records`` records (and about 8 MiB), each
        applied as one atomic write, so memory holds a chunk, never the file. Replayed writes are
        not recorded again.

        Args:
            path: The local changelog file.
            name: The file's name, for error messages.
            chunk_records: Records per atomic write.

        Returns:
            The file's header.

        Raises:
            CorruptionError: The file is truncated or damaged. The checksum of the records is
                checked at the end of the file: the chunks before the damage are applied.
            ValueError: A record with a negative timestamp (the chunks before it are applied).
            StorageError: The file cannot be read.
        """
    def create_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Writes a consistent copy (a RocksDB checkpoint) into the new directory ``path``."""
    def flush(self, *, write_buffer: bool = True) -> None:
        """Writes the write buffer to RocksDB and flushes its memtables to SST files (no-op in
        memory).

        Args:
            write_buffer: False to flush the memtables alone, leaving the write buffer as it
                is: what a holder of an idle store does so that a later
                :meth:`close_keeping_buffer` has little to flush, while the store's next call
                still finds its writes in the buffer and its caches warm. The writes in the
                buffer are then still in no file (:attr:`memtable_bytes` says what is left to
                flush).

        Raises:
            StoreClosedError: The store is closed.
            StorageError: The write or the flush failed (a full disk, an I/O error). When the
                write buffer could not be written, the store has *failed*: see the class.
        """
    def settle(self) -> None:
        """Moves every version that read-free puts left beside a key's newest version into
        its history row, and counts the keys: afterwards ``stats().latest_keys`` is exact and
        ``stats().unsettled_puts`` is 0. One pass over the latest values (the GIL released),
        in atomic steps of a few MiB; no read changes. A store without a write-ahead log writes
        its write buffer first. No-op in memory.

        Raises:
            StoreClosedError: The store is closed.
            StorageError: The store failed, or a write did.
            CorruptionError: A latest value does not decode.
        """
    def reclaim_expired(self) -> None:
        """Drops the latest values ``latest_ttl_ms`` has expired below the retention horizon
        from storage now, in bulk (the GIL released); no read changes. The store does this by
        itself once as many entries are reclaimable as keys are live; this is for tests and
        operators. A store without a write-ahead log is flushed first. Nothing happens without
        a TTL or while a scan is open.

        Raises:
            StoreClosedError: The store is closed.
            StorageError: The store failed, or the flush did.
        """
    @property
    def write_buffer_bytes(self) -> int:
        """Bytes the write buffer holds now (0 with a write-ahead log, or once written)."""
    @property
    def memtable_bytes(self) -> int:
        """Bytes RocksDB's memtables hold now, active and unflushed (0 in memory): what a
        flush, or :meth:`close_keeping_buffer`, would write to SST files. An empty memtable
        counts 2 KiB."""
    def release_memory(self, *, caches: bool = True) -> None:
        """Gives back the memory the store holds between calls: writes its write buffer to
        RocksDB (and frees the buffer's room) and, with ``caches``, empties its caches; what it
        holds stays in RocksDB. For holders of idle stores when :func:`memory_usage` says the
        process's budget is under pressure: ``caches=False`` when it is the write buffers that
        are past their share (``write_buffers_over``), so that the store's next call finds its
        caches warm. No-op in memory but for the write buffer.

        Raises:
            StorageError: The write failed (a full disk, an I/O error): the store has *failed*.
        """
    def close(self) -> None:
        """Writes the write buffer, if any, and releases the store and its directory lock.
        Without a write-ahead log it also flushes the memtables, so a close that returns has
        made every accepted write durable. Idempotent. Open scans of the store end: their next
        batch raises ``StoreClosedError``.

        Raises:
            StorageError: The write buffer could not be written or the memtables not flushed,
                or the store had failed (the store is closed anyway, its lock released).
        """
    def close_keeping_buffer(self, path: str | os.PathLike[str]) -> tuple[int, int]:
        """Closes the store leaving its write buffer in the new file ``path`` instead of
        writing it to RocksDB: how a store moves to another process without a flush of
        everything it buffered. The segments dropped and the metadata are written and the
        memtables flushed, so the directory and the file together hold every accepted write;
        :meth:`load_buffer` right after the next open of the directory restores the store.

        Returns:
            ``(size, crc32)`` of the file, to give to :meth:`load_buffer`.

        Raises:
            ValueError: A store without a write buffer (in memory, or with the write-ahead
                log on); the message names ``buffer``.
            StorageError: RocksDB's write or flush failed, or the file could not be written
                (no file is left). The store is closed either way, as a dropped store is: its
                write buffer is written to RocksDB, unless RocksDB's write failed (the store
                failed, as a failed ``close`` does).
        """
    def load_buffer(self, path: str | os.PathLike[str], size: int, crc32: int) -> None:
        """Restores the write buffer that :meth:`close_keeping_buffer` saved in ``path`` as
        ``(size, crc32)``, right after the open of the directory it was saved with.

        Raises:
            CorruptionError: The file is missing, or its size, checksum or entries are not what
                was saved; the message names it. The store is unchanged.
            ValueError: The store has no write buffer, or already holds writes.
        """
    def __enter__(self) -> VersionedStore: ...
    def __exit__(self, *exc_info: object) -> None: ...

@final
class Scan:
    """A running scan (:meth:`VersionedStore.scan`, :meth:`VersionedStore.scan_versions`): an
    iterator of ``pyarrow.RecordBatch`` read from one consistent state of the store.

    Iteration ends after the last batch. :meth:`close` (or leaving a ``with`` block) stops the
    scan's thread and releases what it holds; iterating a closed scan ends at once. When the
    store is closed first, the next batch raises ``StoreClosedError``.
    """

    def __iter__(self) -> Scan: ...
    def __next__(self) -> pa.RecordBatch:
        """The next batch, waiting (without the GIL) for the scan's thread.

        Raises:
            StopIteration: The scan is done or closed.
            StoreClosedError: The store was closed while the scan was open.
            CorruptionError: Stored bytes do not decode (the scan ends).
            StorageError: RocksDB failed (the scan ends).
        """
    schema: Final[pa.Schema]
    """The batches' schema: ``key``, ``value`` (binary, nullable only in a scan with
    ``tombstones=True``), ``timestamp``, ``valid_to`` (int64, nullable)."""
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
    def close(self) -> None:
        """Stops the scan and waits for its thread. Idempotent."""
    def __enter__(self) -> Scan: ...
    def __exit__(self, *exc_info: object) -> None: ...

@final
class StoreStats:
    """A store's size and memory use at one moment (:meth:`VersionedStore.stats`)."""

    latest_keys: Final[int]
    """Keys whose newest version is a value: exact while ``unsettled_puts`` is 0, else at most
    that many too few (persistent stores keep the count in their metadata; a store written by
    an older build is counted once when opened; :meth:`VersionedStore.settle` counts again).
    With ``latest_ttl_ms``: keys whose newest version is a live value, exact to one time bucket
    (a key counts until its bucket has wholly expired; counted from the data at each open)."""
    unsettled_puts: Final[int]
    """Read-free puts since ``latest_keys`` was last exact: each may have created a key it does
    not count (:class:`VersionedStore`, "Which puts read first"). 0 in memory and with
    ``latest_ttl_ms``; back to 0 after :meth:`VersionedStore.settle` and after the open that
    follows a crash (which counts every key)."""
    history_rows: Final[int]
    """History rows, one per key and live segment holding its older versions: exact in
    memory; on RocksDB its key estimate less the latest values (overwritten keys and row
    appends not yet compacted count too, rows still in the write buffer do not)."""
    live_segments: Final[int]
    """Live history segments."""
    disk_bytes: Final[int]
    """SST and write-ahead-log files of the store (0 in memory)."""
    memtable_bytes: Final[int]
    """RocksDB's active and unflushed memtables (0 in memory)."""
    write_buffer_bytes: Final[int]
    """The write buffer of a store without a write-ahead log (0 otherwise)."""
    observed_stream_time: Final[int]
    """Largest timestamp of any accepted write; -1 before the first."""
    ttl_expired_keys: Final[int]
    """With ``latest_ttl_ms``: keys that expired since the store object opened, counted when
    their time bucket (``max(segment_interval_ms, latest_ttl_ms // 32)`` wide) wholly
    expired; 0 without."""
    ttl_reclaims: Final[int]
    """With ``latest_ttl_ms``: reclamations of expired entries started since the store object
    opened; 0 without."""

DEFAULT_MEMORY_LIMIT_MB: Final[int]
"""The memory budget of a process that never set one (MiB)."""

def set_memory_limit(limit_mb: int) -> None:
    """Sets the memory budget of the process: one limit for the memory verstore allocates
    natively, shared by every store the process holds, open or kept.

    Split by what holds it: a sixteenth for the write buffers of every store (a store writes its
    buffer to RocksDB when they are past it), a sixteenth for their caches of latest values and
    history rows (a cache leaves new entries out, then forgets half of itself, when they are past
    it), three eighths for RocksDB's one block cache (data, index and filter blocks, and the
    memtables charged to it), and half as headroom for what is not bounded: a write buffer's write
    (RocksDB copies it twice: its write batch, then its memtable), RocksDB's own working memory
    (table readers, iterators, flushes, compactions) and the allocators' slack. A batch call holds
    its own rows' writes in memory until it returns, on top of this (its writes, then RocksDB's
    write batch and memtable copies of them; what it reads ahead of its puts is held one round of
    65 536 rows at a time); so do results handed to the caller. Measured: peak RSS within 1.1 x
    the limit + 32 MiB + 25 MiB for a call of 100 000 rows over the process's baseline, for
    limits of 64 MiB to 1 GiB at 1 million keys (111, 176 and 641 MB at 64, 256 and 1024 MiB;
    tests/core/test_memory_rss.py, BENCHMARKS.md, large state).

    Takes effect at once for RocksDB's cache; the write buffers and caches follow as their
    stores next write. Default :data:`DEFAULT_MEMORY_LIMIT_MB`.

    Raises:
        ValueError: ``limit_mb`` below 16.
    """

def memory_usage() -> MemoryUsage:
    """What the memory budget's holders use now: cheap (counters and RocksDB's cache)."""

@final
class MemoryUsage:
    """What the process's memory budget's holders use at one moment (:func:`memory_usage`)."""

    limit_bytes: Final[int]
    """The process's budget (:func:`set_memory_limit`)."""
    rocksdb_bytes: Final[int]
    """RocksDB's block cache: data, index and filter blocks and the memtables charged to it."""
    memtable_bytes: Final[int]
    """RocksDB's memtables of every store (inside ``rocksdb_bytes``)."""
    write_buffer_bytes: Final[int]
    """Write buffers of every store."""
    cache_bytes: Final[int]
    """Caches of latest values and long history rows of every store."""
    open_stores: Final[int]
    """Persistent stores open in the process."""
    under_pressure: Final[bool]
    """Whether the holders use more than their shares: time for a holder of idle stores to
    give their memory back (:meth:`VersionedStore.release_memory`, or close them)."""
    write_buffers_over: Final[bool]
    """Whether the write buffers of every store hold more than their share."""
    write_buffer_share_bytes: Final[int]
    """The write buffers' share of the budget (a sixteenth of ``limit_bytes``)."""
    caches_over: Final[bool]
    """Whether the caches of every store hold more than their share (a sixteenth)."""
    rocksdb_over: Final[bool]
    """Whether RocksDB's block cache, memtables included, holds more than its share (3/8)."""

@final
class GroupHistory:
    """One key's version history with the store's semantics, serializable to bytes.

    For hosts that own durability, such as Spark's ``GroupState`` in
    ``applyInPandasWithState``: the bytes are the store's own keyspace (row format included),
    framed with a checksum.
    """

    def __new__(
        cls,
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        latest_ttl_ms: int | None = None,
    ) -> Self: ...
    @staticmethod
    def from_bytes(
        data: bytes,
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        latest_ttl_ms: int | None = None,
    ) -> GroupHistory:
        """Restores a history from :meth:`to_bytes`.

        Raises:
            CorruptionError: Damaged bytes.
            IncompatibleConfigError: Written with another retention or interval, or with a
                higher latest TTL, or with one when none is given.
        """
    def to_bytes(self) -> bytes:
        """The whole history as bytes."""
    def put(self, value: bytes | None, timestamp: int) -> int:
        """As :meth:`VersionedStore.put` for this one key."""
    def delete(self, timestamp: int) -> VersionedRecord | None:
        """As :meth:`VersionedStore.delete` for this one key."""
    def get(self, as_of: int | None = None) -> VersionedRecord | None:
        """As :meth:`VersionedStore.get` for this one key."""
    def versions(
        self, from_time: int | None = None, to_time: int | None = None, ascending: bool = False
    ) -> list[VersionedRecord]:
        """As :meth:`VersionedStore.versions` for this one key."""
    @property
    def observed_stream_time(self) -> int: ...
    @property
    def history_retention_ms(self) -> int: ...
    @property
    def segment_interval_ms(self) -> int: ...
    @property
    def latest_ttl_ms(self) -> int | None: ...

TUPLE_ENCODING: Final[str]
"""Name and version of the bytes :func:`encode_rows` writes (``"verstore-tuple-1"``); a store
of encoded keys or values records it. ``docs/format.md`` specifies the encoding byte by byte."""

def encode_rows(data: Any, columns: list[str] | None = None) -> pa.BinaryArray:
    """Encodes typed columns into one binary value per row, in the tuple encoding.

    Comparing two encodings bytewise compares the rows column by column, each in its natural
    order with nulls first (``ORDER BY ... NULLS FIRST``); equal rows, and only those, encode
    alike. Floats follow Spark: ``-0.0`` encodes as ``0.0`` and every NaN as one NaN, greater
    than ``inf``. The encoding depends on the column types, not on names, nullability, time
    zones or offset widths (``string`` and ``large_string`` encode alike). The GIL is released
    while encoding.

    Supported types: null, bool, int8/16/32/64, float32/64, decimal128, date32,
    timestamp, duration, time64, string, large_string, binary, large_binary, and struct,
    list, large_list and map of these: every type Spark's Arrow conversion produces.

    Args:
        data: A ``pyarrow.RecordBatch`` or struct array (anything with ``__arrow_c_array__``).
        columns: The columns to encode, in this order; all when None. No columns encode every
            row as ``b""``.

    Returns:
        One value per row, never null.

    Raises:
        ValueError: A named column does not exist, or the rows encode to more than 2 GiB.
        TypeError: A column type (or a type nested in it) the encoding does not support, naming
            the column and the type; raised before any row is encoded, so encoding an empty
            batch checks a schema.
    """

def decode_rows(rows: Any, schema: pa.Schema) -> pa.RecordBatch:
    """Decodes rows made by :func:`encode_rows` back into columns of ``schema``.

    The GIL is released while decoding.

    Args:
        rows: A ``pyarrow.BinaryArray`` (anything with ``__arrow_c_array__`` of binary type).
            A null row decodes to a null in every column.
        schema: The schema of the encoded columns: the same types, in the same order. Field
            names, nullability and time zones are taken from it.

    Returns:
        A batch of ``schema`` with one row per input row.

    Raises:
        CorruptionError: The bytes are not rows of this schema (naming the row and column);
            never a crash.
        TypeError: ``rows`` is not binary, or ``schema`` has a type the encoding does not
            support (raised before any row is decoded).
        ValueError: A null row and a column of ``schema`` that is not nullable.
    """

def sort_indices(keys: Any) -> pa.UInt64Array:
    """The indices that sort ``keys`` by their bytes: ascending, stable (equal keys keep their
    order), nulls last, as ``pyarrow.compute.sort_indices`` orders a binary column.

    Keys made by :func:`encode_rows` order like the rows they encode, so this sorts rows. The
    GIL is released while sorting.

    Args:
        keys: A binary column: an array or chunked array (anything with ``__arrow_c_array__``
            or ``__arrow_c_stream__``), or a list of bytes.

    Raises:
        TypeError: ``keys`` is not binary.
    """

def asof_compact(
    data: Any,
    *,
    side: str | None,
    table_side: int,
    keys: list[str],
    time: str,
    tie_breakers: list[str],
    values: list[str],
    value_prefix: bytes,
    names: list[str],
) -> pa.RecordBatch:
    """The as-of join's table rows of ``data`` that can be stored, encoded (``verstore.spark``
    internals, ``rust/asof.rs``; the GIL is released).

    The rows kept are those whose ``side`` column is ``table_side`` (every row when ``side`` is
    None), with no null in ``keys`` and ``time`` (``int64``), and ``time >= 0``. The result has
    the columns ``names``: the sort key (the tuple encoding of ``time``, ``keys``,
    ``tie_breakers``, ``values``), the key (of ``keys``), the time, the stored value
    (``value_prefix`` then the encoding of ``values`` and ``tie_breakers``) and, with
    tie-breakers, their encoding.

    Raises:
        ValueError: A named column does not exist, ``time`` is not ``int64``, ``names`` has the
            wrong length, or the rows encode to more than 2 GiB.
        TypeError: A column type the tuple encoding does not support.
    """

def asof_apply(store: VersionedStore, keys: Any, times: Any, values: Any) -> pa.Int64Array:
    """Puts the last row of each run of equal (time, key) of rows sorted by time, then key, in
    order (``verstore.spark`` internals; the GIL is released): the put return codes of the
    rows put, as :meth:`VersionedStore.put_batch` returns them.

    Raises:
        ValueError, TypeError: As :meth:`VersionedStore.put_batch`.
        StoreClosedError: The store is closed.
    """

def asof_lookup(
    store: VersionedStore,
    data: Any,
    *,
    keys: list[str],
    time: str,
    strict: bool = False,
    tolerance_ms: int | None = None,
) -> pa.RecordBatch:
    """Each row of ``data`` looked up as of its ``time`` (``int64``; strictly before it with
    ``strict``), its key the tuple encoding of ``keys`` (``verstore.spark`` internals; the GIL
    is released): a batch of ``value``, ``valid_from`` and ``valid_to``, null where the row is
    unmatched: a null key column or time, a lookup time before the epoch, no version, or a
    version more than ``tolerance_ms`` older than ``time``.

    Raises:
        ValueError: A named column does not exist or ``time`` is not ``int64``.
        TypeError: A key column type the tuple encoding does not support.
        StoreClosedError: The store is closed.
    """

CHANGELOG_HEADER_LEN: Final[int]
"""Length of a changelog file's header (64): :func:`read_changelog_header` needs that much."""

@final
class ChangelogHeader:
    """The header of a changelog file (layout in docs/format.md); equal by all fields."""

    version: Final[int]
    """The version the changelog produces."""
    attempt: Final[bytes]
    """The 16-byte id of the attempt that wrote it."""
    parent_attempt: Final[bytes]
    """The 16-byte id of the attempt that wrote the version before."""
    record_count: Final[int]
    """The number of records, stream-time records included."""
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def read_changelog_header(data: bytes, name: str = "changelog") -> ChangelogHeader:
    """Verifies a changelog header (the first :data:`CHANGELOG_HEADER_LEN` bytes of ``data``).

    Raises:
        CorruptionError: Naming ``name``.
    """

def verify_changelog(data: bytes, name: str = "changelog") -> ChangelogHeader:
    """Verifies a whole changelog file (both checksums, record framing); returns its header.

    Raises:
        CorruptionError: Naming ``name``.
    """

def read_changelog(data: bytes, name: str = "changelog") -> tuple[ChangelogHeader, pa.RecordBatch]:
    """A whole changelog file's header and records, verified as :func:`verify_changelog` does.

    Returns:
        The header, and the accepted writes in the order they were applied: a batch of ``key``
        (binary), ``value`` (binary, null for a tombstone) and ``timestamp`` (int64). The GIL
        is released while decoding. Stream-time records (:meth:`VersionedStore.advance_stream_time`)
        change no key and are left out, so the batch may have fewer rows than
        ``header.record_count``, which counts every record.

    Raises:
        CorruptionError: Naming ``name``.
    """

class VerstoreError(Exception):
    """Root of verstore's errors."""

class StoreClosedError(VerstoreError):
    """The store was closed."""

class StoreLockedError(VerstoreError):
    """The store directory is open in another store object or process."""

class IncompatibleConfigError(VerstoreError):
    """The store was created with another retention or segment interval."""

class IncompatibleFormatError(VerstoreError):
    """The store uses an on-disk format version this build does not read."""

class CorruptionError(VerstoreError):
    """Stored bytes do not decode; the message names the file or key range."""

class StorageError(VerstoreError):
    """RocksDB or the filesystem failed."""

__all__ = [
    "CHANGELOG_HEADER_LEN",
    "DEFAULT_MEMORY_LIMIT_MB",
    "NOT_PUT",
    "TUPLE_ENCODING",
    "VALID_TO_UNDEFINED",
    "ChangelogHeader",
    "CorruptionError",
    "GroupHistory",
    "IncompatibleConfigError",
    "IncompatibleFormatError",
    "MemoryUsage",
    "Scan",
    "StorageError",
    "StoreClosedError",
    "StoreLockedError",
    "StoreStats",
    "VersionedRecord",
    "VersionedStore",
    "VerstoreError",
    "__version__",
    "_fail_storage_writes",
    "asof_apply",
    "asof_compact",
    "asof_lookup",
    "decode_rows",
    "default_segment_interval_ms",
    "encode_rows",
    "memory_usage",
    "read_changelog",
    "read_changelog_header",
    "set_memory_limit",
    "sort_indices",
    "verify_changelog",
]
