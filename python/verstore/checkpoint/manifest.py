"""Snapshot manifests: the list of files that make up the RocksDB copy of one commit's state.

```json
{"format_version": 2, "version": 20, "attempt": "<32 hex>",
 "files": [{"name": "000012.sst", "durable": "SSTs/<32 hex>-000012.sst",
            "size": 1234, "crc32": 99}, ...],
 "checksum": <crc32 of the canonical JSON of every other field>}
```

A manifest is input from storage, which anyone with write access to the bucket controls, and a
checksum is not authentication. Decoding therefore checks the *shape* of everything before
anything is used: ``name`` is a plain file name (it becomes a path in the local directory),
``durable`` is ``SSTs/<hex>-<plain name>`` (it becomes a path under the partition directory,
never elsewhere), sizes and checksums are in range, and the version and attempt are the ones the
manifest's own file name claims. Anything else is a :class:`CorruptionError` naming the file.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass
from typing import Any

from verstore._checks import whole
from verstore.checkpoint.layout import FORMAT_VERSION, CommitRef
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
    name = location.describe(path)
    try:
        data = location.read_bytes(path, MANIFEST_LIMIT)
    except ValueError:
        raise CorruptionError(
            f"corrupt data in {name}: larger than {MANIFEST_LIMIT} bytes, not a snapshot manifest"
        ) from None
    return decode_manifest(data, name, expected)


def is_durable_name(durable: object) -> bool:
    """Whether ``durable`` is a manifest ``durable`` path: ``SSTs/<32 hex>-<plain name>``."""
    return isinstance(durable, str) and _DURABLE.fullmatch(durable) is not None


def file_crc32(path: str | os.PathLike[str]) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


__all__ = [
    "MANIFEST_LIMIT",
    "Manifest",
    "ManifestFile",
    "decode_manifest",
    "file_crc32",
    "is_durable_name",
    "read_manifest",
]
