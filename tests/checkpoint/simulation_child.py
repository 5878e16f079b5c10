"""A task process of the harsh checkpoint simulation (``test_simulation_harsh.py``).

It runs partition-store attempts for the parent, one command at a time, so that the parent can
interleave several processes' opens, commits, snapshots and cleanups step by step and kill any
of them with SIGKILL at any step. Commands arrive as one JSON object per line on stdin; every
event goes back as one JSON object per line on stdout:

* ``{"at": step}`` at every step of ``verstore.checkpoint.faults`` that a command reaches (not
  the keeper's thread's, which hands stores over on its own) and after every changelog a
  replay applied (``"replay"``): the process then waits for ``{"cmd": "go"}`` (or its kill);
* ``{"done": result}`` or ``{"error": [class names, message, traceback]}`` when a command ends.

Commands: ``open`` (an attempt: open, dump what it opened, apply the batch's writes), ``commit``,
``abort``, ``settle``, ``reset``. With ``"keep": true`` an open takes the store from the process's
keeper when it holds it, and the commit leaves the store there (``verstore.checkpoint.kept``);
the work the commit defers then runs right after it, inside the command, so that it stops at
its steps too (and, with ``"settle": true``, the store is settled: flushed and clean); its
failures are not the commit's, as in the keeper's thread. The keeper's own thread hands kept
stores over to other processes that ask. ``settle`` settles every kept store of the process.
``open`` and ``commit`` carry the faults to inject while they run:

* ``raise_at``: step -> message, an ``OSError`` raised at that step;
* ``stream``: ``[nth, after]``, the nth write the command makes to the checkpoint fails after
  ``after`` bytes (a connection lost mid-upload: nothing is published), or, for a write no
  longer than that, after it landed whole (its answer lost);
* ``conflict``: ``nth``, on object storage the nth conditional create's answer is lost and the
  client's retry finds the name taken, by this very write;
* ``io_after``: ``verstore._core._fail_storage_writes(io_after)`` for the command's duration.

A failed attempt's exception is kept for the life of the process: nothing guarantees that a
failed task's frames (and the store objects in them) are collected before the next task, so a
release must not depend on the garbage collector.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import traceback
from typing import IO, Any

import verstore._core as core
from forwarding_storage import ForwardingStorage
from keeper_helpers import discard_all
from verstore.checkpoint import CheckpointOptions, PartitionStore, faults, layout
from verstore.checkpoint.kept import Keeper
from verstore.location import Location
from verstore.storage import ObjectStorage, Storage

_plan: dict[str, Any] = {}
_leaked: list[Any] = []
_parts: dict[str, PartitionStore] = {}
#: Stores this process keeps open between its tasks; handoffs run in the keeper's thread, the
#: deferred commit work in the commit command (``run``).
_keeper = Keeper(idle_s=float("inf"), settle_s=float("inf"), poll_s=0.005, maintain=False)


def send(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def receive() -> Any:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def hook(step: str) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # the keeper's thread handing a store over: not a command the parent drives
    send({"at": step})
    command = receive()
    assert command == {"cmd": "go"}, command
    message = _plan.get("raise_at", {}).get(step)
    if message is not None:
        raise OSError(message)


def progress(phase: str, done: int, total: int) -> None:
    hook(phase)


class CutSource:
    """A local file being uploaded that fails once ``after`` bytes were read from it (a
    connection lost mid-upload: object storage aborts the upload, a local write removes its
    temporary file)."""

    def __init__(self, inner: Any, after: int) -> None:
        self._inner = inner
        self._room = after

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if len(data) > self._room:
            self._room = 0
            raise OSError("simulated: connection lost mid-upload")
        self._room -= len(data)
        return bytes(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _armed() -> int | None:
    """The bytes after which this write fails, if the plan picks it (its nth write)."""
    plan = _plan.get("stream")
    if plan is None:
        return None
    plan[0] -= 1
    return int(plan[1]) if plan[0] == 0 else None


def _conflicted() -> bool:
    """Whether the plan makes this conditional create meet its name taken (its nth)."""
    plan = _plan.get("conflict")
    if plan is None:
        return False
    plan[0] -= 1
    return bool(plan[0] == 0)


class FlakyStorage(ForwardingStorage):
    """The checkpoint's storage, whose writes the plan makes fail: the nth write fails after
    some bytes (a small file given whole is then not sent at all, or sent whole and its answer
    lost), and on object storage the nth conditional create's answer is lost, so that the
    client's retry finds the name taken (by this very write)."""

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        if isinstance(inner, ObjectStorage):
            put = inner._put_create

            def put_create(key: str, data: bytes) -> None:
                put(key, data)
                if _conflicted():
                    raise FileExistsError(key)  # the retry of a create whose answer was lost

            inner._put_create = put_create  # type: ignore[method-assign]

    def create(self, path: str, data: bytes) -> None:
        after = _armed()
        if after is not None and after < len(data):
            raise OSError("simulated: connection lost mid-upload")
        self.inner.create(path, data)
        if after is not None:
            raise OSError("simulated: connection lost after the upload, before its answer")

    def put_file(self, path: str, source: IO[bytes]) -> None:
        after = _armed()
        if after is None:
            self.inner.put_file(path, source)
            return
        self.inner.put_file(path, CutSource(source, after))  # type: ignore[arg-type]
        raise OSError("simulated: connection lost after the upload, before its answer")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def location(uri: str, storage_options: dict[str, Any] | None) -> Location:
    loc = Location.resolve(uri, storage_options)
    return dataclasses.replace(loc, storage=FlakyStorage(loc.storage))


