"""What a user writes without verstore: the baselines every benchmark group runs beside it.

* :class:`RawRocks` — raw RocksDB from Python (rocksdict, raw bytes, write-ahead log off, or on
  for the ``wal_on`` ceiling): one value per key, no versions. The ceiling.
* :class:`SqliteHistory` — a temporal table in SQLite (WAL journal, one transaction for a run
  of writes): ``(key, valid_from) -> value``, as-of read = the newest row at or before a time.
* :class:`DictHistory` — pure Python: per key, parallel sorted lists of times and values,
  ``bisect`` for as-of reads; in memory, no durability, no retention.
* :class:`NaiveRocksHistory` — the versioned logic in Python over rocksdict: per key one value
  holding every version (marshal-encoded sorted lists), read, updated and rewritten on each
  put (Kafka's row rewrite, without segments or retention).

None of them applies a retention or returns valid-to; they do less than verstore.
"""

from __future__ import annotations

import bisect
import marshal
import sqlite3
from pathlib import Path
from typing import Any, cast

import rocksdict


def _rocks_options() -> Any:
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(64 << 20)
    return options


class RawRocks:
    """rocksdict in raw mode, write-ahead log off (verstore's checkpointed mode) unless
    ``wal``: then every write is in RocksDB's log when it returns (not synced to disk), as
    verstore's writes with ``write_ahead_log=True`` are."""

    def __init__(self, path: Path, *, wal: bool = False) -> None:
        self.path = path
        self.db = rocksdict.Rdict(str(path), _rocks_options())
        write = rocksdict.WriteOptions()
        # A property at runtime; rocksdict's stubs declare it a method.
        write.disable_wal = not wal  # type: ignore[method-assign, assignment]
        self.db.set_write_options(write)

    def put_batch(self, keys: list[bytes], values: list[bytes]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        put = batch.put
        for k, v in zip(keys, values, strict=True):
            put(k, v)
        self.db.write(batch)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        """RocksDB's MultiGet (which sorts the keys itself)."""
        return cast("list[bytes | None]", self.db.get(cast(Any, keys)))

    def count_found(self, keys: list[bytes], batch_rows: int) -> int:
        """How many of ``keys`` hold a value, read by ``MultiGet`` in batches of ``batch_rows``."""
        found = 0
        for start in range(0, len(keys), batch_rows):
            values = self.multi_get(keys[start : start + batch_rows])
            found += sum(1 for v in values if v is not None)
        return found

    def close(self) -> None:
        self.db.close()


class SqliteHistory:
    """A temporal table: one row per version, primary key (key, valid_from)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS versions (key BLOB, valid_from INTEGER, value BLOB, "
            "PRIMARY KEY (key, valid_from)) WITHOUT ROWID"
        )
        self.put_sql = "INSERT OR REPLACE INTO versions VALUES (?, ?, ?)"
        self.get_sql = (
            "SELECT value, valid_from FROM versions WHERE key = ? AND valid_from <= ? "
            "ORDER BY valid_from DESC LIMIT 1"
        )

    def begin(self) -> None:
        self.db.execute("BEGIN")

    def commit(self) -> None:
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


class DictHistory:
    """Per key, parallel sorted lists of times and values."""

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[list[int], list[bytes]]] = {}

    def put(self, key: bytes, value: bytes, ts: int) -> None:
        times, values = self.data.setdefault(key, ([], []))
        i = bisect.bisect_right(times, ts)
        times.insert(i, ts)
        values.insert(i, value)

    def get(self, key: bytes, as_of: int | None = None) -> bytes | None:
        entry = self.data.get(key)
        if entry is None:
            return None
        times, values = entry
        i = len(times) if as_of is None else bisect.bisect_right(times, as_of)
        return values[i - 1] if i else None


class NaiveRocksHistory:
    """Every version of a key in one rocksdict value, rewritten on each put."""

    def __init__(self, path: Path) -> None:
        self.raw = RawRocks(path)
        self.db = self.raw.db

    def put(self, key: bytes, value: bytes, ts: int) -> None:
        stored = self.db.get(key)
        times, values = marshal.loads(stored) if stored is not None else ([], [])
        i = bisect.bisect_right(times, ts)
        times.insert(i, ts)
        values.insert(i, value)
        self.db.put(key, marshal.dumps((times, values)))

    def get(self, key: bytes, as_of: int) -> bytes | None:
        stored = self.db.get(key)
        if stored is None:
            return None
        times, values = marshal.loads(stored)
        i = bisect.bisect_right(times, as_of)
        return values[i - 1] if i else None

    def close(self) -> None:
        self.raw.close()
