"""Cleanup never deletes a file that a retained version needs (docs/checkpoint.md, "Cleanup").

The property test runs random sequences of commits (each a snapshot every few commits of the
chain and then a cleanup), explicit cleanups, commits that die at a commit step (the fault hook
raises a ``BaseException``, as if the process died there), retries of the last batch, stale
attempts of older batches, and wiped local directories, with small ``snapshot_interval`` and
``min_versions_to_retain`` and ``orphan_grace_s=0``. After each step every version of the
retained window opens in a fresh local directory with the reference's reads.

The retained window is ``[tip - min_versions_to_retain + 1, current]``: ``tip`` is the newest
commit on storage (a commit that died after its changelog is durable, and counts), ``current``
the newest version the reference knows. Stale attempts are fenced; a retry of the last batch
is allowed only while no newer commit exists.
"""

from __future__ import annotations

import itertools
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import verstore
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from verstore.checkpoint import CheckpointOptions, LineageFiles, cleanup, faults
from verstore.exceptions import FencedError
from verstore.location import Location

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    COMMIT_STEPS,
    DURABLE_STEPS,
    LINEAGE,
    NO_SNAPSHOTS,
    OPTIONS,
    STORE,
    TMP_MARK,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    generate_ops,
)

pytest_plugins = ["checkpoint_helpers"]


class _Crash(BaseException):
    """Raised by the fault hook: the process dies at that step (files written so far stay)."""


STEP = st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("crash"), st.integers(0, 1), st.sampled_from(COMMIT_STEPS)),
    st.tuples(st.just("retry_last"), st.integers(0, 1)),
    st.tuples(st.just("stale"), st.integers(0, 1), st.integers(2, 4)),
    st.tuples(st.just("wipe"), st.integers(0, 1)),
    st.tuples(st.just("cleanup")),
)


def _run_scenario(
    target: Target,
    interval: int,
    retain: int,
    seed: int,
    steps: list[tuple[Any, ...]],
    trace: Callable[[str], None] = lambda _: None,
    check_every_step: bool = True,
) -> int:
    """Runs ``steps``; returns how many commits died at their fault step.

    The retained window is checked after every step, or (``check_every_step=False``, for long
    scenarios) only after explicit cleanups and at the end.
    """
    options = CheckpointOptions(
        snapshot_interval=interval,
        min_versions_to_retain=retain,
        orphan_grace_s=0,
        lock_timeout_s=5,
    )
    ref = Reference()
    rng = random.Random(seed)
    local_dirs = [target.new_local_dir(), target.new_local_dir()]
    current = 0  # the version the reference knows last; the next batch opens it
    failures = 0
    target.open(0, options=options).abort()  # the query starts: its lineage exists

    def check_window() -> None:
        tip = target.tip().version
        assert tip in (current, current + 1)  # a commit that died after its changelog counts
        for version in range(max(tip - retain + 1, 0), current + 1):
            assert_version_matches(target, ref, version)

    def attempt(local: Path, opened: int, ops: list[Any], crash_at: str = "") -> bool:
        """One task: opens ``opened``, applies ``ops``, commits; False if it died."""

        def hook(name: str) -> None:
            if name == crash_at:
                raise _Crash(name)

        faults.set_hook(hook)
        try:
            part = target.open(opened, local, options=options)
            apply_ops(part.store, ops)
            part.commit()
        except _Crash:
            return False
        finally:
            faults.set_hook(None)
        return True

    for step in steps:
        trace(f"{step} (current {current}, tip {target.tip().version})")
        kind = step[0]
        if kind in ("commit", "crash"):
            local = local_dirs[step[1]]
            ops = generate_ops(rng, step[2] if kind == "commit" else 6, ref.stream_time_at(current))
            if not attempt(local, current, ops, step[2] if kind == "crash" else ""):
                failures += 1
                continue  # the task failed: Spark retries the batch (the same version)
            current += 1
            ref.commit(current, ops)
        elif kind == "retry_last":
            if current == 0:
                continue
            local = local_dirs[step[1]]
            if target.tip().version > current:
                # A commit of the next batch landed (and its task died): the last batch's
                # attempts are stale now.
                with pytest.raises(FencedError, match="stale"):
                    target.open(current - 1, local, options=options)
                continue
            ops = generate_ops(rng, 6, ref.stream_time_at(current - 1))
            assert attempt(local, current - 1, ops)
            ref.commit(current, ops)  # the later attempt wins
        elif kind == "stale":
            if current - step[2] < 0:
                continue
            with pytest.raises(FencedError, match="stale"):
                target.open(current - step[2], local_dirs[step[1]], options=options)
        elif kind == "wipe":
            shutil.rmtree(local_dirs[step[1]], ignore_errors=True)
        else:
            cleanup(target.files(), options)
        if check_every_step or kind == "cleanup":
            check_window()
    check_window()
    return failures


