"""Checkpointed partition stores (docs/checkpoint.md): versions, rebuilds, damaged files, and the
PartitionStore-level regressions of issue 7.

Every test runs against a local directory and an S3-compatible server (``target``), except the
long lineage test (local only). A rebuild's reads are compared with an in-memory store fed the
same ops (``Reference``). Damaged or missing durable files must raise ``CorruptionError`` or
``MissingVersionError`` naming the file or version, never open a wrong state.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import verstore
import verstore.spark
from verstore.checkpoint import (
    ROOT,
    CheckpointOptions,
    ColumnLayout,
    CommitRef,
    Manifest,
    PartitionStore,
    decode_manifest,
    lineage,
)
from verstore.checkpoint.uploads import ManifestFile
from verstore.exceptions import FencedError
from verstore.location import Location

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    NO_SNAPSHOTS,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    cut_in_half,
    first_sst,
    flip_byte,
    forge_manifest,
    generate_ops,
    largest_file,
    local_db,
    local_partition_dir,
    local_state,
    make_target,
    manifest_body,
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
    """Versions 1..7 committed from one local directory, built once per module and kind:
    snapshots at 3 and 6, and the cleanup after snapshot 6 deleted changelogs 1 and 2 (so
    version 3 is the oldest kept and snapshot 3 the only base below 6). Tests that damage a
    file restore it (``replaced``)."""
    target = make_target(request, request.param, tmp_path_factory.mktemp("template"))
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(5), 0, 7, local)
    return target, ref, local


@pytest.fixture
def built(
    template: tuple[Target, Reference, Path], tmp_path: Path
) -> tuple[Target, Reference, Path]:
    """The shared checkpoint at version 7, the reference, a private copy of the local dir."""
    return share(template, tmp_path)


@pytest.fixture
def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the lineage settings this process verified (a new process reads them again)."""
    monkeypatch.setattr(lineage, "_verified", {})


def test_the_template_has_the_layout_the_tests_assume(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    graph = target.graph()
    assert sorted(ref.version for ref in graph.commits) == [3, 4, 5, 6, 7]
    assert sorted(ref.version for ref in graph.snapshots) == [3, 6]
    assert graph.tip().version == 7
    assert graph.oldest_kept() == 3


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
    assert assert_version_matches(target, ref, 6, local) is True  # a retry of the last batch
    assert_version_matches(target, ref, 4)
    assert local_state(local)["version"] == 6


def test_an_older_version_is_fenced_for_writing_but_opens_read_only(
    built: tuple[Target, Reference, Path],
) -> None:
    target, ref, local = built
    with pytest.raises(
        FencedError, match="has version 7 committed, so version 5 cannot be written"
    ):
        target.open(5, local)
    assert local_state(local)["clean"] is True  # a fenced open leaves the local copy alone
    assert_version_matches(target, ref, 5)
    assert assert_version_matches(target, ref, 7, local) is False


def test_a_version_above_the_newest_commit_serves_the_newest(
    built: tuple[Target, Reference, Path],
) -> None:
    target, ref, _ = built
    for version in (8, 12, 10**18):
        part = target.open(version, read_only=True)
        try:
            assert part.opened == target.winning(7)
            assert reads(part.store) == ref.reads_at(7)
        finally:
            part.abort()


def test_version_zero_is_empty_and_records_the_configuration(target: Target) -> None:
    part = target.open(0)
    assert part.opened == ROOT
    assert part.store.observed_stream_time == -1
    assert part.store.get(b"a") is None
    part.abort()
    assert json.loads(target.read(target.lineage_files().meta)) == {
        "format_version": 2,
        "store": STORE,
        "lineage": LINEAGE,
        "history_retention_ms": RETENTION_MS,
        "segment_interval_ms": SEGMENT_MS,
        "num_partitions": None,
        "columns": None,
    }
    columns = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "double"),))
    target.open(0, lineage="q2", num_partitions=8, columns=columns).abort()
    recorded = json.loads(target.read(target.lineage_files(lineage="q2").meta))
    assert recorded["lineage"] == "q2"
    assert recorded["num_partitions"] == 8
    assert recorded["columns"] == {
        "encoding": "verstore-tuple-1",
        "key": [["symbol", "string"]],
        "value": [["price", "double"]],
    }


