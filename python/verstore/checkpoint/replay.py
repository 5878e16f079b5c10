"""Changelog replay: the commits between a local copy's state and the version opened.

Catching up a local copy and rebuilding one from a snapshot both end here: each changelog is
downloaded whole, its header checked against the commit its file name claims (a changelog
renamed or copied into another commit's place is corrupt, not another commit), then applied
a chunk of records per atomic write.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from verstore._core import CHANGELOG_HEADER_LEN, VersionedStore, read_changelog_header
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import CommitRef
from verstore.checkpoint.session import OpenStats, Progress
from verstore.exceptions import CorruptionError
from verstore.location import TMP_MARK, Location


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


__all__ = ["replay"]
