"""A lineage's partitionings: the partition count its stores started with, and each one a
repartition published (``_partitioning-<id>.json``), from the version it serves, with the
settings its stores are opened with. Each record is written once by a conditional create and is
hostile input when read. The format and rules: docs/checkpoint.md, "Repartitioning".
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from verstore._checks import whole
from verstore.checkpoint.layout import (
    FORMAT_VERSION,
    REPARTITION_MARK,
    LineageFiles,
    PartitionFiles,
    read_numbered,
)
from verstore.exceptions import (
    CorruptionError,
)

#: Records past this many are not read (a hostile directory must not make opens endless).
MAX_PARTITIONINGS = 1000
RECORD_LIMIT = 64 << 10
_DIR_RE = re.compile(r"partitioning-([1-9][0-9]{0,3})-[0-9a-f]{16}")


@dataclass(frozen=True)
class StoreConfig:
    """The settings a partition's stores are opened with: how their bytes are kept and read.

    A lineage's first partitioning has those of ``_meta.json``; a rewrite under other settings
    (``verstore.spark.change_store_settings``) records new ones with its partitioning.
    """

    history_retention_ms: int
    segment_interval_ms: int | None = None
    latest_ttl_ms: int | None = None

    def describe(self) -> str:
        ttl = "" if self.latest_ttl_ms is None else f" latest_ttl_ms={self.latest_ttl_ms}"
        return (
            f"history_retention_ms={self.history_retention_ms} "
            f"segment_interval_ms={self.segment_interval_ms}{ttl}"
        )


@dataclass(frozen=True)
class Partitioning:
    """The partitions of a lineage from ``version`` on.

    Attributes:
        id: 0 for the count of ``_meta.json``, then 1, 2, ... per repartition.
        num_partitions: The partition count (``None``: the lineage recorded none).
        version: The first version this partitioning serves.
        dir: Its directory relative to the lineage's (``""`` for partitioning 0).
        config: The settings its stores are written and read with (None: not known yet, in
            a partitioning made before the lineage's settings were read).
    """

    id: int
    num_partitions: int | None
    version: int = 0
    dir: str = ""
    config: StoreConfig | None = None

    def files(self, lineage: LineageFiles, partition: int) -> PartitionFiles:
        """The directory of ``partition`` in this partitioning."""
        return lineage.partition(partition, self.dir)

    def partitions(self, lineage: LineageFiles) -> list[int]:
        """Its partitions that have a directory."""
        return lineage.partitions(self.dir)


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
    records = read_numbered(
        files, record_path, RECORD_LIMIT, "partitioning record", MAX_PARTITIONINGS
    )
    for partitioning_id, name, obj in records:
        out.append(_decode(name, obj, partitioning_id, out[-1]))
    _check_no_gap(files, len(out))
    return out


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


#: The fields of every partitioning record, and those a record of a change of settings adds.
_RECORD_FIELDS = {"format_version", "id", "num_partitions", "version", "dir"}
_CONFIG_FIELDS = {"history_retention_ms", "segment_interval_ms", "latest_ttl_ms"}


def _decode(name: str, obj: Any, partitioning_id: int, before: Partitioning) -> Partitioning:
    known = (_RECORD_FIELDS, _RECORD_FIELDS | _CONFIG_FIELDS)
    if not isinstance(obj, dict) or set(obj) not in known:
        raise CorruptionError(f"corrupt data in {name}: not a partitioning record")
    config = _decode_config(name, obj) if _CONFIG_FIELDS <= set(obj) else before.config
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
    return Partitioning(partitioning_id, count, version, where, config)


def _decode_config(name: str, obj: dict[str, Any]) -> StoreConfig:
    """The settings a record of a change of settings holds (hostile input: checked)."""
    retention, interval = obj["history_retention_ms"], obj["segment_interval_ms"]
    ttl = obj["latest_ttl_ms"]
    if not (
        whole(retention, 0)
        and (interval is None or whole(interval, 1))
        and (ttl is None or whole(ttl, 1))
    ):
        raise CorruptionError(f"corrupt data in {name}: settings of the wrong type or range")
    return StoreConfig(retention, interval, ttl)


def publish(files: LineageFiles, partitioning: Partitioning, *, with_config: bool = False) -> None:
    """Writes ``partitioning``'s record: the step that makes it the lineage's. The record is a
    conditional create (``Location.create_new``): of two repartitions that publish the same id
    at the same moment, exactly one succeeds. ``with_config``: the record also holds the
    partitioning's settings (a change of settings; other records keep those before them, and
    stay readable by releases that predate changes of settings).

    Raises:
        FileExistsError: Another repartition published this id first.
    """
    body: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "id": partitioning.id,
        "num_partitions": partitioning.num_partitions,
        "version": partitioning.version,
        "dir": partitioning.dir,
    }
    if with_config:
        if partitioning.config is None:
            raise ValueError("a record of a change of settings needs the settings")
        body.update(
            history_retention_ms=partitioning.config.history_retention_ms,
            segment_interval_ms=partitioning.config.segment_interval_ms,
            latest_ttl_ms=partitioning.config.latest_ttl_ms,
        )
    files.location.create_new(record_path(files, partitioning.id), json.dumps(body).encode())


def mark(files: PartitionFiles) -> None:
    """Leaves a repartition's mark in a partition directory (see the module)."""
    files.location.create_new(
        posixpath.join(files.dir, REPARTITION_MARK + os.urandom(8).hex()), b""
    )


__all__ = [
    "Partitioning",
    "StoreConfig",
    "mark",
    "new_dir",
    "publish",
    "read_partitionings",
    "record_path",
]