def test_a_rebuild_reports_replay_progress(built: tuple[Target, Reference, Path]) -> None:
    target, _, _ = built
    calls: list[tuple[str, int, int]] = []
    target.open(7, read_only=True, progress=lambda *call: calls.append(call)).abort()
    assert calls == [("replay", 1, 1)]  # snapshot 6, then 7
    calls.clear()
    target.open(5, read_only=True, progress=lambda *call: calls.append(call)).abort()
    assert calls == [("replay", 1, 2), ("replay", 2, 2)]  # snapshot 3, then 4 and 5


def test_open_stats_say_how_the_state_was_got(built: tuple[Target, Reference, Path]) -> None:
    target, _, local = built
    part = target.open(7, local)
    part.abort()
    assert part.stats.reused and not part.stats.rebuilt
    assert (part.stats.replayed, part.stats.downloaded_bytes, part.stats.snapshot) == (0, 0, None)
    assert part.stats.commit == part.opened == target.winning(7)
    part = target.open(7, read_only=True)
    part.abort()
    seven = target.graph().commits[target.winning(7)]
    assert part.stats.rebuilt and not part.stats.reused
    assert part.stats.snapshot == target.winning(6)
    assert (part.stats.replayed, part.stats.replayed_bytes) == (1, seven.size)
    assert part.stats.downloaded_bytes == sum(f.size for f in target.manifest(6).files)
    assert part.stats.seconds > 0


def test_commit_stats_say_what_a_commit_wrote(target: Target) -> None:
    ref = Reference()
    rng = random.Random(8)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 5, local)
    part = target.open(5, local)
    apply_ops(part.store, generate_ops(rng, 25, ref.stream_time_at(5)))
    assert part.commit_stats is None
    assert part.commit() == 6  # a snapshot (the chain has 3 commits since 3), then cleanup
    stats = part.commit_stats
    assert stats is not None
    assert stats.version == 6
    assert stats.changelog_bytes == target.graph().commits[CommitRef(6, part.attempt)].size
    assert stats.snapshot
    assert 0 < stats.snapshot_uploaded_bytes <= sum(f.size for f in target.manifest(6).files)
    assert stats.deleted_files >= 2  # changelogs 1 and 2
    assert stats.deferred == []


def test_abort_drops_uncommitted_work(built: tuple[Target, Reference, Path]) -> None:
    target, ref, local = built
    part = target.open(7, local)
    part.store.put(b"a", b"uncommitted", 10_000)
    part.abort()
    assert local_state(local)["clean"] is False
    assert assert_version_matches(target, ref, 7, local) is True  # dirty copy: rebuilt


def test_leaving_the_context_without_commit_aborts(
    built: tuple[Target, Reference, Path],
) -> None:
    target, ref, local = built
    with target.open(7, local) as part:
        part.store.put(b"a", b"uncommitted", 10_000)
    with pytest.raises(verstore.StoreClosedError, match="committed or aborted"):
        _ = part.store
    assert assert_version_matches(target, ref, 7, local) is True


def test_commit_ends_the_session(target: Target) -> None:
    part = target.open(0)
    part.store.put(b"a", b"1", 5)
    assert part.commit() == 1
    with pytest.raises(verstore.StoreClosedError, match="committed or aborted"):
        part.store.put(b"a", b"2", 6)
    with pytest.raises(verstore.StoreClosedError):
        part.commit()


def test_a_read_only_store_cannot_commit(target: Target) -> None:
    target.commit(0, [("put", b"a", b"1", 5)])
    part = target.open(1, read_only=True)
    part.store.put(b"a", b"2", 6)
    with pytest.raises(verstore.VerstoreError, match="read-only partition store cannot commit"):
        part.commit()
    part.abort()
    assert target.tip().version == 1


def test_an_empty_commit_makes_a_version(target: Target) -> None:
    ref = Reference()
    for version in range(4):  # 3 is a snapshot of an empty store
        assert target.commit(version, []).version == version + 1
        ref.commit(version + 1, [])
    assert target.winning(4).version == 4
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
    # A partition that never ran a task has the empty state at every version.
    part = target.open(1, partition=2)
    assert part.opened == ROOT
    assert part.store.observed_stream_time == -1
    part.abort()


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
        target.open(7, history_retention_ms=RETENTION_MS + 1)
    with pytest.raises(verstore.IncompatibleConfigError, match="segment_interval_ms=10"):
        target.open(7, segment_interval_ms=None)
    # The template recorded no partition count: a caller that knows one cannot trust it.
    with pytest.raises(verstore.IncompatibleConfigError, match="num_partitions=None"):
        target.open(7, read_only=True, num_partitions=3)


