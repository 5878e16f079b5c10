"""Interleavings of snapshots, cleanups and repartitions that once lost state, driven step by
step (docs/checkpoint.md, "Cleanup": why no interleaving loses a version).

* The harsh simulation's seed 51: a snapshot reuses an upload that a cleanup, which listed the
  partition before the snapshot's manifest existed, is about to delete as unreferenced; a third
  cleanup takes the new manifest as a base and deletes the changelogs below it.
* The same with a fresh upload that takes longer than ``orphan_grace_s``.
* Two repartitions that publish at the same moment: both had found the record's name free.
* A snapshot that writes its manifest after a cleanup deleted its claim (the model check found
  it): the manifest names deleted files, of a version no kept version needs.

Each drives exactly that order with real stores on a real local disk or S3 (moto on loopback),
and asserts that every kept version still rebuilds and that exactly one repartition wins.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import urllib.parse
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import verstore
from verstore.checkpoint import CheckpointOptions, CommitRef, PartitionStore, faults
from verstore.checkpoint import repartition as steps
from verstore.checkpoint.inspect import verify_partition
from verstore.checkpoint.layout import LineageFiles
from verstore.checkpoint.maintenance import cleanup
from verstore.checkpoint.settings import read_settings
from verstore.location import Location

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    Reference,
    Target,
    apply_ops,
    assert_version_matches,
    commit_batches,
    generate_ops,
)
from s3_proxy import S3Proxy  # noqa: E402

pytest_plugins = ["checkpoint_helpers"]

#: A snapshot every second commit, two versions kept, uploads unprotected by time: the windows
#: of the races are then a few steps wide, and nothing but the order can close them.
RACY = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2, orphan_grace_s=0)


def hooked(location: Location, before: Callable[[str, str], None]) -> Location:
    """``location``, calling ``before(kind, path)`` ahead of each delete (``"delete"``) and each
    new file (``"create"``) it makes."""

    class Hooked(type(location)):  # type: ignore[misc]
        def delete(self, path: str) -> None:
            before("delete", path)
            super().delete(path)

        def create_new(self, path: str, data: bytes) -> None:
            before("create", path)
            super().create_new(path, data)

        def write_new(self, path: str, data: bytes) -> None:
            before("create", path)
            super().write_new(path, data)

    fields = {f.name: getattr(location, f.name) for f in dataclasses.fields(location)}
    return Hooked(**fields)


def open_on(
    location: Location, version: int, local: Path, options: CheckpointOptions = RACY
) -> PartitionStore:
    return PartitionStore.open(
        location,
        STORE,
        0,
        version,
        local,
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=SEGMENT_MS,
        lineage=LINEAGE,
        options=options,
    )


def commit(target: Target, ref: Reference, rng: random.Random, version: int, local: Path) -> None:
    commit_batches(target, ref, rng, version, version + 1, local, options=RACY)


def assert_every_kept_version_rebuilds(target: Target, ref: Reference) -> None:
    graph = target.graph()
    for version in range(graph.oldest_kept(), ref.newest + 1):
        assert_version_matches(target, ref, version)
    assert verify_partition(target.files()) == []


def sst_names(target: Target, version: int) -> set[str]:
    return {f.durable for f in target.manifest(version).files if f.is_sst}


def test_a_reused_upload_outlives_a_cleanup_that_listed_before_its_manifest(
    target: Target, ordered_attempts: None
) -> None:
    """Seed 51, three attempts on one partition. Executor A snapshots version 2 (its upload F);
    executor B goes on from version 2 without that snapshot. B's attempt of batch 4 commits
    version 5, snapshots it, and its cleanup lists the partition: F is unreferenced (snapshot 2
    is below the retained versions). Just before that cleanup deletes F, A's retry of batch 4
    catches up and commits version 5 (it wins), with a snapshot that reuses F; A's attempt of
    batch 6 commits version 7, and its cleanup takes that snapshot as its base and deletes the
    changelogs below it. Then B's cleanup goes on: F must survive it."""
    ref, rng = Reference(), random.Random(51)
    a, b = target.new_local_dir(), target.new_local_dir()
    commit(target, ref, rng, 0, a)
    b_opened: list[PartitionStore] = []

    def b_opens_before_a_snapshots(step: str) -> None:
        if step == "after_local_state" and not b_opened:  # A's changelog 2 is written
            b_opened.append(open_on(target.location, 2, b))

    faults.set_hook(b_opens_before_a_snapshots)
    try:
        commit(target, ref, rng, 1, a)  # version 2 and its snapshot
    finally:
        faults.set_hook(None)
    in_snapshot_2 = sst_names(target, 2)
    (part,) = b_opened
    ops = generate_ops(rng, 25, ref.stream_time_at(2))
    apply_ops(part.store, ops)
    assert part.commit() == 3
    ref.commit(3, ops)
    commit(target, ref, rng, 3, b)

    cleaning = threading.Event()
    reused: list[set[str]] = []

    def a_runs_between_b_listing_and_deleting(kind: str, path: str) -> None:
        """Fires when B's cleanup, its listing and reads done, is about to delete F, or to
        retire the uploads it will delete."""
        acts_on_f = kind == "delete" and any(path.endswith(f) for f in in_snapshot_2)
        retires = kind == "create" and "_retiring-" in path
        if not cleaning.is_set() or reused or not (acts_on_f or retires):
            return
        reused.append(set())
        commit(target, ref, rng, 4, a)  # A's retry: catches up, version 5 wins, snapshot 5
        reused[0] = sst_names(target, 5) & in_snapshot_2
        commit_batches(target, ref, rng, 5, 7, a, options=RACY)  # snapshot 7: base 5

    def arm(step: str) -> None:
        if step == "before_cleanup":
            cleaning.set()

    part = open_on(hooked(target.location, a_runs_between_b_listing_and_deleting), 4, b)
    apply_ops(part.store, generate_ops(rng, 25, ref.stream_time_at(4)))
    faults.set_hook(arm)
    try:
        assert part.commit() == 5  # its snapshot, then the cleanup that A overtakes
    finally:
        faults.set_hook(None)
    assert part.commit_stats is not None and part.commit_stats.snapshot
    assert reused and reused[0], "A's snapshot 5 reused no upload of snapshot 2"
    assert target.winning(5) != CommitRef(5, part.attempt)  # A's version 5 won
    assert target.graph().oldest_kept() >= 5  # the changelogs below snapshot 5 are gone
    assert_every_kept_version_rebuilds(target, ref)
    commit_batches(target, ref, rng, 7, 10, a, options=RACY)
    assert_every_kept_version_rebuilds(target, ref)


