"""Incremental snapshots: a RocksDB checkpoint of the store, uploaded as a manifest plus the
files the checkpoint does not have yet.

A snapshot is due when the new commit and its ancestors down to the newest snapshot (or the
empty state) number ``snapshot_interval``. Its SSTs that the local copy's upload map says are
in the checkpoint already (``uploads``) are referenced, the others uploaded under new unique
names; the manifest, written as a new file, makes the snapshot. A snapshot is an optimisation:
it fails without harm, and is due again at the next commit.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import ROOT, CommitRef, PartitionFiles
from verstore.checkpoint.manifest import Manifest, ManifestFile, file_crc32, missing_files
from verstore.checkpoint.uploads import still_uploaded, upload_entry
from verstore.location import TMP_MARK, Location


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
    """Snapshots ``store`` as commit ``new``: uploads the files of a RocksDB checkpoint (made
    in ``scratch``) not uploaded yet, then the manifest.

    Returns:
        The bytes uploaded, and the upload map of the snapshot's SSTs.
    """
    tmp = scratch / f"{TMP_MARK}checkpoint-{uuid.uuid4().hex}"
    store.create_checkpoint(tmp)
    try:
        reusable = still_uploaded(location, files, uploaded)
        entries, uploaded_bytes = _upload(location, files, tmp, reusable)
        manifest = Manifest(new, tuple(entries))
        faults.step("before_manifest")
        location.write_new(files.snapshot(new), manifest.encode())
        faults.step("after_manifest")
        _check_snapshot(location, files, manifest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ssts = {e.name: upload_entry(e.durable, e.size, e.crc32) for e in entries if e.is_sst}
    return uploaded_bytes, ssts


def _upload(
    location: Location, files: PartitionFiles, checkpoint: Path, reusable: dict[str, Any]
) -> tuple[list[ManifestFile], int]:
    """The manifest entries of the checkpoint's files, uploading those not reusable; returns
    them and the bytes uploaded."""
    entries = []
    uploaded_bytes = 0
    for path in sorted(checkpoint.iterdir()):
        size = path.stat().st_size
        known = reusable.get(path.name)
        if path.suffix == ".sst" and known and known.get("size") == size:
            durable, crc = known["durable"], known["crc32"]
        else:
            durable = f"{layout.SST_DIR}/{uuid.uuid4().hex}-{path.name}"
            crc = file_crc32(path)
            location.upload(str(path), files.durable(durable))
            uploaded_bytes += size
            faults.step("during_snapshot_upload")
        entries.append(ManifestFile(path.name, durable, size, crc))
    return entries, uploaded_bytes


def _check_snapshot(location: Location, files: PartitionFiles, manifest: Manifest) -> None:
    """Checks, after the manifest is written, that every file it names is still there.

    A reused upload was checked once before the snapshot began; an attempt whose cleanup
    listed no manifest naming it may have deleted it since. A manifest naming a lost file is
    no snapshot: it is removed, and the snapshot fails (it is due again at the next commit).
    """
    missing = missing_files(location, files, manifest)
    if not missing:
        return
    path = files.snapshot(manifest.ref)
    location.delete(path)
    raise OSError(
        f"{location.describe(path)} names a file that is gone "
        f"({location.describe(missing[0])}: deleted since the snapshot reused "
        "it, as a concurrent attempt's cleanup may); "
        "the snapshot is removed"
    )


__all__ = ["snapshot_due", "take_snapshot"]
