"""What a caller sets for a partition store's checkpointing, and what it is told back.

:class:`CheckpointOptions` holds the settings that are not part of a lineage's recorded
settings (``lineage``): they may differ between runs and between the tasks of one run.
:class:`OpenStats` and :class:`CommitStats` say what an open and a commit did, for metrics;
``Progress`` reports long rebuilds and verifies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from verstore._checks import check_whole
from verstore.checkpoint.layout import ROOT, CommitRef


@dataclass(frozen=True)
class CheckpointOptions:
    """How a partition store checkpoints.

    Attributes:
        snapshot_interval: Take an incremental snapshot once this many commits of the chain
            have no snapshot (>= 1).
        min_versions_to_retain: Cleanup keeps the newest this many versions rebuildable
            (>= 2: a retry of the last micro-batch reopens the version before it).
        lock_timeout_s: How long :meth:`PartitionStore.open` waits for the local directory lock
            before raising ``StoreLockedError``.
        orphan_grace_s: Cleanup deletes unreferenced uploads (leftovers of failed attempts) only
            when they are older than this, so an upload still in flight is never removed.
        replay_chunk_records: Records applied per atomic write during replay.
    """

    snapshot_interval: int = 10
    min_versions_to_retain: int = 100
    lock_timeout_s: float = 60.0
    orphan_grace_s: float = 3600.0
    replay_chunk_records: int = 65_536

    def __post_init__(self) -> None:
        check_whole(self.snapshot_interval, "snapshot_interval", 1)
        check_whole(self.replay_chunk_records, "replay_chunk_records", 1)
        if isinstance(self.min_versions_to_retain, int) and self.min_versions_to_retain == 1:
            raise ValueError(
                "min_versions_to_retain must be >= 2, got 1: a retry of the last micro-batch "
                "reopens the version before it"
            )
        check_whole(self.min_versions_to_retain, "min_versions_to_retain", 2)
        for name in ("lock_timeout_s", "orphan_grace_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)`` for long rebuilds and verifies."""


@dataclass
class OpenStats:
    """How an open got its state, for metrics.

    Attributes:
        commit: The commit whose state was opened (version 0: the empty state).
        reused: The local copy held exactly that commit.
        kept_open: The store was open already: a keeper held it since this process's last
            commit of the partition (``kept``).
        previous_commit: For a store kept open, what that last commit did, including the work
            it deferred until after its task (a snapshot's bytes, files cleanup deleted).
        rebuilt: The local copy was rebuilt from the checkpoint.
        snapshot: The snapshot a rebuild started from (None: from the empty state).
        replayed: Changelogs replayed (a rebuild, or catching up a local copy).
        replayed_bytes: Their total size.
        downloaded_bytes: Snapshot bytes downloaded.
        saved_buffer_bytes: The size of the write buffer that the copy's last holder (another
            process, which handed the store over) saved beside it, loaded into the store.
        seconds: Time the open took.
    """

    commit: CommitRef = ROOT
    reused: bool = False
    kept_open: bool = False
    previous_commit: CommitStats | None = None
    rebuilt: bool = False
    snapshot: CommitRef | None = None
    replayed: int = 0
    replayed_bytes: int = 0
    downloaded_bytes: int = 0
    saved_buffer_bytes: int = 0
    seconds: float = 0.0


class Deferred(StrEnum):
    """A step after a commit point that failed and is made up for later (docs/checkpoint.md,
    "Commit"): the commit stands. Each is its own name in logs and docs."""

    #: ``LOCAL.json`` clean at the new commit: the next open rebuilds or catches up instead.
    MARK_CLEAN = "marking the local copy clean"
    #: The snapshot: due again at the next commit.
    SNAPSHOT = "the snapshot"
    #: Cleanup: the next one deletes what this one left.
    CLEANUP = "cleanup"
    #: Closing the store: the local copy is marked for a rebuild.
    CLOSE = "closing the store"


@dataclass
class CommitStats:
    """What a commit wrote, for metrics.

    Attributes:
        deferred: The steps after the commit point that failed, in order (the commit stands).
    """

    version: int = 0
    records: int = 0
    changelog_bytes: int = 0
    snapshot: bool = False
    snapshot_uploaded_bytes: int = 0
    deleted_files: int = 0
    deferred: list[Deferred] = field(default_factory=list)


__all__ = ["CheckpointOptions", "CommitStats", "Deferred", "OpenStats", "Progress"]
