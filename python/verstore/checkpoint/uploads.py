"""Uploads (``SSTs/<32 hex>-<name>``) and the records that name them.

A snapshot's manifest and its claim reference uploads, a cleanup's retirement retires them
before it deletes them, and the local copy's upload map remembers which of its SSTs are
uploaded already, so that a snapshot references them instead of uploading them again. Every
one of these records is hostile input: decoded with a size limit, its shape checked before
anything is used, and anything else a :class:`CorruptionError` naming the file. The formats and
the order that keeps a manifest's files alive: docs/checkpoint.md, "Snapshot manifest",
"Commit" and "Cleanup".
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from verstore._checks import whole
from verstore.checkpoint.layout import (
    FORMAT_VERSION,
    RETIRING_PREFIX,
    CommitRef,
    PartitionFiles,
    read_limited,
    read_record,
)
from verstore.exceptions import CorruptionError
from verstore.location import Location

#: Manifests larger than this are not manifests (a hostile file must not exhaust memory).
MANIFEST_LIMIT = 64 << 20

_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
_DURABLE = re.compile(r"SSTs/[0-9a-f]{32}-([A-Za-z0-9_][A-Za-z0-9_.-]{0,199})")
_MAX_FILES = 1_000_000
_MAX_SIZE = 2**53


@dataclass(frozen=True)
class ManifestFile:
    """One file of a snapshot: its local ``name``, where it is stored, size and crc32."""

    name: str
    durable: str
    size: int
    crc32: int

    @property
    def is_sst(self) -> bool:
        return self.name.endswith(".sst")


@dataclass(frozen=True)
class Manifest:
    """A verified snapshot manifest."""

    ref: CommitRef
    files: tuple[ManifestFile, ...]

    def encode(self) -> bytes:
        body = {
            "format_version": FORMAT_VERSION,
            "version": self.ref.version,
            "attempt": self.ref.attempt.hex(),
            "files": [
                {"name": f.name, "durable": f.durable, "size": f.size, "crc32": f.crc32}
                for f in self.files
            ],
        }
        body["checksum"] = zlib.crc32(_canonical(body))
        return json.dumps(body, indent=1, sort_keys=True).encode()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def decode_manifest(data: bytes, name: str, expected: CommitRef) -> Manifest:
    """Parses and verifies the manifest of commit ``expected`` read from file ``name``.

    Raises:
        CorruptionError: Naming ``name``, for anything malformed, inconsistent or hostile.
    """

    def corrupt(detail: str) -> CorruptionError:
        return CorruptionError(f"corrupt data in {name}: {detail}")

    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise corrupt("snapshot manifest is not JSON") from None
    if not isinstance(body, dict) or set(body) != {
        "format_version",
        "version",
        "attempt",
        "files",
        "checksum",
    }:
        raise corrupt("snapshot manifest does not have the manifest fields")
    checksum = body.pop("checksum")
    if zlib.crc32(_canonical(body)) != checksum:
        raise corrupt("snapshot manifest does not verify (checksum mismatch)")
    if body["format_version"] != FORMAT_VERSION:
        raise corrupt(f"unknown manifest format {body['format_version']!r}")
    if body["version"] != expected.version or body["attempt"] != expected.attempt.hex():
        raise corrupt("snapshot manifest names another commit than its file name")
    entries = body["files"]
    if not isinstance(entries, list) or len(entries) > _MAX_FILES:
        raise corrupt("snapshot manifest 'files' is not a list of files")
    files = []
    seen = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != {"name", "durable", "size", "crc32"}:
            raise corrupt(f"snapshot manifest file {i} does not have the file fields")
        file_name, durable = entry["name"], entry["durable"]
        size, crc = entry["size"], entry["crc32"]
        if not isinstance(file_name, str) or not _FILE_NAME.fullmatch(file_name):
            raise corrupt(f"snapshot manifest file {i} has an unsafe name {file_name!r}")
        if not isinstance(durable, str) or not _DURABLE.fullmatch(durable):
            raise corrupt(f"snapshot manifest file {i} has an unsafe location {durable!r}")
        if not whole(size, 0, _MAX_SIZE) or not whole(crc, 0, 2**32):
            raise corrupt(f"snapshot manifest file {i} has a bad size or checksum")
        if file_name in seen:
            raise corrupt(f"snapshot manifest lists {file_name!r} twice")
        seen.add(file_name)
        files.append(ManifestFile(file_name, durable, size, crc))
    return Manifest(expected, tuple(files))


def read_manifest(location: Location, path: str, expected: CommitRef) -> Manifest:
    """Reads (at most :data:`MANIFEST_LIMIT` bytes) and verifies the manifest of ``expected``.

    Raises:
        CorruptionError: Naming the file, for anything malformed, hostile or too large.
        OSError: The file cannot be read (a storage error).
    """
    data = read_limited(location, path, MANIFEST_LIMIT, "a snapshot manifest")
    return decode_manifest(data, location.describe(path), expected)


def is_durable_name(durable: object) -> bool:
    """Whether ``durable`` is a manifest ``durable`` path: ``SSTs/<32 hex>-<plain name>``."""
    return isinstance(durable, str) and _DURABLE.fullmatch(durable) is not None


def file_crc32(path: str | os.PathLike[str]) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


RETIREMENT_LIMIT = 64 << 20


def _new_retirement_path(files: PartitionFiles) -> str:
    """A fresh retirement name in the partition directory (each cleanup writes its own)."""
    return posixpath.join(files.dir, f"{RETIRING_PREFIX}{os.urandom(16).hex()}.json")


def write_retirement(files: PartitionFiles, durables: Iterable[str]) -> str:
    """Writes a new retirement naming ``durables``; returns its path."""
    path = _new_retirement_path(files)
    body = {"format_version": FORMAT_VERSION, "files": sorted(durables)}
    files.location.create_new(path, json.dumps(body).encode())
    return path


def read_retirement(files: PartitionFiles, path: str) -> frozenset[str]:
    """The uploads the retirement ``path`` names; empty if it is gone (its cleanup finished).

    Raises:
        CorruptionError: Naming the file, for anything but a retirement.
        OSError: The file cannot be read.
    """
    name = files.location.describe(path)
    try:
        body = read_record(files.location, path, RETIREMENT_LIMIT, "a retirement")
    except FileNotFoundError:
        return frozenset()
    if (
        not isinstance(body, dict)
        or set(body) != {"format_version", "files"}
        or body["format_version"] != FORMAT_VERSION
        or not isinstance(body["files"], list)
        or not all(is_durable_name(f) for f in body["files"])
    ):
        raise CorruptionError(f"corrupt data in {name}: not a list of uploads to retire")
    return frozenset(body["files"])


def retired(files: PartitionFiles, paths: Iterable[str]) -> frozenset[str]:
    """Every upload that the retirements ``paths`` name (a retirement gone since it was
    listed names nothing: its cleanup deleted its files first)."""
    out: set[str] = set()
    for path in paths:
        out |= read_retirement(files, path)
    return frozenset(out)


def upload_entry(durable: str, size: int, crc32: int) -> dict[str, Any]:
    """One SST's entry in the upload map: where it is in the checkpoint, its size and CRC."""
    return {"durable": durable, "size": size, "crc32": crc32}


def still_uploaded(
    location: Location, files: PartitionFiles, uploaded: dict[str, Any]
) -> dict[str, Any]:
    """The entries of the local copy's upload map whose files are still in the checkpoint.

    An upload is deleted once no kept manifest references it, and a local copy that caught
    up after a long absence may remember uploads of a snapshot cleanup has since removed:
    referencing those would make a snapshot that cannot be restored.
    """
    known = {
        name: entry
        for name, entry in uploaded.items()
        if is_durable_name(entry.get("durable"))
        and isinstance(entry.get("size"), int)
        and isinstance(entry.get("crc32"), int)
    }
    if not known:
        return {}
    paths = [files.durable(e["durable"]) for e in known.values()]
    infos = location.info(paths)
    return {
        name: entry
        for (name, entry), info in zip(known.items(), infos, strict=True)
        if info.size == entry["size"]
    }


__all__ = [
    "MANIFEST_LIMIT",
    "RETIREMENT_LIMIT",
    "Manifest",
    "ManifestFile",
    "decode_manifest",
    "file_crc32",
    "is_durable_name",
    "read_manifest",
    "read_retirement",
    "retired",
    "still_uploaded",
    "upload_entry",
    "write_retirement",
]
