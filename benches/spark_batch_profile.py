"""Where one micro-batch of ``asof_join`` spends its time in Spark, stage by stage, beside the
pass-through's on the same rows (issue 44).

``python -m benches.spark_batch_profile [--keys K] [--rows R] [--batches B] [--runs N]
[--py-spy DIR]`` (from the repository root: the Python workers import this module) runs the
workload of ``spark_asof.py`` (``K`` keys, ``R`` orders per micro-batch, ``B`` micro-batches,
4 partitions on ``local[2]``) through the pass-through and the join, ``N`` times each in
alternating order after one small untimed run of each, and prints per micro-batch:

* Spark's own durations (``query.lastProgress['durationMs']``: ``addBatch`` is the job, the
  rest Spark's per-batch bookkeeping);
* each task's stages as its Python worker saw them (summed over the micro-batch's 4 tasks):
  ``input`` the time spent waiting for the next Arrow batch from the JVM (the shuffle read and
  the JVM's rows-to-Arrow, where Python got ahead of it), ``open`` the stores' open (with a
  handoff from the other worker, when it held the store), the partition function's parts
  (``split``: each input batch's table rows encoded and its stream rows set aside;
  ``sort``: the table rows' sort and re-cut into runs; ``puts``; ``reads``: ``asof_lookup``;
  ``output``: the output batches assembled), ``commit`` (the changelog written and uploaded,
  metrics), and ``emit``: the time between yielding an output batch and being resumed (the
  batch serialized and written to the JVM, which reads it back into rows);

With ``--py-spy DIR`` one more run of each pipeline is recorded by ``py-spy record --native
--subprocesses`` attached to the session's ``pyspark.daemon`` (the Python workers are its
children; py-spy from the venv: ``pip install py-spy``, and ptrace rights), written as
collapsed stacks to ``DIR/<pipeline>.txt`` and summarized by the frames named in
:data:`FRAMES`: where the workers' CPU goes, beside the wall-clock stages above. That run is
not in the timings (sampling costs CPU that the 2 cores lack).

``--memory-limit-mb a,b`` runs the join once with each ``configure(memory_limit_mb=...)`` in
every round instead of once with the default.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from . import spark_asof
from .spark_asof import Scale

PARTITIONS = 4
FLOOR = "passthrough"

# --- in the Python workers ---------------------------------------------------------------------

#: This worker's spans of the running task (seconds), filled by the traced partition function.
_SPANS: dict[str, float] = defaultdict(float)
_TASK: dict[str, Any] = {}
from verstore.spark import joins  # noqa: E402


class TracedAsofPartition(joins._AsofPartition):
    """``joins._AsofPartition`` with its parts timed into :data:`_SPANS` (the same work). The
    input is read first (``input`` waiting for it, ``split`` the rest), then the updates are
    sorted (``sort``: from the end of the input to the first lookup, less the puts) and put
    (``puts``), then the stream rows looked up (``reads``) and the output assembled
    (``output``: the rest of the function)."""

    def __call__(self, ctx: Any, batches: Iterator[Any]) -> Iterator[Any]:
        from verstore import memory_usage

        m = ctx.metrics
        _TASK.update(
            batch=ctx.batch_id,
            partition=ctx.partition,
            kept_open=m.kept_open,
            reused=m.reused,
            rebuilt=m.rebuilt,
            open_ms=m.open_ms,
        )
        usage = memory_usage()  # what the worker's stores held when the task began, in MB
        _TASK.update(
            usage_buffers=usage.write_buffer_bytes >> 20,
            usage_caches=usage.cache_bytes >> 20,
            usage_rocksdb=usage.rocksdb_bytes >> 20,
            usage_memtables=usage.memtable_bytes >> 20,
            usage_stores=usage.open_stores,
        )
        _SPANS["fn_start"] = time.perf_counter()

        def source() -> Iterator[Any]:
            yield from batches
            _SPANS["input_end"] = time.perf_counter()

        yield from super().__call__(ctx, source())
        _SPANS["fn_end"] = end = time.perf_counter()
        input_end = _SPANS.pop("input_end")
        first_lookup = _SPANS.pop("first_lookup", end)
        _SPANS["split"] = input_end - _SPANS["fn_start"] - _SPANS["input"]
        _SPANS["sort"] = first_lookup - input_end - _SPANS["puts"]
        known = sum(_SPANS[k] for k in ("input", "split", "sort", "puts", "reads"))
        _SPANS["output"] = end - _SPANS["fn_start"] - known

    def _apply(self, store: Any, codec: Any, chunk: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return super()._apply(store, codec, chunk)
        finally:
            _SPANS["puts"] += time.perf_counter() - started
            _SPANS["puts_cpu"] += time.thread_time() - cpu

    def _lookup(self, store: Any, codec: Any, rows: Any) -> Any:
        from verstore._core import asof_lookup

        started, cpu = time.perf_counter(), time.thread_time()
        _SPANS.setdefault("first_lookup", started)
        found = asof_lookup(
            store,
            rows,
            keys=self.keys,
            time=joins._TIME,
            strict=self.strict,
            tolerance_ms=self.tolerance_ms,
        )
        _SPANS["reads"] += time.perf_counter() - started
        _SPANS["reads_cpu"] += time.thread_time() - cpu
        return self._output(codec, rows, *found.columns)


class Traced:
    """A task's function (``_runtime._task``'s ``run``, or the pass-through's) with the time
    spent waiting for input, in the task's own code and emitting output measured; appends one
    JSON line per task to ``trace``."""

    def __init__(self, run: Any, trace: str, pipeline: str) -> None:
        self.run, self.trace, self.pipeline = run, trace, pipeline

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        _SPANS.clear()
        _TASK.clear()
        started = time.time()
        t0 = time.perf_counter()
        first_input: list[float] = []
        rows = [0, 0]

        def source() -> Iterator[Any]:
            while True:
                t = time.perf_counter()
                if not first_input:
                    first_input.append(t)
                try:
                    batch = next(batches)
                except StopIteration:
                    _SPANS["input"] += time.perf_counter() - t
                    return
                _SPANS["input"] += time.perf_counter() - t
                rows[0] += batch.num_rows
                yield batch

        out = iter(self.run(source()))
        first_output = None
        while True:
            t = time.perf_counter()
            try:
                batch = next(out)
            except StopIteration:
                break
            if first_output is None:
                first_output = time.perf_counter()
            rows[1] += batch.num_rows
            t = time.perf_counter()
            yield batch
            _SPANS["emit"] += time.perf_counter() - t
        ended = time.perf_counter()
        spans = dict(_SPANS)
        if "fn_start" in spans:
            spans["open"] = spans.pop("fn_start") - t0
            spans["commit"] = (first_output or ended) - spans.pop("fn_end", ended)
        line = {
            "pipeline": self.pipeline,
            "pid": os.getpid(),
            "start": started,
            "end": time.time(),
            "task": ended - t0,
            "rows_in": rows[0],
            "rows_out": rows[1],
            **_TASK,
            **spans,
        }
        with open(self.trace, "a") as f:
            f.write(json.dumps(line) + "\n")


# --- on the driver -----------------------------------------------------------------------------


def install(trace: Path) -> None:
    """Makes the queries built from now on trace their tasks into ``trace``."""
    from verstore.spark import _runtime

    original = getattr(_runtime._task, "_original", _runtime._task)

    def task(*args: Any) -> Any:
        return Traced(original(*args), str(trace), "asof_join")

    task._original = original  # type: ignore[attr-defined]
    setattr(_runtime, "_task", task)  # noqa: B010
    setattr(joins, "_AsofPartition", TracedAsofPartition)  # noqa: B010
    spark_asof.QUERIES["passthrough"] = _traced_passthrough(str(trace))


def _traced_passthrough(trace: str) -> Any:
    def query(spark: Any, data_dir: Path, partitions: int) -> Any:
        tagged = spark_asof._tagged(*spark_asof._inputs(spark, data_dir))
        fn = Traced(spark_asof._passthrough_partition, trace, "passthrough")
        return tagged.repartition(partitions, "symbol").mapInArrow(fn, spark_asof.OUT_DDL)

    return query


STAGES = ["input", "open", "split", "sort", "puts", "puts_cpu", "reads", "reads_cpu", "output"]
STAGES += ["commit", "emit"]
SPARK = ["getBatch", "latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets"]


def one_run(
    spark: Any, pipeline: str, data: Path, work: Path, batches: list[Any], trace: Path
) -> list[dict[str, Any]]:
    """One run of ``pipeline``; per micro-batch: Spark's durations and the tasks' summed
    stages (ms)."""
    if trace.exists():  # the previous run's tasks, kept beside it
        trace.rename(trace.with_name(f"{trace.stem}-{time.time():.0f}.jsonl"))
    name, _, limit = pipeline.partition("@")
    with _memory_limit(int(limit) if limit else None):
        result = spark_asof.run(spark, name, data, work, batches, PARTITIONS)
    assert not result.problems, result.problems[:3]
    progress = _LAST_PROGRESS.pop()
    tasks = [json.loads(x) for x in trace.read_text().splitlines()] if trace.exists() else []
    if os.environ.get("VERSTORE_PROFILE_TASKS"):
        for t in tasks:
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in t.items()}
            print(json.dumps(shown))
    rows = []
    for p in progress:
        b = p["batchId"]
        d = p["durationMs"]
        mine = [t for t in tasks if t["start"] >= p["_start"] and t["end"] <= p["_end"]]
        row: dict[str, Any] = {"pipeline": pipeline, "batch": b, "rows": p["numInputRows"]}
        row |= {k: d.get(k, 0) for k in [*SPARK, "triggerExecution"]}
        row["tasks"] = len(mine)
        for stage in [*STAGES, "task"]:
            row[stage] = round(1000 * sum(t.get(stage, 0.0) for t in mine))
        row["task_max"] = round(1000 * max((t["task"] for t in mine), default=0))
        rows.append(row)
    return rows


_LAST_PROGRESS: list[list[dict[str, Any]]] = []


@contextmanager
def _memory_limit(mb: int | None) -> Iterator[None]:
    """Within: ``verstore.spark.configure`` (as ``spark_asof.run`` calls it) sets
    ``memory_limit_mb=mb`` (None: its default)."""
    import verstore.spark

    configure = verstore.spark.configure
    if mb is not None:
        verstore.spark.configure = partial(configure, memory_limit_mb=mb)
    try:
        yield
    finally:
        verstore.spark.configure = configure


def _record_progress() -> None:
    """Makes ``spark_asof.run`` leave its query's progress (with each batch's wall-clock
    start and end) in :data:`_LAST_PROGRESS`."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    if getattr(DataStreamWriter.start, "_recorded", False):
        return
    start = DataStreamWriter.start

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        query = start(self, *args, **kwargs)
        wait = query.awaitTermination

        def awaited(*a: Any, **k: Any) -> Any:
            out = wait(*a, **k)
            progress: list[dict[str, Any]] = []
            for each in query.recentProgress:
                if each["numInputRows"] == 0:
                    continue
                p = json.loads(each.json) if hasattr(each, "json") else dict(each)
                end = _epoch(p["timestamp"]) + p["durationMs"]["triggerExecution"] / 1000
                p["_start"], p["_end"] = _epoch(p["timestamp"]), end
                progress.append(p)
            _LAST_PROGRESS.append(progress)
            return out

        query.awaitTermination = awaited  # type: ignore[method-assign]
        return query

    recorded._recorded = True  # type: ignore[attr-defined]
    setattr(DataStreamWriter, "start", recorded)  # noqa: B010


