"""Looking at a checkpoint from outside: which stores, lineages and partitions it holds, what each
partition's version graph looks like, and whether every file in it verifies.

Used by the operator CLI (``verstore inspect|get|verify``) and ``verstore.spark.inspect``. It
only reads; a problem is reported, never repaired.
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyarrow.fs import FileType

from verstore._core import verify_changelog
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import (
    META_NAME,
    LineageFiles,
    Listing,
    PartitionFiles,
    lineages,
)
from verstore.checkpoint.session import Progress
from verstore.checkpoint.uploads import read_manifest, read_retirement
from verstore.exceptions import IncompatibleFormatError, VerstoreError
from verstore.location import Location


def find_stores(loc: Location, only: str | None = None) -> Iterator[tuple[str, Location]]:
    """``(store name, root)`` for every store under ``loc``, or ``loc`` itself if it is one.

    A store directory holds lineage directories (``q=<id>``), or a checkpoint format 1
    ``_meta.json``.
    """

    def is_store(path: str) -> bool:
        if loc.exists(posixpath.join(path, META_NAME)):
            return True
        return any(
            i.base_name.startswith("q=") and i.type == FileType.Directory for i in loc.list(path)
        )

    root = loc.root.rstrip("/")
    if is_store(root):
        name = posixpath.basename(root)
        if only in (None, name):
            yield name, Location(loc.storage, posixpath.dirname(root), loc.uri)
        return
    for info in sorted(loc.list(root), key=lambda i: i.base_name):
        if (
            info.type == FileType.Directory
            and only in (None, info.base_name)
            and is_store(info.path)
        ):
            yield info.base_name, loc


def find_lineages(root: Location, store: str, only: str | None = None) -> list[LineageFiles]:
    return [LineageFiles(root, store, q) for q in lineages(root, store) if only in (None, q)]


def format1_error(root: Location, store: str) -> IncompatibleFormatError | None:
    """The error for a store directory of checkpoint format 1 (verstore 0.1, no lineages),
    whose ``_meta.json`` sits in the store directory itself; ``None`` for any other."""
    store_dir = root.path(store)
    if not root.exists(posixpath.join(store_dir, META_NAME)):
        return None
    return IncompatibleFormatError(
        f"{root.describe(store_dir)} holds a store of checkpoint format 1, which this verstore "
        "does not read"
    )


@dataclass
class PartitionSummary:
    """One partition's version graph in numbers."""

    partition: int
    tip: int = 0
    oldest: int = 0
    commits: int = 0
    off_chain: int = 0
    snapshots: list[int] = field(default_factory=list)
    changelog_bytes: int = 0
    sst_bytes: int = 0
    problem: str | None = None


def summarize(files: PartitionFiles) -> PartitionSummary:
    out = PartitionSummary(files.partition)
    try:
        listing = files.listing()
        graph = Graph(files, listing)
        tip = graph.tip()
    except VerstoreError as e:
        out.problem = str(e)
        return out
    chain = set(graph.walk(tip))
    out.tip, out.oldest = tip.version, graph.oldest_kept()
    out.commits = len(listing.commits)
    out.off_chain = sum(1 for ref in listing.commits if ref not in chain)
    out.snapshots = sorted(ref.version for ref in listing.snapshots if ref in chain)
    out.changelog_bytes = sum(c.size or 0 for c in listing.commits.values())
    out.sst_bytes = sum(i.size or 0 for i in files.uploaded_files())
    return out


def verify_partition(
    files: PartitionFiles, *, deep: bool = False, progress: Progress | None = None
) -> list[str]:
    """Every problem of one partition: names, changelog checksums and headers, the version
    graph (the tip and every version cleanup keeps must be rebuildable) and snapshot files."""
    loc = files.location
    problems: list[str] = []
    try:
        listing = files.listing()
    except VerstoreError as e:
        return [str(e)]
    for info in listing.others:
        problems.append(f"{loc.describe(info.path)}: not a verstore file")
    problems += _verify_changelogs(files, listing, progress)
    graph = Graph(files, listing)
    try:
        tip = graph.tip()
    except VerstoreError as e:
        return [*problems, str(e)]
    chain = set(graph.walk(tip))
    for ref in sorted(listing.snapshots):
        try:
            manifest = read_manifest(loc, listing.snapshots[ref].path, ref)
        except VerstoreError as e:
            problems.append(str(e))
            continue
        for entry in manifest.files:
            durable = files.durable(entry.durable)
            (info,) = loc.info([durable])
            if info.size is None:
                problems.append(f"{loc.describe(durable)}: missing (snapshot {ref.version})")
            elif info.size != entry.size:
                problems.append(
                    f"{loc.describe(durable)}: size {info.size}, manifest says {entry.size} "
                    f"(snapshot {ref.version})"
                )
            elif deep and ref in chain:
                with tempfile.TemporaryDirectory(prefix="verstore-verify-") as tmp:
                    _, crc = loc.fetch(durable, posixpath.join(tmp, "file"), entry.size)
                if crc != entry.crc32:
                    problems.append(f"{loc.describe(durable)}: checksum mismatch")
    for ref in sorted(listing.claims):
        try:
            read_manifest(loc, listing.claims[ref].path, ref)
        except VerstoreError as e:
            problems.append(str(e))
    for path in listing.retirements:
        try:
            read_retirement(files, path)
        except VerstoreError as e:
            problems.append(str(e))
    if not graph.reachable(tip):
        problems.append(f"{files.describe()}: the newest version {tip.version} cannot be rebuilt")
    return problems


def _verify_changelogs(
    files: PartitionFiles, listing: Listing, progress: Progress | None
) -> list[str]:
    loc = files.location
    problems = []
    commits = sorted(listing.commits.values(), key=lambda c: c.ref)
    for done, commit in enumerate(commits, 1):
        where = loc.describe(commit.path)
        try:
            header = verify_changelog(loc.read_bytes(commit.path), where)
            if (header.version, header.attempt, header.parent_attempt) != (
                commit.ref.version,
                commit.ref.attempt,
                commit.parent.attempt,
            ):
                problems.append(f"{where}: its header names another commit than its file name")
        except VerstoreError as e:
            problems.append(str(e))
        if progress is not None:
            progress("changelogs", done, len(commits))
    return problems


__all__ = [
    "PartitionSummary",
    "find_lineages",
    "find_stores",
    "format1_error",
    "summarize",
    "verify_partition",
]
