"""The checkpoint simulation of a query that changes while it runs (docs/checkpoint.md, "The
simulation test"): its partition count (``verstore.checkpoint.repartition``, as
``repartition_store`` runs it) and its value columns (a column added, then one widened), amid
the events of ``test_simulation.py``: retried tasks, crashes at every step of a
commit and of a repartition, zombies of older micro-batches and of the old partition count,
processes that remember old settings, lost executor disks.

The model is the query's committed writes in order; keys are routed by a hash of their bytes
over the count in force. The invariants, checked after every step:

* every partition of the partitioning in force reads, at the query's current version, exactly
  the model's versions of its keys, decoded in the newest column layout (older values with the
  added column null and the widened one cast);
* a version before the last repartition still reads exactly what it did, from its own
  partitioning;
* the change feed holds exactly the committed writes of every micro-batch, across repartitions;
* a repartition that crashed before its publish changed nothing; after it, everything moved;
* of two repartitions that publish at once (a conflict on the record's conditional create),
  exactly one wins and the other says so;
* the next micro-batch can always be opened with the count in force; a stale attempt, or an
  attempt with the old count, is refused, never the query.

``VERSTORE_SIMULATION_EXAMPLES`` and ``VERSTORE_SIMULATION_SEED`` size and seed the run, as
for ``test_simulation.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
from hypothesis import HealthCheck, event, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from repartition_helpers import run_in_process
from verstore._core import TUPLE_ENCODING, encode_rows
from verstore.changes import partitions_of_changes, read_changes
from verstore.checkpoint import CheckpointOptions, PartitionStore, faults
from verstore.checkpoint import repartition as steps
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.values import ValueCodec
from verstore.committed import read_partition, resolve
from verstore.exceptions import FencedError, IncompatibleConfigError
from verstore.location import Location

STORE, LINEAGE = "quotes", "query"
RETENTION_MS = 10**9  # nothing expires: the model is every committed write
EXECUTORS = 3
KEYS = [f"k{i}" for i in range(9)]
OPTIONS = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=50, lock_timeout_s=0)
KEY_SCHEMA = pa.schema([("k", pa.string())])
#: The value columns over time: a column added, then a column widened.
VALUE_SCHEMAS = [
    pa.schema([("price", pa.int32())]),
    pa.schema([("price", pa.int32()), ("venue", pa.string())]),
    pa.schema([("price", pa.int64()), ("venue", pa.string())]),
]
COMMIT_STEPS = faults.COMMIT_STEPS
DURABLE_FROM = COMMIT_STEPS.index("after_changelog")
REPARTITION_STEPS = (
    "repartition_marked",
    "during_rebuild",
    "repartition_writing",
    "after_changelog",
    "repartition_before_publish",
    "repartition_published",
)


class SimulatedCrash(BaseException):
    """The process died at a step (not an ``Exception``: nothing may swallow it)."""


def layout(index: int) -> ColumnLayout:
    return ColumnLayout.of(TUPLE_ENCODING, KEY_SCHEMA, VALUE_SCHEMAS[index])


def route(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


def key_bytes(key: str) -> bytes:
    return bytes(encode_rows(pa.record_batch([pa.array([key])], schema=KEY_SCHEMA))[0].as_py())


def batch_writes(batch: int, layout_index: int) -> list[tuple[str, dict[str, Any] | None, int]]:
    """The writes of micro-batch ``batch``: the same for every attempt."""
    rng = random.Random(batch)
    out = []
    for _ in range(rng.randint(0, 6)):
        value: dict[str, Any] | None = {"price": rng.randint(-(2**31), 2**31 - 1)}
        if layout_index >= 1:
            value["venue"] = rng.choice(["X", None])  # type: ignore[index]
        if rng.random() < 0.2:
            value = None
        out.append((rng.choice(KEYS), value, max(0, batch * 10 + rng.randint(-25, 9))))
    return out


class Simulation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = Path(tempfile.mkdtemp(prefix="verstore-repartition-", dir=shm))
        self.location = Location.resolve(str(self.dir / "root"))
        self.partitions = 3
        self.layout = 0
        self.batch = 0
        #: The model: committed writes per batch, in order.
        self.committed: dict[int, list[tuple[str, dict[str, Any] | None, int]]] = {}
        #: version -> what every key read then (checked again after later repartitions).
        self.seen: dict[int, dict[str, Any]] = {}

    def teardown(self) -> None:
        faults.set_hook(None)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the store ------------------------------------------------------------------------------

    def open(self, partition: int, version: int, local: Path, **kw: Any) -> PartitionStore:
        return PartitionStore.open(
            self.location, STORE, partition, version, local, lineage=LINEAGE,
            history_retention_ms=RETENTION_MS, options=OPTIONS, **kw,
        )  # fmt: skip

    def task(self, partition: int, executor: int, crash: str | None) -> bool:
        """One attempt of the current batch on ``partition``; whether it committed."""
        part = self.open(
            partition,
            self.batch,
            self.dir / f"executor-{executor}",
            num_partitions=self.partitions,
            columns=layout(self.layout),
        )
        writes = [
            w
            for w in batch_writes(self.batch, self.layout)
            if route(key_bytes(w[0]), self.partitions) == partition
        ]
        if writes:
            codec = ValueCodec(part.settings)
            keys = pa.array([key_bytes(k) for k, _, _ in writes], pa.binary())
            rows = [v or dict.fromkeys(VALUE_SCHEMAS[self.layout].names) for _, v, _ in writes]
            values = codec.encode(pa.RecordBatch.from_pylist(rows, VALUE_SCHEMAS[self.layout]))
            values = pa.array(
                [
                    None if v is None else b
                    for (_, v, _), b in zip(writes, values.to_pylist(), strict=True)
                ],
                pa.binary(),
            )
            part.store.put_batch(keys, values, pa.array([t for _, _, t in writes], pa.int64()))
        return self.commit(part, crash)

    def commit(self, part: PartitionStore, crash: str | None) -> bool:
        def hook(step: str) -> None:
            if step == crash:
                raise SimulatedCrash(step)

        faults.set_hook(hook)
        try:
            part.commit()
            return True
        except SimulatedCrash as e:
            return COMMIT_STEPS.index(str(e)) >= DURABLE_FROM
        finally:
            faults.set_hook(None)

    # -- the model ------------------------------------------------------------------------------

    def expected(self, upto_batch: int) -> dict[str, Any]:
        """Every key's versions after the batches below ``upto_batch``, as the newest layout
        reads them (oldest first: value, valid from, valid to)."""
        model = verstore.VersionedStore.in_memory(history_retention_ms=RETENTION_MS)
        for b in range(upto_batch):
            for key, value, t in self.committed.get(b, []):
                full = (
                    None
                    if value is None
                    else {"price": value["price"], "venue": value.get("venue")}
                )
                model.put(key.encode(), None if full is None else json.dumps(full).encode(), t)
        return {
            k: [
                (json.loads(r.value), r.timestamp, r.valid_to)
                for r in model.versions(k.encode(), ascending=True)
            ]
            for k in KEYS
        }

    def read(self, version: int) -> dict[str, Any]:
        """Every key's versions at ``version``, through the reader, across its partitioning."""
        ref, stored = resolve(self.location, STORE, LINEAGE)
        out: dict[str, Any] = {k: [] for k in KEYS}
        for p in stored.partitioning_at(version).partitions(ref.files):
            for batch in read_partition(ref, stored, p, version=version, history=True):
                for r in batch.to_pylist():
                    value = {"price": r["price"], "venue": r.get("venue")}
                    out[r["k"]].append((value, r["valid_from"], r["valid_to"]))
        return out

    # -- rules ----------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        crashes=st.lists(st.sampled_from([None, None, None, *COMMIT_STEPS]), max_size=3),
    )
    def run_batch(self, data: st.DataObject, crashes: list[str | None]) -> None:
        """A micro-batch: every partition's task commits, some after crashed attempts."""
        for p in range(self.partitions):
            if not batch_writes(self.batch, self.layout) and data.draw(st.booleans()):
                continue  # a no-data batch may run no task here
            for crash in [*crashes, None]:
                if self.task(p, data.draw(st.integers(0, EXECUTORS - 1)), crash):
                    break
                event("task crashed before its commit")
        self.committed[self.batch] = batch_writes(self.batch, self.layout)
        self.batch += 1

    @rule(executor=st.integers(0, EXECUTORS - 1), back=st.integers(0, 2), old_count=st.booleans())
    def zombie(self, executor: int, back: int, old_count: bool) -> None:
        """An attempt of an older micro-batch, or with the count before the last repartition."""
        batch = self.batch - 1 - back
        count = self.partitions + 1 if old_count else self.partitions
        if batch < 0:
            return
        try:
            part = self.open(
                0, batch, self.dir / f"executor-{executor}",
                num_partitions=count, columns=layout(self.layout),
            )  # fmt: skip
        except (FencedError, IncompatibleConfigError):
            event("zombie refused")
            return
        # What may open: the right count, at or above the repartition, not behind the tip.
        assert not old_count, "an attempt with the old count opened for writing"
        assert batch >= part.settings.partitioning.version, "a write below the repartition"
        part.abort()

    @rule(
        count=st.integers(1, 5),
        crash=st.sampled_from([None, None, None, None, *REPARTITION_STEPS]),
        rival=st.sampled_from([None, None, None, 1, 2, 3, 4, 5]),
    )
    def repartition(self, count: int, crash: str | None, rival: int | None) -> None:
        """The query stops; its store moves to ``count`` partitions (or a crash stops that).
        With a ``rival``, another repartition (to that count) runs whole and publishes just
        before this one publishes, after this one checked that none had: a conflict on the
        record's conditional create, which exactly one of them wins."""
        if self.batch == 0:
            return
        before, older = self.read(self.batch), self.read(self.batch - 1)
        rival_moved: list[bool] = []

        def hook(step: str) -> None:
            if step == "repartition_before_publish" and rival is not None and not rival_moved:
                faults.set_hook(None)
                try:
                    rival_moved.append(self.move(rival))
                finally:
                    faults.set_hook(hook)
            if step == crash:
                raise SimulatedCrash(step)

        faults.set_hook(hook)
        try:
            moved = self.move(count)
        except SimulatedCrash:
            moved = crash == "repartition_published"
        except IncompatibleConfigError as e:
            assert rival_moved == [True], f"a repartition failed with no rival: {e}"
            assert "another repartition published partitioning" in str(e)
            event("a concurrent repartition won the publish")
            moved = False
        finally:
            faults.set_hook(None)
        assert not (moved and rival_moved == [True]), "two repartitions both published"
        for won, to in ((moved, count), (rival_moved == [True], rival)):
            if won and to is not None and to != self.partitions:
                event("repartitioned")
                self.seen[self.batch - 1] = older
                self.partitions = to
        assert self.read(self.batch) == before

    def move(self, count: int) -> bool:
        plan = steps.plan(self.location, STORE, LINEAGE, self.batch, count)
        if plan is None:
            return False
        run_in_process(self.location, plan, route, str(self.dir / "scratch"))
        return True

    @rule()
    def change_columns(self) -> None:
        """The query restarts with a value column added, then one widened."""
        if self.layout + 1 < len(VALUE_SCHEMAS):
            self.layout += 1
            event(f"columns changed to layout {self.layout}")

    @rule(executor=st.integers(0, EXECUTORS - 1))
    def lose_local_disk(self, executor: int) -> None:
        shutil.rmtree(self.dir / f"executor-{executor}", ignore_errors=True)

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def state_is_exact(self) -> None:
        if self.batch == 0:
            return
        assert self.read(self.batch) == self.expected(self.batch)
        for version, what in self.seen.items():
            assert self.read(version) == what

    @invariant()
    def change_feed_is_exact(self) -> None:
        if self.batch == 0:
            return
        ref, stored = resolve(self.location, STORE, LINEAGE)
        got: dict[int, list[tuple[str, int]]] = {}
        for partitioning, p in partitions_of_changes(ref, stored, None, None):
            for batch in read_changes(ref, stored, p, partitioning=partitioning):
                for r in batch.to_pylist():
                    got.setdefault(r["batch_id"], []).append((r["k"], r["valid_from"]))
        want = {b: sorted((k, t) for k, _, t in w) for b, w in self.committed.items() if w}
        assert {b: sorted(v) for b, v in got.items()} == want

    @invariant()
    def next_batch_opens(self) -> None:
        for p in range(self.partitions):
            scratch = Path(tempfile.mkdtemp(dir=self.dir))
            self.open(
                p, self.batch, scratch, num_partitions=self.partitions, columns=layout(self.layout)
            ).abort()
            shutil.rmtree(scratch)


_LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"
_EXAMPLES = int(os.environ.get("VERSTORE_SIMULATION_EXAMPLES", "30" if _LONG else "6"))
_SEED = int(os.environ.get("VERSTORE_SIMULATION_SEED", "0"))

TestRepartitionSimulation = seed(_SEED)(Simulation).TestCase
TestRepartitionSimulation.settings = settings(
    max_examples=_EXAMPLES,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
pytest.register_assert_rewrite(__name__)
