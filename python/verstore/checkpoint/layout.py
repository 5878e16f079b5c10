"""The durable tree: where a store's lineages, partitions, commits and snapshots live, their
names, one listing of a partition, and bounded reads of its records.

The tree and the rules of its names are docs/checkpoint.md's, "Durable layout" and "Commits and
the winning chain": a commit is named by what it is and what it was built on, so that one
listing of a partition gives the whole version graph without reading a file::

    <version>-<attempt>-<parent version>-<parent attempt>.changelog

Names that carry a known suffix but do not parse are :class:`CorruptionError`\\ s naming the
file; other names are not verstore's and are left alone.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pyarrow.fs import FileType

from verstore._checks import check_whole
from verstore.exceptions import CorruptionError
from verstore.location import TMP_MARK, Location

#: The layout version, recorded in each lineage's ``_meta.json``.
FORMAT_VERSION = 2
ATTEMPT_BYTES = 16
NO_ATTEMPT = bytes(ATTEMPT_BYTES)
MAX_VERSION = 2**63 - 1

SST_DIR = "SSTs"
META_NAME = "_meta.json"
LINEAGE_PREFIX = "q="
PARTITION_PREFIX = "p="
CHANGELOG_SUFFIX = ".changelog"
SNAPSHOT_SUFFIX = ".snapshot"
#: A snapshot's claim on the files it names, written before its manifest (``maintenance.py``).
CLAIM_SUFFIX = ".claim"
#: The start of a cleanup's list of uploads it is about to delete (``uploads.py``).
RETIRING_PREFIX = "_retiring-"
#: The start of a repartition's mark in a partition directory (``partitionings.py``).
REPARTITION_MARK = "_repartitioning-"

_VERSION = r"(0|[1-9][0-9]{0,18})"
_ATTEMPT = r"([0-9a-f]{32})"
_CHANGELOG_RE = re.compile(rf"{_VERSION}-{_ATTEMPT}-{_VERSION}-{_ATTEMPT}\.changelog")
_SNAPSHOT_RE = re.compile(rf"{_VERSION}-{_ATTEMPT}\.snapshot")
_CLAIM_RE = re.compile(rf"{_VERSION}-{_ATTEMPT}\.claim")
_RETIRING_RE = re.compile(r"_retiring-[0-9a-f]{32}\.json")
_PARTITION_RE = re.compile(r"p=(0|[1-9][0-9]{0,8})")
#: Store names and lineage ids: one path segment, no dot files, no separators.
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


class CommitRef(NamedTuple):
    """A commit's identity: the version it produced and the attempt that wrote it.

    ``ROOT`` (version 0, no attempt) is the empty state every lineage starts from. Refs order
    by version, then attempt: the order in which a tie at one version is broken.
    """

    version: int
    attempt: bytes

    def __str__(self) -> str:
        return f"{self.version}-{self.attempt.hex()}"


ROOT = CommitRef(0, NO_ATTEMPT)


@dataclass(frozen=True)
class Commit:
    """A changelog in a listing: the commit ``ref``, built on ``parent``."""

    ref: CommitRef
    parent: CommitRef
    path: str
    size: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """A snapshot manifest in a listing: the state of commit ``ref``."""

    ref: CommitRef
    path: str


@dataclass
class Listing:
    """What one listing of a partition directory found, by kind."""

    commits: dict[CommitRef, Commit] = field(default_factory=dict)
    snapshots: dict[CommitRef, Snapshot] = field(default_factory=dict)
    #: Snapshots' claims (``<v>-<a>.claim``): a manifest's body, written before the manifest.
    claims: dict[CommitRef, Snapshot] = field(default_factory=dict)
    #: Cleanups' retirement lists (``_retiring-<32 hex>.json``), by path.
    retirements: list[str] = field(default_factory=list)
    temporaries: list[Any] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)
    #: Whether a repartition left its mark here (``partitionings.py``).
    repartitioning: bool = False


def new_attempt() -> bytes:
    """A fresh attempt id: open time in ms (8 bytes, big-endian), then 8 random bytes.

    Later openers sort after earlier ones (across machines, up to clock skew), which decides a
    tie between two commits of one version: see :mod:`verstore.checkpoint.chain`.
    """
    return int(time.time() * 1000).to_bytes(8, "big") + os.urandom(8)


def check_name(name: str, what: str) -> str:
    """``name`` if it is a plain path segment for a store or lineage; ``ValueError`` if not."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"{what} must be a plain directory name: 1-200 letters, digits, '_', '.' or '-', "
            f"not starting with '.' or '-', got {name!r}"
        )
    return name


