"""Reuse and catch-up: what a local copy left by an earlier task is still good for.

A copy that is clean (``LOCAL.json`` says ``db/`` is exactly one commit of this lineage) is
reused as it is when it holds the commit being opened, and caught up by replaying the
changelogs above it when it holds an ancestor whose descendants are all still in the
checkpoint. Anything else is rebuilt (``rebuild``). A read-only open never uses the working
copy.
"""

from __future__ import annotations

from pathlib import Path

from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef, PartitionFiles
from verstore.checkpoint.local import LocalState
from verstore.exceptions import MissingVersionError


def commits_to_catch_up(
    state: LocalState, lineage: str, db: Path, graph: Graph, serving: CommitRef
) -> list[CommitRef] | None:
    """The commits to replay onto the local copy to reach ``serving``, oldest first: empty
    when the copy holds ``serving`` (reuse it), None when it is of no use (rebuild)."""
    usable = state.clean and state.lineage == lineage and state.commit is not None and db.is_dir()
    if not usable:
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
        state.clean
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


__all__ = ["check_not_behind_local", "commits_to_catch_up"]
