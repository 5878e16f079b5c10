"""Failed commits and retried attempts (docs/checkpoint.md, "Commit" and "Versions").

A child process (``sys.executable -c``) commits with ``verstore.checkpoint.fault_hook`` set to
SIGKILL itself at one step of the commit. Whatever the step, the checkpoint then holds either
the old version or the new one, every rebuild equals the reference, a retry of the same version
replaces the failed attempt's work, and the next cleanup removes the failed attempt's uploads.
The other scenarios need no process death: a deleted local directory, a local copy left at a
newer version by a failed attempt, and two attempts committing the same version.
"""

from __future__ import annotations

import random
import re
import shutil
import signal
from pathlib import Path

import pytest
import verstore

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    COMMIT_STEPS,
    NO_SNAPSHOTS,
    STORE,
    Op,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    commit_in_child,
    generate_ops,
    local_state,
    rebuild_in_child,
)

pytest_plugins = ["checkpoint_helpers"]

#: Steps after which the new version's changelog is durable.
DURABLE_AFTER = set(COMMIT_STEPS) - {"before_changelog"}
#: Steps after which version 3's snapshot manifest exists.
SNAPSHOT_AFTER = {"after_manifest", "after_local_state"}


def _crash_committing_version_3(
    target: Target, step: str
) -> tuple[Reference, random.Random, Path, list[Op]]:
    """Versions 1, 2 committed; then a child commits 3 (a snapshot version) and dies at ``step``.

    Returns the reference (with version 3 only if its changelog became durable), the rng, the
    crashed executor's local directory and the ops the child tried to commit.
    """
    ref = Reference()
    rng = random.Random(COMMIT_STEPS.index(step))
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    child = commit_in_child(target, 2, ops, local, step)
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert "committed" not in child.stdout
    if step in DURABLE_AFTER:
        ref.commit(3, ops)
    return ref, rng, local, ops


@pytest.mark.parametrize("step", COMMIT_STEPS)
def test_sigkill_during_commit_then_a_retry_of_the_same_version(target: Target, step: str) -> None:
    ref, rng, local, _ = _crash_committing_version_3(target, step)
    durable = ref.newest
    assert durable == (3 if step in DURABLE_AFTER else 2)
    if durable == 2:
        with pytest.raises(verstore.MissingVersionError, match="version 3 is missing"):
            target.open(3)
    assert target.exists(target.path("3.snapshot")) == (step in SNAPSHOT_AFTER)
    # The checkpoint holds the durable version: a new executor rebuilds it, and the crashed one
    # reuses its local copy only if the commit got as far as recording it clean.
    assert assert_version_matches(target, ref, durable) is True
    assert assert_version_matches(target, ref, durable, local) is (step != "after_local_state")

    # The task failed, so the version it opened (2) is retried on the same executor, with other
    # input; whatever the failed attempt left (changelog, snapshot, uploads, local copy) yields.
    retry_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    part = target.open(2, local)
    assert part.rebuilt  # the crashed copy is dirty at 2 or clean at 3: never reused at 2
    apply_ops(part.store, retry_ops)
    assert part.commit() == 3
    ref.commit(3, retry_ops)
    attempt = target.files().attempt_of(3).hex()
    assert local_state(local)["attempt"] == attempt
    assert target.manifest(3)["attempt"] == attempt
    assert assert_version_matches(target, ref, 3) is True
    # Through the next snapshot and cleanup, which removes the failed attempt's uploads.
    commit_batches(target, ref, rng, 3, 6, local)
    assert assert_version_matches(target, ref, 6, local) is False
    assert_version_matches(target, ref, 4)
    assert_no_orphans(target)


def test_sigkill_during_a_rebuild_leaves_no_clean_looking_local_copy(target: Target) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(19), 0, 5, local)  # clean at 5, snapshot 3
    child = rebuild_in_child(target, 4, local)  # dies after downloading 3 and replaying 4
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert local_state(local)["clean"] is False
    assert assert_version_matches(target, ref, 5, local) is True


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


@pytest.mark.parametrize("damage", ["db deleted", "state deleted", "state garbage"])
def test_a_damaged_local_copy_is_rebuilt(target: Target, damage: str) -> None:
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(21), 0, 2, local)
    partition_dir = local / STORE / "p=0"
    if damage == "db deleted":
        shutil.rmtree(partition_dir / "db")
    elif damage == "state deleted":
        (partition_dir / "LOCAL.json").unlink()
    else:
        (partition_dir / "LOCAL.json").write_text('["not", "a", "state"]')
    assert assert_version_matches(target, ref, 2, local) is True


