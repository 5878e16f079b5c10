"""``inspect``: what a store's checkpoint holds, as an Arrow table (for notebooks and jobs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verstore._core import read_changelog_header
from verstore.checkpoint import CHANGELOG_HEADER_LEN, PartitionFiles, decode_manifest
from verstore.location import Location


def inspect(
    checkpoint_root: str,
    store: str,
    partition: int | None = None,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """One row per durable file of a store's partitions: changelogs and snapshots.

    Args:
        checkpoint_root: The root passed to :func:`verstore.spark.configure`.
        store: The store name (e.g. ``"asof"``).
        partition: Only this partition.
        version: Only this version.
        storage_options: Filesystem options for a URI root.

    Returns:
        A ``pyarrow.Table`` with columns ``partition``, ``version``, ``kind``
        (``"changelog"`` or ``"snapshot"``), ``bytes``, ``records`` (changelogs),
        ``files`` (snapshots), ``attempt`` (hex) and ``parent_attempt`` (hex, changelogs).
    """
    import pyarrow as pa

    loc = Location.resolve(checkpoint_root, storage_options)
    rows: list[dict[str, Any]] = []
    partitions = []
    for info in loc.list(loc.path(store)):
        name = info.base_name
        if name.startswith("p=") and name[2:].isdigit():
            partitions.append(int(name[2:]))
    for p in sorted(partitions):
        if partition is not None and p != partition:
            continue
        files = PartitionFiles(loc, store, p)
        changelogs, snapshots, _ = files.listing()
        for v, info in sorted(changelogs.items()):
            if version is not None and v != version:
                continue
            head = loc.read_head(info.path, CHANGELOG_HEADER_LEN)
            _, attempt, parent, count = read_changelog_header(head, loc.describe(info.path))
            rows.append(
                {
                    "partition": p,
                    "version": v,
                    "kind": "changelog",
                    "bytes": info.size,
                    "records": count,
                    "files": None,
                    "attempt": attempt.hex(),
                    "parent_attempt": parent.hex(),
                }
            )
        for v, info in sorted(snapshots.items()):
            if version is not None and v != version:
                continue
            manifest = decode_manifest(loc.read_bytes(info.path), loc.describe(info.path))
            rows.append(
                {
                    "partition": p,
                    "version": v,
                    "kind": "snapshot",
                    "bytes": sum(f["size"] for f in manifest["files"]),
                    "records": None,
                    "files": len(manifest["files"]),
                    "attempt": manifest["attempt"],
                    "parent_attempt": None,
                }
            )
    schema = pa.schema(
        [
            ("partition", pa.int32()),
            ("version", pa.int64()),
            ("kind", pa.string()),
            ("bytes", pa.int64()),
            ("records", pa.int64()),
            ("files", pa.int32()),
            ("attempt", pa.string()),
            ("parent_attempt", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
