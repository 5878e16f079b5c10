"""The checkpoint simulation made as harsh as production (docs/checkpoint.md, "The simulation
test"): the model, oracle and invariants of ``test_simulation.py``, with attempts that
run in real processes, overlap, die by SIGKILL, write to S3 and meet failing storage.

Every attempt runs in a task process (``simulation_child.py``) from a small pool. A task process
stops at every step of ``verstore.checkpoint.faults`` (and after every changelog a replay
applies) and waits for the parent, so hypothesis decides the interleaving of several attempts'
opens, commits, snapshots and cleanups step by step, and a run stays a function of its seed:

* **concurrency**: an attempt can be left standing at any step while other attempts of the same
  partition (retries, speculative copies, zombies, on other executors) open, commit, snapshot
  and clean up; an open may be overtaken by commits between its listing and its rebuild;
* **real kills**: a task process standing at any commit or open step, or holding an open
  attempt, is killed with SIGKILL (no ``finally`` runs, the OS releases its locks);
* **object storage**: ``test_harsh_s3`` runs against the moto S3 server on loopback;
* **mid-upload failures**: the nth write a command makes to the checkpoint fails after some
  bytes (nothing is published), or after it landed whole (its answer lost);
* **conflicts on conditional create** (S3): a create's answer is lost and the client's retry
  finds the name taken, by that very create, which must then succeed;
* **backend write failures**: ``verstore._core._fail_storage_writes`` fails RocksDB's writes
  from the nth on during an open or a commit (when the extension has the hook), and
  ``test_harsh_full_disk`` runs the checkpoint and the executors' disks on a small tmpfs that a
  ballast file fills to a few kilobytes (root only);
* snapshot uploads and cleanup deletions that raise, wiped executor disks, a second lineage;
* **kept stores**: task processes 1 and 2 keep the stores they commit open between tasks
  (process 0 closes them at commit); another process that opens such a copy has it handed
  over by the keeper's thread of the holder; the work a commit defers runs, step by step, in
  the commit's command; processes die holding kept stores, settled or not.

The invariants are the existing simulation's: every open returns exactly the contents of a
committed commit, the one the winning chain served for the requested version while the open
ran; every kept version rebuilds from scratch to exactly its contents; the next version of
every partition opens (never wedged); a failed commit publishes nothing or a whole changelog.
Besides, an open or commit without an injected fault must succeed, and a task after a failed one
on the same executor must not find the local copy locked or wrong.

``VERSTORE_SIMULATION_EXAMPLES`` and ``VERSTORE_SIMULATION_SEED`` (read by
``test_simulation``) set each test's examples and seed; without the first, ``SIZES``:
make test's and CI's small size, or with ``VERSTORE_LONG_TESTS=1`` a longer one.
``VERSTORE_SIMULATION_EXAMPLES=500
pytest tests/checkpoint/test_simulation_harsh.py`` is a long run; S3 takes about 4 s an example.
Each test prints the events its run covered (hypothesis has no statistics for
``run_state_machine_as_test``): ``pytest -s`` or ``-rA`` shows them.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import verstore
import verstore._core as core
from hypothesis import HealthCheck, seed, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test
from simulation_child import dump
from test_simulation import (
    _EXAMPLES,
    _SEED,
    COMMIT_STEPS,
    EXECUTORS,
    LATEST_TTL_MS,
    OPTIONS,
    PARTITIONS,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    Op,
    Simulation,
    batch_ops,
    model,
)
from verstore.checkpoint import CommitRef, layout
from verstore.checkpoint.layout import ROOT
from verstore.location import Location

pytest_plugins = ["checkpoint_helpers"]

CHILD = Path(__file__).with_name("simulation_child.py")
#: Task processes: at most this many attempts are open or in flight at once.
WORKERS = 3
#: Steps of an open at which a task process can stand (``replay``: after each changelog).
OPEN_STEPS = ("during_rebuild", "replay")
#: Where a task process may stand: mostly nowhere (it runs through), else at one or two steps.
PAUSES_OPEN = [frozenset()] * 3 + [frozenset({s}) for s in OPEN_STEPS] + [frozenset(OPEN_STEPS)]
PAUSES_COMMIT = (
    [frozenset()] * 6
    + [frozenset({s}) for s in COMMIT_STEPS]
    + [
        frozenset({"after_changelog", "during_cleanup"}),
        frozenset({"before_changelog", "before_manifest"}),
    ]
)
#: A command that does not answer within this long is a hang (a wedged lock, a deadlock).
ANSWER_TIMEOUT_S = 120
#: Whether the extension can fail RocksDB writes on demand.
HAS_IO_HOOK = hasattr(core, "_fail_storage_writes")
#: Without ``VERSTORE_SIMULATION_EXAMPLES``, the size per test: the long run's with
#: ``VERSTORE_LONG_TESTS=1``, else the small one of make test and CI.
_SET = "VERSTORE_SIMULATION_EXAMPLES" in os.environ
_LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"
SIZES = {"local": 40, "s3": 8, "full_disk": 20} if _LONG else {"local": 10, "s3": 3, "full_disk": 5}
TMPFS_BYTES = 8 << 20

CHECKPOINT_OPTIONS = {
    "snapshot_interval": OPTIONS.snapshot_interval,
    "min_versions_to_retain": OPTIONS.min_versions_to_retain,
    "orphan_grace_s": OPTIONS.orphan_grace_s,
    "lock_timeout_s": OPTIONS.lock_timeout_s,
    "replay_chunk_records": OPTIONS.replay_chunk_records,
}


# --- task processes ----------------------------------------------------------------------------


class Worker:
    """One task process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> Any:
        out = self.proc.stdout
        assert out is not None
        # One message is outstanding at a time, so nothing waits in the reader's buffer.
        ready, _, _ = select.select([out], [], [], ANSWER_TIMEOUT_S)
        if not ready:
            raise AssertionError(f"a task process did not answer in {ANSWER_TIMEOUT_S} s")
        line = out.readline()
        if not line:
            raise AssertionError(f"a task process died (exit code {self.proc.wait()})")
        return json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