def test_a_fresh_upload_slower_than_the_grace_outlives_a_cleanup(
    target: Target, ordered_attempts: None
) -> None:
    """A snapshot of version 4 has uploaded its first file F when another attempt's cleanup
    lists the partition: F is older than ``orphan_grace_s`` (0) and no manifest names it yet.
    That cleanup stalls before it deletes anything; the snapshot finishes, the commits go on,
    and a cleanup at version 6 takes snapshot 4 as its base. Then the stalled cleanup goes on:
    F must survive it."""
    ref, rng = Reference(), random.Random(52)
    a = target.new_local_dir()
    commit_batches(target, ref, rng, 0, 3, a, options=RACY)
    stalled = threading.Event()
    go_on = threading.Event()
    errors: list[BaseException] = []

    def stall(kind: str, path: str) -> None:
        if "/SSTs/" in path or "_retiring-" in path:
            stalled.set()
            assert go_on.wait(300), "the stalled cleanup was never released"

    def slow_cleanup() -> None:
        try:
            files = LineageFiles(hooked(target.location, stall), STORE, LINEAGE).partition(0)
            cleanup(files, RACY)
        except BaseException as e:
            errors.append(e)
        finally:
            stalled.set()  # it found nothing to delete: nothing to wait for

    threads: list[threading.Thread] = []

    def cleanup_lists_mid_upload(step: str) -> None:
        if step == "during_snapshot_upload" and not threads:
            threads.append(threading.Thread(target=slow_cleanup))
            threads[0].start()
            assert stalled.wait(300)

    faults.set_hook(cleanup_lists_mid_upload)
    try:
        commit(target, ref, rng, 3, a)  # version 4: its snapshot overtakes the cleanup
    finally:
        faults.set_hook(None)
    assert threads, "the snapshot uploaded nothing"
    try:
        commit_batches(target, ref, rng, 4, 6, a, options=RACY)  # snapshot 6; base 4
    finally:
        go_on.set()
        threads[0].join(300)
    assert not errors, errors
    assert target.graph().oldest_kept() >= 4
    assert_every_kept_version_rebuilds(target, ref)


def test_a_manifest_written_after_a_cleanup_deleted_its_claim_names_deleted_files(
    target: Target, ordered_attempts: None
) -> None:
    """The model check's stalled manifest (test_protocol_model.py; docs/checkpoint.md, "Why no
    interleaving loses a version"). A's snapshot of version 1 passes its check and stalls
    before its manifest. B runs batch 0 again (its version 1 wins: it opened later) and
    commits on to version 3, whose cleanup finds version 1 no longer needed: it deletes A's
    claim and the uploads it names. Then A writes its manifest, which names deleted files:
    verify reports them until A's own cleanup deletes the manifest. No kept version depends
    on it."""
    options = CheckpointOptions(snapshot_interval=1, min_versions_to_retain=2, orphan_grace_s=0)
    ref, rng = Reference(), random.Random(53)
    a, b = target.new_local_dir(), target.new_local_dir()
    stalled, go_on = threading.Event(), threading.Event()

    def stall(kind: str, path: str) -> None:
        if kind == "create" and path.endswith(".snapshot") and not stalled.is_set():
            stalled.set()
            assert go_on.wait(300), "the stalled snapshot was never released"

    ops = generate_ops(rng, 25, ref.stream_time_at(0))
    part_a = open_on(hooked(target.location, stall), 0, a, options)
    apply_ops(part_a.store, ops)
    errors: list[BaseException] = []
    seen: list[list[str]] = []

    def commit_a() -> None:
        try:
            part_a.commit()
        except BaseException as e:
            errors.append(e)
            stalled.set()

    def verify_before_cleanup(step: str) -> None:
        if step == "before_cleanup" and not seen:
            seen.append(verify_partition(target.files()))

    thread = threading.Thread(target=commit_a)
    thread.start()
    assert stalled.wait(300) and not errors, errors
    part_b = open_on(target.location, 0, b, options)
    apply_ops(part_b.store, ops)  # deterministic processing: the same batch
    assert part_b.commit() == 1
    ref.commit(1, ops)
    commit_batches(target, ref, rng, 1, 3, b, options=options)
    faults.set_hook(verify_before_cleanup)
    try:
        go_on.set()
        thread.join(300)
    finally:
        faults.set_hook(None)
    assert not errors, errors
    assert part_a.commit_stats is not None and part_a.commit_stats.snapshot
    (problems,) = seen
    assert problems and all("missing (snapshot 1)" in p for p in problems), problems
    assert_every_kept_version_rebuilds(target, ref)  # A's cleanup deleted the manifest


