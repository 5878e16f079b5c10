"""Faults at the storage boundary of checkpoints (docs/checkpoint.md, "What a failure leaves
behind").

* An upload that fails half way publishes nothing under the name it was writing: a commit is
  all or nothing on S3 (the moto server on loopback) as on a local disk, and a truncated
  sibling can never become the tip.
* A snapshot whose reused upload vanished before its manifest was written (a concurrent
  attempt's cleanup deleted it) is a failed snapshot, and a manifest that names a missing file
  is never a usable base for cleanup.
* A store whose close fails still releases the local directory's lock.

Failures are injected into real components: a real S3 server or local directory, with an
upload's source cut after half of it was read (a connection reset: the multipart upload is
aborted, the local temporary file removed), or a real store whose close raises after closing.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import verstore
from forwarding_storage import ForwardingStorage
from verstore.checkpoint import CheckpointOptions, CommitRef, PartitionStore, faults
from verstore.checkpoint.local import LocalCopy, LocalState
from verstore.exceptions import StorageError
from verstore.location import Location
from verstore.storage import Storage

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    OPTIONS,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    TMP_MARK,
    Reference,
    Target,
    apply_ops,
    assert_no_orphans,
    assert_version_matches,
    commit_batches,
    generate_ops,
    local_partition_dir,
    local_state,
)

pytest_plugins = ["checkpoint_helpers"]


# --- a filesystem whose uploads are cut half way --------------------------------------------------


class CutSource:
    """A local file being uploaded whose reading fails half way (a connection reset)."""

    def __init__(self, inner: Any, path: str, cut: list[str]) -> None:
        self._inner, self._path, self._cut = inner, path, cut
        self._room = os.fstat(inner.fileno()).st_size // 2

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if len(data) > self._room:
            self._cut.append(self._path)
            raise OSError(f"injected: connection reset while uploading {self._path}")
        self._room -= len(data)
        return bytes(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CuttingStorage(ForwardingStorage):
    """A real storage whose uploads of the paths ``armed`` picks are cut half way; a small file
    given whole is refused before it is sent."""

    def __init__(self, inner: Storage, armed: Callable[[str], bool]) -> None:
        super().__init__(inner)
        self.armed, self.cut = armed, []

    def create(self, path: str, data: bytes) -> None:
        if self.armed(path):
            self.cut.append(path)
            raise OSError(f"injected: connection reset while uploading {path}")
        self.inner.create(path, data)

    def put_file(self, path: str, source: Any) -> None:
        self.inner.put_file(path, CutSource(source, path, self.cut) if self.armed(path) else source)


def cutting_location(target: Target, armed: Callable[[str], bool]) -> tuple[Location, list[str]]:
    """``target``'s location on a storage that cuts the uploads ``armed`` picks; also the list
    of paths it cut."""
    plain = target.location
    storage = CuttingStorage(plain.storage, armed)
    return Location(storage, plain.root, plain.uri), storage.cut


def open_at(
    location: Location, version: int, local_dir: Path, options: CheckpointOptions = OPTIONS
) -> PartitionStore:
    return PartitionStore.open(
        location,
        STORE,
        0,
        version,
        local_dir,
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=SEGMENT_MS,
        lineage=LINEAGE,
        options=options,
    )


def assert_every_version_matches(target: Target, ref: Reference) -> None:
    """Every version the winning chain keeps rebuilds from scratch to the reference."""
    graph = target.graph()
    for version in range(graph.oldest_kept(), ref.newest + 1):
        assert_version_matches(target, ref, version)


# --- an upload cut half way -----------------------------------------------------------------------


def test_a_commit_upload_cut_half_way_publishes_nothing_and_never_wedges(
    target: Target, ordered_attempts: None
) -> None:
    """Two attempts of batch 2: the one that opened first commits; the later one (the greater
    attempt id, which would win) has its changelog upload cut half way."""
    ref = Reference()
    rng = random.Random(31)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir())
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    first = target.open(2)
    location, cut = cutting_location(target, lambda path: path.endswith(".changelog"))
    later = open_at(location, 2, target.new_local_dir())
    assert later.attempt > first.attempt
    failed = target.files().changelog(CommitRef(3, later.attempt), later.opened)
    apply_ops(first.store, ops)
    assert first.commit() == 3
    ref.commit(3, ops)
    apply_ops(later.store, ops)
    with pytest.raises(OSError, match="injected: connection reset"):
        later.commit()
    assert cut, "the upload was not cut"
    listing = target.files().listing()
    assert [r for r in listing.commits if r.attempt == later.attempt] == []
    assert not target.exists(failed)
    assert listing.temporaries == []  # the half-written upload was removed
    assert target.tip() == CommitRef(3, first.attempt)
    # The next batch opens and commits: the partition is not wedged.
    assert_version_matches(target, ref, 3)
    commit_batches(target, ref, rng, 3, 4, target.new_local_dir())
    assert_every_version_matches(target, ref)


def test_a_snapshot_upload_cut_half_way_leaves_no_partial_file(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    ref = Reference()
    rng = random.Random(32)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, local)
    location, cut = cutting_location(target, lambda path: "/SSTs/" in path)
    part = open_at(location, 2, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    apply_ops(part.store, ops)
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        assert part.commit() == 3  # the commit stands; its snapshot failed
    ref.commit(3, ops)
    assert cut, "no snapshot upload was cut"
    assert part.commit_stats is not None and part.commit_stats.deferred == ["the snapshot"]
    assert target.graph().snapshots == {}
    assert target.names(target.files().sst_dir) == set()  # no truncated upload is left
    assert_every_version_matches(target, ref)
    commit_batches(target, ref, rng, 3, 4, local)  # the snapshot is due again, and taken
    assert target.winning(4) in target.graph().snapshots
    assert_no_orphans(target)
    assert_every_version_matches(target, ref)


# --- a reused upload deleted by a concurrent cleanup ----------------------------------------------


def _delete_reused_uploads(
    local: Path, target: Target, deleted: list[str]
) -> Callable[[str], None]:
    """A fault hook that, just before a snapshot's manifest is written, deletes the uploads the
    snapshot reuses: what a concurrent attempt's cleanup does to uploads that no manifest it
    listed references."""

    def hook(step: str) -> None:
        if step != "before_manifest":
            return
        part_dir = local_partition_dir(local)
        [checkpoint] = part_dir.glob(f"{TMP_MARK}checkpoint-*")
        in_snapshot = {p.name for p in checkpoint.iterdir()}
        for name, entry in local_state(local)["uploaded"].items():
            if name in in_snapshot:
                path = target.path(entry["durable"])
                target.remove(path)
                deleted.append(path)

    return hook


def test_a_reused_upload_deleted_before_the_manifest_fails_the_snapshot(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    ref = Reference()
    rng = random.Random(41)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, local)  # snapshot 3
    # Batches without writes: snapshot 6 holds exactly snapshot 3's files, all reused.
    for version in (3, 4):
        target.commit(version, [], local)
        ref.commit(version + 1, [])
    deleted: list[str] = []
    faults.set_hook(_delete_reused_uploads(local, target, deleted))
    try:
        with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
            part = target.open(5, local)
            assert part.commit() == 6  # the commit stands whatever its snapshot does
    finally:
        faults.set_hook(None)
    ref.commit(6, [])
    assert deleted, "the snapshot reused no upload"
    # Snapshot 3 lost files too: it is no base, so versions 1..6 keep their changelogs.
    assert_every_version_matches(target, ref)
    assert target.graph().oldest_kept() == 0
    assert part.commit_stats is not None and part.commit_stats.deferred == ["the snapshot"]
    assert target.winning(6) not in target.graph().snapshots  # no manifest names a lost file
    assert "is missing or of another size" in caplog.text
    commit_batches(target, ref, rng, 6, 10, local)  # snapshot 7 (due again), 10: cleanup
    assert {r.version for r in target.graph().snapshots} == {7, 10}
    assert_no_orphans(target)
    assert_every_version_matches(target, ref)


def test_cleanup_does_not_trust_a_manifest_whose_file_is_missing(target: Target) -> None:
    """A manifest that decodes but names a missing upload is no base: cleanup keeps the older
    changelogs that the versions above it are rebuilt from."""
    ref = Reference()
    rng = random.Random(42)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 5, local)  # snapshot 3
    [lost] = [f for f in target.manifest(3).files if f.is_sst][:1]
    target.remove(target.path(lost.durable))
    commit_batches(target, ref, rng, 5, 6, local)  # snapshot 6, cleanup down to lowest 3
    for version in range(3, 7):  # the retained window: min_versions_to_retain 4
        assert_version_matches(target, ref, version)
    assert target.graph().oldest_kept() == 0


# --- a close that fails ---------------------------------------------------------------------------


class CloseFails:
    """A real store whose ``close()`` closes it, then raises (a flush RocksDB could not do)."""

    def __init__(self, store: verstore.VersionedStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def close(self) -> None:
        self._store.close()
        raise StorageError("injected: close failed")


QUICK_LOCK = CheckpointOptions(
    snapshot_interval=3, min_versions_to_retain=4, orphan_grace_s=0, lock_timeout_s=0.5
)


def test_an_abort_whose_close_fails_releases_the_lock(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    ref = Reference()
    rng = random.Random(51)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 2, local)
    part = target.open(2, local)
    apply_ops(part.store, generate_ops(rng, 25, ref.stream_time_at(2)))
    part._store = CloseFails(part.store)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        part.abort()  # nothing to keep: the failure is logged, the session ends
    assert "injected: close failed" in caplog.text
    assert local_state(local)["clean"] is False
    again = target.open(2, local, options=QUICK_LOCK)  # not StoreLockedError
    assert again.rebuilt
    again.abort()
    assert_version_matches(target, ref, 2, local)


def test_a_commit_whose_close_fails_stays_committed_and_releases_the_lock(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    ref = Reference()
    rng = random.Random(52)
    local = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 1, local)
    part = target.open(1, local)
    ops = generate_ops(rng, 25, ref.stream_time_at(1))
    apply_ops(part.store, ops)
    part._store = CloseFails(part.store)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        assert part.commit() == 2
    ref.commit(2, ops)
    assert part.commit_stats is not None
    assert part.commit_stats.deferred == ["closing the store"]
    # A copy whose close failed is not trusted: the next open rebuilds it.
    assert local_state(local)["clean"] is False
    again = target.open(2, local, options=QUICK_LOCK)
    assert again.rebuilt
    again.abort()
    assert_version_matches(target, ref, 2, local)


def test_a_failed_open_whose_close_fails_raises_the_open_error(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error that ended the open is the one raised, and the lock is released."""
    local = target.new_local_dir()
    target.commit(0, [("put", b"a", b"1", 1)], local)
    real = LocalCopy.write_state

    def failing(self: LocalCopy, state: LocalState) -> None:
        if not state.clean and state.commit is not None:  # the last step of open
            raise OSError("injected: local disk full")
        real(self, state)

    monkeypatch.setattr(LocalCopy, "write_state", failing)
    monkeypatch.setattr(PartitionStore, "_open_local", _open_local_close_fails)
    with pytest.raises(OSError, match="injected: local disk full"):
        target.open(1, local)
    monkeypatch.undo()
    target.open(1, local, options=QUICK_LOCK).abort()


_real_open_local = PartitionStore._open_local


def _open_local_close_fails(self: PartitionStore) -> verstore.VersionedStore:
    return CloseFails(_real_open_local(self))  # type: ignore[return-value]
