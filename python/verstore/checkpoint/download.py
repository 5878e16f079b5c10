"""Download of a snapshot into an empty ``db/``: every file its manifest names, checked.

A snapshot's files are hostile input like its manifest: each is fetched no further than the
size the manifest gives and checked against that size and its CRC-32, and a file that is
missing, not a file, or different makes the snapshot unusable (``CorruptionError``, so that a
rebuild tries an older one). A storage error is raised as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyarrow.fs import FileType

from verstore.checkpoint.layout import CommitRef, PartitionFiles
from verstore.checkpoint.session import OpenStats
from verstore.checkpoint.uploads import Manifest, ManifestFile, read_manifest, upload_entry
from verstore.exceptions import CorruptionError
from verstore.location import Location


def download_snapshot(
    location: Location,
    files: PartitionFiles,
    path: str,
    ref: CommitRef,
    db: Path,
    stats: OpenStats,
) -> dict[str, Any]:
    """Downloads snapshot ``ref`` (its manifest at ``path``) into ``db``, which must not exist.

    Returns:
        The upload map of its SSTs (they are in the checkpoint already).

    Raises:
        CorruptionError: The manifest or a file it names is gone or damaged.
        OSError: Storage failures.
    """
    manifest = _manifest(location, path, ref)
    db.mkdir(parents=True)
    uploaded = {}
    for entry in manifest.files:
        stats.downloaded_bytes += _fetch(location, files, entry, db, ref)
        if entry.is_sst:
            uploaded[entry.name] = upload_entry(entry.durable, entry.size, entry.crc32)
    return uploaded


def _manifest(location: Location, path: str, ref: CommitRef) -> Manifest:
    try:
        return read_manifest(location, path, ref)
    except FileNotFoundError:
        # Listed, then removed: a snapshot found to name a lost file (see snapshot.py).
        raise CorruptionError(
            f"corrupt data in {location.describe(path)}: snapshot manifest is gone"
        ) from None


def _fetch(
    location: Location, files: PartitionFiles, entry: ManifestFile, db: Path, ref: CommitRef
) -> int:
    """Fetches one file of the snapshot into ``db``, checked; returns its size."""
    durable = files.durable(entry.durable)
    where = location.describe(durable)
    try:
        # Never more than the manifest's size: a file that grew is not read to its end.
        size, crc = location.fetch(durable, str(db / entry.name), entry.size)
    except FileNotFoundError:
        raise CorruptionError(
            f"corrupt data in {where}: file of snapshot {ref.version} is missing"
        ) from None
    except OSError:
        if location.info([durable])[0].type == FileType.File:
            raise  # a storage error
        raise CorruptionError(
            f"corrupt data in {where}: file of snapshot {ref.version} is not a file"
        ) from None
    if size != entry.size or crc != entry.crc32:
        raise CorruptionError(
            f"corrupt data in {where}: size or checksum differs from snapshot "
            f"{ref.version}'s manifest"
        )
    return size


__all__ = ["download_snapshot"]