# --- two repartitions at once --------------------------------------------------------------------


class _Interposer(S3Proxy):
    """A proxy in front of the S3 server that runs ``rival`` once, just before it sends on the
    first upload of a key ending in ``watched`` (the record itself, or a temporary copy of it):
    the rival then lands after this client found the name free and before it writes."""

    def __init__(self, upstream: int, watched: str, rival: Callable[[], None]) -> None:
        super().__init__(upstream)
        self.watched, self.rival = watched, rival
        self.fired = False
        self.lock = threading.Lock()

    def seen(self, method: str, path: str, headers: Any) -> None:
        if self.first_upload(method, path):
            self.rival()

    def first_upload(self, method: str, path: str) -> bool:
        with self.lock:
            if self.fired or method not in ("PUT", "POST"):
                return False
            if not urllib.parse.urlsplit(path).path.endswith(self.watched):
                return False
            self.fired = True
            return True


@pytest.fixture
def interposer(s3_server: dict[str, Any]) -> Iterator[Callable[..., _Interposer]]:
    started: list[_Interposer] = []

    def start(watched: str, rival: Callable[[], None]) -> _Interposer:
        upstream = int(s3_server["endpoint_override"].rsplit(":", 1)[1])
        proxy = _Interposer(upstream, watched, rival)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.shutdown()
        proxy.server_close()


def _route(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


def test_of_two_repartitions_publishing_at_once_exactly_one_wins(
    s3_server: dict[str, Any], interposer: Callable[..., _Interposer], tmp_path: Path
) -> None:
    """Two repartitions of a stopped 2-partition store (to 3 and to 4 partitions) have written
    their partitions; the one to 4 publishes while the one to 3 is publishing, after it found
    the record's name free. Exactly one wins, the other says so, and the record in force is the
    winner's."""
    uri = f"s3://bucket/{uuid.uuid4().hex}"
    direct = Location.resolve(uri, s3_server)
    for p in range(2):
        part = PartitionStore.open(
            direct, STORE, p, 0, tmp_path / "local" / f"{p}",
            history_retention_ms=RETENTION_MS, lineage=LINEAGE, num_partitions=2,
        )  # fmt: skip
        for i in range(20):
            if _route(f"k{i}".encode(), 2) == p:
                part.store.put(f"k{i}".encode(), b"v", i)
        part.commit()
    to3 = steps.plan(direct, STORE, LINEAGE, 1, 3)
    to4 = steps.plan(direct, STORE, LINEAGE, 1, 4)
    assert to3 is not None and to4 is not None and to3.target.id == to4.target.id == 1
    for plan in (to3, to4):
        steps.mark_sources(direct, plan)
        for p in range(plan.target.num_partitions or 0):
            steps.write_target(direct, plan, p, str(tmp_path / "scratch"), [])
    outcomes: dict[int, BaseException | None] = {}

    def publish(location: Location, plan: steps.Plan) -> None:
        try:
            steps.publish(location, plan)
            outcomes[plan.target.num_partitions or 0] = None
        except verstore.IncompatibleConfigError as e:
            outcomes[plan.target.num_partitions or 0] = e

    proxy = interposer("_partitioning-1.json", lambda: publish(direct, to4))
    via_proxy = Location.resolve(
        uri, {**s3_server, "endpoint_override": f"127.0.0.1:{proxy.server_address[1]}"}
    )
    publish(via_proxy, to3)
    assert proxy.fired and set(outcomes) == {3, 4}
    winners = [n for n, error in outcomes.items() if error is None]
    assert len(winners) == 1, f"both repartitions won: {outcomes}"
    (loser,) = {3, 4} - set(winners)
    assert "another repartition published partitioning 1" in str(outcomes[loser])
    settings = read_settings(LineageFiles(direct, STORE, LINEAGE))
    assert settings is not None and settings.num_partitions == winners[0]
