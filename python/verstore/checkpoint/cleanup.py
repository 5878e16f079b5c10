"""Cleanup: deletes what no retained version needs, working from the lineage's own version graph.

Let ``tip`` be the winning chain's newest commit and ``lowest = tip.version -
min_versions_to_retain + 1``. Versions ``lowest .. tip.version`` stay rebuildable, and so does
*every* commit at a version ``>= lowest``, on the winning chain or not: a sibling may be the
parent of an attempt still in flight, and cleanup must never make a commit unreachable. Each
such commit's chain is kept down to its first usable snapshot at or below ``lowest``
(``chain.Graph.needed``). Deleted:

* commits and snapshots below ``lowest`` that no kept chain needs (a snapshot's manifest first,
  then its claim; a claim without a manifest, a snapshot in flight or failed, only once its
  commit is needed by no kept chain either);
* uploaded files that no kept manifest or claim names, once older than ``orphan_grace_s`` (a
  space policy only), in two phases: the cleanup writes a retirement naming them
  (``retirement.py``), lists the partition again, spares what a manifest or claim it had not
  read names, deletes the rest, and then its retirement. A snapshot reads the retirements
  between its claim and its manifest, so a manifest never names a file a cleanup deletes;
* temporary files older than ``orphan_grace_s``, and retirements of finished cleanups.

A manifest that does not verify is not a usable base and references nothing. Nor is one that
names a file missing from ``SSTs/`` (or of another size): the checkpoint of an older release,
a damaged bucket. Its files that exist stay referenced. A manifest or claim that cannot be
*read* (a storage error) stops the deletion of uploaded files, since what it references is
unknown. Everything cleanup does not understand it leaves alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from verstore.checkpoint import faults
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import CommitRef, Listing, PartitionFiles
from verstore.checkpoint.session import CheckpointOptions
from verstore.checkpoint.uploads import Manifest, read_manifest, read_retirement, write_retirement
from verstore.exceptions import CorruptionError

log = logging.getLogger("verstore.checkpoint")


def cleanup(files: PartitionFiles, options: CheckpointOptions) -> list[str]:
    """Deletes what no retained version of the partition needs; returns the deleted paths.

    Raises:
        CorruptionError: The partition's version graph is broken (nothing is deleted).
        OSError: Storage failures (whatever was deleted before stays deleted).
    """
    loc = files.location
    listing = files.listing()
    graph = Graph(files, listing)
    now = time.time()
    deleted: list[str] = []

    def old_enough(info: Any) -> bool:
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return now - mtime >= options.orphan_grace_s

    def delete(path: str) -> None:
        faults.step("during_cleanup")
        loc.delete(path)
        deleted.append(path)

    for info in listing.temporaries:
        if old_enough(info):
            delete(info.path)
    lowest = graph.tip().version - options.min_versions_to_retain + 1
    if lowest <= 0:
        return deleted
    manifests = _Manifests(files, listing)
    keep_commits, keep_snapshots = graph.needed(lowest, manifests.usable)
    for ref, commit in listing.commits.items():
        if ref.version < lowest and ref not in keep_commits:
            delete(commit.path)
    kept: list[CommitRef] = []
    for ref in sorted(set(listing.snapshots) | set(listing.claims)):
        snapshot, claim = listing.snapshots.get(ref), listing.claims.get(ref)
        needed = ref in keep_snapshots or (snapshot is None and ref in keep_commits)
        if ref.version >= lowest or needed:
            kept.append(ref)
            continue
        for found in (snapshot, claim):  # the manifest first: a claim outlives its manifest
            if found is not None:
                delete(found.path)
    referenced = manifests.named(kept)
    if manifests.unreadable:
        return deleted
    candidates = {
        durable: info
        for durable, info in manifests.uploads.items()
        if durable not in referenced and old_enough(info)
    }
    if candidates:
        _retire_and_delete(files, listing, manifests, candidates, delete)
    _forget_finished(files, listing, manifests, delete)
    return deleted


def _retire_and_delete(
    files: PartitionFiles,
    listing: Listing,
    manifests: _Manifests,
    candidates: dict[str, Any],
    delete: Any,
) -> None:
    """Retires ``candidates``, spares those a manifest or claim written since ``listing``
    names, deletes the rest, then the retirement."""
    path = write_retirement(files, candidates)
    faults.step("during_cleanup")
    again = files.listing()
    seen = set(listing.snapshots) | set(listing.claims)
    fresh = [ref for ref in (set(again.snapshots) | set(again.claims)) if ref not in seen]
    spared = manifests.named(fresh, again)
    if not manifests.unreadable:
        for durable, info in candidates.items():
            if durable not in spared:
                delete(info.path)
    faults.step("during_cleanup")
    files.location.delete(path)


def _forget_finished(
    files: PartitionFiles, listing: Listing, manifests: _Manifests, delete: Any
) -> None:
    """Deletes the retirements of other cleanups every file of which is gone (those cleanups
    finished, or died after their deletions). One whose files still exist stays: its cleanup
    may be deleting them now."""
    for path in listing.retirements:
        try:
            named = read_retirement(files, path)
        except (CorruptionError, OSError) as e:
            log.warning("cleanup: %s", e)
            continue
        if not named & set(manifests.uploads):
            delete(path)


class _Manifests:
    """The partition's snapshot manifests and claims, each read once, and which are usable
    bases."""

    def __init__(self, files: PartitionFiles, listing: Listing) -> None:
        self.files, self.listing = files, listing
        self.read: dict[tuple[str, CommitRef], Manifest | None] = {}
        #: A manifest could not be read (a storage error): what it references is unknown.
        self.unreadable = False
        # One listing of the uploads answers both "does every file of this manifest exist" and
        # "which uploads does no kept manifest reference".
        self.uploads = {f"SSTs/{info.base_name}": info for info in files.uploaded_files()}

    def get(self, ref: CommitRef, listing: Listing | None = None) -> Manifest | None:
        """Snapshot ``ref``'s manifest, else its claim (the same body), from ``listing``;
        None when it does not verify or cannot be read."""
        listing = listing or self.listing
        found = listing.snapshots.get(ref) or listing.claims.get(ref)
        if found is None:
            return None
        key = (found.path, ref)
        if key not in self.read:
            loc = self.files.location
            try:
                self.read[key] = read_manifest(loc, found.path, ref)
            except FileNotFoundError:
                self.read[key] = None  # deleted since the listing: it references nothing
            except CorruptionError as e:
                log.warning("cleanup: %s", e)
                self.read[key] = None
            except OSError as e:
                log.warning("cleanup: cannot read %s: %s", loc.describe(found.path), e)
                self.read[key] = None
                self.unreadable = True
        return self.read[key]

    def named(self, refs: Any, listing: Listing | None = None) -> set[str]:
        """Every upload the manifests (or claims) of ``refs`` name."""
        out: set[str] = set()
        for ref in refs:
            found = self.get(ref, listing)
            if found is not None:
                out.update(f.durable for f in found.files)
        return out

    def usable(self, ref: CommitRef) -> bool:
        """Whether snapshot ``ref`` can be a rebuild's base: its manifest verifies and every
        file it names is uploaded, of the size it says."""
        if ref not in self.listing.snapshots:
            return False
        found = self.get(ref)
        if found is None:
            return False
        for f in found.files:
            info = self.uploads.get(f.durable)
            if info is None or info.size != f.size:
                log.warning(
                    "cleanup: snapshot %s is no base: %s is missing or of another size",
                    self.files.location.describe(self.listing.snapshots[ref].path),
                    self.files.location.describe(self.files.durable(f.durable)),
                )
                return False
        return True


__all__ = ["cleanup"]