def changelog_name(ref: CommitRef, parent: CommitRef) -> str:
    return f"{ref.version}-{ref.attempt.hex()}-{parent.version}-{parent.attempt.hex()}.changelog"


def snapshot_name(ref: CommitRef) -> str:
    return f"{ref.version}-{ref.attempt.hex()}.snapshot"


def claim_name(ref: CommitRef) -> str:
    return f"{ref.version}-{ref.attempt.hex()}.claim"


def parse_changelog_name(name: str, where: str) -> tuple[CommitRef, CommitRef]:
    """``(commit, parent)`` from a changelog's file name; ``CorruptionError`` naming ``where``."""
    match = _CHANGELOG_RE.fullmatch(name)
    if match is None:
        raise CorruptionError(f"corrupt data in {where}: not a verstore changelog name")
    v, attempt, pv, parent_attempt = match.groups()
    ref = CommitRef(int(v), bytes.fromhex(attempt))
    parent = CommitRef(int(pv), bytes.fromhex(parent_attempt))
    if not (0 < ref.version <= MAX_VERSION) or parent.version >= ref.version:
        raise CorruptionError(
            f"corrupt data in {where}: version {ref.version} cannot follow {parent.version}"
        )
    parent_ok = parent == ROOT if parent.version == 0 else parent.attempt != NO_ATTEMPT
    if ref.attempt == NO_ATTEMPT or not parent_ok:
        raise CorruptionError(f"corrupt data in {where}: malformed attempt in its name")
    return ref, parent


def parse_snapshot_name(name: str, where: str, claim: bool = False) -> CommitRef:
    """The commit of a manifest's (or, with ``claim``, a claim's) file name."""
    match = (_CLAIM_RE if claim else _SNAPSHOT_RE).fullmatch(name)
    if match is None:
        what = "claim" if claim else "snapshot"
        raise CorruptionError(f"corrupt data in {where}: not a verstore {what} name")
    ref = CommitRef(int(match.group(1)), bytes.fromhex(match.group(2)))
    if not 0 < ref.version <= MAX_VERSION or ref.attempt == NO_ATTEMPT:
        raise CorruptionError(f"corrupt data in {where}: malformed version or attempt")
    return ref


def parse_partition_dir(name: str) -> int | None:
    """The partition number of a ``p=<n>`` directory name, or ``None``."""
    match = _PARTITION_RE.fullmatch(name)
    return int(match.group(1)) if match else None


class LineageFiles:
    """``<root>/<store>/q=<lineage>/``: one query's state of one store."""

    def __init__(self, location: Location, store_name: str, lineage: str) -> None:
        self.location = location
        self.store_name = check_name(store_name, "store_name")
        self.lineage = check_name(lineage, "lineage")
        self.store_dir = location.path(store_name)
        self.dir = location.path(store_name, LINEAGE_PREFIX + lineage)
        self.meta = posixpath.join(self.dir, META_NAME)
        #: Where checkpoint format 1 kept its settings (a store that predates lineages).
        self.format1_meta = posixpath.join(self.store_dir, META_NAME)

    def partition(self, partition: int, partitioning_dir: str = "") -> PartitionFiles:
        """``p=<partition>`` of the partitioning whose directory is ``partitioning_dir``
        (relative to the lineage's; ``""``: the lineage's first partitioning)."""
        return PartitionFiles(self, partition, partitioning_dir)

    def partitions(self, partitioning_dir: str = "") -> list[int]:
        """The partitions of a partitioning that have a directory, in order."""
        found = (
            parse_partition_dir(i.base_name)
            for i in self.location.list(posixpath.join(self.dir, partitioning_dir))
            if i.type == FileType.Directory
        )
        return sorted(p for p in found if p is not None)


def lineages(location: Location, store_name: str) -> list[str]:
    """The lineage ids of a store (its ``q=<id>`` directories), in name order."""
    out = []
    for info in location.list(location.path(store_name)):
        name = info.base_name
        if (
            info.type == FileType.Directory
            and name.startswith(LINEAGE_PREFIX)
            and _NAME_RE.fullmatch(name[len(LINEAGE_PREFIX) :])
        ):
            out.append(name[len(LINEAGE_PREFIX) :])
    return sorted(out)


