"""Failed commits, crashed rebuilds and competing attempts (docs/checkpoint.md, "Commit",
"Commits and the winning chain", "Local copy").

A child process (``sys.executable -c``) commits with ``verstore.checkpoint.faults`` set to
SIGKILL itself at one step of the commit. Whatever the step, the checkpoint then holds either
the old version or the new one, every rebuild equals the reference, a retry of the same batch
wins over the dead attempt, and cleanup removes the dead attempt's files once they fall below
the retained window. The other scenarios need no process death: failures after the commit point
(logged, made up for later), deleted or damaged local directories, retries on the executor that
committed, stale attempts, two attempts of one batch, and superseded snapshots.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
import signal
from pathlib import Path

import pytest
import verstore
from verstore.checkpoint import CommitRef, faults
from verstore.checkpoint.local import LocalCopy, LocalState
from verstore.exceptions import FencedError

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    CLEAN_STEPS,
    COMMIT_STEPS,
    DURABLE_STEPS,
    NO_SNAPSHOTS,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    commit_in_child,
    generate_ops,
    local_db,
    local_partition_dir,
    local_state,
    reads,
    rebuild_in_child,
)

pytest_plugins = ["checkpoint_helpers"]

#: Steps after which the dead attempt's snapshot manifest of version 6 exists.
SNAPSHOT_STEPS = COMMIT_STEPS[COMMIT_STEPS.index("after_manifest") :]


def _crash_committing_version_6(
    target: Target, step: str
) -> tuple[Reference, random.Random, Path, CommitRef]:
    """Versions 1..5 committed (snapshot 3); then a child commits 6 (a snapshot and a cleanup
    are due) and dies at ``step``.

    Returns the reference (with version 6 only if its changelog became durable), the rng, the
    crashed executor's local directory and the dead attempt's commit.
    """
    ref = Reference()
    rng = random.Random(COMMIT_STEPS.index(step))
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 5, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(5))
    child = commit_in_child(target, 5, ops, local, step)
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert "committed" not in child.stdout
    [attempt] = re.findall(r"attempt ([0-9a-f]{32})", child.stdout)
    if step in DURABLE_STEPS:
        ref.commit(6, ops)
    return ref, rng, local, CommitRef(6, bytes.fromhex(attempt))


@pytest.mark.parametrize("step", COMMIT_STEPS)
def test_sigkill_during_commit_then_a_retry_of_the_same_batch(target: Target, step: str) -> None:
    ref, rng, local, dead = _crash_committing_version_6(target, step)
    durable = ref.newest
    assert durable == (6 if step in DURABLE_STEPS else 5)
    graph = target.graph()
    assert graph.tip() == (dead if durable == 6 else target.winning(5))
    assert (dead in graph.snapshots) == (step in SNAPSHOT_STEPS)
    assert {r.version for r in graph.commits} == {1, 2, 3, 4, 5} | ({6} if durable == 6 else set())
    # The checkpoint holds the durable version: a new executor rebuilds it, and the crashed one
    # reuses its local copy only if the commit got as far as recording it clean.
    assert assert_version_matches(target, ref, durable) is True
    assert assert_version_matches(target, ref, durable, local) is (step not in CLEAN_STEPS)
    assert_version_matches(target, ref, 6)  # above a version that did not commit: its state

    # The task failed, so its batch (opening 5) is retried on the same executor with other
    # input; whatever the dead attempt left (changelog, snapshot, uploads, local copy) yields.
    retry_ops = generate_ops(rng, 25, ref.stream_time_at(5))
    part = target.open(5, local)
    assert part.rebuilt  # the crashed copy is dirty at 5 or clean at 6: never reused at 5
    assert not [p for p in local_partition_dir(local).iterdir() if p.name.startswith(".tmp-")]
    apply_ops(part.store, retry_ops)
    assert part.commit() == 6
    ref.commit(6, retry_ops)
    retry = CommitRef(6, part.attempt)
    assert target.winning(6) == retry
    assert local_state(local)["attempt"] == retry.attempt.hex()
    assert target.manifest(6).ref == retry
    assert assert_version_matches(target, ref, 6) is True
    # Through later snapshots and cleanups, which remove the dead attempt's files once they
    # fall below the retained window.
    commit_batches(target, ref, rng, 6, 12, local)
    assert assert_version_matches(target, ref, 12, local) is False
    assert_version_matches(target, ref, 9)
    graph = target.graph()
    assert dead not in graph.commits
    assert dead not in graph.snapshots
    assert_no_orphans(target)


def test_sigkill_during_a_rebuild_leaves_no_clean_looking_local_copy(target: Target) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(19), 0, 5, local)  # clean at 5, snapshot 3
    child = rebuild_in_child(target, 4, local)  # dies after downloading 3 and replaying 4
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert local_state(local)["clean"] is False
    assert assert_version_matches(target, ref, 5, local) is True


def test_sigkill_while_catching_up_leaves_no_clean_looking_local_copy(target: Target) -> None:
    """Executor A is clean at 2; B commits 3 and 4; A catches up to 4 and dies after
    replaying 3 (its copy then holds 3, not the 2 that LOCAL.json named)."""
    ref = Reference()
    rng = random.Random(18)
    a, b = target.new_local_dir(), target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, a, options=NO_SNAPSHOTS)
    commit_batches(target, ref, rng, 2, 4, b, options=NO_SNAPSHOTS)
    child = rebuild_in_child(target, 4, a)
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert local_state(a)["clean"] is False
    assert assert_version_matches(target, ref, 4, a) is True


# --- failures after the commit point ------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "deferred"),
    [("during_snapshot_upload", "the snapshot"), ("during_cleanup", "cleanup")],
)
def test_a_failure_after_the_changelog_is_logged_and_made_up_for_later(
    target: Target, caplog: pytest.LogCaptureFixture, step: str, deferred: str
) -> None:
    ref = Reference()
    rng = random.Random(17)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 5, local)

    def hook(name: str) -> None:
        if name == step:
            raise OSError(f"simulated: {name} failed")

    part = target.open(5, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(5))
    apply_ops(part.store, ops)
    faults.set_hook(hook)
    try:
        with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
            assert part.commit() == 6  # a durable commit stays a success
    finally:
        faults.set_hook(None)
    ref.commit(6, ops)
    assert part.commit_stats is not None
    assert part.commit_stats.deferred == [deferred]
    assert f"version 6 is committed; {deferred} failed and is retried later" in caplog.text
    assert (target.winning(6) in target.graph().snapshots) == (deferred == "cleanup")
    assert assert_version_matches(target, ref, 6, local) is False  # the copy is clean at 6
    # The next commit makes up for it: the snapshot is due again, cleanup runs again.
    commit_batches(target, ref, rng, 6, 7, local)
    graph = target.graph()
    assert {r.version for r in graph.snapshots if r in set(graph.walk(graph.tip()))} == (
        {3, 7} if deferred == "the snapshot" else {3, 6}
    )
    if deferred == "the snapshot":
        assert min(r.version for r in graph.commits) == 3  # cleaned down to base 3 (lowest 4)
        assert_no_orphans(target)
    assert_version_matches(target, ref, 7)


def test_a_local_copy_that_cannot_be_marked_clean_is_rebuilt(
    target: Target, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ref = Reference()
    rng = random.Random(16)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, local)
    real = LocalCopy.write_state

    def failing(self: LocalCopy, state: LocalState) -> None:
        if state.clean:
            raise OSError("simulated: local disk full")
        real(self, state)

    part = target.open(2, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    apply_ops(part.store, ops)
    monkeypatch.setattr(LocalCopy, "write_state", failing)
    assert part.commit() == 3
    monkeypatch.undo()
    ref.commit(3, ops)
    assert part.commit_stats is not None
    assert part.commit_stats.deferred == ["marking the local copy clean"]
    assert local_state(local)["clean"] is False
    assert assert_version_matches(target, ref, 3, local) is True


# --- local directories --------------------------------------------------------------------------


def test_the_local_directory_deleted(target: Target) -> None:
    ref = Reference()
    rng = random.Random(20)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 4, local)
    shutil.rmtree(local)
    assert assert_version_matches(target, ref, 4, local) is True
    commit_batches(target, ref, rng, 4, 5, local)
    assert assert_version_matches(target, ref, 5, local) is False
    assert_version_matches(target, ref, 5)


@pytest.mark.parametrize(
    "damage",
    ["db deleted", "state deleted", "state garbage", "state not an object", "another lineage"],
)
def test_a_damaged_local_copy_is_rebuilt(target: Target, damage: str) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(21), 0, 2, local)
    partition_dir = local_partition_dir(local)
    state_file = partition_dir / "LOCAL.json"
    if damage == "db deleted":
        shutil.rmtree(local_db(local))
    elif damage == "state deleted":
        state_file.unlink()
    elif damage == "state garbage":
        state_file.write_bytes(b"\xff{")
    elif damage == "state not an object":
        state_file.write_text('["not", "a", "state"]')
    else:
        state = json.loads(state_file.read_text())
        state_file.write_text(json.dumps({**state, "lineage": "other"}))
    assert assert_version_matches(target, ref, 2, local) is True


def test_a_local_copy_ahead_of_the_checkpoint_means_lost_files(target: Target) -> None:
    """The executor is clean at 5, but the checkpoint lost commit 5 (an operator restored an
    old backup): the open says so rather than serving version 4."""
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(22), 0, 5, local, options=NO_SNAPSHOTS)
    target.remove(target.changelog(5))
    with pytest.raises(
        verstore.MissingVersionError, match=r"does not have version 5 .*lost committed files"
    ):
        target.open(5, local, options=NO_SNAPSHOTS)
    assert local_state(local)["clean"] is True  # nothing was changed locally
    assert_version_matches(target, ref, 4)  # elsewhere, the checkpoint serves what it has


def test_a_retry_on_the_executor_that_committed_the_last_batch(
    target: Target, ordered_attempts: None
) -> None:
    """The executor committed 4, then its batch is retried (a later stage failed): it opens 3,
    which its copy at 4 must not serve, and the retry's commit wins."""
    ref = Reference()
    rng = random.Random(23)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 4, local)
    stale_four = ref.reads_at(4)
    part = target.open(3, local)
    assert part.rebuilt
    ops = generate_ops(rng, 25, ref.stream_time_at(3))
    apply_ops(part.store, ops)
    assert part.commit() == 4
    ref.commit(4, ops)
    assert ref.reads_at(4) != stale_four
    assert assert_version_matches(target, ref, 4, local) is False
    assert assert_version_matches(target, ref, 4) is True
    commit_batches(target, ref, rng, 4, 5, local)
    assert_version_matches(target, ref, 5)


