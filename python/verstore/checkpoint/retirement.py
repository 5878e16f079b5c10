"""Retirements: a cleanup's durable list of the uploads it is about to delete.

An upload (``SSTs/<32 hex>-<name>``) is deleted only in this order (docs/checkpoint.md,
"Cleanup"): the cleanup first writes ``_retiring-<32 hex>.json`` in the partition directory,
naming every upload it means to delete; then it lists the partition again and spares every
upload that a manifest or claim it had not read names; then it deletes the rest, and its
retirement last. A snapshot reads every retirement after it wrote its claim and before it
writes its manifest, and fails if one names a file it names. Of a cleanup and a snapshot that
race for one upload, one of them therefore always sees the other: no interleaving publishes a
manifest whose file a cleanup deletes.

```json
{"format_version": 2, "files": ["SSTs/<32 hex>-000012.sst", ...]}
```

A retirement is hostile input like every file of a checkpoint: one larger than
:data:`RETIREMENT_LIMIT`, not JSON, with other fields or naming anything but an upload is a
:class:`CorruptionError` naming it.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Iterable
from typing import Any

from verstore.checkpoint.layout import FORMAT_VERSION, RETIRING_PREFIX, PartitionFiles
from verstore.checkpoint.manifest import is_durable_name
from verstore.exceptions import CorruptionError

RETIREMENT_LIMIT = 64 << 20


def new_path(files: PartitionFiles) -> str:
    """A fresh retirement name in the partition directory (each cleanup writes its own)."""
    return posixpath.join(files.dir, f"{RETIRING_PREFIX}{os.urandom(16).hex()}.json")


def write(files: PartitionFiles, durables: Iterable[str]) -> str:
    """Writes a new retirement naming ``durables``; returns its path."""
    path = new_path(files)
    body = {"format_version": FORMAT_VERSION, "files": sorted(durables)}
    files.location.create_new(path, json.dumps(body).encode())
    return path


def read(files: PartitionFiles, path: str) -> frozenset[str]:
    """The uploads the retirement ``path`` names; empty if it is gone (its cleanup finished).

    Raises:
        CorruptionError: Naming the file, for anything but a retirement.
        OSError: The file cannot be read.
    """
    name = files.location.describe(path)
    try:
        data = files.location.read_bytes(path, RETIREMENT_LIMIT)
    except FileNotFoundError:
        return frozenset()
    except ValueError:
        raise CorruptionError(
            f"corrupt data in {name}: larger than {RETIREMENT_LIMIT} bytes"
        ) from None
    try:
        body: Any = json.loads(data)
    except (ValueError, RecursionError):
        raise CorruptionError(f"corrupt data in {name}: a retirement that is not JSON") from None
    if (
        not isinstance(body, dict)
        or set(body) != {"format_version", "files"}
        or body["format_version"] != FORMAT_VERSION
        or not isinstance(body["files"], list)
        or not all(is_durable_name(f) for f in body["files"])
    ):
        raise CorruptionError(f"corrupt data in {name}: not a list of uploads to retire")
    return frozenset(body["files"])


def retired(files: PartitionFiles, paths: Iterable[str]) -> frozenset[str]:
    """Every upload that the retirements ``paths`` name (a retirement gone since it was
    listed names nothing: its cleanup deleted its files first)."""
    out: set[str] = set()
    for path in paths:
        out |= read(files, path)
    return frozenset(out)


__all__ = ["RETIREMENT_LIMIT", "read", "retired", "write"]