def test_partition_count_and_columns_are_checked_once_recorded(target: Target) -> None:
    price = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "double"),))
    target.open(0, num_partitions=4, columns=price).abort()
    target.open(0, num_partitions=4, columns=price).abort()
    target.open(0).abort()  # None: the caller does not know them, nothing is checked
    with pytest.raises(verstore.IncompatibleConfigError, match=r"num_partitions=4.*=5"):
        target.open(0, num_partitions=5)
    other = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "float"),))
    with pytest.raises(
        verstore.IncompatibleConfigError,
        match=r"price: double\).*this query encodes .*price: float",
    ):
        target.open(0, columns=other)


def test_another_version_of_the_tuple_encoding_is_refused(target: Target) -> None:
    price = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "double"),))
    target.open(0, columns=price).commit()
    meta_path = target.lineage_files().meta
    meta = json.loads(target.read(meta_path))
    meta["columns"]["encoding"] = "verstore-tuple-0"
    target.write(meta_path, json.dumps(meta).encode())
    before = target.tree()
    for read_only in (False, True):
        with pytest.raises(
            verstore.IncompatibleFormatError,
            match=r"_meta.json holds keys and values in the verstore-tuple-0 encoding; this "
            r"verstore reads verstore-tuple-1",
        ):
            target.open(1, read_only=read_only)
    assert target.tree() == before


def test_each_lineage_records_its_own_settings(target: Target) -> None:
    target.commit(0, [("put", b"a", b"1", 1)])
    part = target.open(0, lineage="q2", history_retention_ms=RETENTION_MS * 2)
    assert part.opened == ROOT
    part.abort()
    with pytest.raises(verstore.IncompatibleConfigError):
        target.open(1, history_retention_ms=RETENTION_MS * 2)