def test_a_stale_attempt_is_fenced_on_every_executor(target: Target) -> None:
    """An attempt of batch 1 when version 3 is committed (a zombie, or a query rolled back to
    an older Spark checkpoint) cannot open for writing, not even where its copy is clean."""
    ref = Reference()
    rng = random.Random(25)
    writer = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, writer, options=NO_SNAPSHOTS)
    for local in (writer, target.new_local_dir()):
        with pytest.raises(FencedError, match=r"version 3 committed, so version 1 cannot be"):
            target.open(1, local, options=NO_SNAPSHOTS)
    assert local_state(writer)["clean"] is True
    assert_version_matches(target, ref, 1)
    assert assert_version_matches(target, ref, 3, writer) is False


# --- competing attempts -------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["one after the other", "interleaved", "first commits last"])
def test_two_attempts_of_one_batch_the_later_opened_wins(
    target: Target, ordered_attempts: None, order: str
) -> None:
    ref = Reference()
    rng = random.Random(23)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir())
    first_dir, second_dir = target.new_local_dir(), target.new_local_dir()
    first_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    second_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    first = target.open(2, first_dir)
    apply_ops(first.store, first_ops)
    if order == "one after the other":
        first.commit()
    second = target.open(2, second_dir)
    apply_ops(second.store, second_ops)
    if order == "interleaved":
        first.commit()
    assert second.commit() == 3
    if order == "first commits last":
        assert first.commit() == 3  # lands, and changes nothing
    ref.commit(3, second_ops)
    first_ref, second_ref = CommitRef(3, first.attempt), CommitRef(3, second.attempt)
    graph = target.graph()
    assert {first_ref, second_ref} <= set(graph.commits)
    assert graph.tip() == second_ref
    assert target.manifest(3).ref == second_ref  # both took a snapshot; the winner's is used
    # The first attempt's local copy is off the chain; the second one's is reused.
    assert assert_version_matches(target, ref, 3, first_dir) is True
    assert assert_version_matches(target, ref, 3, second_dir) is False
    assert assert_version_matches(target, ref, 3) is True
    commit_batches(target, ref, rng, 3, 9, first_dir)
    assert_version_matches(target, ref, 9)
    graph = target.graph()
    assert first_ref not in graph.commits  # below the window: gone, with its snapshot
    assert first_ref not in graph.snapshots
    assert_no_orphans(target)


def test_a_snapshot_of_a_superseded_attempt_is_ignored(
    target: Target, ordered_attempts: None
) -> None:
    ref = Reference()
    rng = random.Random(24)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, local)  # snapshot 3
    superseded = target.winning(3)
    assert superseded in target.graph().snapshots
    # A retry of batch 2 that takes no snapshot leaves the first attempt's snapshot behind.
    commit_batches(target, ref, rng, 2, 5, target.new_local_dir(), options=NO_SNAPSHOTS)
    graph = target.graph()
    assert target.winning(3) != superseded
    assert superseded in graph.snapshots
    for version in (3, 5):
        part = target.open(version, read_only=True)
        assert part.stats.snapshot is None  # rebuilt from the empty state, not from 3's
        assert reads(part.store) == ref.reads_at(version)
        part.abort()
    # The next snapshot (6) is on the new chain; its cleanup finds no usable base at or below
    # the oldest retained version (3) on the winning chain, so it keeps the whole chain.
    commit_batches(target, ref, rng, 5, 6, local)
    graph = target.graph()
    assert [r.version for r in graph.walk(graph.tip())] == [6, 5, 4, 3, 2, 1, 0]
    assert_version_matches(target, ref, 4)
    assert_version_matches(target, ref, 6)
