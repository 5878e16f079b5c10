"""Incremental snapshots: a RocksDB checkpoint of the store, uploaded as a manifest plus the
files the checkpoint does not have yet.

A snapshot is due when the new commit and its ancestors down to the newest snapshot (or the
empty state) number ``snapshot_interval``. Its SSTs that the local copy's upload map says are
in the checkpoint already (``uploads``) and that no cleanup is retiring are referenced, the
others uploaded under new unique names. In this order (docs/checkpoint.md, "Cleanup", says why
no interleaving with a cleanup then loses a file a manifest names):

1. the claim ``<v>-<a>.claim`` (the manifest's body) is created, naming every file;
2. the new files are uploaded;
3. the partition is listed and its retirements (``retirement.py``) read, then the uploads
   listed: a claim gone, a file retired, missing or of another size fails the snapshot, which
   withdraws its claim;
4. the manifest ``<v>-<a>.snapshot`` is created: it makes the snapshot, and is final.

A snapshot is an optimisation: it fails without harm, and is due again at the next commit.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef, PartitionFiles
from verstore.checkpoint.uploads import (
    Manifest,
    ManifestFile,
    file_crc32,
    retired,
    still_uploaded,
    upload_entry,
)
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


__all__ = ["snapshot_due", "take_snapshot"]