_runs = itertools.count()


def _scenario_target(target: Target) -> Target:
    """A fresh location and scratch area under the fixture's, for one hypothesis example."""
    run = next(_runs)
    return Target(
        target.kind, f"{target.uri}/run-{run}", target.storage_options, target.scratch / f"r{run}"
    )


SCENARIO = {
    "interval": st.integers(1, 4),
    "retain": st.integers(2, 4),
    "seed": st.integers(0, 2**32 - 1),
    "steps": st.lists(STEP, min_size=1, max_size=10),
}
SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
}


@settings(max_examples=15, **SETTINGS)  # type: ignore[arg-type]
@given(**SCENARIO)
def test_cleanup_keeps_every_retained_version_rebuildable_local(
    tmp_path: Path,
    ordered_attempts: None,
    interval: int,
    retain: int,
    seed: int,
    steps: list[tuple[Any, ...]],
) -> None:
    base = Target("local", str(tmp_path / "checkpoint"), None, tmp_path)
    _run_scenario(_scenario_target(base), interval, retain, seed, steps, note)


@settings(max_examples=3, **SETTINGS)  # type: ignore[arg-type]
@given(**SCENARIO)
def test_cleanup_keeps_every_retained_version_rebuildable_s3(
    s3_server: dict[str, Any],
    tmp_path: Path,
    ordered_attempts: None,
    interval: int,
    retain: int,
    seed: int,
    steps: list[tuple[Any, ...]],
) -> None:
    base = Target("s3", "s3://bucket/cleanup-property", dict(s3_server), tmp_path)
    _run_scenario(_scenario_target(base), interval, retain, seed, steps, note)


def test_a_long_run_with_retries_and_failures_keeps_its_window(
    target: Target, ordered_attempts: None
) -> None:
    """A fixed scenario of the property test, on both kinds of location."""
    steps: list[tuple[Any, ...]] = [
        *[("commit", 0, 10)] * 5,  # 1..5
        ("crash", 1, "during_snapshot_upload"),  # 6 is durable, its snapshot died half way
        *[("commit", 1, 10)] * 2,  # 6 (a retry: a sibling that wins), 7
        ("crash", 0, "after_manifest"),  # 8 is durable with its snapshot
        ("retry_last", 1),  # fenced: the batch of 8 is running, 7 is final
        ("wipe", 1),
        *[("commit", 1, 10)] * 2,  # 8 (wins over the dead one), 9
        ("crash", 0, "before_manifest"),  # 10 is durable
        ("crash", 1, "after_changelog"),  # another 10 is durable
        ("cleanup",),
        *[("commit", 0, 10)] * 2,  # 10, 11
        ("retry_last", 0),  # 11 again
        ("stale", 1, 3),  # a zombie of batch 8: fenced
        ("crash", 1, "during_cleanup"),  # 12 is durable, its cleanup died half way
        ("commit", 0, 10),  # 12
    ]
    assert _run_scenario(target, 2, 3, 7, steps, check_every_step=False) == 5
    cleanup(target.files(), CheckpointOptions(min_versions_to_retain=3, orphan_grace_s=0))
    assert_no_orphans(target)