#: The events of the current test: hypothesis reports no statistics for
#: ``run_state_machine_as_test``, so each test prints what its run covered.
EVENTS: Counter[str] = Counter()


def event(name: str) -> None:
    EVENTS[name] += 1
    hypothesis_event(name)


#: The pool, kept across examples (a process start costs more than an example's steps).
_POOL: list[Worker | None] = [None] * WORKERS


def worker(index: int) -> Worker:
    current = _POOL[index]
    if current is None or current.proc.poll() is not None:
        current = _POOL[index] = Worker()
    return current


def kill_worker(index: int) -> None:
    current = _POOL[index]
    _POOL[index] = None
    if current is not None:
        current.kill()


@pytest.fixture(scope="module", autouse=True)
def _stop_pool() -> Iterator[None]:
    yield
    for index in range(WORKERS):
        kill_worker(index)


# --- the simulation ----------------------------------------------------------------------------


@dataclass
class Task:
    """An attempt in a task process (the ``Attempt`` of the base simulation, which its
    ``busy``, ``finish_batch`` and ``lose_local_disk`` read from ``pending``)."""

    lineage: str
    partition: int
    batch: int
    executor: int
    worker: int
    attempt: bytes
    ops: list[Op]
    keys: list[bytes]
    zombie: bool
    phase: str = "opening"  # opening, open, committing, aborting
    pause: set[str] = field(default_factory=set)
    paused_at: str | None = None
    opened: CommitRef | None = None
    durable: bool = False
    faulty: bool = False
    #: What the winning chain served for ``batch``, and its tip, while the open ran.
    servings: set[CommitRef] = field(default_factory=set)
    tips: set[int] = field(default_factory=set)
    steps: list[str] = field(default_factory=list)


def error_is(error: list[Any], *names: str) -> bool:
    return any(name in error[0] for name in names)


#: What the messages of the injected faults say.
FAULT_MARKS = ("simulated:", "injected I/O error", "No space left", "os error 28")


def caused_by_fault(error: list[Any]) -> bool:
    return any(mark in error[1] or mark in error[2] for mark in FAULT_MARKS)


