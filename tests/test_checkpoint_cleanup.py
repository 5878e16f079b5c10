"""Cleanup never deletes a file that a retained version needs (docs/checkpoint.md, "Cleanup").

The property test runs random sequences of commits (each a snapshot every few versions and then
a cleanup), explicit cleanups, failed commits (the fault hook raises at a commit step), retries
of older versions and wiped local directories, with small ``snapshot_interval`` and
``min_versions_to_retain`` and ``orphan_grace_s=0``. After each commit every version of the
retained window opens in a fresh local directory with the reference's reads.

The retained window of version ``c`` is ``[c - min_versions_to_retain + 1, c]``, except that
a cleanup counts versions left above ``c`` by failed attempts: it keeps the newest
``min_versions_to_retain`` versions present on storage. So the test tracks ``floor``, the oldest
version every cleanup so far had to keep, and checks the window from there; retries only go
back to versions at or above it.
"""

from __future__ import annotations

import itertools
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import verstore
import verstore.checkpoint
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from verstore.checkpoint import CheckpointOptions, cleanup

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    COMMIT_STEPS,
    NO_SNAPSHOTS,
    OPTIONS,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    generate_ops,
)

pytest_plugins = ["checkpoint_helpers"]


class _Crash(Exception):
    """Raised by the fault hook: the commit dies at that step (files written so far stay)."""


STEP = st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 12)),
    st.tuples(st.just("crash"), st.integers(0, 1), st.sampled_from(COMMIT_STEPS)),
    st.tuples(st.just("retry_older"), st.integers(1, 4)),
    st.tuples(st.just("wipe"), st.integers(0, 1)),
    st.tuples(st.just("cleanup")),
)


def _newest_on_storage(target: Target) -> int:
    changelogs, _, _ = target.files().listing()
    return max(changelogs, default=0)


