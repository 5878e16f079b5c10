"""A lineage's partitionings: how many partitions its keys are spread over, from which version.

A lineage starts with the partition count of its ``_meta.json`` (partitioning 0, whose partition
directories are ``<lineage>/p=<n>``). ``verstore.spark.repartition_store`` moves the state of a
stopped query to another count: it writes every new partition, in a directory of its own that
nothing names yet, as one commit at version ``V`` (the version the query's next micro-batch
opens) built on the empty state, then publishes the new partitioning in one step by writing

```
<lineage>/_partitioning-<id>.json
{"format_version": 2, "id": 1, "num_partitions": 7, "version": 4, "dir": "partitioning-1-<16 hex>"}
```

(id 1, 2, ...; written once and never replaced, like every durable file). Version ``V`` and
everything after it are served by the newest partitioning at or below it; the versions before
``V`` stay where they were, so a reader of an older micro-batch still finds them. A crash
before the publish leaves the old partitioning in force and an orphaned directory that nothing
reads; after it, the new one. Never a mix: the new partitions become visible together.

Before it writes anything, a repartition leaves an empty ``_repartitioning-<16 hex>`` file in
every partition directory of the partitioning it replaces. An open that finds one there reads
the lineage's partitionings again instead of trusting what its process remembered, so a worker
that opened the store before the repartition never writes on under the old count.

Like every file of a checkpoint, a partitioning record is hostile input: one larger than 64 KiB,
not JSON, naming another id, a count out of range, a version not above its predecessor's or a
directory that is not ``partitioning-<id>-<16 hex>`` is a :class:`CorruptionError` naming it.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from verstore._checks import whole
from verstore.checkpoint.layout import (
    FORMAT_VERSION,
    REPARTITION_MARK,
    LineageFiles,
    PartitionFiles,
)
from verstore.exceptions import CorruptionError

#: Records past this many are not read (a hostile directory must not make opens endless).
MAX_PARTITIONINGS = 1000
RECORD_LIMIT = 64 << 10
_DIR_RE = re.compile(r"partitioning-([1-9][0-9]{0,3})-[0-9a-f]{16}")


class StoreSettingsLike(Protocol):
    """What :func:`every_partition` needs of ``meta.StoreSettings`` (which imports this)."""

    @property
    def partitionings(self) -> tuple[Partitioning, ...]: ...


@dataclass(frozen=True)
class Partitioning:
    """The partitions of a lineage from ``version`` on.

    Attributes:
        id: 0 for the count of ``_meta.json``, then 1, 2, ... per repartition.
        num_partitions: The partition count (``None``: the lineage recorded none).
        version: The first version this partitioning serves.
        dir: Its directory relative to the lineage's (``""`` for partitioning 0).
    """

    id: int
    num_partitions: int | None
    version: int = 0
    dir: str = ""

    def files(self, lineage: LineageFiles, partition: int) -> PartitionFiles:
        """The directory of ``partition`` in this partitioning."""
        return lineage.partition(partition, self.dir)

    def partitions(self, lineage: LineageFiles) -> list[int]:
        """Its partitions that have a directory."""
        return lineage.partitions(self.dir)


def every_partition(
    files: LineageFiles, settings: StoreSettingsLike | None
) -> Iterator[tuple[Partitioning, int, PartitionFiles]]:
    """Every partition directory of every partitioning a lineage recorded (only the first
    when its settings are unknown), oldest partitioning first."""
    found = settings.partitionings if settings is not None and settings.partitionings else ()
    for partitioning in found or (Partitioning(0, None),):
        for partition in partitioning.partitions(files):
            yield partitioning, partition, partitioning.files(files, partition)


def record_path(files: LineageFiles, partitioning_id: int) -> str:
    return posixpath.join(files.dir, f"_partitioning-{partitioning_id}.json")


def new_dir(partitioning_id: int) -> str:
    """A fresh directory name for partitioning ``partitioning_id``: a repartition that failed
    before its publish leaves its directory behind, and the next attempt must not write into it."""
    return f"partitioning-{partitioning_id}-{os.urandom(8).hex()}"


def read_partitionings(files: LineageFiles, first: Partitioning) -> list[Partitioning]:
    """``first`` and every partitioning recorded after it, oldest first.

    Raises:
        CorruptionError: A record is damaged, too large, or contradicts its predecessor.
    """
    out = [first]
    for partitioning_id in range(1, MAX_PARTITIONINGS + 1):
        path = record_path(files, partitioning_id)
        name = files.location.describe(path)
        try:
            data = files.location.read_bytes(path, RECORD_LIMIT)
        except FileNotFoundError:
            _check_no_gap(files, len(out))
            return out
        except ValueError:
            raise CorruptionError(
                f"corrupt data in {name}: larger than {RECORD_LIMIT} bytes"
            ) from None
        out.append(_decode(name, data, partitioning_id, out[-1]))
    raise CorruptionError(
        f"{files.location.describe(files.dir)} holds over {MAX_PARTITIONINGS} partitionings"
    )


_RECORD_RE = re.compile(r"_partitioning-([1-9][0-9]{0,3})\.json")


def _check_no_gap(files: LineageFiles, missing: int) -> None:
    """Records are read by id until one is missing: a later one beyond it means a record was
    lost, and the partitioning in force would silently be an older one."""
    for info in files.location.list(files.dir):
        match = _RECORD_RE.fullmatch(info.base_name)
        if match and int(match.group(1)) > missing:
            raise CorruptionError(
                f"{files.location.describe(files.dir)} holds {info.base_name} but not "
                f"_partitioning-{missing}.json: a repartition's record is missing"
            )


def _decode(name: str, data: bytes, partitioning_id: int, before: Partitioning) -> Partitioning:
    try:
        obj: Any = json.loads(data)
    except (ValueError, RecursionError):
        raise CorruptionError(f"corrupt data in {name}: not JSON") from None
    fields = {"format_version", "id", "num_partitions", "version", "dir"}
    if not isinstance(obj, dict) or set(obj) != fields:
        raise CorruptionError(f"corrupt data in {name}: not a partitioning record")
    count, version, where = obj["num_partitions"], obj["version"], obj["dir"]
    match = _DIR_RE.fullmatch(where) if isinstance(where, str) else None
    if not (
        obj["format_version"] == FORMAT_VERSION
        and obj["id"] == partitioning_id
        and whole(count, 1, 2**31)
        and whole(version, max(before.version, 1), 2**63 - 1)
        and match is not None
        and int(match.group(1)) == partitioning_id
    ):
        raise CorruptionError(
            f"corrupt data in {name}: not the record of partitioning {partitioning_id} starting "
            f"at or after version {before.version}: a field of the wrong type or range"
        )
    return Partitioning(partitioning_id, count, version, where)


def publish(files: LineageFiles, partitioning: Partitioning) -> None:
    """Writes ``partitioning``'s record: the step that makes it the lineage's. The record is a
    conditional create (``Location.create_new``): of two repartitions that publish the same id
    at the same moment, exactly one succeeds.

    Raises:
        FileExistsError: Another repartition published this id first.
    """
    body = {
        "format_version": FORMAT_VERSION,
        "id": partitioning.id,
        "num_partitions": partitioning.num_partitions,
        "version": partitioning.version,
        "dir": partitioning.dir,
    }
    files.location.create_new(record_path(files, partitioning.id), json.dumps(body).encode())


def mark(files: PartitionFiles) -> None:
    """Leaves a repartition's mark in a partition directory (see the module)."""
    files.location.create_new(
        posixpath.join(files.dir, REPARTITION_MARK + os.urandom(8).hex()), b""
    )


__all__ = [
    "Partitioning",
    "every_partition",
    "mark",
    "new_dir",
    "publish",
    "read_partitionings",
]
