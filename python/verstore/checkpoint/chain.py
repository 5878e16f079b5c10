"""The version graph of a partition, and the rule that picks the winning chain.

Every commit names the commit it was built on, so a partition's commits form a tree rooted at
the empty state (``ROOT``). Retries, speculative copies and zombie attempts add *siblings*:
several commits of one version, possibly on different parents. Nothing is ever overwritten, so
deciding which state a version has is a pure function of one listing:

* A commit is **reachable** when its chain of parents reaches ``ROOT`` or a snapshot through
  commits that all exist. Only reachable commits can be rebuilt.
* The **tip** is the reachable commit with the highest version; among siblings of that version,
  the greatest attempt id (the attempt that *opened* last, as the newest producer epoch wins in
  Kafka). A late write of an attempt that opened earlier never displaces a later one, and a
  write at a version below the tip changes nothing: later commits name their parents.
* The **winning chain** is the tip and its ancestors. Opening version ``v`` serves the newest
  commit of the winning chain at or below ``v``. Versions need not be dense: a micro-batch in
  which a partition ran no task leaves no commit, and its version has the state of the one
  below.

If the highest version holds commits but none is reachable, the chain is broken (a file was
lost or damaged) and that is an error, never a silent fall back to older state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from verstore.checkpoint.layout import ROOT, CommitRef, Listing, PartitionFiles
from verstore.exceptions import CorruptionError, MissingVersionError


class Graph:
    """The commits and snapshots of one listing, with the winning-chain rule."""

    def __init__(self, files: PartitionFiles, listing: Listing) -> None:
        self.files = files
        self.commits = listing.commits
        self.snapshots = listing.snapshots
        self._reachable: dict[CommitRef, bool] = {ROOT: True}
        self._tip: CommitRef | None = None

    def parent(self, ref: CommitRef) -> CommitRef | None:
        commit = self.commits.get(ref)
        return commit.parent if commit is not None else None

    def walk(self, ref: CommitRef) -> Iterator[CommitRef]:
        """``ref`` and its ancestors, newest first, while their changelogs exist. The last ref
        is ``ROOT``, a ref known only by its snapshot, or a ref that is gone (a broken chain)."""
        while True:
            yield ref
            parent = self.parent(ref)
            if parent is None:
                return
            ref = parent

    def reachable(self, ref: CommitRef) -> bool:
        """Whether ``ref`` can be rebuilt: its chain ends at ``ROOT`` or at a snapshot."""
        path = []
        for r in self.walk(ref):
            known = self._reachable.get(r)
            if known is not None:
                result = known
                break
            if r in self.snapshots:
                result = True
                break
            path.append(r)
        else:
            result = False  # the walk ended at a ref that is neither ROOT nor a snapshot
        for r in path:
            self._reachable[r] = result
        return result

    def tip(self) -> CommitRef:
        """The winning chain's newest commit (``ROOT`` for an empty partition).

        Raises:
            CorruptionError: The highest version's commits are all unreachable.
        """
        if self._tip is not None:
            return self._tip
        if not self.commits:
            self._tip = ROOT
            return ROOT
        top = max(ref.version for ref in self.commits)
        siblings = [ref for ref in self.commits if ref.version == top]
        candidates = [ref for ref in siblings if self.reachable(ref)]
        if not candidates:
            commit = self.commits[max(siblings)]
            broken = next(r for r in self.walk(commit.ref) if r not in self.commits)
            raise CorruptionError(
                f"corrupt data in {self.files.describe(commit.path)}: broken version chain, "
                f"version {commit.ref.version} needs version {broken.version} (attempt "
                f"{broken.attempt.hex()}), which {self.files.describe()} does not have"
            )
        self._tip = max(candidates)
        return self._tip

    def serving(self, version: int) -> CommitRef:
        """The commit whose state is version ``version``: the newest winning-chain commit at or
        below it.

        Raises:
            MissingVersionError: ``version`` is older than what cleanup kept.
        """
        for ref in self.walk(self.tip()):
            if ref.version <= version:
                if self.reachable(ref):
                    return ref
                break  # below the chain's oldest base: its changelogs are gone
        raise MissingVersionError(
            f"version {version} is missing from {self.files.describe()}: it is older than the "
            f"oldest version kept ({self.oldest_kept()})"
        )

    def oldest_kept(self) -> int:
        """The oldest version of the winning chain that can still be opened.

        The walk down the chain ends at the empty state, at a commit known only by its
        snapshot, or at a parent whose changelog cleanup deleted: that last one has no state.
        """
        return min(ref.version for ref in self.walk(self.tip()) if self.reachable(ref))

    def snapshots_on(self, ref: CommitRef) -> list[CommitRef]:
        """The snapshots on ``ref``'s chain, newest first: rebuild bases for ``ref``."""
        return [r for r in self.walk(ref) if r in self.snapshots]

    def ends_at_root(self, ref: CommitRef) -> bool:
        return ROOT in self.walk(ref)

    def needed(
        self, lowest: int, usable: Callable[[CommitRef], bool]
    ) -> tuple[set[CommitRef], set[CommitRef]]:
        """``(commits, snapshots)`` that every commit at version >= ``lowest`` needs to stay
        rebuildable at every version from ``lowest`` up.

        Each such commit's chain is followed down to its first usable snapshot at or below
        ``lowest`` (or to ``ROOT``). Siblings off the winning chain are kept too: one of them may
        be the parent of a commit that is in flight (an attempt that opened before the tip
        changed), and cleanup must never make a commit unreachable.
        """
        commits: set[CommitRef] = set()
        snapshots: set[CommitRef] = set()
        seen: set[CommitRef] = set()
        for start in self.commits:
            if start.version < lowest:
                continue
            for ref in self.walk(start):
                if ref in seen:
                    break
                seen.add(ref)
                if ref in self.commits:
                    commits.add(ref)
                if ref.version <= lowest and ref in self.snapshots and usable(ref):
                    snapshots.add(ref)
                    break
        return commits, snapshots


__all__ = ["Graph"]
