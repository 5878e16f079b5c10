"""Rebuild: a local copy made again from the checkpoint, for a commit it does not hold.

The base is the newest snapshot on the commit's chain that downloads and verifies; a snapshot
found damaged is logged and the next older one tried. Without a usable snapshot the base is the
empty state, if the chain reaches it; otherwise the version cannot be rebuilt. The changelogs
above the base are then replayed (``replay``).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from verstore.checkpoint.chain import Graph
from verstore.checkpoint.download import download_snapshot
from verstore.checkpoint.layout import ROOT, CommitRef, PartitionFiles
from verstore.checkpoint.session import OpenStats
from verstore.exceptions import CorruptionError, MissingVersionError
from verstore.location import Location

log = logging.getLogger("verstore.checkpoint")


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


__all__ = ["restore_base"]
