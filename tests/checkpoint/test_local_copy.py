"""The local copy of a partition (docs/checkpoint.md, "Local copy"): it is not the
checkpoint, a clean copy with damaged files is rebuilt, a rebuild or catch-up that fails leaves
a copy that does not look clean, a read-only open leaves it alone, and ``LOCAL.json`` is
replaced, then its directory synced.

Every test with ``target`` or ``built`` runs against a local directory and an S3-compatible
server.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import verstore
from verstore.checkpoint import CheckpointOptions, CommitRef
from verstore.checkpoint.local import CopyState, LocalCopy, LocalState, SavedBuffer

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    NO_SNAPSHOTS,
    STORE,
    Reference,
    Target,
    assert_version_matches,
    commit_batches,
    cut_in_half,
    flip_byte,
    largest_file,
    local_db,
    local_partition_dir,
    local_state,
    open_and_read,
    reads,
    replaced,
)

pytest_plugins = ["checkpoint_helpers"]


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


def test_local_json_is_replaced_then_its_directory_synced(
    tmp_path: Path, fsyncs: list[tuple[str, str]]
) -> None:
    copy = LocalCopy(tmp_path, STORE, LINEAGE, 0)
    copy.lock(1)
    try:
        copy.write_state(LocalState(LINEAGE, CommitRef(1, bytes(15) + b"\x01"), clean=True))
    finally:
        copy.unlock()
    state_file = os.path.realpath(copy.state_file)
    at = fsyncs.index(("replace", state_file))
    assert ("fsync", os.path.realpath(copy.dir)) in fsyncs[at + 1 :]


def test_each_state_of_local_json_reads_back_as_it_was_written(tmp_path: Path) -> None:
    """``CopyState``: what each constructor of ``LocalState`` writes, the next open reads (a
    copy being changed names no commit: it reads as nothing usable, as a failed close leaves)."""
    commit, uploaded = CommitRef(3, bytes(15) + b"\x02"), {"000009.sst": {"durable": "x"}}
    buffer = SavedBuffer(f"buffer-{'a' * 32}", 10, 7)
    written = {
        CopyState.NONE: LocalState(),
        CopyState.CHANGING: LocalState.changing(LINEAGE, uploaded),
        CopyState.DIRTY: LocalState.dirty(LINEAGE, commit, uploaded),
        CopyState.CLEAN: LocalState.clean_at(LINEAGE, commit, uploaded),
        CopyState.CLEAN_WITH_BUFFER: LocalState.clean_at(LINEAGE, commit, uploaded, buffer),
    }
    copy = LocalCopy(tmp_path, STORE, LINEAGE, 0)
    copy.lock(1)
    try:
        for kind, state in written.items():
            assert state.kind is kind
            assert state.reusable == (kind in (CopyState.CLEAN, CopyState.CLEAN_WITH_BUFFER))
            copy.write_state(state)
            read = copy.read_state()
            assert read.kind is (CopyState.NONE if kind is CopyState.CHANGING else kind)
            if read.kind is not CopyState.NONE:
                assert (read.commit, read.uploaded, read.buffer) == (
                    commit,
                    uploaded,
                    state.buffer,
                )
    finally:
        copy.unlock()