def record(rec: Any) -> Any:
    if rec is None:
        return None
    return [None if rec.value is None else rec.value.hex(), rec.timestamp, rec.valid_to]


def dump(store: Any, keys: list[bytes]) -> Any:
    """Everything a reader can observe of ``keys`` (the parent's ``normalized_dump``)."""
    return [
        store.observed_stream_time,
        [
            [k.hex(), record(store.get(k)), [record(r) for r in store.versions(k, ascending=True)]]
            for k in keys
        ],
    ]


def arm(command: dict[str, Any]) -> None:
    plan = command.get("faults") or {}
    _plan.clear()
    _plan["raise_at"] = plan.get("raise_at") or {}
    if plan.get("stream") is not None:
        _plan["stream"] = list(plan["stream"])
    if plan.get("conflict") is not None:
        _plan["conflict"] = [plan["conflict"]]
    io_after = plan.get("io_after")
    if io_after is not None:
        core._fail_storage_writes(io_after)  # type: ignore[attr-defined]


def disarm() -> None:
    _plan.clear()
    if hasattr(core, "_fail_storage_writes"):
        core._fail_storage_writes(None)


def run(command: dict[str, Any]) -> Any:
    cmd = command["cmd"]
    if cmd == "reset":
        _leaked.clear()
        _parts.clear()
        discard_all(_keeper)
        return None
    if cmd == "settle":
        _maintain(settle=True)
        return None
    if cmd == "open":
        attempt = bytes.fromhex(command["attempt"])
        layout.new_attempt = lambda: attempt
        part = PartitionStore.open(
            location(command["uri"], command["storage_options"]),
            command["store"],
            command["partition"],
            command["version"],
            command["local_dir"],
            lineage=command["lineage"],
            history_retention_ms=command["retention"],
            segment_interval_ms=command["interval"],
            latest_ttl_ms=command.get("latest_ttl_ms"),
            options=CheckpointOptions(**command["options"]),
            num_partitions=command["num_partitions"],
            progress=progress,
            keeper=_keeper if command.get("keep") else None,
        )
        opened = [part.opened.version, part.opened.attempt.hex()]
        how = (
            "kept open"
            if part.stats.kept_open
            else "reused"
            if part.stats.reused
            else "rebuilt"
            if part.stats.rebuilt
            else "caught up"
            if part.stats.replayed
            else "new"
        ) + (" with a saved write buffer" if part.stats.saved_buffer_bytes else "")
        try:
            seen = dump(part.store, [bytes.fromhex(k) for k in command["keys"]])
            for key, value, ts in command["ops"]:
                part.store.put(
                    bytes.fromhex(key), None if value is None else bytes.fromhex(value), ts
                )
            if command.get("reclaim"):
                part.store.reclaim_expired()  # a flush and a compaction, faults armed
        except BaseException:
            _leaked.append(part)
            part.abort()
            raise
        _parts[command["attempt"]] = part
        return {"opened": opened, "dump": seen, "how": how}
    part = _parts.pop(command["attempt"])
    _leaked.append(part)
    if cmd == "commit":
        version = part.commit()
        stats = part.commit_stats
        if part.keeps_open:
            _maintain(settle=bool(command.get("settle")))
        return {"version": version, "deferred": stats.deferred if stats else []}
    if cmd == "abort":
        part.abort()
        return None
    raise ValueError(f"unknown command {cmd!r}")


def _maintain(settle: bool) -> None:
    """The kept stores' deferred work; a failure drops the store (the keeper does) and is the
    keeper's to log, not the task's to raise."""
    try:
        _keeper.run_maintenance(settle=settle)
    except Exception as e:
        _leaked.append(e)


def main() -> None:
    faults.set_hook(hook)
    while True:
        command = receive()
        try:
            arm(command)
            result = run(command)
        except BaseException as e:
            _leaked.append(e)  # its traceback keeps the frames alive, as a task's may
            names = [c.__name__ for c in type(e).__mro__]
            send({"error": [names, str(e)[:2000], traceback.format_exc()[-4000:]]})
        else:
            send({"done": result})
        finally:
            disarm()


if __name__ == "__main__":
    main()