class HarshSimulation(Simulation):
    """The base simulation's model and invariants; its in-process task rules are replaced by
    rules that run attempts in task processes, step by step."""

    def __init__(self, kind: str, storage: dict[str, Any] | None) -> None:
        super().__init__()
        self.kind = kind
        self.storage = storage
        self.disk: Path | None = None
        self.ballast: Path | None = None
        self.full = False
        self.free_bytes = 0
        if kind == "s3":
            assert storage is not None
            self.uri = f"s3://bucket/{uuid.uuid4().hex}"
            self.location = Location.resolve(self.uri, storage)
        elif kind == "full_disk":
            self.disk = self.dir / "disk"
            self.disk.mkdir()
            mount = _mount(self.disk)
            assert mount is None, mount
            self.ballast = self.disk / "ballast"
            self.uri = str(self.disk / "root")
            self.location = Location.resolve(self.uri)
        else:
            self.uri = str(self.root)
        self._dumps: dict[tuple[str, int, CommitRef, tuple[bytes, ...]], Any] = {}
        #: Task processes that may keep a store open (they committed one with a keeper).
        self.keeping: set[int] = set()
        #: (lineage, partition, version) of snapshots whose task died between writing the
        #: manifest and checking that every file it names is still there.
        for index in range(WORKERS):
            worker(index).send({"cmd": "reset"})
            assert worker(index).receive() == {"done": None}

    def teardown(self) -> None:
        try:
            for task in list(self.pending):
                kill_worker(task.worker)
            self.pending.clear()
            self.free_disk()
            super().teardown()
        finally:
            if self.disk is not None:
                subprocess.run(["umount", "-l", str(self.disk)], check=False)
                shutil.rmtree(self.dir, ignore_errors=True)

    # The base simulation's in-process task rules: replaced by the rules below.
    open_attempt = None  # type: ignore[assignment]
    commit_attempt = None  # type: ignore[assignment]
    abort_attempt = None  # type: ignore[assignment]
    late_zombie_opens = None  # type: ignore[assignment]
    crash_during_rebuild = None  # type: ignore[assignment]
    worker_ends = None  # type: ignore[assignment]
    reclaim = None  # type: ignore[assignment]  # the task processes reclaim ("reclaim")

    def local(self, executor: int) -> Path:
        if self.disk is not None:
            return self.disk / f"executor-{executor}"
        return super().local(executor)

    # -- the model ------------------------------------------------------------------------------

    def expected_dump(self, task: Task, ref: CommitRef) -> Any:
        key = (task.lineage, task.partition, ref, tuple(task.keys))
        if key not in self._dumps:
            ops = [] if ref == ROOT else self.history[(task.lineage, task.partition)][ref]
            store = model(task.lineage)
            for k, value, ts in ops:
                store.put(k, value, ts)
            self._dumps[key] = json.loads(json.dumps(dump(store, task.keys)))
        return self._dumps[key]

    def observe(self, task: Task) -> None:
        """Records what the winning chain serves for an open in flight, as it changes."""
        try:
            graph = self.graph(task.lineage, task.partition)
            task.tips.add(graph.tip().version)
            task.servings.add(graph.serving(task.batch))
        except verstore.VerstoreError:
            pass  # fenced or cleaned up: the open must then fail, checked at its end

    def record_commit(self, task: Task) -> None:
        """The changelog is written: the commit is durable, whatever happens to the task."""
        key = (task.lineage, task.partition)
        assert task.opened is not None
        base = [] if task.opened == ROOT else self.history[key][task.opened]
        self.history.setdefault(key, {})[CommitRef(task.batch + 1, task.attempt)] = base + task.ops
        self.outcomes.setdefault((task.lineage, task.batch, task.partition), []).append("committed")
        task.durable = True
        event("commit durable")
        for other in self.pending:
            if other.phase == "opening":
                self.observe(other)

    # -- driving task processes -----------------------------------------------------------------

    def drive(self, task: Task) -> None:
        """Runs ``task``'s command until it stands at a step it should pause at, or ends."""
        proc = worker(task.worker)
        while True:
            message = proc.receive()
            if "at" in message:
                step = message["at"]
                task.steps.append(step)
                if step == "after_changelog":
                    self.record_commit(task)
                if step in task.pause:
                    task.pause.discard(step)
                    task.paused_at = step
                    event(f"paused at {step}")
                    return
                proc.send({"cmd": "go"})
                continue
            task.paused_at = None
            self.ended(task, message.get("done"), message.get("error"))
            return

    def ended(self, task: Task, done: Any, error: list[Any] | None) -> None:
        phase = task.phase
        if error is not None:
            event(f"{phase} failed: {error[0][0]}")
        if phase == "opening":
            if error is None:
                self.opened(task, done)
            else:
                self.open_failed(task, error)
        elif phase == "committing":
            self.pending.remove(task)
            self.commit_ended(task, error)
        else:
            self.pending.remove(task)
            self.outcomes.setdefault((task.lineage, task.batch, task.partition), []).append(
                "failed"
            )
            assert error is None or (self.full and caused_by_fault(error)), (
                f"an abort failed, not by an injected fault: {error}"
            )

    def opened(self, task: Task, done: Any) -> None:
        """The invariant of every open, with the chain as it was while the open ran."""
        ref = CommitRef(done["opened"][0], bytes.fromhex(done["opened"][1]))
        known = self.history.get((task.lineage, task.partition), {})
        assert ref == ROOT or ref in known, f"opened {ref}, which was never committed"
        assert ref.version <= task.batch
        self.observe(task)
        assert ref in task.servings, f"opened {ref}, the chain served {task.servings}"
        assert done["dump"] == self.expected_dump(task, ref), f"open of {ref} returned other state"
        task.opened = ref
        task.phase = "open"
        event(f"open: {done['how']}")

    def open_failed(self, task: Task, error: list[Any]) -> None:
        self.pending.remove(task)
        self.outcomes.setdefault((task.lineage, task.batch, task.partition), []).append("failed")
        if error_is(error, "FencedError"):
            assert task.zombie and max(task.tips) > task.batch + 1, error
            event("stale attempt fenced")
            return
        assert not error_is(error, "StoreLockedError"), (
            f"the local copy of executor {task.executor} stayed locked after an earlier task "
            f"failed there: {error[1]}"
        )
        assert task.faulty and caused_by_fault(error), (
            f"an open failed, not by an injected fault: {error[1]}\n{error[2]}"
        )

    def commit_ended(self, task: Task, error: list[Any] | None) -> None:
        if task.worker != 0 and error is None:
            self.keeping.add(task.worker)
        if task.durable:
            # After the commit point, failures are logged and made up for later, never raised
            # into the task (docs/checkpoint.md, "Commit"): Spark would retry a durable commit.
            assert error is None, f"a commit raised after its commit point: {error[1]}\n{error[2]}"
            return
        self.outcomes.setdefault((task.lineage, task.batch, task.partition), []).append("failed")
        assert error is not None, "a commit returned without writing its changelog"
        assert not error_is(error, "StoreLockedError"), error
        assert task.faulty and caused_by_fault(error), (
            f"a commit failed, not by an injected fault: {error[1]}\n{error[2]}"
        )
        # A commit that raised wrote nothing under its name, or all of it.
        assert task.opened is not None
        ref = CommitRef(task.batch + 1, task.attempt)
        files = self.graph(task.lineage, task.partition).files
        path = files.changelog(ref, task.opened)
        if self.location.exists(path):
            data = self.location.read_bytes(path)
            try:
                core.verify_changelog(data, path)
            except verstore.CorruptionError as e:
                raise AssertionError(
                    f"a commit that failed ({error[1]}) published a damaged changelog "
                    f"{path} ({len(data)} bytes): {e}"
                ) from None
            event("commit raised but landed whole")
            self.record_commit(task)

    def start(self, task: Task, command: dict[str, Any]) -> None:
        worker(task.worker).send(command)
        self.drive(task)

    def free_worker(self, data: st.DataObject | None = None) -> int | None:
        busy = {task.worker for task in self.pending}
        free = [index for index in range(WORKERS) if index not in busy]
        if not free:
            return None
        return data.draw(st.sampled_from(free), label="worker") if data else free[0]

    def faults(self, data: st.DataObject, steps: tuple[str, ...]) -> tuple[dict[str, Any], bool]:
        """Draws the faults of one command: ``(plan, faulty)``."""
        commit = "during_snapshot_upload" in steps
        kinds = ["none", "none", "none", "stream"]
        if HAS_IO_HOOK:
            kinds.append("io")
        if commit:
            kinds += ["stream", "snapshot_fails", "cleanup_fails"]
        if self.kind == "s3":
            kinds.append("conflict")
        kind = data.draw(st.sampled_from(kinds), label="fault")
        event(f"{'commit' if commit else 'open'} fault: {kind}")
        if kind == "conflict":
            # A conditional create's answer lost, its retry finding the name taken by itself:
            # no fault the task may see (the create recognizes its own bytes).
            return {"conflict": data.draw(st.integers(1, 4), label="create")}, self.full
        if kind == "stream":
            nth = data.draw(st.sampled_from([1, 1, 2, 3, 4, 5, 6, 7, 8]), label="stream")
            after = data.draw(st.integers(0, 90), label="bytes")
            return {"stream": [nth, after]}, True
        if kind == "io":
            return {"io_after": data.draw(st.integers(0, 4), label="writes")}, True
        if kind == "snapshot_fails":
            return {"raise_at": {"during_snapshot_upload": "simulated: upload failed"}}, True
        if kind == "cleanup_fails":
            return {"raise_at": {"during_cleanup": "simulated: delete failed"}}, True
        return {}, self.full

    # -- rules: tasks -------------------------------------------------------------------------

    @rule(
        data=st.data(),
        partition=st.integers(0, PARTITIONS - 1),
        executor=st.integers(0, EXECUTORS - 1),
        back=st.sampled_from([0, 0, 0, 1, 2]),
        nondeterministic=st.booleans(),
        pause=st.sampled_from(PAUSES_OPEN),
    )
    def open_task(
        self,
        data: st.DataObject,
        partition: int,
        executor: int,
        back: int,
        nondeterministic: bool,
        pause: frozenset[str],
    ) -> None:
        """A task opens its partition in a task process (a zombie of an older batch with
        ``back``) and applies its input; it may stop at a rebuild or replay step."""
        self.start_open(data, partition, executor, back, nondeterministic, pause)

    def start_open(
        self,
        data: st.DataObject,
        partition: int,
        executor: int,
        back: int,
        nondeterministic: bool,
        pause: frozenset[str],
        lineage: str | None = None,
    ) -> Task | None:
        if lineage is None:
            lineage = data.draw(st.sampled_from(sorted(self.started)), label="lineage")
        index = self.free_worker(data)
        batch = self.batch[lineage] - back
        if index is None or batch < 0 or self.busy(lineage, partition, executor):
            return None
        if back and "committed" not in self.outcomes.get((lineage, batch, partition), []):
            return None  # zombies exist only where an attempt of that batch ran and committed
        plan, faulty = self.faults(data, OPEN_STEPS)
        attempt = layout.new_attempt()
        ops = batch_ops(lineage, batch, partition)
        if nondeterministic:
            marker = b"m" + attempt[:8].hex().encode()
            self.markers.setdefault((lineage, partition), []).append(marker)
            ops.append((marker, b"x", batch * 12))
        task = Task(
            lineage,
            partition,
            batch,
            executor,
            index,
            attempt,
            ops,
            self.keys(lineage, partition),
            zombie=back > 0,
            pause=set(pause),
            faulty=faulty,
        )
        self.observe(task)
        self.pending.append(task)
        self.touched = (lineage, partition)
        self.start(
            task,
            {
                "cmd": "open",
                "attempt": attempt.hex(),
                "uri": self.uri,
                "storage_options": self.storage,
                "store": STORE,
                "partition": partition,
                "version": batch,
                "local_dir": str(self.local(executor)),
                "lineage": lineage,
                "retention": RETENTION_MS,
                "interval": SEGMENT_MS,
                "latest_ttl_ms": LATEST_TTL_MS[lineage],
                # A store with a TTL drops what it expired before its commit, now and then.
                "reclaim": LATEST_TTL_MS[lineage] is not None and batch % 3 == 0,
                "options": CHECKPOINT_OPTIONS,
                "num_partitions": PARTITIONS,
                "keys": [k.hex() for k in task.keys],
                "ops": [[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in ops],
                "faults": plan,
                "keep": index != 0,
            },
        )
        return task

    @precondition(lambda self: any(t.phase == "open" for t in self.pending))
    @rule(data=st.data(), pause=st.sampled_from(PAUSES_COMMIT))
    def commit_task(
        self,
        data: st.DataObject,
        pause: frozenset[str],
        task: Task | None = None,
    ) -> None:
        """An open attempt commits; its process may stop at any step of the commit."""
        if task is None:
            ready = [t for t in self.pending if t.phase == "open"]
            task = data.draw(st.sampled_from(ready), label="task")
        plan, faulty = self.faults(data, tuple(COMMIT_STEPS))
        task.phase, task.pause, task.faulty = "committing", set(pause), faulty
        self.touched = (task.lineage, task.partition)
        settle = data.draw(st.sampled_from([False, False, True]), label="settle")
        command = {"cmd": "commit", "attempt": task.attempt.hex(), "faults": plan}
        self.start(task, command | {"settle": settle})

    @rule(data=st.data(), partitions=st.sets(st.integers(0, PARTITIONS - 1)))
    def run_batch(self, data: st.DataObject, partitions: set[int]) -> None:
        """A whole micro-batch runs (while other attempts may stand at any step): each
        partition in ``partitions`` runs one task that opens and commits, then Spark moves on
        if they all committed. A task may stay standing at a commit step: past the commit
        point, the next batches run while it snapshots or cleans up."""
        lineage = data.draw(st.sampled_from(sorted(self.started)), label="lineage")
        for p in sorted(partitions):
            free = [e for e in range(EXECUTORS) if not self.busy(lineage, p, e)]
            if not free or self.free_worker() is None:
                continue
            executor = data.draw(st.sampled_from(free), label="executor")
            task = self.start_open(data, p, executor, 0, False, frozenset(), lineage)
            if task is not None and task.phase == "open":
                pause = data.draw(st.sampled_from(PAUSES_COMMIT), label="pause")
                self.commit_task(data, pause, task=task)
        self.touched = None
        self.finish_batch(data, lineage=lineage)

    @precondition(lambda self: any(t.phase == "open" for t in self.pending))
    @rule(data=st.data(), kill=st.sampled_from([False, False, True]))
    def abort_task(self, data: st.DataObject, kill: bool) -> None:
        """A task fails before its commit: by an exception, or its process is killed."""
        ready = [t for t in self.pending if t.phase == "open"]
        task = data.draw(st.sampled_from(ready), label="task")
        self.touched = (task.lineage, task.partition)
        if kill:
            self.kill(task)
            return
        task.phase = "aborting"
        self.start(task, {"cmd": "abort", "attempt": task.attempt.hex()})

    @precondition(lambda self: any(t.paused_at is not None for t in self.pending))
    @rule(data=st.data(), kill=st.sampled_from([False, False, True]))
    def resume_task(self, data: st.DataObject, kill: bool) -> None:
        """A task standing at a step goes on (to its next pause or its end), or its process is
        killed there."""
        paused = [t for t in self.pending if t.paused_at is not None]
        task = data.draw(st.sampled_from(paused), label="task")
        self.touched = (task.lineage, task.partition)
        if kill:
            self.kill(task)
            return
        worker(task.worker).send({"cmd": "go"})
        self.drive(task)

    @precondition(lambda self: self.keeping - {t.worker for t in self.pending})
    @rule(data=st.data(), how=st.sampled_from(["dies", "settles"]))
    def idle_worker_ends(self, data: st.DataObject, how: str) -> None:
        """A task process without a task dies with the stores it keeps (settled or not), or
        settles them."""
        idle = sorted(self.keeping - {t.worker for t in self.pending})
        index = data.draw(st.sampled_from(idle), label="worker")
        event(f"idle worker {how}")
        if how == "dies":
            kill_worker(index)
            self.keeping.discard(index)
        else:
            # Settling runs the deferred work of the stores' last commits first, at its steps.
            proc = worker(index)
            proc.send({"cmd": "settle"})
            while "at" in (message := proc.receive()):
                event(f"settling passes {message['at']}")
                proc.send({"cmd": "go"})
            assert message == {"done": None}

    @rule(executor=st.integers(0, EXECUTORS - 1))
    def lose_local_disk(self, executor: int) -> None:
        """A lost disk takes the node's processes along: the idle task processes (which may
        keep stores on it) are killed first."""
        if any(task.executor == executor for task in self.pending):
            return
        for index in range(WORKERS):
            if not any(task.worker == index for task in self.pending):
                kill_worker(index)
                self.keeping.discard(index)
        super().lose_local_disk(executor)

    def kill(self, task: Task) -> None:
        """SIGKILL: no ``finally`` block runs; the OS closes the process's files and locks."""
        event(f"killed at {task.paused_at or 'open attempt'}")
        kill_worker(task.worker)
        self.keeping.discard(task.worker)
        self.pending.remove(task)
        if not task.durable:
            self.outcomes.setdefault((task.lineage, task.batch, task.partition), []).append(
                "failed"
            )

    # -- rules: disks ---------------------------------------------------------------------------

    @precondition(lambda self: self.ballast is not None)
    @rule(free=st.sampled_from([0, 4096, 65536, 262144]))
    def fill_disk(self, free: int) -> None:
        """The executors' and the checkpoint's disk fills up, leaving ``free`` bytes."""
        assert self.ballast is not None and self.disk is not None
        self.free_bytes = free
        self.ballast.unlink(missing_ok=True)
        stat = os.statvfs(self.disk)
        size = max(0, stat.f_bavail * stat.f_frsize - free)
        with open(self.ballast, "wb") as out:
            try:
                out.write(bytes(size))
            except OSError:
                pass  # full
        self.full = True
        event("disk full")
        for task in self.pending:
            task.faulty = True

    @precondition(lambda self: self.full)
    @rule()
    def free_disk(self) -> None:
        """Space is freed again."""
        if self.ballast is not None:
            self.ballast.unlink(missing_ok=True)
        self.full = False

    def check_partition(self, lineage: str, partition: int) -> None:
        # The checks open versions in scratch directories elsewhere; a write-open may still
        # record the lineage's settings on the full disk.
        full = self.full
        if full and self.ballast is not None:
            self.ballast.unlink(missing_ok=True)
        try:
            super().check_partition(lineage, partition)
        finally:
            if full:
                self.fill_disk(self.free_bytes)


def _settings(kind: str) -> settings:
    return settings(
        max_examples=_EXAMPLES if _SET else SIZES[kind],
        stateful_step_count=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def _run(kind: str, storage: dict[str, Any] | None = None) -> None:
    def factory() -> HarshSimulation:
        return HarshSimulation(kind, storage)

    EVENTS.clear()
    try:
        run_state_machine_as_test(seed(_SEED)(factory), settings=_settings(kind))
    finally:
        print(f"{kind}: {', '.join(f'{name} {n}' for name, n in sorted(EVENTS.items()))}")


def test_harsh_local() -> None:
    """Concurrent task processes, SIGKILLs, mid-write and backend failures; a local root."""
    _run("local")


def test_harsh_s3(s3_server: dict[str, Any]) -> None:
    """The same against S3 (moto on loopback): uploads that fail half way."""
    _run("s3", s3_server)


def _mount(path: Path) -> str | None:
    """Mounts a small tmpfs at ``path``; returns why it cannot (None: mounted)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    try:
        mount = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as e:
        return f"cannot run mount: {e}"
    if mount.returncode != 0:
        return f"cannot mount a tmpfs: {mount.stderr.strip()}"
    return None


def test_harsh_full_disk(tmp_path: Path) -> None:
    """The same with the checkpoint and the executors' disks on a tmpfs that fills up."""
    why = _mount(tmp_path)
    if why is not None:
        pytest.skip(why)
    subprocess.run(["umount", str(tmp_path)], check=True)
    _run("full_disk")


__all__ = ["HarshSimulation", "Task", "Worker"]
