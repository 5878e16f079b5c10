"""What an open and a commit of a partition store did, for metrics and progress reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from verstore.checkpoint.layout import ROOT, CommitRef

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)`` for long rebuilds and verifies."""


@dataclass
class OpenStats:
    """How an open got its state, for metrics.

    Attributes:
        commit: The commit whose state was opened (version 0: the empty state).
        reused: The local copy held exactly that commit.
        kept_open: The store was open already: a keeper held it since this process's last
            commit of the partition (``keeper``).
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


@dataclass
class CommitStats:
    """What a commit wrote, for metrics."""

    version: int = 0
    records: int = 0
    changelog_bytes: int = 0
    snapshot: bool = False
    snapshot_uploaded_bytes: int = 0
    deleted_files: int = 0
    deferred: list[str] = field(default_factory=list)


__all__ = ["CommitStats", "OpenStats", "Progress"]
