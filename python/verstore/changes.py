"""A store's change feed: what each micro-batch wrote, read from the committed changelogs.

Micro-batch ``b`` commits version ``b + 1`` of each partition as one changelog: the writes the
store accepted, in the order they were applied (docs/format.md, changelog files). The feed is
those changelogs along the winning chain of each partition (docs/checkpoint.md), so a retried,
speculative or zombie attempt's changelog never appears, and a write rejected as older than the
grace period never does either. Keys and values are decoded with the store's column layout, as
:mod:`verstore.committed` decodes state. Like every file read, a changelog is hostile input: its
checksums, framing and header (version and attempts against its name) are verified.

A store's ``latest_ttl_ms`` ends keys without a write, so the feed has no row for an expiry
(docs/semantics.md §2.15): a consumer that needs expiries applies the rule to the feed, a key
whose last row has ``valid_from = t`` having expired once its partition's stream time reaches
``t + latest_ttl_ms``.

Used by ``verstore.spark.read_store(..., changes=True)`` (one Spark task per partition) and
``verstore changes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from verstore._core import read_changelog
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.settings import StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.committed import PARTITION, StoreRef
from verstore.exceptions import CorruptionError, MissingVersionError

BATCH_ID = "batch_id"
SEQUENCE = "change_seq"
CHANGE = "change_type"
#: The write's time (epoch ms): the version it wrote is valid from then, as
#: :mod:`verstore.committed` says.
TIMESTAMP = "valid_from"
#: ``change_type`` of a write with a value, and of a tombstone (a delete).
PUT, DELETE = "put", "delete"


def changes_schema(columns: ColumnLayout | None) -> Any:
    """The Arrow schema of change feed rows: ``batch_id``, ``partition``, ``change_seq`` (the
    write's place in its micro-batch's changelog), ``change_type``, the key and value columns
    (``key`` and ``value`` as binary without a layout; the value columns null for a delete) and
    ``valid_from`` (the write's time, epoch ms)."""
    import pyarrow as pa

    if columns is None:
        fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary())]
    else:
        key, value = columns.schemas()
        fields = [f.with_nullable(True) for f in [*key, *value]]
    head = [
        pa.field(BATCH_ID, pa.int64()),
        pa.field(PARTITION, pa.int32()),
        pa.field(SEQUENCE, pa.int64()),
        pa.field(CHANGE, pa.string()),
    ]
    taken = {f.name for f in head} | {TIMESTAMP}
    for f in fields:
        if f.name in taken:
            raise ValueError(f"the store has a column named {f.name!r}, which the feed adds")
    return pa.schema([*head, *fields, pa.field(TIMESTAMP, pa.int64())])


def batch_range(
    graph: Graph, from_batch: int | None, to_batch: int | None, served: range = range(0, 2**63)
) -> list[CommitRef]:
    """The winning chain's commits of micro-batches ``from_batch`` to ``to_batch`` (inclusive;
    default: the oldest kept and the newest) among the batches ``served`` (those of the
    partitioning the graph belongs to), oldest first.

    Raises:
        MissingVersionError: ``from_batch`` is older than the oldest changelog kept.
    """
    chain = list(graph.walk(graph.tip()))
    kept = [r for r in chain if r in graph.commits]
    # A chain that reaches the empty state keeps every batch; otherwise cleanup removed the
    # changelogs below its oldest kept one.
    oldest = 0 if chain[-1] == ROOT else (kept[-1].version - 1 if kept else graph.tip().version)
    if from_batch is not None and max(from_batch, served.start) < oldest:
        raise MissingVersionError(
            f"the changes of micro-batch {from_batch} are gone from {graph.files.describe()}: the "
            f"oldest micro-batch whose changelog is kept is {oldest} (min_versions_to_retain)"
        )
    low = oldest if from_batch is None else from_batch
    high = graph.tip().version - 1 if to_batch is None else to_batch
    return [r for r in reversed(kept) if low <= r.version - 1 <= high and r.version - 1 in served]


def partitions_of_changes(
    ref: StoreRef, settings: StoreSettings, from_batch: int | None, to_batch: int | None
) -> list[tuple[int, int]]:
    """``(partitioning id, partition)`` of every partition whose changelogs may hold the
    batches ``from_batch`` to ``to_batch``, across the store's repartitions."""
    low, high = from_batch or 0, 2**63 - 2 if to_batch is None else to_batch
    out = []
    for partitioning in settings.partitionings or (settings.partitioning,):
        served = batches_served(settings, partitioning.id)
        if served.start <= high and low < served.stop:
            out += [(partitioning.id, p) for p in partitioning.partitions(ref.files)]
    return out


def batches_served(settings: StoreSettings, partitioning_id: int) -> range:
    """The micro-batches whose changes partitioning ``partitioning_id`` holds: from its first
    version (its own first commit is the repartition, not a micro-batch) to the batch before
    the next partitioning's first version."""
    found = settings.partitionings or (settings.partitioning,)
    start = found[partitioning_id].version
    stop = found[partitioning_id + 1].version if partitioning_id + 1 < len(found) else 2**63 - 1
    return range(start, stop)


def read_changes(
    ref: StoreRef,
    settings: StoreSettings,
    partition: int,
    *,
    from_batch: int | None = None,
    to_batch: int | None = None,
    partitioning: int = 0,
) -> Iterator[Any]:
    """One partition's change feed, micro-batch by micro-batch, as ``pyarrow.RecordBatch`` of
    :func:`changes_schema`. ``partitioning``: the id of the partitioning the partition is of
    (:func:`partitions_of_changes`).

    Raises:
        MissingVersionError: ``from_batch`` is older than the oldest changelog kept.
        CorruptionError: A changelog is damaged, or its header names another commit.
    """
    found = settings.partitionings or (settings.partitioning,)
    files = found[partitioning].files(ref.files, partition)
    graph = Graph(files, files.listing())
    schema = changes_schema(settings.columns)
    values = ValueCodec(settings) if settings.columns is not None else None
    served = batches_served(settings, partitioning)
    for commit_ref in batch_range(graph, from_batch, to_batch, served):
        commit = graph.commits[commit_ref]
        where = files.location.describe(commit.path)
        header, records = read_changelog(files.location.read_bytes(commit.path), where)
        named = (commit.ref.version, commit.ref.attempt, commit.parent.attempt)
        if (header.version, header.attempt, header.parent_attempt) != named:
            raise CorruptionError(f"corrupt data in {where}: its header names another commit")
        yield _decode(records, settings, values, commit.ref.version - 1, partition, schema)


def _decode(
    records: Any,
    settings: StoreSettings,
    values_codec: ValueCodec | None,
    batch_id: int,
    partition: int,
    schema: Any,
) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    from verstore._core import decode_rows

    n = records.num_rows
    values = records.column("value")
    if settings.columns is None or values_codec is None:
        stored = [records.column("key"), values]
    else:
        stored = [
            *decode_rows(records.column("key"), settings.columns.schemas()[0]).columns,
            *values_codec.decode(values).columns,
        ]
    head = [
        pa.array([batch_id] * n, pa.int64()),
        pa.array([partition] * n, pa.int32()),
        pa.array(range(n), pa.int64()),
        pc.if_else(pc.is_null(values), DELETE, PUT),
    ]
    return pa.RecordBatch.from_arrays([*head, *stored, records.column("timestamp")], schema=schema)


__all__ = [
    "BATCH_ID",
    "CHANGE",
    "DELETE",
    "PUT",
    "SEQUENCE",
    "TIMESTAMP",
    "changes_schema",
    "partitions_of_changes",
    "read_changes",
]