def test_every_commit_step_is_in_the_property_test() -> None:
    others = {"during_rebuild", "during_handoff", *faults.REPARTITION_STEPS}
    assert set(COMMIT_STEPS) == set(faults.STEPS) - others
    assert DURABLE_STEPS[0] == "after_changelog"


# --- deterministic cases ------------------------------------------------------------------------


#: Snapshots every 2 commits, 3 retained: cleanup deletes something from version 4 on.
SMALL = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=3, orphan_grace_s=0)


def _versions(target: Target) -> tuple[list[int], list[int]]:
    """``(changelog versions, snapshot versions)`` on storage."""
    graph = target.graph()
    return sorted(r.version for r in graph.commits), sorted(r.version for r in graph.snapshots)


def test_cleanup_deletes_versions_below_the_newest_usable_base(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(30), 0, 6, target.new_local_dir(), options=SMALL)
    # Retained: 4..6; base: snapshot 4. Snapshot 2 and changelogs 1..3 are gone.
    assert _versions(target) == ([4, 5, 6], [4, 6])
    assert_no_orphans(target)
    for version in range(4, 7):
        assert_version_matches(target, ref, version)
    with pytest.raises(
        verstore.MissingVersionError, match=r"version 3 is missing .*oldest version kept \(4\)"
    ):
        target.open(3, read_only=True)
    assert cleanup(target.files(), SMALL) == []  # nothing more to delete


def test_orphans_and_temporaries_wait_for_the_grace_period(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(31), 0, 4, target.new_local_dir(), options=SMALL)
    orphan = target.path(f"SSTs/{'0123456789abcdef' * 2}-000099.sst")
    temporary = target.path(f"{TMP_MARK}{'ab' * 16}-7-x.changelog")
    for path in (orphan, temporary):
        target.write(path, b"left behind by a failed attempt")
    patient = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=3, orphan_grace_s=3600)
    assert cleanup(target.files(), patient) == []
    assert target.exists(orphan)
    assert target.exists(temporary)
    assert sorted(cleanup(target.files(), SMALL)) == sorted([orphan, temporary])
    assert_no_orphans(target)
    assert_version_matches(target, ref, 2)


def _with_a_second_base(target: Target) -> tuple[Reference, str]:
    """Versions 1..8 with snapshots at 2, 4, 6, 8 and nothing cleaned yet, plus an orphan
    upload; returns the reference and the orphan's path."""
    ref = Reference()
    keep_all = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=100, orphan_grace_s=0)
    commit_batches(target, ref, random.Random(32), 0, 8, target.new_local_dir(), options=keep_all)
    assert _versions(target) == ([1, 2, 3, 4, 5, 6, 7, 8], [2, 4, 6, 8])
    orphan = target.path(f"SSTs/{'0123456789abcdef' * 2}-000099.sst")
    target.write(orphan, b"orphan")
    return ref, orphan


def _referenced(target: Target, *versions: int) -> set[str]:
    return {target.path(f.durable) for v in versions for f in target.manifest(v).files}


def test_a_damaged_manifest_protects_nothing_and_cleanup_cleans_the_rest(
    target: Target,
) -> None:
    """Snapshot 6 would be the base of the retained versions 6..8; its manifest is damaged, so
    the chain is kept down to snapshot 4, and everything else goes: changelogs 1..3, snapshot
    2 and its claim, the orphan and every upload that only the damaged manifest references
    (its claim, a snapshot's body before its manifest, does not stand in for it)."""
    ref, orphan = _with_a_second_base(target)
    files = target.files()
    keep = _referenced(target, 4, 8)
    uploads = {i.path for i in files.uploaded_files()}
    graph = target.graph()
    old = [c.path for r, c in graph.commits.items() if r.version < 4]
    old += [target.snapshot(2), files.claim(target.winning(2))]
    target.write(target.snapshot(6), b"{damaged")
    deleted = cleanup(files, SMALL)
    assert sorted(deleted) == sorted([*old, *(uploads - keep)])
    assert orphan in deleted
    assert _versions(target) == ([4, 5, 6, 7, 8], [4, 6, 8])
    assert {i.path for i in files.uploaded_files()} == keep
    for version in range(6, 9):
        assert_version_matches(target, ref, version)