def _run_scenario(
    target: Target,
    interval: int,
    retain: int,
    seed: int,
    steps: list[tuple[Any, ...]],
    trace: Callable[[str], None] = lambda _: None,
    check_every_commit: bool = True,
) -> int:
    """Runs ``steps``; returns how many commits failed at their fault step.

    The retained window is checked after every commit, or (``check_every_commit=False``, for
    long scenarios) only after the commits and calls that ran a cleanup, and at the end.
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
    current = 0  # the version the next task opens
    floor = 0  # every version >= floor that is on the current chain must stay rebuildable
    failures = 0

    def cleaned() -> None:
        nonlocal floor
        floor = max(floor, _newest_on_storage(target) - retain + 1)

    def check_window() -> None:
        for version in range(max(floor, current - retain + 1, 0), current + 1):
            assert_version_matches(target, ref, version)

    for step in steps:
        trace(f"{step} (current {current}, floor {floor})")
        kind = step[0]
        if kind in ("commit", "crash"):
            local = local_dirs[step[1]]
            ops = generate_ops(rng, step[2] if kind == "commit" else 6, ref.stream_time_at(current))

            def hook(name: str, crash_at: str = step[2] if kind == "crash" else "") -> None:
                if name == crash_at:
                    raise _Crash(name)

            verstore.checkpoint.fault_hook = hook
            try:
                part = target.open(current, local, options=options)
                apply_ops(part.store, ops)
                part.commit()
            except _Crash:
                failures += 1
                continue  # the task failed: it is retried from the same version
            finally:
                verstore.checkpoint.fault_hook = None
            current += 1
            ref.commit(current, ops)
            if current % interval == 0:
                cleaned()
            if check_every_commit or current % interval == 0:
                check_window()
        elif kind == "retry_older":
            if current - step[1] >= floor:
                current -= step[1]
        elif kind == "wipe":
            shutil.rmtree(local_dirs[step[1]], ignore_errors=True)
        else:
            cleanup(target.files(), options)
            cleaned()
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
    "retain": st.integers(1, 4),
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
    tmp_path: Path, interval: int, retain: int, seed: int, steps: list[tuple[Any, ...]]
) -> None:
    base = Target("local", str(tmp_path / "checkpoint"), None, tmp_path)
    _run_scenario(_scenario_target(base), interval, retain, seed, steps, note)


@settings(max_examples=3, **SETTINGS)  # type: ignore[arg-type]
@given(**SCENARIO)
def test_cleanup_keeps_every_retained_version_rebuildable_s3(
    s3_server: dict[str, Any],
    tmp_path: Path,
    interval: int,
    retain: int,
    seed: int,
    steps: list[tuple[Any, ...]],
) -> None:
    base = Target("s3", "s3://bucket/cleanup-property", dict(s3_server), tmp_path)
    _run_scenario(_scenario_target(base), interval, retain, seed, steps, note)


def test_a_long_run_with_retries_and_failures_keeps_its_window(target: Target) -> None:
    """A fixed scenario of the property test, on both kinds of location."""
    steps: list[tuple[Any, ...]] = [
        *[("commit", 0, 10)] * 5,  # 1..5
        ("crash", 1, "during_snapshot_upload"),  # 6 fails after its changelog
        *[("commit", 1, 10)] * 2,  # 6 (retry), 7
        ("crash", 0, "after_manifest"),  # 8 fails with its snapshot written
        ("retry_older", 1),  # back to 6
        ("wipe", 1),
        *[("commit", 1, 10)] * 2,  # 7, 8
        ("crash", 0, "before_manifest"),  # 9 is no snapshot version: commits
        ("crash", 1, "after_changelog"),  # 10 fails after its changelog
        ("cleanup",),
        *[("commit", 0, 10)] * 2,  # 10, 11
    ]
    assert _run_scenario(target, 2, 3, 7, steps, check_every_commit=False) == 3
    assert_no_orphans(target)


# --- deterministic cases ------------------------------------------------------------------------


#: Snapshots every 2 versions, 3 retained: cleanup deletes something from version 4 on.
SMALL = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=3, orphan_grace_s=0)


def test_cleanup_deletes_versions_below_the_newest_usable_base(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(30), 0, 6, target.new_local_dir(), options=SMALL)
    files = target.files()
    changelogs, snapshots, _ = files.listing()
    # Retained: 4..6; base: snapshot 4. Snapshot 2 and changelogs 1..3 are gone.
    assert sorted(changelogs) == [4, 5, 6]
    assert sorted(snapshots) == [4, 6]
    assert_no_orphans(target)
    for version in range(4, 7):
        assert_version_matches(target, ref, version)
    with pytest.raises(verstore.MissingVersionError, match=r"version 3 is missing .*3\.changelog"):
        target.open(3)
    assert cleanup(files, SMALL) == []  # nothing more to delete


def test_orphans_and_temporaries_wait_for_the_grace_period(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(31), 0, 4, target.new_local_dir(), options=SMALL)
    orphan = target.path("SSTs/0123456789abcdef-000099.sst")
    temporary = target.path(".tmp-0123-7.changelog")
    for path in (orphan, temporary):
        with target.location.filesystem.open_output_stream(path) as out:
            out.write(b"left behind by a failed attempt")
    patient = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=3, orphan_grace_s=3600)
    assert cleanup(target.files(), patient) == []
    assert target.exists(orphan)
    assert target.exists(temporary)
    assert sorted(cleanup(target.files(), SMALL)) == sorted([orphan, temporary])
    assert_no_orphans(target)
    assert_version_matches(target, ref, 2)


def test_an_unreadable_kept_manifest_stops_cleanup(target: Target) -> None:
    ref = Reference()
    commit_batches(target, ref, random.Random(32), 0, 5, target.new_local_dir(), options=SMALL)
    orphan = target.path("SSTs/0123456789abcdef-000099.sst")
    target.write(orphan, b"orphan")
    target.write(target.path("4.snapshot"), b"{damaged")
    before = target.names(target.files().dir) | target.names(target.files().sst_dir)
    assert cleanup(target.files(), SMALL) == []
    assert target.names(target.files().dir) | target.names(target.files().sst_dir) == before


def test_without_a_usable_snapshot_cleanup_deletes_nothing(target: Target) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(33), 0, 5, local, options=NO_SNAPSHOTS)
    assert cleanup(target.files(), SMALL) == []
    assert_version_matches(target, ref, 1)
    assert_version_matches(target, ref, 5)


def test_cleanup_of_an_empty_partition_deletes_nothing(target: Target) -> None:
    assert cleanup(target.files(partition=7), OPTIONS) == []


def test_a_cleanup_never_runs_between_snapshots(target: Target) -> None:
    ref = Reference()
    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=1, orphan_grace_s=0)
    commit_batches(target, ref, random.Random(34), 0, 5, target.new_local_dir(), options=options)
    changelogs, snapshots, _ = target.files().listing()
    assert sorted(snapshots) == [4]
    assert sorted(changelogs) == [4, 5]  # cleaned at 4, not since
    assert_version_matches(target, ref, 4)
    assert_version_matches(target, ref, 5)
