"""How a local copy comes to hold the commit an open asks for: docs/checkpoint.md, "Open".

A clean copy is reused as it is when it holds that commit, and caught up by replaying the
changelogs above it when it holds an ancestor (:func:`commits_to_catch_up`). Anything else is
rebuilt (:func:`restore_base`): from the newest snapshot on the commit's chain that downloads
and verifies (:func:`download_snapshot`), else from the empty state, then the changelogs above
it replayed (:func:`replay`), each checked against the commit its file name claims. A
snapshot's files, like its manifest and the changelogs, are hostile input.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path
from typing import Any

from pyarrow.fs import FileType

from verstore._core import CHANGELOG_HEADER_LEN, VersionedStore, read_changelog_header
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef, PartitionFiles
from verstore.checkpoint.local import LocalState
from verstore.checkpoint.session import OpenStats, Progress
from verstore.checkpoint.uploads import Manifest, ManifestFile, read_manifest, upload_entry
from verstore.exceptions import CorruptionError, MissingVersionError
from verstore.location import TMP_MARK, Location

log = logging.getLogger("verstore.checkpoint")


def commits_to_catch_up(
    state: LocalState, lineage: str, db: Path, graph: Graph, serving: CommitRef
) -> list[CommitRef] | None:
    """The commits to replay onto the local copy to reach ``serving``, oldest first: empty
    when the copy holds ``serving`` (reuse it), None when it is of no use (rebuild)."""
    if not (state.reusable and state.lineage == lineage and db.is_dir()):
        return None
    if state.commit == serving:
        return []
    chain = list(graph.walk(serving))
    if state.commit not in chain:
        return None
    above = chain[: chain.index(state.commit)]
    if not all(ref in graph.commits for ref in above):
        return None
    return list(reversed(above))


def check_not_behind_local(
    state: LocalState, lineage: str, graph: Graph, files: PartitionFiles, local_dir: Path
) -> None:
    """A clean local copy of a commit the checkpoint no longer has, with nothing newer in
    the checkpoint, means durable files were lost: say so instead of serving older state."""
    held = state.commit
    if (
        state.reusable
        and state.lineage == lineage
        and held is not None
        and held != ROOT
        and held not in graph.commits
        and graph.tip().version < held.version
    ):
        raise MissingVersionError(
            f"{files.describe()} does not have version {held.version} (attempt "
            f"{held.attempt.hex()}), which the local copy {local_dir} holds: the "
            "checkpoint lost committed files. Restore them, or delete the local copy and "
            "the store's checkpoint directory to start the store over"
        )


def download_snapshot(
    location: Location,
    files: PartitionFiles,
    path: str,
    ref: CommitRef,
    db: Path,
    stats: OpenStats,
) -> dict[str, Any]:
    """Downloads snapshot ``ref`` (its manifest at ``path``) into ``db``, which must not exist.

    Returns:
        The upload map of its SSTs (they are in the checkpoint already).

    Raises:
        CorruptionError: The manifest or a file it names is gone or damaged.
        OSError: Storage failures.
    """
    manifest = _manifest(location, path, ref)
    db.mkdir(parents=True)
    uploaded = {}
    for entry in manifest.files:
        stats.downloaded_bytes += _fetch(location, files, entry, db, ref)
        if entry.is_sst:
            uploaded[entry.name] = upload_entry(entry.durable, entry.size, entry.crc32)
    return uploaded


def _manifest(location: Location, path: str, ref: CommitRef) -> Manifest:
    try:
        return read_manifest(location, path, ref)
    except FileNotFoundError:
        # Listed, then removed: a snapshot found to name a lost file (see maintenance.py).
        raise CorruptionError(
            f"corrupt data in {location.describe(path)}: snapshot manifest is gone"
        ) from None


def _fetch(
    location: Location, files: PartitionFiles, entry: ManifestFile, db: Path, ref: CommitRef
) -> int:
    """Fetches one file of the snapshot into ``db``, checked; returns its size."""
    durable = files.durable(entry.durable)
    where = location.describe(durable)
    try:
        # Never more than the manifest's size: a file that grew is not read to its end.
        size, crc = location.fetch(durable, str(db / entry.name), entry.size)
    except FileNotFoundError:
        raise CorruptionError(
            f"corrupt data in {where}: file of snapshot {ref.version} is missing"
        ) from None
    except OSError:
        if location.info([durable])[0].type == FileType.File:
            raise  # a storage error
        raise CorruptionError(
            f"corrupt data in {where}: file of snapshot {ref.version} is not a file"
        ) from None
    if size != entry.size or crc != entry.crc32:
        raise CorruptionError(
            f"corrupt data in {where}: size or checksum differs from snapshot "
            f"{ref.version}'s manifest"
        )
    return size


def replay(
    store: VersionedStore,
    location: Location,
    graph: Graph,
    refs: list[CommitRef],
    *,
    scratch: Path,
    chunk_records: int,
    stats: OpenStats,
    progress: Progress | None,
) -> None:
    """Applies the changelogs of ``refs`` (oldest first) to ``store``, each checked against
    its name; downloads go to a temporary file in ``scratch``."""
    local = scratch / f"{TMP_MARK}replay-{uuid.uuid4().hex}"
    for done, ref in enumerate(refs, 1):
        commit = graph.commits[ref]
        name = location.describe(commit.path)
        try:
            # Downloaded whole, replayed in chunks: memory holds one chunk, not the file.
            location.download(commit.path, str(local))
            _check_header(local, name, ref, commit.parent)
            store.apply_changelog(local, name=name, chunk_records=chunk_records)
            stats.replayed_bytes += local.stat().st_size
        finally:
            local.unlink(missing_ok=True)
        stats.replayed += 1
        if progress is not None:
            progress("replay", done, len(refs))


def _check_header(path: Path, name: str, ref: CommitRef, parent: CommitRef) -> None:
    with open(path, "rb") as head:
        header = read_changelog_header(head.read(CHANGELOG_HEADER_LEN), name)
    if (header.version, header.attempt, header.parent_attempt) != (
        ref.version,
        ref.attempt,
        parent.attempt,
    ):
        raise CorruptionError(
            f"corrupt data in {name}: its header names another commit than its file name"
        )


def restore_base(
    location: Location,
    files: PartitionFiles,
    graph: Graph,
    serving: CommitRef,
    db: Path,
    stats: OpenStats,
) -> tuple[dict[str, Any], list[CommitRef]]:
    """Puts the base of ``serving``'s rebuild into ``db`` (which must not exist).

    Returns:
        The upload map of the base's SSTs, and the commits above the base to replay, oldest
        first.

    Raises:
        CorruptionError: No snapshot is usable and the chain does not reach the empty state
            (the first snapshot's error).
        MissingVersionError: No snapshot exists and the chain does not reach the empty state.
    """
    chain = list(graph.walk(serving))
    failures: list[CorruptionError] = []
    for candidate in graph.snapshots_on(serving):
        path = graph.snapshots[candidate].path
        try:
            uploaded = download_snapshot(location, files, path, candidate, db, stats)
        except CorruptionError as e:
            log.warning("snapshot unusable, trying an older one: %s", e)
            failures.append(e)
            shutil.rmtree(db, ignore_errors=True)
            continue
        stats.snapshot = candidate
        return uploaded, list(reversed(chain[: chain.index(candidate)]))
    if not graph.ends_at_root(serving):
        if failures:
            raise failures[0]
        raise MissingVersionError(f"no snapshot of {files.describe()} is usable")
    return {}, list(reversed(chain[: chain.index(ROOT)]))


__all__ = [
    "check_not_behind_local",
    "commits_to_catch_up",
    "download_snapshot",
    "replay",
    "restore_base",
]
