"""Checkpointed partition stores (docs/checkpoint.md): versions, rebuilds and damaged files.

Every test runs against a local directory and an S3-compatible server (``target``). A rebuild's
reads are compared with an in-memory store fed the same ops (``Reference``). Damaged or missing
durable files must raise ``CorruptionError`` or ``MissingVersionError`` naming the file or
version, never open a wrong state.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import verstore
from verstore.checkpoint import (
    CheckpointOptions,
    PartitionStore,
    decode_manifest,
    encode_manifest,
)
from verstore.location import TMP_MARK, Location

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    NO_SNAPSHOTS,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    Reference,
    Target,
    apply_ops,
    assert_version_matches,
    commit_batches,
    first_sst,
    flip_byte,
    generate_ops,
    local_state,
    make_target,
    open_and_read,
    reads,
    replaced,
    share,
)

pytest_plugins = ["checkpoint_helpers"]


@pytest.fixture(scope="module", params=["local", "s3"])
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Target, Reference, Path]:
    """Versions 1..5 committed from one local directory (snapshot at 3, none at 5), built once
    per module and kind; the tests that damage a file restore it (``replaced``)."""
    target = make_target(request, request.param, tmp_path_factory.mktemp("template"))
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(5), 0, 5, local)
    return target, ref, local


@pytest.fixture
def built(
    template: tuple[Target, Reference, Path], tmp_path: Path
) -> tuple[Target, Reference, Path]:
    """The shared checkpoint at version 5, the reference, a private copy of the local dir."""
    return share(template, tmp_path)


# --- versions and rebuilds ----------------------------------------------------------------------


def test_every_version_reopens_locally_and_rebuilds_elsewhere(target: Target) -> None:
    ref = Reference()
    rng = random.Random(1)
    local = target.new_local_dir()
    for version in range(6):
        ops = generate_ops(rng, 30, ref.stream_time_at(version))
        part = target.open(version, local)
        assert part.version == version
        with ref.store_at(version) as expected:
            assert apply_ops(part.store, ops) == apply_ops(expected, ops)
        assert part.commit() == version + 1
        ref.commit(version + 1, ops)
        # The clean local copy is reused; a new executor rebuilds the same state.
        assert assert_version_matches(target, ref, version + 1, local) is False
        assert assert_version_matches(target, ref, version + 1) is True
    for version in (3, 4):  # the oldest of version 6's retained window, after its cleanup
        assert_version_matches(target, ref, version)


def test_open_gives_exactly_the_requested_version_not_the_latest(
    built: tuple[Target, Reference, Path],
) -> None:
    target, ref, local = built
    assert_version_matches(target, ref, 4, local)
    assert_version_matches(target, ref, 2)
    assert local_state(local)["version"] == 4


def test_version_zero_is_empty_and_records_the_configuration(target: Target) -> None:
    part = target.open(0)
    assert part.store.observed_stream_time == -1
    assert part.store.get(b"a") is None
    part.abort()
    meta = json.loads(target.read(target.files().meta))
    assert meta == {
        "format_version": 1,
        "history_retention_ms": RETENTION_MS,
        "segment_interval_ms": SEGMENT_MS,
    }


def test_a_rebuild_reports_replay_progress(built: tuple[Target, Reference, Path]) -> None:
    target, _, _ = built
    calls: list[tuple[str, int, int]] = []
    part = target.open(5, progress=lambda *call: calls.append(call))
    part.abort()
    assert calls == [("replay", 1, 2), ("replay", 2, 2)]  # snapshot 3, then 4 and 5


def test_abort_drops_uncommitted_work(built: tuple[Target, Reference, Path]) -> None:
    target, ref, local = built
    part = target.open(5, local)
    part.store.put(b"a", b"uncommitted", 10_000)
    part.abort()
    assert local_state(local)["clean"] is False
    assert assert_version_matches(target, ref, 5, local) is True  # dirty copy: rebuilt


def test_leaving_the_context_without_commit_aborts(
    built: tuple[Target, Reference, Path],
) -> None:
    target, ref, local = built
    with target.open(5, local) as part:
        part.store.put(b"a", b"uncommitted", 10_000)
    with pytest.raises(verstore.StoreClosedError, match="committed or aborted"):
        _ = part.store
    assert assert_version_matches(target, ref, 5, local) is True


def test_commit_ends_the_session(target: Target) -> None:
    part = target.open(0)
    part.store.put(b"a", b"1", 5)
    assert part.commit() == 1
    with pytest.raises(verstore.StoreClosedError, match="committed or aborted"):
        part.store.put(b"a", b"2", 6)
    with pytest.raises(verstore.StoreClosedError):
        part.commit()


def test_an_empty_commit_makes_a_version(target: Target) -> None:
    ref = Reference()
    for version in range(4):  # 3 is a snapshot of an empty store
        assert target.commit(version, []) == version + 1
        ref.commit(version + 1, [])
    assert_version_matches(target, ref, 4)


def test_partitions_are_independent(target: Target) -> None:
    ops = {p: generate_ops(random.Random(p), 20, -1) for p in (0, 1)}
    for p in (0, 1):
        target.commit(0, ops[p], partition=p)
    for p in (0, 1):
        part = target.open(1, partition=p)
        with verstore.VersionedStore.in_memory(
            history_retention_ms=RETENTION_MS, segment_interval_ms=SEGMENT_MS
        ) as expected:
            apply_ops(expected, ops[p])
            assert reads(part.store) == reads(expected)
        part.abort()
    with pytest.raises(verstore.MissingVersionError, match="version 1 is missing"):
        target.open(1, partition=2)


def test_a_second_open_of_the_same_local_directory_waits_then_fails(target: Target) -> None:
    local = target.new_local_dir()
    target.commit(0, [], local)
    part = target.open(1, local)
    quick = CheckpointOptions(lock_timeout_s=0.2)
    with pytest.raises(verstore.StoreLockedError, match="is locked by another task"):
        target.open(1, local, options=quick)
    part.abort()
    target.open(1, local, options=quick).abort()


# --- configuration and arguments ----------------------------------------------------------------


def test_reopening_with_another_configuration_is_refused(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    with pytest.raises(verstore.IncompatibleConfigError, match="history_retention_ms=40"):
        target.open(5, history_retention_ms=RETENTION_MS + 1)
    with pytest.raises(verstore.IncompatibleConfigError, match="segment_interval_ms=10"):
        target.open(5, segment_interval_ms=None)


def test_bad_arguments_raise_value_errors(target: Target, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="version must be >= 0"):
        target.open(-1)
    with pytest.raises(ValueError, match="partition must be >= 0"):
        target.open(0, partition=-1)
    with pytest.raises(ValueError, match="store_name must be a plain directory name"):
        target.open(0, store="a/b")
    with pytest.raises(TypeError, match=r"use PartitionStore\.open"):
        PartitionStore()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("snapshot_interval", 0, "snapshot_interval must be >= 1"),
        ("min_versions_to_retain", 0, "min_versions_to_retain must be >= 1"),
        ("lock_timeout_s", -1, "lock_timeout_s must be >= 0"),
    ],
)
def test_checkpoint_options_are_validated(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CheckpointOptions(**{field: value})


# --- missing versions ---------------------------------------------------------------------------


def test_a_version_never_committed_is_missing(built: tuple[Target, Reference, Path]) -> None:
    target, _, _ = built
    with pytest.raises(verstore.MissingVersionError, match=r"version 9 is missing .*9\.changelog"):
        target.open(9)


def test_an_empty_location_holds_only_version_zero(target: Target) -> None:
    with pytest.raises(verstore.MissingVersionError, match="holds no verstore checkpoint"):
        target.open(3)


def test_a_gap_in_the_chain_is_a_missing_version(built: tuple[Target, Reference, Path]) -> None:
    target, _, _ = built
    with (
        replaced(target, target.path("4.changelog"), None),
        pytest.raises(
            verstore.MissingVersionError,
            match=r"version 4 is missing .*needed to rebuild version 5.*4\.changelog",
        ),
    ):
        target.open(5)


def test_a_gap_before_any_snapshot_is_a_missing_version(target: Target) -> None:
    ref = Reference()
    commit_batches(
        target, ref, random.Random(2), 0, 4, target.new_local_dir(), options=NO_SNAPSHOTS
    )
    target.remove(target.path("2.changelog"))
    with pytest.raises(verstore.MissingVersionError, match="version 2 is missing"):
        target.open(4)
    assert_version_matches(target, ref, 1)


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
    [*((4, damage) for damage in CHANGELOG_DAMAGE), (5, "short header"), (5, "body bit flip")],
)
def test_a_damaged_changelog_raises_corruption_naming_it(
    built: tuple[Target, Reference, Path], version: int, damage: str
) -> None:
    target, _, _ = built
    path = target.path(f"{version}.changelog")
    with (
        replaced(target, path, CHANGELOG_DAMAGE[damage](target.read(path))),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5)


def test_a_damaged_header_of_the_requested_version_is_caught_on_the_fast_path(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, local = built
    path = target.path("5.changelog")
    with (
        replaced(target, path, flip_byte(target.read(path), 20)),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5, local)


def test_a_damaged_header_of_the_snapshot_version_raises_corruption(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    path = target.path("3.changelog")  # not replayed, but its header names snapshot 3's attempt
    with (
        replaced(target, path, flip_byte(target.read(path), 20)),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5)


def test_a_changelog_under_another_version_name_raises_corruption(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    path = target.path("5.changelog")
    with (
        replaced(target, path, target.read(target.path("4.changelog"))),
        pytest.raises(
            verstore.CorruptionError,
            match=re.escape(target.describe(path)) + ".*header says version 4",
        ),
    ):
        target.open(5)


def test_a_broken_version_chain_raises_corruption_naming_both_attempts(target: Target) -> None:
    ref = Reference()
    rng = random.Random(3)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir(), options=NO_SNAPSHOTS)
    first_two = target.read(target.path("2.changelog"))
    # A retry rewrites version 2 and builds version 3 on it; then the old 2 comes back.
    commit_batches(target, ref, rng, 1, 3, target.new_local_dir(), options=NO_SNAPSHOTS)
    assert_version_matches(target, ref, 3)
    target.write(target.path("2.changelog"), first_two)
    path = target.path("3.changelog")
    with pytest.raises(
        verstore.CorruptionError,
        match=re.escape(target.describe(path)) + ": broken version chain.*written by [0-9a-f]{32}",
    ):
        target.open(3)


# --- damaged snapshots --------------------------------------------------------------------------


def _reencoded_manifest(target: Target, change: dict[str, object]) -> bytes:
    manifest = target.manifest(3)
    manifest.update(change)
    return encode_manifest(manifest)


MANIFEST_DAMAGE = {
    "empty": lambda target, data: b"",
    "truncated": lambda target, data: data[: len(data) // 2],
    "bit flip": lambda target, data: flip_byte(data, len(data) // 2),
    "not json": lambda target, data: b"\x00\x01 snapshot",
    "checksum removed": lambda target, data: json.dumps(
        {k: v for k, v in json.loads(data).items() if k != "checksum"}
    ).encode(),
    "unknown format": lambda target, data: _reencoded_manifest(target, {"format_version": 99}),
}


@pytest.mark.parametrize("damage", MANIFEST_DAMAGE)
def test_a_damaged_snapshot_manifest_raises_corruption_naming_it(
    built: tuple[Target, Reference, Path], damage: str
) -> None:
    target, _, _ = built
    path = target.path("3.snapshot")
    with (
        replaced(target, path, MANIFEST_DAMAGE[damage](target, target.read(path))),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5)


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
    path = target.path(entry["durable"])
    data = None if damage == "deleted" else SST_DAMAGE[damage](target.read(path))
    with (
        replaced(target, path, data),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5)


def test_damaged_meta_raises_corruption(built: tuple[Target, Reference, Path]) -> None:
    target, _, _ = built
    path = target.files().meta
    with (
        replaced(target, path, b"{not json"),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(5)


def test_manifest_round_trip_and_checksum() -> None:
    manifest = {"format_version": 1, "version": 3, "attempt": "ab" * 16, "files": []}
    data = encode_manifest(manifest)
    assert decode_manifest(data, "3.snapshot") == manifest
    edited = data.replace(b'"version": 3', b'"version": 4')
    assert edited != data
    with pytest.raises(verstore.CorruptionError, match=r"3\.snapshot: snapshot manifest"):
        decode_manifest(edited, "3.snapshot")


# --- locations ----------------------------------------------------------------------------------


def test_location_resolves_paths_and_uris(tmp_path: Path) -> None:
    local = Location.resolve(str(tmp_path / "x"))
    assert local.root == str(tmp_path / "x")
    assert not local.atomic_put
    assert local.describe(local.path("a")) == str(tmp_path / "x" / "a")
    file_uri = Location.resolve(f"file://{tmp_path}/y/")
    assert file_uri.root == f"{tmp_path}/y"
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        Location.resolve("ftp://host/path")


def test_atomic_writes_replace_whole_files_and_leave_no_temporaries(target: Target) -> None:
    loc = target.location
    path = loc.path("dir", "file.bin")
    loc.write_atomic(path, b"first")
    loc.write_atomic(path, b"second")
    assert loc.read_bytes(path) == b"second"
    assert loc.read_head(path, 3) == b"sec"
    assert target.names(loc.path("dir")) == {"file.bin"}
    assert not any(name.startswith(TMP_MARK) for name in target.names(loc.path("dir")))
    loc.delete(path)
    loc.delete(path)  # deleting a missing file is not an error
    assert not loc.exists(path)
    assert list(loc.list(loc.path("nothing-here"))) == []
    if target.kind == "s3":
        assert loc.describe(path) == f"s3://{path}"


def test_the_local_copy_is_not_the_checkpoint(built: tuple[Target, Reference, Path]) -> None:
    target, ref, local = built
    state = local_state(local)
    assert state["version"] == 5
    assert state["clean"] is True
    assert (local / STORE / "p=0" / "db").is_dir()
    assert set(state["uploaded"]) == {
        e["name"] for e in target.manifest(3)["files"] if e["name"].endswith(".sst")
    }
    actual, rebuilt = open_and_read(target, 5, local)
    assert not rebuilt
    assert actual == ref.reads_at(5)


def test_replay_in_chunks_equals_one_by_one(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(6), 0, 2, target.new_local_dir(), ops_per_batch=120)
    expected = ref.reads_at(2)
    for chunk in (1, 7, 65_536):
        part = target.open(2, options=CheckpointOptions(replay_chunk_records=chunk))
        try:
            assert part.rebuilt
            assert reads(part.store) == expected, f"replay_chunk_records={chunk}"
        finally:
            part.abort()


def test_a_failed_rebuild_does_not_leave_a_local_copy_that_looks_clean(
    built: tuple[Target, Reference, Path],
) -> None:
    """The local copy is clean at 5; a rebuild of 4 in it fails half way (damaged 4.changelog,
    after snapshot 3 was downloaded). Version 5 must not then be served from that half-built
    copy."""
    target, ref, local = built
    path = target.path("4.changelog")
    with (
        replaced(target, path, flip_byte(target.read(path), 70)),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(4, local)
    assert assert_version_matches(target, ref, 5, local) is True
    assert local_state(local).get("clean") is not True
