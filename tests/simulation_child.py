"""A task process of the harsh checkpoint simulation (``test_checkpoint_simulation_harsh.py``).

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
keeper when it holds it, and the commit leaves the store there (``verstore.checkpoint.keeper``);
the work the commit defers then runs right after it, inside the command, so that it stops at
its steps too (and, with ``"settle": true``, the store is settled: flushed and clean); its
failures are not the commit's, as in the keeper's thread. The keeper's own thread hands kept
stores over to other processes that ask. ``settle`` settles every kept store of the process.
``open`` and ``commit`` carry the faults to inject while they run:

* ``raise_at``: step -> message, an ``OSError`` raised at that step;
* ``stream``: ``[nth, after]``, the nth output stream the command opens on the checkpoint
  filesystem fails after ``after`` bytes (a connection lost mid-upload; the stream is closed as
  the ``with`` block closes it, so what was written may complete as an object);
* ``io_after``: ``verstore._core._fail_storage_writes(io_after)`` for the command's duration.

A failed attempt's exception is kept for the life of the process: nothing guarantees that a
failed task's frames (and the store objects in them) are collected before the next task, so a
release must not depend on the garbage collector.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import threading
import traceback
from typing import Any

import pyarrow.fs as pafs
import verstore
import verstore._core as core
from verstore.checkpoint import CheckpointOptions, PartitionStore, faults, layout
from verstore.checkpoint.keeper import Keeper
from verstore.location import Location

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


class FailingStream:
    """An output stream that fails once ``after`` bytes were written through it."""

    def __init__(self, inner: Any, after: int) -> None:
        self._inner = inner
        self._room = after

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if len(view) > self._room:
            if self._room:
                self._inner.write(view[: self._room])
            self._room = 0
            raise OSError("simulated: connection lost mid-upload")
        self._room -= len(view)
        return int(self._inner.write(view))

    def __enter__(self) -> FailingStream:
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _open_output_stream(fs: Any, base: Any, path: str, *args: Any, **kwargs: Any) -> Any:
    stream = base.open_output_stream(fs, path, *args, **kwargs)
    plan = _plan.get("stream")
    if plan is not None:
        plan[0] -= 1
        if plan[0] == 0:
            return FailingStream(stream, plan[1])
    return stream


class FlakyS3(pafs.S3FileSystem):
    def open_output_stream(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return _open_output_stream(self, pafs.S3FileSystem, path, *args, **kwargs)


class FlakyLocal(pafs.LocalFileSystem):
    def open_output_stream(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return _open_output_stream(self, pafs.LocalFileSystem, path, *args, **kwargs)


_copy_files = pafs.copy_files


def copy_files(source: str, destination: str, **kwargs: Any) -> None:
    """Uploads of local files through the flaky filesystem's Python streams (pyarrow's C++
    copy would not pass them); everything else as pyarrow does it."""
    fs = kwargs.get("destination_filesystem")
    if isinstance(fs, FlakyS3 | FlakyLocal) and kwargs.get("source_filesystem") is None:
        with open(source, "rb") as src, fs.open_output_stream(destination) as out:
            shutil.copyfileobj(src, out, 1 << 20)
        return
    _copy_files(source, destination, **kwargs)


def location(uri: str, storage_options: dict[str, Any] | None) -> Location:
    loc = Location.resolve(uri, storage_options)
    flaky = (
        FlakyS3(**(storage_options or {}))
        if isinstance(loc.filesystem, pafs.S3FileSystem)
        else FlakyLocal()
    )
    return dataclasses.replace(loc, filesystem=flaky)


def record(rec: Any) -> Any:
    if rec is None:
        return None
    return [None if rec.value is None else rec.value.hex(), rec.timestamp, rec.valid_to]


def dump(store: verstore.VersionedStore, keys: list[bytes]) -> Any:
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
        _keeper.discard_all()
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
    pafs.copy_files = copy_files
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
