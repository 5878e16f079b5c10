"""Damaged changelogs and snapshots (docs/checkpoint.md, "Changelog file", "Snapshot
manifest"): a damaged or misnamed durable file raises ``CorruptionError`` naming it, never
opens a wrong state; a damaged newest snapshot falls back to the next older one.

Every test runs against a local directory and an S3-compatible server (``target``), on a
checkpoint of seven versions built once per module (``template``); a test that damages a file
restores it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import verstore
from verstore.checkpoint import CommitRef, Manifest, decode_manifest, settings
from verstore.checkpoint.uploads import ManifestFile

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    Reference,
    Target,
    assert_version_matches,
    first_sst,
    flip_byte,
    forge_manifest,
    manifest_body,
    reads,
    replaced,
)

pytest_plugins = ["checkpoint_helpers"]


# --- damaged changelogs -------------------------------------------------------------------------


CHANGELOG_DAMAGE = {
    "empty": lambda data: b"",
    "short header": lambda data: data[:30],
    "header only": lambda data: data[:64],
    "last byte cut": lambda data: data[:-1],
    "bad magic": lambda data: b"XXXX" + data[4:],
    "header bit flip": lambda data: flip_byte(data, 50),
    "body bit flip": lambda data: flip_byte(data, len(data) - 3),
    "appended garbage": lambda data: data + b"\x00\x01",
}


@pytest.mark.parametrize(
    ("version", "damage"),
    [*((4, damage) for damage in CHANGELOG_DAMAGE), (7, "short header"), (7, "body bit flip")],
)
def test_a_damaged_changelog_raises_corruption_naming_it(
    built: tuple[Target, Reference, Path], version: int, damage: str
) -> None:
    """Version 4 is replayed when version 5 rebuilds from snapshot 3, 7 when 7 rebuilds from
    snapshot 6."""
    target, _, _ = built
    path = target.changelog(version)
    opened = 5 if version == 4 else 7
    with (
        replaced(target, path, CHANGELOG_DAMAGE[damage](target.read(path))),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(opened, read_only=True)


def test_a_reused_local_copy_reads_no_changelog(built: tuple[Target, Reference, Path]) -> None:
    """A clean local copy of exactly the commit to open is trusted without reading a file (the
    listing decides); a new executor's rebuild names the damaged file."""
    target, ref, local = built
    path = target.changelog(7)
    with replaced(target, path, flip_byte(target.read(path), 20)):
        assert assert_version_matches(target, ref, 7, local) is False
        with pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))):
            target.open(7, read_only=True)


def test_a_changelog_under_another_commit_name_raises_corruption(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    path = target.changelog(7)
    with (
        replaced(target, path, target.read(target.changelog(6))),
        pytest.raises(
            verstore.CorruptionError,
            match=re.escape(target.describe(path)) + ": its header names another commit",
        ),
    ):
        target.open(7, read_only=True)


# --- damaged snapshots --------------------------------------------------------------------------


def _forged(target: Target, change: dict[str, object]) -> bytes:
    return forge_manifest({**manifest_body(target.manifest(3)), **change})


MANIFEST_DAMAGE = {
    "empty": lambda target, data: b"",
    "truncated": lambda target, data: data[: len(data) // 2],
    "bit flip": lambda target, data: flip_byte(data, len(data) // 2),
    "not json": lambda target, data: b"\x00\x01 snapshot",
    "checksum removed": lambda target, data: json.dumps(
        {k: v for k, v in json.loads(data).items() if k != "checksum"}
    ).encode(),
    "unknown format": lambda target, data: _forged(target, {"format_version": 99}),
}


@pytest.mark.parametrize("damage", MANIFEST_DAMAGE)
def test_a_damaged_snapshot_manifest_raises_corruption_naming_it(
    built: tuple[Target, Reference, Path], damage: str
) -> None:
    """Snapshot 3 is the only base of versions 3..5 (their chain below 3 was cleaned up)."""
    target, _, _ = built
    path = target.snapshot(3)
    with (
        replaced(target, path, MANIFEST_DAMAGE[damage](target, target.read(path))),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5, read_only=True)


@pytest.mark.parametrize("damage", ["bit flip", "unknown format", "sst deleted"])
def test_a_damaged_newest_snapshot_falls_back_to_the_next_older_one(
    built: tuple[Target, Reference, Path], damage: str
) -> None:
    target, ref, _ = built
    if damage == "sst deleted":
        older = {f.durable for f in target.manifest(3).files}
        [path] = [
            target.path(f.durable)
            for f in [first_sst(target.manifest(6))]
            if f.durable not in older
        ]
        data = None
    else:
        path = target.snapshot(6)
        data = MANIFEST_DAMAGE[damage](target, target.read(path))
    with replaced(target, path, data):
        part = target.open(7, read_only=True)
        try:
            assert part.stats.snapshot == target.winning(3)
            assert part.stats.replayed == 4
            assert reads(part.store) == ref.reads_at(7)
        finally:
            part.abort()
        # With no older base left, the newest failure is the error, naming its file.
        with (
            replaced(target, target.snapshot(3), b"{}"),
            pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
        ):
            target.open(7, read_only=True)


SST_DAMAGE = {
    "truncated": lambda data: data[:-1],
    "bit flip": lambda data: flip_byte(data, len(data) // 2),
    "same size, other bytes": lambda data: bytes(len(data)),
}


@pytest.mark.parametrize("damage", [*SST_DAMAGE, "deleted"])
def test_a_damaged_snapshot_file_raises_corruption_naming_it(
    built: tuple[Target, Reference, Path], damage: str
) -> None:
    target, _, _ = built
    entry = first_sst(target.manifest(3))
    path = target.path(entry.durable)
    data = None if damage == "deleted" else SST_DAMAGE[damage](target.read(path))
    with (
        replaced(target, path, data),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5, read_only=True)


@pytest.fixture
def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the lineage settings this process verified (a new process reads them again)."""
    monkeypatch.setattr(settings, "_verified", {})


def test_damaged_meta_raises_corruption(
    built: tuple[Target, Reference, Path], new_process: None
) -> None:
    target, _, _ = built
    path = target.lineage_files().meta
    with (
        replaced(target, path, b"{not json"),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(7)


def test_manifest_round_trip_and_checksum() -> None:
    ref = CommitRef(3, bytes.fromhex("ab" * 16))
    manifest = Manifest(ref, (ManifestFile("000012.sst", f"SSTs/{'cd' * 16}-000012.sst", 10, 7),))
    data = manifest.encode()
    assert decode_manifest(data, "3.snapshot", ref) == manifest
    edited = data.replace(b'"size": 10', b'"size": 11')
    assert edited != data
    with pytest.raises(verstore.CorruptionError, match=r"3\.snapshot: .*checksum mismatch"):
        decode_manifest(edited, "3.snapshot", ref)
    with pytest.raises(verstore.CorruptionError, match="names another commit"):
        decode_manifest(data, "4.snapshot", CommitRef(4, ref.attempt))
