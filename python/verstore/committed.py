"""Reading a store's committed state from its checkpoint: what the whole table looked like at a
version, as of a time, or with its full history, decoded back to the columns that wrote it.

Each read opens one partition of a lineage read-only (``PartitionStore.open(read_only=True)``):
it rebuilds the committed version in a private temporary directory, never touching the local
copies of a running query, then scans it with a consistent snapshot and decodes keys and values
with the Arrow schemas the store recorded (``ColumnLayout``). Used by
``verstore.spark.read_store`` (one Spark task per partition) and ``verstore scan``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import CheckpointOptions, LineageFiles, PartitionStore, read_settings
from verstore.checkpoint.layout import MAX_VERSION, lineages
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.settings import StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.exceptions import MissingVersionError
from verstore.location import Location

VALID_FROM = "valid_from"
VALID_TO = "valid_to"
PARTITION = "partition"
#: The newest committed version of every partition.
NEWEST = MAX_VERSION - 1


@dataclass(frozen=True)
class StoreRef:
    """Where a store's state is: a root location, a store name and a lineage."""

    location: Location
    store: str
    lineage: str

    @property
    def files(self) -> LineageFiles:
        return LineageFiles(self.location, self.store, self.lineage)


def resolve(
    root: str | Location,
    store: str,
    lineage: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[StoreRef, StoreSettings]:
    """The store's lineage (``lineage``, or the only one) and its recorded settings.

    Raises:
        MissingVersionError: The store or the lineage does not exist.
        ValueError: Several lineages and ``lineage`` not given.
    """
    location = root if isinstance(root, Location) else Location.resolve(root, storage_options)
    found = lineages(location, store)
    if lineage is None:
        if not found:
            raise MissingVersionError(f"{location.describe(location.path(store))} holds no state")
        if len(found) > 1:
            raise ValueError(
                f"store {store!r} holds the state of several queries ({', '.join(found)}): "
                "name one with lineage=<query id>"
            )
        lineage = found[0]
    elif lineage not in found:
        raise MissingVersionError(
            f"store {store!r} has no lineage {lineage!r} (it has {', '.join(found) or 'none'})"
        )
    ref = StoreRef(location, store, lineage)
    settings = read_settings(ref.files)
    if settings is None:
        raise MissingVersionError(f"{location.describe(ref.files.meta)} is missing")
    return ref, settings


def output_schema(columns: ColumnLayout | None) -> Any:
    """The Arrow schema of the rows read: the key columns, the value columns (or ``key`` and
    ``value`` as binary when the store recorded no layout), ``valid_from``, ``valid_to`` (epoch
    ms) and ``partition``."""
    import pyarrow as pa

    if columns is None:
        fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary())]
    else:
        key, value = columns.schemas()
        fields = [f.with_nullable(True) for f in [*key, *value]]
    names = [f.name for f in fields]
    for extra in (VALID_FROM, VALID_TO, PARTITION):
        if extra in names:
            raise ValueError(f"the store has a column named {extra!r}, which a reader adds")
    return pa.schema(
        [
            *fields,
            pa.field(VALID_FROM, pa.int64()),
            pa.field(VALID_TO, pa.int64()),
            pa.field(PARTITION, pa.int32()),
        ]
    )


def read_partition(
    ref: StoreRef,
    settings: StoreSettings,
    partition: int,
    *,
    version: int = NEWEST,
    as_of: int | None = None,
    history: bool = False,
    from_time: int | None = None,
    to_time: int | None = None,
    start: bytes | None = None,
    end: bytes | None = None,
    prefix: bytes | None = None,
    batch_rows: int = 65_536,
) -> Iterator[Any]:
    """The decoded rows of one partition at ``version`` (default: its newest), as
    ``pyarrow.RecordBatch`` of :func:`output_schema`.

    Without ``history``: one row per key, its record as of ``as_of`` (default: the latest).
    With ``history``: every version whose validity meets ``[from_time, to_time]``, oldest first
    per key. ``start``/``end``/``prefix`` bound the (encoded) keys.
    """
    schema = output_schema(settings.columns)
    key_schema = settings.columns.schemas()[0] if settings.columns is not None else None
    values = ValueCodec(settings) if settings.columns is not None else None
    with reading(ref, settings, partition, version) as store:
        if history:
            scan = store.scan_versions(
                start=start, end=end, prefix=prefix, from_time=from_time,
                to_time=to_time, ascending=True, batch_rows=batch_rows,
            )  # fmt: skip
        else:
            scan = store.scan(
                start=start, end=end, prefix=prefix, as_of=as_of, batch_rows=batch_rows
            )
        with scan:
            for batch in scan:
                yield _decode(batch, key_schema, values, partition, schema)


@contextmanager
def reading(
    ref: StoreRef,
    settings: StoreSettings,
    partition: int,
    version: int = NEWEST,
    progress: Callable[[str, int, int], None] | None = None,
) -> Iterator[VersionedStore]:
    """One partition's store at ``version`` (default: its newest), rebuilt read-only from the
    checkpoint into a temporary directory that is removed on exit: a running query's local
    copies are never touched."""
    with tempfile.TemporaryDirectory(prefix="verstore-read-") as tmp:
        part = PartitionStore.open(
            ref.location,
            ref.store,
            partition,
            version,
            tmp,
            lineage=ref.lineage,
            history_retention_ms=settings.history_retention_ms,
            segment_interval_ms=settings.segment_interval_ms,
            latest_ttl_ms=settings.latest_ttl_ms,
            options=CheckpointOptions(lock_timeout_s=0),
            progress=progress,
            read_only=True,
            # The partitioning these settings (read afresh by resolve()) say serves the version.
            partitioning=settings.partitioning_at(version),
        )
        try:
            yield part.store
        finally:
            part.abort()


def _decode(
    batch: Any, key_schema: Any, values: ValueCodec | None, partition: int, schema: Any
) -> Any:
    import pyarrow as pa

    from verstore._core import decode_rows

    if values is None:
        columns = [batch.column("key"), batch.column("value")]
    else:
        columns = [
            *decode_rows(batch.column("key"), key_schema).columns,
            *values.decode(batch.column("value")).columns,
        ]
    columns += [
        batch.column("timestamp"),
        batch.column("valid_to"),
        pa.array([partition] * batch.num_rows, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def encode_key(columns: ColumnLayout | None, key: Any) -> bytes | None:
    """A key bound of a read: bytes as they are, or a tuple/dict of the key columns' values
    encoded with the store's layout (a prefix of the key columns is a prefix bound)."""
    import pyarrow as pa

    from verstore._core import encode_rows

    if key is None or isinstance(key, bytes):
        return key
    if columns is None:
        raise TypeError("this store recorded no column layout: give key bounds as bytes")
    key_schema, _ = columns.schemas()
    values = list(key.values()) if isinstance(key, dict) else list(key)
    if not 0 < len(values) <= len(key_schema):
        raise ValueError(f"a key bound has 1 to {len(key_schema)} values, got {len(values)}")
    fields = list(key_schema)[: len(values)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([v], f.type) for v, f in zip(values, fields, strict=True)],
        schema=pa.schema(fields),
    )
    encoded: bytes = encode_rows(batch)[0].as_py()
    return encoded


__all__ = ["NEWEST", "StoreRef", "encode_key", "output_schema", "read_partition", "resolve"]
