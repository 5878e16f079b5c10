"""``CheckpointOptions``: how often a partition store snapshots, what cleanup keeps, how long
an open waits for the local lock.

The settings of the checkpoint protocol that are not part of a lineage's recorded settings
(``meta``): they may differ between runs and between the tasks of one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from verstore._checks import whole


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
        def check(name: str, low: int) -> None:
            value = getattr(self, name)
            if not whole(value, low, math.inf):
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

        check("snapshot_interval", 1)
        check("replay_chunk_records", 1)
        if isinstance(self.min_versions_to_retain, int) and self.min_versions_to_retain == 1:
            raise ValueError(
                "min_versions_to_retain must be >= 2, got 1: a retry of the last micro-batch "
                "reopens the version before it"
            )
        check("min_versions_to_retain", 2)
        for name in ("lock_timeout_s", "orphan_grace_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


__all__ = ["CheckpointOptions"]