@dataclass(frozen=True)
class _Unreadable(Location):
    """A location on which reading one path fails with a storage error."""

    broken: str = ""

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        if path == self.broken:
            raise OSError(f"simulated: cannot read {path}")
        return super().read_bytes(path, limit)


def test_an_unreadable_manifest_stops_only_the_deletion_of_uploads(target: Target) -> None:
    """Manifest 6 cannot be read (a storage error): what it references is unknown, so no upload
    is deleted, not even the orphan; old changelogs and snapshots still go."""
    ref, orphan = _with_a_second_base(target)
    loc = target.location
    broken = _Unreadable(loc.storage, loc.root, loc.uri, broken=target.snapshot(6))
    files = LineageFiles(broken, STORE, LINEAGE).partition(0)
    uploads = {i.path for i in files.uploaded_files()}
    deleted = cleanup(files, SMALL)
    assert _versions(target) == ([4, 5, 6, 7, 8], [4, 6, 8])
    assert {i.path for i in files.uploaded_files()} == uploads
    assert orphan in uploads
    assert not set(deleted) & uploads
    assert len(deleted) == 5  # changelogs 1..3, snapshot 2 and its claim
    for version in range(6, 9):
        assert_version_matches(target, ref, version)
    # Readable again, the next cleanup deletes what no kept manifest references.
    cleanup(target.files(), SMALL)
    assert_no_orphans(target)


def test_without_a_usable_snapshot_cleanup_deletes_nothing(target: Target) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(33), 0, 5, local, options=NO_SNAPSHOTS)
    assert cleanup(target.files(), SMALL) == []
    assert_version_matches(target, ref, 1)
    assert_version_matches(target, ref, 5)


def test_cleanup_of_an_empty_partition_deletes_nothing(target: Target) -> None:
    assert cleanup(target.files(partition=7), OPTIONS) == []


def test_a_cleanup_runs_only_after_a_snapshot(target: Target) -> None:
    ref = Reference()
    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2, orphan_grace_s=0)
    commit_batches(target, ref, random.Random(34), 0, 5, target.new_local_dir(), options=options)
    # Cleaned at 4 (retaining 3..4, down to base 2), not since.
    assert _versions(target) == ([2, 3, 4, 5], [2, 4])
    for version in (2, 3, 4, 5):
        assert_version_matches(target, ref, version)


def test_cleanup_keeps_commits_off_the_winning_chain_inside_the_window(
    target: Target, ordered_attempts: None
) -> None:
    """A retry R of batch 3 commits 4' over A's 4 while attempt Z of batch 4, which opened A's
    4, is in flight; Z then commits 5 on A's 4 and its chain wins (the highest version). No
    cleanup in between may make A's 4 unreachable, and every kept version stays exact."""
    ref = Reference()
    rng = random.Random(35)
    a = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 4, a, options=SMALL)
    a_four = target.winning(4)
    z = target.open(4, target.new_local_dir(), options=SMALL)
    retry = Reference()
    retry.batches = dict(ref.batches)
    commit_batches(target, retry, rng, 3, 4, target.new_local_dir(), options=SMALL)
    assert target.winning(4) != a_four
    z_ops = generate_ops(rng, 25, ref.stream_time_at(4))
    apply_ops(z.store, z_ops)
    assert z.commit() == 5
    ref.commit(5, z_ops)
    assert target.winning(4) == a_four
    commit_batches(target, ref, rng, 5, 9, a, options=SMALL)
    graph = target.graph()
    lowest = graph.tip().version - SMALL.min_versions_to_retain + 1
    assert all(graph.reachable(r) for r in graph.commits if r.version >= lowest)
    for version in range(lowest, 10):
        assert_version_matches(target, ref, version)
    assert_no_orphans(target)
