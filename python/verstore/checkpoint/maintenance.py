"""After the commit point: the best-effort work that keeps a checkpoint fast to open and small.

Once a commit's changelog is durable, :func:`after_commit` marks the local copy clean at the new
commit, takes an incremental snapshot when one is due (:func:`snapshot_due`,
:func:`take_snapshot`) and runs :func:`cleanup`. Each step is an optimisation a later open does
without: a failure is recorded in the commit's stats and logged, never raised, and ends the
steps after it. The order of a snapshot's claim, uploads, check and manifest, and of a
cleanup's retirement, listing and deletes, is what keeps every retained version rebuildable:
docs/checkpoint.md, "Commit" and "Cleanup" (with the argument, "Why no interleaving loses a
version", which tests/checkpoint/test_protocol_model.py checks over every interleaving).
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef, Listing, PartitionFiles
from verstore.checkpoint.local import LocalCopy, LocalState
from verstore.checkpoint.session import CheckpointOptions, CommitStats, Deferred
from verstore.checkpoint.uploads import (
    Manifest,
    ManifestFile,
    file_crc32,
    read_manifest,
    read_retirement,
    retired,
    still_uploaded,
    upload_entry,
    write_retirement,
)
from verstore.exceptions import CorruptionError
from verstore.location import TMP_MARK, Location

log = logging.getLogger("verstore.checkpoint")


def snapshot_due(graph: Graph, opened: CommitRef, interval: int) -> bool:
    """Whether the commit made on top of ``opened`` and its ancestors down to the newest
    snapshot (or the empty state) number ``interval``. Counting the chain, not versions, keeps
    the cadence when versions are sparse, and makes a failed snapshot due again at the next
    commit."""
    unsnapshotted = 1  # the new commit
    for ref in graph.walk(opened):
        if unsnapshotted >= interval:
            break
        if ref in graph.snapshots or ref == ROOT:
            break
        unsnapshotted += 1
    return unsnapshotted >= interval


def take_snapshot(
    store: VersionedStore,
    location: Location,
    files: PartitionFiles,
    new: CommitRef,
    *,
    scratch: Path,
    uploaded: dict[str, Any],
) -> tuple[int, dict[str, Any]]:
    """Snapshots ``store`` as commit ``new``: claims the files of a RocksDB checkpoint (made in
    ``scratch``), uploads those not uploaded yet, checks that no cleanup retires any of them,
    then writes the manifest.

    Returns:
        The bytes uploaded, and the upload map of the snapshot's SSTs.

    Raises:
        OSError: A storage failure, or a cleanup retiring a file the snapshot names: nothing
            is published (the snapshot is due again at the next commit).
        FileExistsError: The claim or manifest of ``new`` exists already.
    """
    tmp = scratch / f"{TMP_MARK}checkpoint-{uuid.uuid4().hex}"
    store.create_checkpoint(tmp)
    try:
        retiring = retired(files, files.listing().retirements)
        reusable = {
            name: entry
            for name, entry in still_uploaded(location, files, uploaded).items()
            if entry["durable"] not in retiring
        }
        entries, fresh = _plan(tmp, reusable)
        manifest = Manifest(new, tuple(entries))
        body = manifest.encode()
        location.create_new(files.claim(new), body)
        try:
            uploaded_bytes = _upload(location, files, fresh)
            faults.step("before_manifest")
            _check_claim(location, files, manifest)
        except Exception:
            _withdraw(location, files, new, fresh)
            raise
        location.create_new(files.snapshot(new), body)
        faults.step("after_manifest")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ssts = {e.name: upload_entry(e.durable, e.size, e.crc32) for e in entries if e.is_sst}
    return uploaded_bytes, ssts


def _plan(
    checkpoint: Path, reusable: dict[str, Any]
) -> tuple[list[ManifestFile], list[tuple[Path, ManifestFile]]]:
    """The manifest entries of the checkpoint's files, reusing what ``reusable`` holds; and
    the files to upload, each with its entry (a new unique name)."""
    entries, fresh = [], []
    for path in sorted(checkpoint.iterdir()):
        size = path.stat().st_size
        known = reusable.get(path.name)
        if path.suffix == ".sst" and known and known.get("size") == size:
            entries.append(ManifestFile(path.name, known["durable"], size, known["crc32"]))
            continue
        durable = f"{layout.SST_DIR}/{uuid.uuid4().hex}-{path.name}"
        entry = ManifestFile(path.name, durable, size, file_crc32(path))
        entries.append(entry)
        fresh.append((path, entry))
    return entries, fresh


def _upload(
    location: Location, files: PartitionFiles, fresh: list[tuple[Path, ManifestFile]]
) -> int:
    """Uploads the files ``_plan`` chose; returns the bytes uploaded."""
    uploaded_bytes = 0
    for path, entry in fresh:
        location.upload(str(path), files.durable(entry.durable))
        uploaded_bytes += entry.size
        faults.step("during_snapshot_upload")
    return uploaded_bytes


def _check_claim(location: Location, files: PartitionFiles, manifest: Manifest) -> None:
    """Checks, after the claim is written and before the manifest, that the claim is still
    there, that no cleanup retires a file the snapshot names and that each is uploaded at its
    size. The retirements are read
    before the uploads are listed: a cleanup removes its retirement only after deleting what it
    names, so a file deleted by a cleanup whose retirement this misses is seen missing."""
    named = {f.durable for f in manifest.files}
    listing = files.listing()
    if manifest.ref not in listing.claims:
        raise OSError(
            f"{location.describe(files.claim(manifest.ref))} is gone (a cleanup found its "
            "version no longer needed); the snapshot is not published"
        )
    retiring = named & retired(files, listing.retirements)
    if retiring:
        raise OSError(
            f"{location.describe(files.claim(manifest.ref))}: a cleanup is retiring "
            f"{location.describe(files.durable(min(retiring)))}, which the snapshot reuses; "
            "the snapshot is not published"
        )
    sizes = {f"{layout.SST_DIR}/{info.base_name}": info.size for info in files.uploaded_files()}
    for f in manifest.files:
        if sizes.get(f.durable) != f.size:
            raise OSError(
                f"{location.describe(files.durable(f.durable))} is missing or of another size "
                f"(deleted since the snapshot claimed it); the snapshot is not published"
            )


def _withdraw(
    location: Location, files: PartitionFiles, ref: CommitRef, fresh: list[tuple[Path, Any]]
) -> None:
    """Best effort after a failed snapshot: its fresh uploads, then its claim (no manifest will
    name them; what is left is cleanup's)."""
    try:
        for _, entry in fresh:
            location.delete(files.durable(entry.durable))
        location.delete(files.claim(ref))
    except OSError as e:
        log.warning("cannot withdraw the failed snapshot %s: %s", files.describe(), e)


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

    def deferred(what: Deferred, error: Exception) -> None:
        stats.deferred.append(what)
        log.warning(
            "%s: version %d is committed; %s failed and is retried later: %s",
            files.describe(),
            new.version,
            what,
            error,
        )

    try:
        local.write_state(LocalState.clean_at(lineage, new, uploaded))
    except Exception as e:
        deferred(Deferred.MARK_CLEAN, e)
        return uploaded
    faults.step("after_local_state")
    if not snapshot_due(graph, opened, options.snapshot_interval):
        return uploaded
    try:
        stats.snapshot_uploaded_bytes, uploaded = take_snapshot(
            store, location, files, new, scratch=local.dir, uploaded=uploaded
        )
        stats.snapshot = True
        local.write_state(LocalState.clean_at(lineage, new, uploaded))
    except Exception as e:
        deferred(Deferred.SNAPSHOT, e)
        return uploaded
    try:
        faults.step("before_cleanup")
        stats.deleted_files = len(cleanup(files, options))
    except Exception as e:
        deferred(Deferred.CLEANUP, e)
    return uploaded


@dataclass(frozen=True)
class AfterCommit:
    """The steps after commit ``new`` of a kept store, as a value its keeper runs
    (``kept.DeferredWork``): when a snapshot is due, a flush and :func:`after_commit`; else
    nothing until the keeper settles the store (a store taken again soon then gets many
    micro-batches into one flush, RocksDB's own when its memtables fill, or the keeper's of its
    memtables alone when it idles). It holds what the
    commit's session knew (no session: that ended with the commit), and runs on the store and
    local copy of whoever holds them then.
    """

    location: Location
    files: PartitionFiles
    copy_of: str
    graph: Graph
    opened: CommitRef
    new: CommitRef
    options: CheckpointOptions
    stats: CommitStats

    def run(
        self, store: VersionedStore, local: LocalCopy, uploaded: dict[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """Returns the copy's upload map afterwards, and whether the copy is clean at
        ``new`` on disk (``LOCAL.json`` says so)."""
        if not snapshot_due(self.graph, self.opened, self.options.snapshot_interval):
            return uploaded, False
        store.flush()
        uploaded = after_commit(
            store,
            self.location,
            self.files,
            local,
            self.copy_of,
            graph=self.graph,
            opened=self.opened,
            new=self.new,
            uploaded=uploaded,
            options=self.options,
            stats=self.stats,
        )
        return uploaded, Deferred.MARK_CLEAN not in self.stats.deferred


__all__ = ["AfterCommit", "after_commit", "cleanup", "snapshot_due", "take_snapshot"]
