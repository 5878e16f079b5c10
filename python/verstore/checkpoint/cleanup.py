"""Cleanup: deletes what no retained version needs, working from the lineage's own version graph.

Let ``tip`` be the winning chain's newest commit and ``lowest = tip.version -
min_versions_to_retain + 1``. Versions ``lowest .. tip.version`` stay rebuildable, and so does
*every* commit at a version ``>= lowest``, on the winning chain or not: a sibling may be the
parent of an attempt still in flight, and cleanup must never make a commit unreachable. Each
such commit's chain is kept down to its first usable snapshot at or below ``lowest``
(``chain.Graph.needed``). Deleted:

* commits and snapshots below ``lowest`` that no kept chain needs;
* uploaded files that no kept manifest references, once older than ``orphan_grace_s`` (an
  upload of a snapshot still in flight is younger);
* temporary files older than ``orphan_grace_s``.

A manifest that does not verify is not a usable base and references nothing. Nor is one that
names a file missing from ``SSTs/`` (or of another size): a snapshot can reuse an upload that a
concurrent cleanup deletes before the manifest is written, and trusting that manifest would
delete the changelogs the versions above it must be rebuilt from. Its files that exist stay
referenced. A manifest that cannot be *read* (a storage error) stops the deletion of uploaded
files, since what it references is unknown. Everything cleanup does not understand it leaves
alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from verstore.checkpoint import faults
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import CommitRef, Listing, PartitionFiles
from verstore.checkpoint.manifest import Manifest, read_manifest
from verstore.checkpoint.options import CheckpointOptions
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
    kept_manifests = []
    for ref, snapshot in listing.snapshots.items():
        if ref.version < lowest and ref not in keep_snapshots:
            delete(snapshot.path)
        else:
            kept_manifests.append(manifests.get(ref))
    if manifests.unreadable:
        return deleted
    referenced = {f.durable for m in kept_manifests if m is not None for f in m.files}
    for durable, info in manifests.uploads.items():
        if durable not in referenced and old_enough(info):
            delete(info.path)
    return deleted


class _Manifests:
    """The partition's snapshot manifests, each read once, and which are usable bases."""

    def __init__(self, files: PartitionFiles, listing: Listing) -> None:
        self.files, self.listing = files, listing
        self.read: dict[CommitRef, Manifest | None] = {}
        #: A manifest could not be read (a storage error): what it references is unknown.
        self.unreadable = False
        # One listing of the uploads answers both "does every file of this manifest exist" and
        # "which uploads does no kept manifest reference".
        self.uploads = {f"SSTs/{info.base_name}": info for info in files.uploaded_files()}

    def get(self, ref: CommitRef) -> Manifest | None:
        """Snapshot ``ref``'s manifest; None when it does not verify or cannot be read."""
        if ref not in self.read:
            loc = self.files.location
            path = self.listing.snapshots[ref].path
            try:
                self.read[ref] = read_manifest(loc, path, ref)
            except CorruptionError as e:
                log.warning("cleanup: %s", e)
                self.read[ref] = None
            except OSError as e:
                log.warning("cleanup: cannot read %s: %s", loc.describe(path), e)
                self.read[ref] = None
                self.unreadable = True
        return self.read[ref]

    def usable(self, ref: CommitRef) -> bool:
        """Whether snapshot ``ref`` can be a rebuild's base: its manifest verifies and every
        file it names is uploaded, of the size it says."""
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
