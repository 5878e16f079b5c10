"""Checkpointed partition stores open exactly the version asked for (docs/checkpoint.md,
"Versions", "Commits and the winning chain", "Open"): every version reopens locally and
rebuilds elsewhere, an older version is fenced for writing, a version that cleanup deleted or
whose chain broke is missing and says which, and late zombies, retries after a snapshot and
cleanup, and batches without a task never wedge a partition (the Spark side is in tests/spark).

Every test runs against a local directory and an S3-compatible server (``target``). A rebuild's
reads are compared with an in-memory store fed the same ops (``Reference``).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import verstore
from verstore.checkpoint import ROOT, CheckpointOptions, ColumnLayout, CommitRef
from verstore.exceptions import FencedError

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
    generate_ops,
    local_state,
    reads,
    replaced,
)

pytest_plugins = ["checkpoint_helpers"]


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


# --- late, retried and skipped batches ------------------------------------------------------------


def test_a_late_zombie_commit_never_wedges_the_partition(
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


def test_with_the_minimum_retention_a_retry_after_a_snapshot_and_cleanup_opens(
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


def test_a_batch_without_a_task_leaves_sparse_versions(target: Target) -> None:
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
