"""After the commit point: what a commit does once its changelog is durable.

Marking the local copy clean at the new commit, a snapshot when one is due, then cleanup. Each
step is an optimisation a later open does without, so a failure is recorded in the commit's
stats and logged, never raised, and ends the steps after it (a snapshot the local copy's
state does not know of, or a cleanup after a failed snapshot, would gain nothing).
"""

from __future__ import annotations

import logging
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import faults
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.cleanup import cleanup
from verstore.checkpoint.layout import CommitRef, PartitionFiles
from verstore.checkpoint.local import LocalCopy, LocalState
from verstore.checkpoint.session import CheckpointOptions, CommitStats
from verstore.checkpoint.snapshot import snapshot_due, take_snapshot
from verstore.location import Location

log = logging.getLogger("verstore.checkpoint")

#: The step of ``CommitStats.deferred`` that leaves the local copy not marked clean.
MARK_CLEAN = "marking the local copy clean"


def after_commit(
    store: VersionedStore,
    location: Location,
    files: PartitionFiles,
    local: LocalCopy,
    lineage: str,
    *,
    graph: Graph,
    opened: CommitRef,
    new: CommitRef,
    uploaded: dict[str, Any],
    options: CheckpointOptions,
    stats: CommitStats,
) -> dict[str, Any]:
    """The steps after commit ``new`` (made on top of ``opened``), best effort.

    Returns:
        The local copy's upload map afterwards: a snapshot's, or ``uploaded`` unchanged.
    """

    def deferred(what: str, error: Exception) -> None:
        stats.deferred.append(what)
        log.warning(
            "%s: version %d is committed; %s failed and is retried later: %s",
            files.describe(),
            new.version,
            what,
            error,
        )

    try:
        local.write_state(LocalState(lineage, new, True, uploaded))
    except Exception as e:
        deferred(MARK_CLEAN, e)
        return uploaded
    faults.step("after_local_state")
    if not snapshot_due(graph, opened, options.snapshot_interval):
        return uploaded
    try:
        stats.snapshot_uploaded_bytes, uploaded = take_snapshot(
            store, location, files, new, scratch=local.dir, uploaded=uploaded
        )
        stats.snapshot = True
        local.write_state(LocalState(lineage, new, True, uploaded))
    except Exception as e:
        deferred("the snapshot", e)
        return uploaded
    try:
        faults.step("before_cleanup")
        stats.deleted_files = len(cleanup(files, options))
    except Exception as e:
        deferred("cleanup", e)
    return uploaded


__all__ = ["MARK_CLEAN", "after_commit"]
