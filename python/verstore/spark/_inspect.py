"""``inspect``: what a store's checkpoint holds, as an Arrow table (for notebooks and jobs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verstore.checkpoint.chain import Graph
from verstore.checkpoint.manifest import read_manifest
from verstore.checkpoint.survey import find_lineages
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
        A ``pyarrow.Table`` with columns ``lineage``, ``partition``, ``version``, ``kind``
        (``"changelog"`` or ``"snapshot"``), ``bytes``, ``records`` (changelogs), ``files``
        (snapshots), ``attempt`` (hex), ``parent_version`` and ``parent_attempt`` (changelogs)
        and ``winning`` (whether the commit is on the partition's winning chain).

    Raises:
        CorruptionError: A damaged file, naming it.
    """
    import pyarrow as pa

    from verstore._core import CHANGELOG_HEADER_LEN, read_changelog_header

    loc = Location.resolve(checkpoint_root, storage_options)
    rows: list[dict[str, Any]] = []
    for files_of_lineage in find_lineages(loc, store, lineage):
        for p in files_of_lineage.partitions():
            if partition is not None and p != partition:
                continue
            files = files_of_lineage.partition(p)
            listing = files.listing()
            graph = Graph(files, listing)
            chain = set(graph.walk(graph.tip()))
            for ref, commit in sorted(listing.commits.items()):
                if version is not None and ref.version != version:
                    continue
                head = loc.read_head(commit.path, CHANGELOG_HEADER_LEN)
                count = read_changelog_header(head, loc.describe(commit.path)).record_count
                rows.append(
                    {
                        "lineage": files_of_lineage.lineage,
                        "partition": p,
                        "version": ref.version,
                        "kind": "changelog",
                        "bytes": commit.size,
                        "records": count,
                        "files": None,
                        "attempt": ref.attempt.hex(),
                        "parent_version": commit.parent.version,
                        "parent_attempt": commit.parent.attempt.hex(),
                        "winning": ref in chain,
                    }
                )
            for ref, snapshot in sorted(listing.snapshots.items()):
                if version is not None and ref.version != version:
                    continue
                manifest = read_manifest(loc, snapshot.path, ref)
                rows.append(
                    {
                        "lineage": files_of_lineage.lineage,
                        "partition": p,
                        "version": ref.version,
                        "kind": "snapshot",
                        "bytes": sum(f.size for f in manifest.files),
                        "records": None,
                        "files": len(manifest.files),
                        "attempt": ref.attempt.hex(),
                        "parent_version": None,
                        "parent_attempt": None,
                        "winning": ref in chain,
                    }
                )
    schema = pa.schema(
        [
            ("lineage", pa.string()),
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
    return pa.Table.from_pylist(rows, schema=schema)