def test_a_local_copy_left_at_a_newer_version_by_a_failed_attempt(target: Target) -> None:
    ref = Reference()
    rng = random.Random(22)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 4, local)  # the attempts that wrote 3 and 4 failed
    assert local_state(local)["version"] == 4
    stale_four = ref.reads_at(4)
    # The retry opens 2 in the same directory: the local copy at 4 must not be used.
    part = target.open(2, local)
    assert part.rebuilt
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    apply_ops(part.store, ops)
    assert part.commit() == 3
    ref.commit(3, ops)
    assert assert_version_matches(target, ref, 3, local) is False
    assert assert_version_matches(target, ref, 3) is True
    # The failed attempt's version 4 is still on storage but no longer on the chain.
    with pytest.raises(verstore.CorruptionError, match=r"4\.changelog.*broken version chain"):
        target.open(4)
    commit_batches(target, ref, rng, 3, 4, local)
    assert assert_version_matches(target, ref, 4) is True
    assert ref.reads_at(4) != stale_four


@pytest.mark.parametrize("interleaved", [False, True])
def test_two_attempts_commit_the_same_version_one_after_the_other(
    target: Target, interleaved: bool
) -> None:
    ref = Reference()
    rng = random.Random(23)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir())
    first_dir, second_dir = target.new_local_dir(), target.new_local_dir()
    first_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    second_ops = generate_ops(rng, 25, ref.stream_time_at(2))
    first = target.open(2, first_dir)
    second = target.open(2, second_dir) if interleaved else None
    apply_ops(first.store, first_ops)
    first.commit()
    first_attempt = target.files().attempt_of(3)
    if second is None:
        second = target.open(2, second_dir)
    apply_ops(second.store, second_ops)
    assert second.commit() == 3
    ref.commit(3, second_ops)
    second_attempt = target.files().attempt_of(3)
    assert second_attempt != first_attempt
    assert target.manifest(3)["attempt"] == second_attempt.hex()
    # The first attempt's local copy no longer matches the chain; the second one's does.
    assert assert_version_matches(target, ref, 3, first_dir) is True
    assert assert_version_matches(target, ref, 3, second_dir) is False
    assert assert_version_matches(target, ref, 3) is True
    commit_batches(target, ref, rng, 3, 6, first_dir)
    assert_version_matches(target, ref, 6)
    assert_no_orphans(target)  # the first attempt's uploads are gone


def test_a_snapshot_of_a_superseded_attempt_is_ignored(target: Target) -> None:
    ref = Reference()
    rng = random.Random(24)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, local)  # snapshot 3
    superseded = target.manifest(3)["attempt"]
    # A retry of version 3 that takes no snapshot leaves the first attempt's manifest behind.
    commit_batches(target, ref, rng, 2, 5, target.new_local_dir(), options=NO_SNAPSHOTS)
    assert target.manifest(3)["attempt"] == superseded
    assert target.files().attempt_of(3).hex() != superseded
    assert_version_matches(target, ref, 3)
    assert_version_matches(target, ref, 5)
    # Cleanup finds no usable snapshot at or below the oldest retained version: keeps all.
    commit_batches(target, ref, rng, 5, 6, local)
    assert {f"{v}.changelog" for v in range(1, 7)} <= target.names(target.files().dir)
    assert_version_matches(target, ref, 4)
    assert_version_matches(target, ref, 6)


def test_a_stale_version_above_a_retry_fails_loudly_on_rebuild(target: Target) -> None:
    ref = Reference()
    rng = random.Random(25)
    commit_batches(target, ref, rng, 0, 3, target.new_local_dir(), options=NO_SNAPSHOTS)
    commit_batches(target, ref, rng, 1, 2, target.new_local_dir(), options=NO_SNAPSHOTS)
    path = target.path("3.changelog")
    with pytest.raises(
        verstore.CorruptionError, match=re.escape(target.describe(path)) + ": broken version chain"
    ):
        target.open(3)
    assert_version_matches(target, ref, 2)


def test_a_stale_version_above_a_retry_is_not_served_from_its_writers_local_copy(
    target: Target,
) -> None:
    """The executor that wrote the superseded version 3 still has it locally, clean: opening
    version 3 there must not reuse that copy (its parent was rewritten) but fail like a
    rebuild does."""
    ref = Reference()
    rng = random.Random(26)
    writer = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, writer, options=NO_SNAPSHOTS)
    commit_batches(target, ref, rng, 1, 2, target.new_local_dir(), options=NO_SNAPSHOTS)
    path = target.path("3.changelog")
    with pytest.raises(
        verstore.CorruptionError, match=re.escape(target.describe(path)) + ": broken version chain"
    ):
        target.open(3, writer)