def _epoch(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


#: Categories of py-spy's samples: the first (innermost) frame of a stack that names one of a
#: category's functions decides.
FRAMES = [
    ("puts", ["_apply (verstore/spark/joins.py", "asof_apply"]),
    ("reads", ["asof_lookup", "_lookup (benches/spark_batch_profile.py"]),
    ("output assembly", ["_output (verstore/spark/joins.py"]),
    ("split", ["_compact (verstore/spark/joins.py", "_passthrough_partition"]),
    ("sort", ["chunks (verstore/spark/_spill.py", "whole_runs (verstore"]),
    ("commit", ["_commit_all", "_partition_stores"]),
    ("open", ["_open_one"]),
    ("emit (Arrow to the JVM)", ["dump_stream"]),
    ("input (the JVM to Arrow)", ["load_stream", "__next__ (verstore/spark/_runtime.py"]),
    (
        "the task's other code",
        ["__call__ (benches/spark_batch_profile.py", "run (verstore/spark/_runtime.py"],
    ),
    ("keeper thread (mostly its idle wait)", ["_run (verstore/checkpoint/kept.py"]),
]


def summarize_py_spy(path: Path) -> dict[str, float]:
    """Shares (%) of the samples of ``path`` (py-spy's raw collapsed stacks) by
    :data:`FRAMES`; ``other`` is the worker's loop outside tasks (pyspark's ``gc.collect``
    after each task most of it)."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        category = "other"
        for frame in reversed(stack.split(";")):
            hit = next((c for c, words in FRAMES if any(w in frame for w in words)), None)
            if hit is not None:
                category = hit
                break
        counts[category] += int(n)
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return {k: round(100 * v / max(total, 1), 1) for k, v in ordered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/verstore-batch-profile"))
    parser.add_argument("--py-spy", type=Path, default=None, dest="py_spy")
    parser.add_argument("--pipelines", default="passthrough,asof_join")
    parser.add_argument(
        "--memory-limit-mb",
        default=None,
        help="configure(memory_limit_mb=...) for the joins; a,b,... runs the join once with "
        "each in every round, as pipelines asof_join@a, asof_join@b",
    )
    args = parser.parse_args()
    pipelines = args.pipelines.split(",")
    if args.memory_limit_mb is not None:
        limits = args.memory_limit_mb.split(",")
        pipelines = [p for p in pipelines if p != "asof_join"] + [f"asof_join@{m}" for m in limits]
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    batches = spark_asof.generate(Scale(args.keys, args.rows, args.batches))
    spark_asof.write_inputs(batches, args.work / "data")
    small = spark_asof.generate(Scale(200, 1_000, 2))
    spark_asof.write_inputs(small, args.work / "small")
    spark = spark_asof.session(PARTITIONS, "4g")
    trace = args.work / "trace.jsonl"
    _record_progress()
    install(trace)
    for name in pipelines:  # class loading, code generation, workers
        one_run(spark, name, args.work / "small", args.work / "run", small, trace)
    rows: list[dict[str, Any]] = []
    for r in range(args.runs):
        order = pipelines if r % 2 == 0 else pipelines[::-1]
        for name in order:
            got = one_run(spark, name, args.work / "data", args.work / "run", batches, trace)
            for row in got:
                row["run"] = r
                print(json.dumps(row), flush=True)
            rows += got
    if rows:
        report(rows, pipelines)
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
        for name in pipelines:
            out = args.py_spy / f"{name}.txt"
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--native",
                    "--subprocesses",
                    "--format",
                    "raw",
                    "--rate",
                    "50",
                    "--pid",
                    str(_daemon()),
                    "--output",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(2)
            one_run(spark, name, args.work / "data", args.work / "run", batches, trace)
            spy.send_signal(2)
            spy.wait()
            print(name, json.dumps(summarize_py_spy(out)), flush=True)
    spark.stop()


def _daemon() -> int:
    """The pid of this driver's ``pyspark.daemon`` (the Python workers' parent)."""
    mine = {os.getpid()}
    for _ in range(3):  # driver -> JVM -> daemon
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) in mine:
                if b"pyspark.daemon" in cmd:
                    return int(entry.name)
                mine.add(int(entry.name))
    raise RuntimeError("no pyspark.daemon under this driver")


def report(rows: list[dict[str, Any]], pipelines: list[str]) -> None:
    """Medians over the runs' steady-state micro-batches (1..) of every column, per pipeline
    (ms; the tasks' stages summed over a micro-batch's tasks); then each pipeline's speed
    relative to the pass-through's, per run (the pass-through's time over the pipeline's, the
    whole query and batches 1..), and their medians."""
    columns = [*SPARK, "triggerExecution", "task", "task_max", *STAGES]
    print("column | " + " | ".join(pipelines))
    for c in columns:
        values = []
        for name in pipelines:
            mine = [r[c] for r in rows if r["pipeline"] == name and r["batch"] > 0]
            values.append(f"{statistics.median(mine):.0f}" if mine else "-")
        print(f"{c} | " + " | ".join(values))
    if FLOOR not in pipelines:
        return
    runs = sorted({r["run"] for r in rows})

    def seconds(name: str, run: int, first: int) -> float:
        mine = [r for r in rows if r["pipeline"] == name and r["run"] == run]
        return float(sum(r["triggerExecution"] for r in mine if r["batch"] >= first)) / 1000

    for name in pipelines:
        for first, what in ((0, "whole query"), (1, "batches 1..")):
            ratios = [seconds(FLOOR, r, first) / seconds(name, r, first) for r in runs]
            times = [seconds(name, r, first) for r in runs]
            print(
                f"{name}, {what}: {', '.join(f'{t:.1f}' for t in times)} s; pass-through / "
                f"this per run {', '.join(f'{x:.3f}' for x in ratios)}, median "
                f"{statistics.median(ratios):.3f}"
            )


if __name__ == "__main__":
    main()
