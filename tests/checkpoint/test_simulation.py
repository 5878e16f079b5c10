"""A deterministic simulation of the checkpoint protocol (docs/checkpoint.md, "The simulation
test"), in the spirit of FoundationDB's simulation testing.

A hypothesis state machine drives real partition stores on a real local filesystem through the
events Spark produces: several attempts per micro-batch on several executors (retries,
speculative copies, zombies that opened before their retry and commit after it, zombies that
open late), micro-batches in which some or no partitions run, crashes at every step of a
commit and during a rebuild, failing snapshot uploads and cleanups, wiped executor disks, and a
second query (lineage) on the same root and store name. Each executor runs Python workers that
keep committed stores open between tasks (``checkpoint.kept``): a task reuses the store its
worker kept, or asks another worker to hand it over; workers die holding stores, close idle
ones, and keep stores of commits that other executors have since moved past (zombie stores).
Attempt ids come from a simulated clock, so a run is a function of hypothesis' seed.

The model records every commit's operations from the empty state. The invariants:

* every open returns exactly the contents of the commit it reports, a commit that was made,
  and the one the winning chain serves for the requested version;
* every version that cleanup keeps rebuilds, from scratch, to exactly the contents of the
  winning chain's commit for it;
* the next version of every partition of every lineage can always be opened (a stale attempt is
  fenced, never the query);
* lineages never see each other's state.

``VERSTORE_SIMULATION_EXAMPLES`` (default 8, or 30 with ``VERSTORE_LONG_TESTS=1``) and
``VERSTORE_SIMULATION_SEED`` (default 0) set the run's size and seed:
``VERSTORE_SIMULATION_EXAMPLES=5000 pytest tests/checkpoint/test_simulation.py`` is the long run.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import verstore
from hypothesis import HealthCheck, event, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from keeper_helpers import discard_all
from reference_model import ReferenceModel, as_tuple
from verstore.checkpoint import CheckpointOptions, CommitRef, PartitionStore, faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.inspect import verify_partition
from verstore.checkpoint.kept import Keeper
from verstore.checkpoint.layout import ROOT, LineageFiles
from verstore.committed import read_partition, resolve
from verstore.exceptions import FencedError
from verstore.location import Location

RETENTION_MS = 40
SEGMENT_MS = 10
STORE = "orders"
PARTITIONS = 2
EXECUTORS = 3
#: Python workers per executor, each keeping the stores it committed open (worker 0 keeps none:
#: it closes at commit, as a query without kept stores does).
WORKERS = 3
LINEAGES = ("query-a", "query-b")
#: query-a's stores have a latest TTL below the retention (docs/semantics.md §2.15), query-b's
#: none: keys of query-a expire, come back as new histories, and leave storage.
LATEST_TTL_MS = {"query-a": 25, "query-b": None}
KEYS = [b"", b"a", b"b", b"k\x00", b"\xff"]
#: Keys a TTL lineage writes once every eight batches, expiring in between.
FRESH_KEYS = [f"f{i}".encode() for i in range(8)]
OPTIONS = CheckpointOptions(
    snapshot_interval=2,
    min_versions_to_retain=3,
    orphan_grace_s=0,
    # A task waits for a store another worker keeps while that worker hands it over; it never
    # waits for a running task (``busy``).
    lock_timeout_s=30,
    replay_chunk_records=3,
)
COMMIT_STEPS = faults.COMMIT_STEPS
#: Steps at or after which a crashed commit is durable (the changelog write is the commit).
DURABLE_FROM = COMMIT_STEPS.index("after_changelog")

Op = tuple[bytes, bytes | None, int]
"""``(key, value or None for a tombstone, timestamp)``."""


class SimulatedCrash(BaseException):
    """The process died at a protocol step (not an ``Exception``: nothing may swallow it)."""


def batch_ops(lineage: str, batch: int, partition: int) -> list[Op]:
    """The input of one micro-batch on one partition: the same for every attempt (Spark's
    offset log gives a re-run batch the same input). Times trail the batch's time by up to
    more than the retention, so some writes are too old, and advance by about a segment per
    batch, so segments expire."""
    rng = random.Random(f"{lineage}/{batch}/{partition}")
    base = batch * 12
    ops: list[Op] = []
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(KEYS)
        ts = max(0, base + rng.randint(-55, 12))
        value = None if rng.random() < 0.2 else f"{lineage[-1]}{batch}.{rng.randint(0, 9)}".encode()
        ops.append((key, value, ts))
    if LATEST_TTL_MS[lineage] is not None:
        ops.append((FRESH_KEYS[batch % len(FRESH_KEYS)], f"f{batch}".encode(), base))
    return ops


def dump(store: verstore.VersionedStore | ReferenceModel, keys: list[bytes]) -> Any:
    """Everything a reader can observe of ``keys``."""
    return (
        store.observed_stream_time,
        [
            (k, as_tuple(store.get(k)), [as_tuple(r) for r in store.versions(k, ascending=True)])
            for k in keys
        ],
    )


def model(lineage: str) -> ReferenceModel:
    """An empty store of ``lineage`` as the reference model has it."""
    return ReferenceModel(
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=SEGMENT_MS,
        latest_ttl_ms=LATEST_TTL_MS[lineage],
    )


@dataclass
class Attempt:
    lineage: str
    partition: int
    batch: int
    executor: int
    worker: int
    part: PartitionStore
    ops: list[Op] = field(default_factory=list)


class Simulation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # Memory-backed when there is one: the simulation tests the protocol, not fsync.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = Path(tempfile.mkdtemp(prefix="verstore-sim-", dir=shm))
        self.root = self.dir / "root"
        self.location = Location.resolve(str(self.root))
        clock = itertools.count(1)
        self._saved_new_attempt = layout.new_attempt
        layout.new_attempt = lambda: next(clock).to_bytes(8, "big") + bytes(7) + b"\x01"
        #: (lineage, partition) -> commit -> every op from the empty state, in order.
        self.history: dict[tuple[str, int], dict[CommitRef, list[Op]]] = {}
        self.markers: dict[tuple[str, int], list[bytes]] = {}
        self.batch = dict.fromkeys(LINEAGES, 0)
        self.started = {LINEAGES[0]}
        #: (lineage, batch, partition) -> outcomes of its attempts ("committed", "failed")
        self.outcomes: dict[tuple[str, int, int], list[str]] = {}
        self.pending: list[Attempt] = []
        self.touched: tuple[str, int] | None = None
        self._contents: dict[tuple[str, int, CommitRef, int], Any] = {}
        # Handoffs run in the keepers' threads; the work commits defer runs here, in the step
        # that committed, so that crashes in it are part of the (deterministic) run.
        self.keepers = {
            (e, w): Keeper(idle_s=float("inf"), poll_s=0.005, maintain=False)
            for e in range(EXECUTORS)
            for w in range(1, WORKERS)
        }

    def teardown(self) -> None:
        try:
            for attempt in self.pending:
                attempt.part.abort()
            self.pending.clear()
            for keeper in self.keepers.values():
                keeper.stop()
            for lineage in self.started:
                for p in range(PARTITIONS):
                    self.check_partition(lineage, p)
        finally:
            faults.set_hook(None)
            layout.new_attempt = self._saved_new_attempt
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model --------------------------------------------------------------------------

    def keys(self, lineage: str, partition: int) -> list[bytes]:
        fresh = FRESH_KEYS if LATEST_TTL_MS[lineage] is not None else []
        return KEYS + fresh + self.markers.get((lineage, partition), [])

    def expected(self, lineage: str, partition: int, ref: CommitRef) -> Any:
        keys = self.keys(lineage, partition)
        cached = self._contents.get((lineage, partition, ref, len(keys)))
        if cached is not None:
            return cached
        ops = [] if ref == ROOT else self.history[(lineage, partition)][ref]
        store = model(lineage)
        for key, value, ts in ops:
            store.put(key, value, ts)
        result = dump(store, keys)
        self._contents[(lineage, partition, ref, len(keys))] = result
        return result

    def graph(self, lineage: str, partition: int) -> Graph:
        files = LineageFiles(self.location, STORE, lineage).partition(partition)
        return Graph(files, files.listing())

    def open(
        self,
        lineage: str,
        partition: int,
        version: int,
        local: Path,
        *,
        read_only: bool = False,
        keeper: Keeper | None = None,
    ) -> PartitionStore:
        return PartitionStore.open(
            self.location,
            STORE,
            partition,
            version,
            local,
            lineage=lineage,
            history_retention_ms=RETENTION_MS,
            segment_interval_ms=SEGMENT_MS,
            latest_ttl_ms=LATEST_TTL_MS[lineage],
            options=OPTIONS,
            num_partitions=PARTITIONS,
            read_only=read_only,
            keeper=keeper,
        )

    def check_open(self, lineage: str, partition: int, version: int, part: PartitionStore) -> None:
        """The invariant of every open: a committed state, the one the winning chain serves."""
        opened = part.opened
        known = self.history.get((lineage, partition), {})
        assert opened == ROOT or opened in known, f"opened {opened}, which was never committed"
        assert opened.version <= version
        assert opened == self.graph(lineage, partition).serving(version)
        assert dump(part.store, self.keys(lineage, partition)) == self.expected(
            lineage, partition, opened
        )

    def check_verified(self, lineage: str, partition: int, problems: list[str]) -> None:
        """Nothing in the checkpoint is damaged: every snapshot can be restored from its
        files."""
        assert problems == []

    def check_partition(self, lineage: str, partition: int) -> None:
        """The next version opens for writing; every kept version rebuilds exactly."""
        scratch = Path(tempfile.mkdtemp(dir=self.dir))
        part = self.open(lineage, partition, self.batch[lineage], scratch)  # never fenced
        part.abort()
        shutil.rmtree(scratch)
        graph = self.graph(lineage, partition)
        self.check_verified(lineage, partition, verify_partition(graph.files))
        tip = graph.tip()
        current = self.batch[lineage]
        assert tip.version <= current + 1
        lowest = max(0, tip.version - OPTIONS.min_versions_to_retain + 1)
        for version in sorted({*range(lowest, tip.version + 1), current}):
            scratch = Path(tempfile.mkdtemp(dir=self.dir))
            part = self.open(lineage, partition, version, scratch, read_only=True)
            if part.stats.snapshot is not None:
                event("rebuilt from a snapshot")
            if part.opened.version < graph.oldest_kept() + 1 and part.opened != ROOT:
                event("opened the oldest kept version")
            try:
                self.check_open(lineage, partition, version, part)
            finally:
                part.abort()
                shutil.rmtree(scratch)
        self.check_reader(lineage, partition, tip.version)

    def check_reader(self, lineage: str, partition: int, version: int) -> None:
        """The reader (``verstore.committed``, behind ``read_store`` and ``verstore scan``) returns
        exactly the winning chain's contents at ``version``: every version of every key."""
        ref, settings = resolve(self.location, STORE, lineage)
        got = [
            (r["key"], r["value"], r["valid_from"], r["valid_to"])
            for batch in read_partition(ref, settings, partition, version=version, history=True)
            for r in batch.to_pylist()
        ]
        opened = self.graph(lineage, partition).serving(version)
        ops = [] if opened == ROOT else self.history[(lineage, partition)][opened]
        store = model(lineage)
        for key, value, ts in ops:
            store.put(key, value, ts)
        want = [
            (key, r.value, r.timestamp, r.valid_to)
            for key in sorted(self.keys(lineage, partition))
            for r in store.versions(key, ascending=True)
        ]
        assert got == want

    def local(self, executor: int) -> Path:
        return self.dir / f"executor-{executor}"

    def open_task(
        self, lineage: str, partition: int, version: int, executor: int, worker: int
    ) -> PartitionStore:
        """A task's open in ``worker`` of ``executor``, with its worker's keeper."""
        keeper = self.keepers.get((executor, worker))
        copy = self.local(executor) / STORE / f"q={lineage}" / f"p={partition}"
        if any(k is not keeper and copy in k.held() for k in self.keepers.values()):
            event("task lands in another worker than the one keeping its store")
        return self.open(lineage, partition, version, self.local(executor), keeper=keeper)

    def idle_worker(self, data: st.DataObject, executor: int) -> int | None:
        """A worker of ``executor`` not running a task (a Python worker runs one at a time)."""
        free = [
            w
            for w in range(WORKERS)
            if not any((a.executor, a.worker) == (executor, w) for a in self.pending)
        ]
        return data.draw(st.sampled_from(free)) if free else None

    def busy(self, lineage: str, partition: int, executor: int) -> bool:
        return any(
            (a.lineage, a.partition, a.executor) == (lineage, partition, executor)
            for a in self.pending
        )

    # -- rules: tasks -------------------------------------------------------------------------

    @rule(
        data=st.data(),
        partition=st.integers(0, PARTITIONS - 1),
        executor=st.integers(0, EXECUTORS - 1),
        nondeterministic=st.booleans(),
    )
    def open_attempt(
        self,
        data: st.DataObject,
        partition: int,
        executor: int,
        nondeterministic: bool,
        lineage: str | None = None,
    ) -> None:
        """A task of the current micro-batch opens its partition and applies its input."""
        if lineage is None:
            lineage = data.draw(st.sampled_from(sorted(self.started)))
        worker = self.idle_worker(data, executor)
        if worker is None or self.busy(lineage, partition, executor):
            return
        batch = self.batch[lineage]
        self.touched = (lineage, partition)
        part = self.open_task(lineage, partition, batch, executor, worker)
        self.check_open(lineage, partition, batch, part)
        event(
            "open: kept open, caught up"
            if part.stats.kept_open and part.stats.replayed
            else "open: kept open"
            if part.stats.kept_open
            else "open: reused"
            if part.stats.reused
            else "open: rebuilt"
            if part.stats.rebuilt
            else "open: caught up"
            if part.stats.replayed
            else "open: new"
        )
        if part.stats.saved_buffer_bytes:
            event("open: loaded a saved write buffer")
        if part.opened.version < batch:
            event("open of a version without its own commit")
        attempt = Attempt(
            lineage, partition, batch, executor, worker, part, batch_ops(lineage, batch, partition)
        )
        if nondeterministic:
            # A function that is not deterministic: attempts of one batch write different data.
            marker = b"m" + part.attempt[:8].hex().encode()
            self.markers.setdefault((lineage, partition), []).append(marker)
            attempt.ops.append((marker, b"x", batch * 12))
        for key, value, ts in attempt.ops:
            part.store.put(key, value, ts)
        self.pending.append(attempt)

    @precondition(lambda self: self.pending)
    @rule(
        data=st.data(),
        outcome=st.sampled_from(
            ["ok", "ok", "ok", "snapshot_fails", "cleanup_fails"]
            + [f"crash:{s}" for s in COMMIT_STEPS]
        ),
    )
    def commit_attempt(self, data: st.DataObject, outcome: str, index: int | None = None) -> None:
        """An open attempt commits: now, or long after (a zombie), or crashes on the way."""
        if index is None:
            index = data.draw(st.integers(0, len(self.pending) - 1))
        attempt = self.pending.pop(index)
        key = (attempt.lineage, attempt.partition)
        self.touched = key
        ref = CommitRef(attempt.batch + 1, attempt.part.attempt)
        parent = attempt.part.opened

        def hook(step: str) -> None:
            if outcome == f"crash:{step}":
                raise SimulatedCrash(step)
            if outcome == "snapshot_fails" and step == "during_snapshot_upload":
                raise OSError("simulated: upload failed")
            if outcome == "cleanup_fails" and step == "during_cleanup":
                raise OSError("simulated: delete failed")

        before = self.graph(*key)
        chain_before = list(before.walk(before.tip()))
        keeper = self.keepers.get((attempt.executor, attempt.worker))
        faults.set_hook(hook)
        try:
            durable = True
            try:
                attempt.part.commit()
                if keeper is not None:
                    keeper.run_maintenance()  # what the commit deferred, crashes included
            except SimulatedCrash as crash:
                durable = COMMIT_STEPS.index(str(crash)) >= DURABLE_FROM
                if keeper is not None and durable:
                    event("crash in a kept store's deferred commit work")
        finally:
            faults.set_hook(None)
        outcomes = self.outcomes.setdefault((attempt.lineage, attempt.batch, attempt.partition), [])
        if not durable:
            outcomes.append("failed")
            return
        base = [] if parent == ROOT else self.history[key][parent]
        self.history.setdefault(key, {})[ref] = base + attempt.ops
        outcomes.append("committed")
        after = self.graph(*key)
        chain_after = list(after.walk(after.tip()))
        if chain_before[0].version > ref.version:
            # A write below the tip (a zombie's, after later batches) changes nothing (the
            # snapshot and cleanup it may trigger only shorten the chain from below).
            event("commit below the tip")
            assert chain_after == chain_before[: len(chain_after)]
        if any(r.version == ref.version and r.attempt > ref.attempt for r in before.commits):
            # An attempt that opened earlier never displaces a sibling that opened later.
            event("commit after a later-opened sibling")
            assert ref not in chain_after
        if ref not in chain_after:
            event("commit off the winning chain")

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def reclaim(self, data: st.DataObject) -> None:
        """An open attempt's store drops what its TTL expired (a flush, then a compaction of
        its latest values): no read and no later commit or rebuild may tell."""
        attempt = data.draw(st.sampled_from(self.pending))
        self.touched = (attempt.lineage, attempt.partition)
        before = attempt.part.store.stats()
        attempt.part.store.reclaim_expired()
        if attempt.part.store.stats().ttl_reclaims > before.ttl_reclaims:
            event("reclaimed expired latest values")
        keys = self.keys(attempt.lineage, attempt.partition)
        assert dump(attempt.part.store, keys) == dump(self.model_of(attempt), keys)

    def model_of(self, attempt: Attempt) -> ReferenceModel:
        """The model of an open attempt: its parent's contents and its own writes."""
        key = (attempt.lineage, attempt.partition)
        parent = attempt.part.opened
        base = [] if parent == ROOT else self.history[key][parent]
        store = model(attempt.lineage)
        for k, value, ts in base + attempt.ops:
            store.put(k, value, ts)
        return store

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def abort_attempt(self, data: st.DataObject) -> None:
        """A task fails before its commit."""
        attempt = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        self.touched = (attempt.lineage, attempt.partition)
        attempt.part.abort()
        key = (attempt.lineage, attempt.batch, attempt.partition)
        self.outcomes.setdefault(key, []).append("failed")

    @rule(data=st.data(), partitions=st.sets(st.integers(0, PARTITIONS - 1)))
    def run_batch(self, data: st.DataObject, partitions: set[int]) -> None:
        """A whole micro-batch goes well: each partition in ``partitions`` runs one task that
        commits (none: a no-data batch), then Spark moves on."""
        lineage = data.draw(st.sampled_from(sorted(self.started)))
        for p in sorted(partitions):
            free = [e for e in range(EXECUTORS) if not self.busy(lineage, p, e)]
            if not free:
                continue
            executor = data.draw(st.sampled_from(free))
            self.open_attempt(data, p, executor, nondeterministic=False, lineage=lineage)
            self.commit_attempt(data, "ok", index=len(self.pending) - 1)
        self.touched = None
        self.finish_batch(data, lineage=lineage)

    @rule(data=st.data())
    def finish_batch(self, data: st.DataObject, lineage: str | None = None) -> None:
        """Spark completes the micro-batch: every partition that ran has a committed attempt
        (partitions may not have run at all); open attempts of it live on as zombies."""
        if lineage is None:
            lineage = data.draw(st.sampled_from(sorted(self.started)))
        batch = self.batch[lineage]
        for p in range(PARTITIONS):
            ran = self.outcomes.get((lineage, batch, p)) or any(
                (a.lineage, a.batch, a.partition) == (lineage, batch, p) for a in self.pending
            )
            if ran and "committed" not in self.outcomes.get((lineage, batch, p), []):
                return  # Spark would retry the task (or the query) first
        self.batch[lineage] = batch + 1

    @rule(
        data=st.data(),
        partition=st.integers(0, PARTITIONS - 1),
        executor=st.integers(0, EXECUTORS - 1),
        back=st.integers(1, 4),
    )
    def late_zombie_opens(
        self, data: st.DataObject, partition: int, executor: int, back: int
    ) -> None:
        """An attempt of an older micro-batch (a task that was running somewhere all along)
        opens now: fenced if its partition has moved on, else it may still commit."""
        lineage = data.draw(st.sampled_from(sorted(self.started)))
        batch = self.batch[lineage] - back
        worker = self.idle_worker(data, executor)
        if batch < 0 or worker is None or self.busy(lineage, partition, executor):
            return
        if "committed" not in self.outcomes.get((lineage, batch, partition), []):
            return  # zombies exist only where an attempt of that batch ran and committed
        self.touched = (lineage, partition)
        tip = self.graph(lineage, partition).tip()
        if tip.version > batch + 1:
            event("stale attempt fenced")
            with pytest.raises(FencedError, match="stale"):
                self.open_task(lineage, partition, batch, executor, worker)
            return
        part = self.open_task(lineage, partition, batch, executor, worker)
        self.check_open(lineage, partition, batch, part)
        attempt = Attempt(
            lineage, partition, batch, executor, worker, part, batch_ops(lineage, batch, partition)
        )
        for key, value, ts in attempt.ops:
            part.store.put(key, value, ts)
        self.pending.append(attempt)

    # -- rules: machines ------------------------------------------------------------------------

    @rule(
        data=st.data(),
        partition=st.integers(0, PARTITIONS - 1),
        executor=st.integers(0, EXECUTORS - 1),
    )
    def crash_during_rebuild(self, data: st.DataObject, partition: int, executor: int) -> None:
        """The process dies while it rebuilds a local copy."""
        lineage = data.draw(st.sampled_from(sorted(self.started)))
        worker = self.idle_worker(data, executor)
        if worker is None or self.busy(lineage, partition, executor):
            return
        self.touched = (lineage, partition)

        def hook(step: str) -> None:
            if step == "during_rebuild":
                raise SimulatedCrash(step)

        faults.set_hook(hook)
        try:
            part = self.open_task(lineage, partition, self.batch[lineage], executor, worker)
            part.abort()  # the local copy was reusable: nothing to crash in
        except SimulatedCrash:
            pass
        finally:
            faults.set_hook(None)

    @rule(executor=st.integers(0, EXECUTORS - 1))
    def lose_local_disk(self, executor: int) -> None:
        """An executor's local disk is wiped (a new node, a full disk cleaned up): its
        workers are gone with the stores they kept."""
        if any(a.executor == executor for a in self.pending):
            return
        for w in range(1, WORKERS):
            discard_all(self.keepers[(executor, w)])
        shutil.rmtree(self.local(executor), ignore_errors=True)

    @rule(
        executor=st.integers(0, EXECUTORS - 1),
        worker=st.integers(1, WORKERS - 1),
        how=st.sampled_from(
            ["dies", "closes idle stores", "settles idle stores", "dies handing over"]
        ),
    )
    def worker_ends(self, executor: int, worker: int, how: str) -> None:
        """A Python worker dies holding the stores it kept (killed, out of memory), closes
        them (idle too long, too many: each leaves its write buffer saved beside its copy),
        settles them (idle a while: flushed and clean), or dies while it hands one over (its
        write buffer saved, ``LOCAL.json`` not yet naming it)."""
        keeper = self.keepers[(executor, worker)]
        if not keeper.held() or any(
            (a.executor, a.worker) == (executor, worker) for a in self.pending
        ):
            return
        event(f"worker {how}")
        if how == "dies":
            discard_all(keeper)
        elif how == "dies handing over":

            def hook(step: str) -> None:
                if step == "during_handoff":
                    raise SimulatedCrash(step)

            faults.set_hook(hook)
            try:
                keeper.close_all()
            except SimulatedCrash:
                pass
            finally:
                faults.set_hook(None)
            discard_all(keeper)
        elif how == "settles idle stores":
            keeper.run_maintenance(settle=True)
        else:
            keeper.close_all()

    @precondition(lambda self: len(self.started) < len(LINEAGES))
    @rule()
    def start_second_query(self) -> None:
        """A new query (a fresh Spark checkpoint) runs on the same root and store name."""
        self.started.add(LINEAGES[1])

    @invariant()
    def touched_partition_is_exact_and_openable(self) -> None:
        if self.touched is not None:
            self.check_partition(*self.touched)
            self.touched = None


#: Examples (runs of the machine): VERSTORE_SIMULATION_EXAMPLES, else 30 for the long run
#: (VERSTORE_LONG_TESTS=1) and 8 for make test and CI.
_LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"
_EXAMPLES = int(os.environ.get("VERSTORE_SIMULATION_EXAMPLES", "30" if _LONG else "8"))
_SEED = int(os.environ.get("VERSTORE_SIMULATION_SEED", "0"))

TestSimulation = seed(_SEED)(Simulation).TestCase
TestSimulation.settings = settings(
    max_examples=_EXAMPLES,
    stateful_step_count=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