def test_bad_arguments_raise_value_errors(target: Target) -> None:
    with pytest.raises(ValueError, match="version must be >= 0"):
        target.open(-1)
    with pytest.raises(ValueError, match=r"version must be >= 0 and < 2\*\*63 - 1"):
        target.open(2**63 - 1)
    with pytest.raises(ValueError, match="version must be an int"):
        target.open(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition must be an int >= 0"):
        target.open(0, partition=-1)
    for name in ("a/b", "..", ".hidden", "", "x" * 201):
        with pytest.raises(ValueError, match=r"store_name must be .*1-200"):
            target.open(0, store=name)
        with pytest.raises(ValueError, match=r"lineage must be .*1-200"):
            target.open(0, lineage=name)
    with pytest.raises(TypeError, match=r"use PartitionStore\.open"):
        PartitionStore()
    assert target.tree() == {}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("snapshot_interval", 0, "snapshot_interval must be an int >= 1"),
        ("snapshot_interval", True, "snapshot_interval must be an int >= 1"),
        ("min_versions_to_retain", 0, "min_versions_to_retain must be an int >= 2"),
        ("min_versions_to_retain", 1, "must be >= 2, got 1: a retry of the last micro-batch"),
        ("lock_timeout_s", -1, "lock_timeout_s must be a number >= 0"),
        ("orphan_grace_s", -0.5, "orphan_grace_s must be a number >= 0"),
        ("replay_chunk_records", 0, "replay_chunk_records must be an int >= 1"),
    ],
)
def test_checkpoint_options_are_validated(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CheckpointOptions(**{field: value})  # type: ignore[arg-type]


# --- missing versions and broken chains ---------------------------------------------------------


def test_an_empty_location_opens_every_version_empty(target: Target) -> None:
    part = target.open(3)
    assert part.opened == ROOT
    assert part.store.observed_stream_time == -1
    part.abort()
    with pytest.raises(verstore.MissingVersionError, match="holds no state of lineage 'other'"):
        target.open(3, lineage="other", read_only=True)
    assert not target.exists(target.lineage_files(lineage="other").dir)


def test_a_version_older_than_cleanup_kept_is_missing(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    for version in (0, 1, 2):
        with pytest.raises(
            verstore.MissingVersionError,
            match=rf"version {version} is missing .*oldest version kept \(3\)",
        ):
            target.open(version, read_only=True)


def test_a_version_below_a_lost_changelog_is_missing(
    built: tuple[Target, Reference, Path],
) -> None:
    """Changelog 5 lost: 6 and 7 still rebuild from snapshot 6, versions below 6 are gone."""
    target, ref, _ = built
    with replaced(target, target.changelog(5), None):
        assert_version_matches(target, ref, 7)
        assert_version_matches(target, ref, 6)
        with pytest.raises(
            verstore.MissingVersionError,
            match=r"version 5 is missing .*oldest version kept \(6\)",
        ):
            target.open(5, read_only=True)


def test_a_lost_commit_under_the_newest_breaks_the_chain_naming_both(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, local = built
    seven = target.changelog(7)
    six = target.winning(6)
    with (
        replaced(target, target.changelog(6), None),
        replaced(target, target.snapshot(6), None),
    ):
        for read_only, local_dir in ((True, None), (False, local)):
            with pytest.raises(
                verstore.CorruptionError,
                match=re.escape(target.describe(seven))
                + rf": broken version chain, version 7 needs version 6 "
                rf"\(attempt {six.attempt.hex()}\)",
            ):
                target.open(7, local_dir, read_only=read_only)


def test_a_gap_before_any_snapshot_breaks_the_chain(target: Target) -> None:
    ref = Reference()
    commit_batches(
        target, ref, random.Random(2), 0, 4, target.new_local_dir(), options=NO_SNAPSHOTS
    )
    four = target.changelog(4)
    target.remove(target.changelog(2))
    # Never a silent fall back to older state: every version of the partition refuses.
    for version in (4, 1):
        with pytest.raises(
            verstore.CorruptionError,
            match=re.escape(target.describe(four)) + ": broken version chain, version 4 needs "
            "version 2",
        ):
            target.open(version, read_only=True)


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


# --- locations and the local copy ---------------------------------------------------------------


def test_location_resolves_paths_and_uris(tmp_path: Path) -> None:
    local = Location.resolve(str(tmp_path / "x"))
    assert local.root == str(tmp_path / "x")
    assert local.storage.conditional_create
    assert local.describe(local.path("a")) == str(tmp_path / "x" / "a")
    file_uri = Location.resolve(f"file://{tmp_path}/y/")
    assert file_uri.root == f"{tmp_path}/y"
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        Location.resolve("ftp://host/path")


def test_create_new_writes_whole_files_once_and_leaves_no_temporaries(target: Target) -> None:
    loc = target.location
    path = loc.path("dir", "file.bin")
    loc.create_new(path, b"first")
    with pytest.raises(FileExistsError):
        loc.create_new(path, b"second")
    assert loc.read_bytes(path) == b"first"
    assert loc.read_head(path, 3) == b"fir"
    with pytest.raises(ValueError, match="larger than 4 bytes"):
        loc.read_bytes(path, 4)
    assert loc.read_bytes(path, 5) == b"first"
    assert target.names(loc.path("dir")) == {"file.bin"}
    loc.delete(path)
    loc.delete(path)  # deleting a missing file is not an error
    assert not loc.exists(path)
    assert list(loc.list(loc.path("nothing-here"))) == []
    if target.kind == "s3":
        assert loc.describe(path) == f"s3://{path}"


def test_the_local_copy_is_not_the_checkpoint(built: tuple[Target, Reference, Path]) -> None:
    target, ref, local = built
    state = local_state(local)
    seven = target.winning(7)
    assert (state["lineage"], state["version"], state["attempt"], state["clean"]) == (
        LINEAGE,
        7,
        seven.attempt.hex(),
        True,
    )
    assert local_db(local).is_dir()
    assert set(state["uploaded"]) == {f.name for f in target.manifest(6).files if f.is_sst}
    actual, rebuilt = open_and_read(target, 7, local)
    assert not rebuilt
    assert actual == ref.reads_at(7)


def _flip_manifest(db: Path) -> None:
    manifest = largest_file(db, "MANIFEST-*")
    manifest.write_bytes(flip_byte(manifest.read_bytes(), 20))


LOCAL_DAMAGE: dict[str, Callable[[Path], None]] = {
    "an SST cut short": lambda db: cut_in_half(largest_file(db, "*.sst")),
    "an SST deleted": lambda db: largest_file(db, "*.sst").unlink(),
    "the MANIFEST flipped": _flip_manifest,
    "CURRENT deleted": lambda db: (db / "CURRENT").unlink(),
}


@pytest.mark.parametrize("damage", LOCAL_DAMAGE)
def test_a_clean_local_copy_with_damaged_files_is_rebuilt(
    built: tuple[Target, Reference, Path], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``LOCAL.json`` says the copy is clean at 7, but RocksDB finds its files damaged (a
    failing disk, a file system that lost writes in a crash): the copy is a cache of the
    checkpoint, so the open rebuilds it, saying so, where every retry of the task would fail
    on the same files. (A flipped byte in a data block is found when the block is read; this
    process's block cache holds the blocks, which a new executor's does not.)"""
    target, ref, local = built
    damaged = local_db(local)
    LOCAL_DAMAGE[damage](damaged)
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        assert assert_version_matches(target, ref, 7, local) is True
    assert f"the local copy {damaged} is damaged" in caplog.text
    assert not damaged.exists()
    assert local_db(local).is_dir()


def test_a_copy_made_before_rebuilds_named_db_is_reused_and_names_are_checked(
    built: tuple[Target, Reference, Path],
) -> None:
    """A copy from before rebuilds named their directory: ``db/``, and a ``LOCAL.json`` that
    names none, is reused as it is. A ``LOCAL.json`` naming a directory not of the copy's form
    (a path out of it, say) is hostile: the copy is rebuilt under a name of its own."""
    target, ref, local = built
    partition, state = local_partition_dir(local), local_state(local)
    local_db(local).rename(partition / "db")
    del state["db"]
    (partition / "LOCAL.json").write_text(json.dumps(state))
    assert assert_version_matches(target, ref, 7, local) is False
    assert local_state(local)["db"] == "db"
    outside = local / "elsewhere"
    shutil.copytree(partition / "db", outside)
    for hostile in (str(outside), "../../elsewhere", "db-XYZ", 7):
        state = local_state(local)
        (partition / "LOCAL.json").write_text(json.dumps({**state, "db": hostile}))
        assert assert_version_matches(target, ref, 7, local) is True
    assert sorted(p.name for p in partition.iterdir()) == [
        "LOCAL.json",
        "LOCK",
        local_db(local).name,
    ]
    assert outside.is_dir()


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
    """The local copy is clean at 7; a retry of the last batch (open 6) rebuilds it, falls back
    from the damaged snapshot 6 to snapshot 3 and fails half way (damaged changelog 5). Version
    7 must not then be served from that half-built copy."""
    target, ref, local = built
    path = target.changelog(5)
    with (
        replaced(target, target.snapshot(6), b"damaged"),
        replaced(target, path, flip_byte(target.read(path), 70)),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(6, local)
    assert local_state(local).get("clean") is not True
    assert assert_version_matches(target, ref, 7, local) is True


def test_a_read_only_open_leaves_the_local_copy_alone(
    built: tuple[Target, Reference, Path],
) -> None:
    """A read-only open of another version in an executor's local directory (an operator, a
    reader) neither changes the working copy nor leaves anything behind."""
    target, ref, local = built
    before = local_state(local)
    for version in (4, 7):
        part = target.open(version, local, read_only=True)
        assert part.rebuilt
        assert reads(part.store) == ref.reads_at(version)
        part.abort()
        assert local_state(local) == before
    assert sorted(p.name for p in local_partition_dir(local).iterdir()) == [
        "LOCAL.json",
        "LOCK",
        local_db(local).name,
    ]
    assert assert_version_matches(target, ref, 7, local) is False  # still reused, still exact


def test_a_failed_catch_up_leaves_the_local_copy_dirty(target: Target) -> None:
    """Executor A is clean at 2; B commits 3 and 4. A catches up by replaying 3 and 4, and 4 is
    damaged: A's copy already holds 3, so it must not be trusted as version 2 any more."""
    ref = Reference()
    rng = random.Random(9)
    a, b = target.new_local_dir(), target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, a, options=NO_SNAPSHOTS)
    commit_batches(target, ref, rng, 2, 4, b, options=NO_SNAPSHOTS)
    path = target.changelog(4)
    with (
        replaced(target, path, flip_byte(target.read(path), 70)),
        pytest.raises(verstore.CorruptionError, match=re.escape(target.describe(path))),
    ):
        target.open(4, a, options=NO_SNAPSHOTS)
    assert local_state(a)["clean"] is False
    part = target.open(4, a, options=NO_SNAPSHOTS)
    assert part.stats.rebuilt
    assert reads(part.store) == ref.reads_at(4)
    part.abort()
    # The ordinary catch-up: A clean at 4, B commits 5 and 6, A opens 6 by replaying them.
    commit_batches(target, ref, rng, 3, 4, a, options=NO_SNAPSHOTS)
    commit_batches(target, ref, rng, 4, 6, b, options=NO_SNAPSHOTS)
    part = target.open(6, a, options=NO_SNAPSHOTS)
    assert (part.stats.rebuilt, part.stats.reused, part.stats.replayed) == (False, False, 2)
    assert reads(part.store) == ref.reads_at(6)
    part.abort()


# --- issue 7 regressions (PartitionStore level; the Spark ones are in tests/spark) ---------------


def test_issue7_a_late_zombie_commit_never_wedges_the_partition(
    target: Target, ordered_attempts: None
) -> None:
    """Attempt A of batch 2 opens version 2 and stalls; its retry B commits 3; batch 3 commits
    4; then A commits 3. Version 4 opens on a new executor with exactly B's chain, and every
    later batch works (through snapshots and cleanups)."""
    ref = Reference()
    rng = random.Random(70)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir())
    zombie = target.open(2, target.new_local_dir())
    zombie_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    apply_ops(zombie.store, zombie_ops)
    zombie.store.put(b"zombie", b"only A wrote this", ref.stream_time_at(2))
    executor = target.new_local_dir()
    commit_batches(target, ref, rng, 2, 4, executor)  # B commits 3, batch 3 commits 4
    b_three = target.winning(3)
    assert zombie.commit() == 3  # lands late, under its own name
    a_three = CommitRef(3, zombie.attempt)
    assert a_three in target.graph().commits
    assert target.winning(3) == b_three
    assert target.tip() == target.winning(4)
    for local in (None, target.new_local_dir()):
        part = target.open(4, local) if local else target.open(4, read_only=True)
        try:
            assert reads(part.store) == ref.reads_at(4)
            assert part.store.get(b"zombie") is None
        finally:
            part.abort()
    commit_batches(target, ref, rng, 4, 12, executor)
    commit_batches(target, ref, rng, 12, 14, target.new_local_dir())
    for version in range(11, 15):
        assert_version_matches(target, ref, version)
    assert_no_orphans(target)
    assert a_three not in target.graph().commits  # cleaned up once below the window


def _lineage_tree(target: Target, lineage: str) -> dict[str, int]:
    prefix = f"{STORE}/q={lineage}/"
    return {k: v for k, v in target.tree().items() if k.startswith(prefix)}


def test_issue7_a_new_query_on_a_populated_root_starts_its_own_lineage(tmp_path: Path) -> None:
    """Lineage 1 commits 1..150 with cleanup; lineage 2 (a new query, same root, store name and
    local directory) opens 0 and gets the empty state, commits 1..20 with cleanup; then lineage
    1 goes on. Neither touches the other's files and both stay exact."""
    target = Target("local", str(tmp_path / "checkpoint"), None, tmp_path)
    options = CheckpointOptions(snapshot_interval=5, min_versions_to_retain=4, orphan_grace_s=0)
    local = target.new_local_dir()
    refs = {"q1": Reference(), "q2": Reference()}
    rng = random.Random(71)

    def run(lineage: str, start: int, stop: int) -> None:
        commit_batches(
            target,
            refs[lineage],
            rng,
            start,
            stop,
            local,
            ops_per_batch=4,
            options=options,
            lineage=lineage,
        )

    def exact(lineage: str, newest: int) -> None:
        for version in range(newest - 3, newest + 1):
            part = target.open(version, lineage=lineage, read_only=True, options=options)
            try:
                assert reads(part.store) == refs[lineage].reads_at(version), (lineage, version)
            finally:
                part.abort()

    run("q1", 0, 150)
    q1_files = _lineage_tree(target, "q1")
    assert any(name.endswith(".snapshot") for name in q1_files)
    assert not any(name.startswith(f"{STORE}/q=q1/p=0/1-") for name in q1_files)  # cleaned
    part = target.open(0, lineage="q2", options=options, local_dir=local)
    assert part.opened == ROOT
    assert part.store.observed_stream_time == -1
    part.abort()
    run("q2", 0, 20)
    assert _lineage_tree(target, "q1") == q1_files
    q2_files = _lineage_tree(target, "q2")
    assert not any(name.startswith(f"{STORE}/q=q2/p=0/1-") for name in q2_files)  # cleaned
    exact("q1", 150)
    exact("q2", 20)
    run("q1", 150, 160)
    assert _lineage_tree(target, "q2") == q2_files
    exact("q1", 160)
    exact("q2", 20)
    assert sorted(target.tree()) == sorted(
        [f"{STORE}/q=q1/_meta.json", f"{STORE}/q=q2/_meta.json"]
        + [k for k in target.tree() if "/p=" in k]
    )


def test_issue7_min_versions_to_retain_1_is_refused() -> None:
    message = "min_versions_to_retain must be >= 2, got 1"
    with pytest.raises(ValueError, match=message):
        CheckpointOptions(min_versions_to_retain=1)
    # configure refuses it on the driver, before it touches the session.
    with pytest.raises(ValueError, match=message):
        verstore.spark.configure(None, "/tmp/unused", min_versions_to_retain=1)


def test_issue7_with_the_minimum_retention_a_retry_after_a_snapshot_and_cleanup_opens(
    target: Target, ordered_attempts: None
) -> None:
    """Retention 2: the commit of version 4 takes a snapshot and cleans up; the batch that wrote
    it is retried (it opens version 3 again) and its commit wins."""
    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2, orphan_grace_s=0)
    ref = Reference()
    rng = random.Random(72)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 4, local, options=options)
    assert target.graph().oldest_kept() == 2
    assert {r.version for r in target.graph().commits} == {2, 3, 4}
    for local_dir in (local, target.new_local_dir()):
        commit_batches(target, ref, rng, 3, 4, local_dir, options=options)
        assert_version_matches(target, ref, 4)
    commit_batches(target, ref, rng, 4, 8, local, options=options)
    for version in (7, 8):
        assert_version_matches(target, ref, version)


