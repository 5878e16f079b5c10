"""``inspect``: what a store's checkpoint holds, as an Arrow table (for notebooks and jobs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verstore.checkpoint.chain import Graph
from verstore.checkpoint.inspect import find_lineages
from verstore.checkpoint.layout import CommitRef, PartitionFiles
from verstore.checkpoint.settings import every_partition, read_settings
from verstore.checkpoint.uploads import read_manifest
from verstore.location import Location


def inspect(
    checkpoint_root: str,
    store: str,
    partition: int | None = None,
    version: int | None = None,
    *,
    lineage: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """One row per durable file of a store's partitions: changelogs and snapshots.

    Args:
        checkpoint_root: The root passed to :func:`verstore.spark.configure`.
        store: The store name (e.g. ``"asof"``).
        partition: Only this partition.
        version: Only this version.
        lineage: Only this lineage (a query id); default: every lineage of the store.
        storage_options: Filesystem options for a URI root.

    Returns:
        A ``pyarrow.Table`` with columns ``lineage``, ``partitioning`` (0, then one more per
        repartition: ``verstore.spark.repartition_store``), ``partition``, ``version``, ``kind``
        (``"changelog"`` or ``"snapshot"``), ``bytes``, ``records`` (changelogs), ``files``
        (snapshots), ``attempt`` (hex), ``parent_version`` and ``parent_attempt`` (changelogs)
        and ``winning`` (whether the commit is on the partition's winning chain).

    Raises:
        CorruptionError: A damaged file, naming it.
    """
    import pyarrow as pa

    loc = Location.resolve(checkpoint_root, storage_options)
    rows: list[dict[str, Any]] = []
    for files_of_lineage in find_lineages(loc, store, lineage):
        settings = read_settings(files_of_lineage)
        for partitioning, p, files in every_partition(files_of_lineage, settings):
            if partition is None or p == partition:
                rows += [
                    {**row, "partitioning": partitioning.id}
                    for row in _partition_rows(files, version)
                ]
    return pa.Table.from_pylist(rows, schema=_schema())


def _partition_rows(files: PartitionFiles, version: int | None) -> list[dict[str, Any]]:
    """The rows of one partition's changelogs, then its snapshots (of ``version`` only)."""
    from verstore._core import CHANGELOG_HEADER_LEN, read_changelog_header

    loc = files.location
    listing = files.listing()
    graph = Graph(files, listing)
    chain = set(graph.walk(graph.tip()))
    rows = []
    for ref, commit in sorted(listing.commits.items()):
        if version is None or ref.version == version:
            head = loc.read_head(commit.path, CHANGELOG_HEADER_LEN)
            count = read_changelog_header(head, loc.describe(commit.path)).record_count
            rows.append(
                {
                    **_row(files, ref, "changelog", ref in chain),
                    "bytes": commit.size,
                    "records": count,
                    "parent_version": commit.parent.version,
                    "parent_attempt": commit.parent.attempt.hex(),
                }
            )
    for ref, snapshot in sorted(listing.snapshots.items()):
        if version is None or ref.version == version:
            manifest = read_manifest(loc, snapshot.path, ref)
            rows.append(
                {
                    **_row(files, ref, "snapshot", ref in chain),
                    "bytes": sum(f.size for f in manifest.files),
                    "files": len(manifest.files),
                }
            )
    return rows


def _row(files: PartitionFiles, ref: CommitRef, kind: str, winning: bool) -> dict[str, Any]:
    """A row's columns common to changelogs and snapshots; the others null."""
    return {
        "lineage": files.lineage.lineage,
        "partitioning": 0,
        "partition": files.partition,
        "version": ref.version,
        "kind": kind,
        "bytes": None,
        "records": None,
        "files": None,
        "attempt": ref.attempt.hex(),
        "parent_version": None,
        "parent_attempt": None,
        "winning": winning,
    }


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("lineage", pa.string()),
            ("partitioning", pa.int32()),
            ("partition", pa.int32()),
            ("version", pa.int64()),
            ("kind", pa.string()),
            ("bytes", pa.int64()),
            ("records", pa.int64()),
            ("files", pa.int32()),
            ("attempt", pa.string()),
            ("parent_version", pa.int64()),
            ("parent_attempt", pa.string()),
            ("winning", pa.bool_()),
        ]
    )