class PartitionFiles:
    """``<lineage dir>/p=<n>/``: one partition's commits, snapshots and uploaded files."""

    def __init__(self, lineage: LineageFiles, partition: int, partitioning_dir: str = "") -> None:
        check_whole(partition, "partition", 0)
        self.lineage = lineage
        self.location = lineage.location
        self.partition = partition
        self.dir = posixpath.join(lineage.dir, partitioning_dir, f"{PARTITION_PREFIX}{partition}")
        self.sst_dir = posixpath.join(self.dir, SST_DIR)

    def describe(self, path: str | None = None) -> str:
        return self.location.describe(self.dir if path is None else path)

    def changelog(self, ref: CommitRef, parent: CommitRef) -> str:
        return posixpath.join(self.dir, changelog_name(ref, parent))

    def snapshot(self, ref: CommitRef) -> str:
        return posixpath.join(self.dir, snapshot_name(ref))

    def claim(self, ref: CommitRef) -> str:
        return posixpath.join(self.dir, claim_name(ref))

    def durable(self, relative: str) -> str:
        """A path named relative to the partition directory (a manifest's ``durable``)."""
        return posixpath.join(self.dir, relative)

    def listing(self) -> Listing:
        """Everything in the partition directory, parsed; ``CorruptionError`` for a file with a
        verstore suffix whose name does not parse."""
        out = Listing()
        for info in self.location.list(self.dir):
            name = info.base_name
            if name.startswith(TMP_MARK):
                out.temporaries.append(info)
                continue
            suffixes = (CHANGELOG_SUFFIX, SNAPSHOT_SUFFIX, CLAIM_SUFFIX)
            if name.endswith(suffixes) and info.type != FileType.File:
                raise CorruptionError(
                    f"corrupt data in {self.describe(info.path)}: a verstore name, but not a file"
                )
            if name.endswith(CHANGELOG_SUFFIX):
                ref, parent = parse_changelog_name(name, self.describe(info.path))
                out.commits[ref] = Commit(ref, parent, info.path, info.size)
            elif name.endswith(SNAPSHOT_SUFFIX):
                ref = parse_snapshot_name(name, self.describe(info.path))
                out.snapshots[ref] = Snapshot(ref, info.path)
            elif name.endswith(CLAIM_SUFFIX):
                ref = parse_snapshot_name(name, self.describe(info.path), claim=True)
                out.claims[ref] = Snapshot(ref, info.path)
            elif _RETIRING_RE.fullmatch(name) and info.type == FileType.File:
                out.retirements.append(info.path)
            elif name.startswith(REPARTITION_MARK):
                out.repartitioning = True
            elif name != SST_DIR:
                out.others.append(info)
        return out

    def uploaded_files(self) -> Iterator[Any]:
        """Every file under ``SSTs/``."""
        yield from self.location.list(self.sst_dir)


def read_limited(location: Location, path: str, limit: int, what: str) -> bytes:
    """The bytes of ``path``, read no further than ``limit``: every checkpoint file is hostile
    input, and one larger than any ``what`` could be must not exhaust memory.

    Raises:
        FileNotFoundError: There is no such file.
        CorruptionError: Naming the file: larger than ``limit``.
        OSError: The file cannot be read (a storage error).
    """
    try:
        return location.read_bytes(path, limit)
    except ValueError:
        raise CorruptionError(
            f"corrupt data in {location.describe(path)}: larger than {limit} bytes, not {what}"
        ) from None


def read_record(location: Location, path: str, limit: int, what: str) -> Any:
    """The JSON value of the record ``path`` (:func:`read_limited`).

    Raises:
        FileNotFoundError: There is no such file.
        CorruptionError: Naming the file: larger than ``limit``, or not JSON.
        OSError: The file cannot be read (a storage error).
    """
    data = read_limited(location, path, limit, what)
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise CorruptionError(f"corrupt data in {location.describe(path)}: not JSON") from None


def read_numbered(
    files: LineageFiles,
    path_of: Callable[[LineageFiles, int], str],
    limit: int,
    what: str,
    most: int,
) -> Iterator[tuple[int, str, Any]]:
    """``(id, file name, JSON)`` of the records numbered 1, 2, ... until one is missing: a
    lineage's records written once each, one id after the other.

    Raises:
        CorruptionError: A record is too large or not JSON, or there are over ``most``.
    """
    for record_id in range(1, most + 1):
        path = path_of(files, record_id)
        try:
            obj = read_record(files.location, path, limit, f"a {what}")
        except FileNotFoundError:
            return
        yield record_id, files.location.describe(path), obj
    raise CorruptionError(f"{files.location.describe(files.dir)} holds over {most} {what}s")


__all__ = [
    "FORMAT_VERSION",
    "NO_ATTEMPT",
    "ROOT",
    "Commit",
    "CommitRef",
    "LineageFiles",
    "Listing",
    "PartitionFiles",
    "Snapshot",
    "lineages",
    "new_attempt",
    "read_limited",
    "read_numbered",
    "read_record",
]