def test_issue7_a_batch_without_a_task_leaves_sparse_versions(target: Target) -> None:
    """Batch 0 commits version 1; batches 1..3 run no task here (no data, ``take(1)``); batch 4
    opens version 5, which has version 1's state, and commits version 6."""
    ref = Reference()
    rng = random.Random(73)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 1, local)
    for version in range(1, 6):
        part = target.open(version, read_only=True)
        assert part.opened == target.winning(1)
        part.abort()
    for local_dir in (local, target.new_local_dir()):
        part = target.open(5, local_dir)
        assert part.opened == target.winning(1)
        assert reads(part.store) == ref.reads_at(1)
        part.abort()
    commit_batches(target, ref, rng, 5, 6, local)
    graph = target.graph()
    assert sorted(r.version for r in graph.walk(graph.tip())) == [0, 1, 6]
    for version in (1, 3, 5, 6, 9):
        assert_version_matches(target, ref, version)
    # Sparse commits keep the snapshot cadence (counted in commits, not versions) and cleanup.
    for start in (6, 9, 15, 16, 20, 30):
        commit_batches(target, ref, rng, start, start + 1, local)
    assert sorted(ref.batches) == [1, 6, 7, 10, 16, 17, 21, 31]
    graph = target.graph()
    assert {r.version for r in graph.snapshots} == {7, 17}
    assert {r.version for r in graph.commits} == {7, 10, 16, 17, 21, 31}  # cleaned at 17
    for version in (28, 30, 31, 40):
        assert_version_matches(target, ref, version)


def test_a_format1_store_is_refused(target: Target) -> None:
    store_dir = target.location.path(STORE)
    format1 = {"format_version": 1, "history_retention_ms": 40, "segment_interval_ms": 10}
    target.write(f"{store_dir}/_meta.json", json.dumps(format1).encode())
    target.write(f"{store_dir}/p=0/1.changelog", b"VSCL")
    before = target.tree()
    for read_only in (False, True):
        with pytest.raises(
            verstore.IncompatibleFormatError,
            match=re.escape(target.describe(store_dir)) + " holds a store of checkpoint format 1",
        ):
            target.open(0, read_only=read_only)
    assert target.tree() == before
