"""Spark: ``asof_join`` against the ``applyInPandasWithState`` baseline and the stateless floor,
and the peer: Flink SQL's temporal join on the same rows.

Scales: 10 000 keys with 60 000 orders per micro-batch (all three pipelines), 100 000 keys
with 600 000 orders per micro-batch and 1 000 000 keys with 1 000 000 (``asof_join`` and the
floor: the baseline takes minutes there), 4 micro-batches each, 4 partitions on ``local[2]``.
With ``--benchmark-disable`` (CI smoke runs) or ``VERSTORE_BENCH_SPARK_SCALE=smoke`` the scales
shrink to a few hundred rows. Each pipeline's rows/s is in ``extra_info["rows_per_s"]`` (see
``spark_asof.py`` for the method); every join is checked against the pandas ``merge_asof``
oracle.

Then, on each scale's files, Flink's event-time temporal join (``flink_asof.py``: PyFlink in
``make flink-env``'s environment, parallelism 2) with RocksDB and with heap state, checked
against the oracle by event time; ``extra_info["asof_join_ratio"]`` is ``asof_join``'s rows/s
over Flink's in the same run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import flink_asof, spark_asof
from .spark_asof import Scale

pytestmark = pytest.mark.spark

PARTITIONS = 4
FULL = {
    "10k_keys": (
        Scale(keys=10_000, rows=60_000, batches=4),
        ["asof_join", "pandas_state", "passthrough"],
    ),
    "100k_keys": (Scale(keys=100_000, rows=600_000, batches=4), ["asof_join", "passthrough"]),
    "1m_keys": (Scale(keys=1_000_000, rows=1_000_000, batches=4), ["asof_join", "passthrough"]),
}
SMOKE = {
    "10k_keys": (
        Scale(keys=200, rows=1_000, batches=2),
        ["asof_join", "pandas_state", "passthrough"],
    ),
    "100k_keys": (Scale(keys=500, rows=2_000, batches=2), ["asof_join", "passthrough"]),
    "1m_keys": (Scale(keys=1_000, rows=2_000, batches=2), ["asof_join", "passthrough"]),
}
CASES = [(scale, name) for scale, (_, names) in FULL.items() for name in names]
#: The peer's pipelines: Flink with each state backend (``flink_asof.BACKENDS``).
FLINK_CASES = [(scale, f"flink_{backend}") for scale in FULL for backend in flink_asof.BACKENDS]
#: ``asof_join``'s rows/s by scale, for the peer's ratio.
ASOF_RATES: dict[str, float] = {}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    session = spark_asof.session(PARTITIONS, "4g", tmp_path_factory.mktemp("warehouse"))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def warm_spark(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session after one small untimed run of every pipeline: the first query of a JVM
    pays for class loading and code generation, which would otherwise land on whichever
    pipeline happens to run first."""
    root = tmp_path_factory.mktemp("warm-up")
    scale = SMOKE["10k_keys"][0]
    batches = spark_asof.generate(scale)
    spark_asof.write_inputs(batches, root / "data")
    for name in FULL["10k_keys"][1]:
        spark_asof.run(spark, name, root / "data", root / name, batches, PARTITIONS)
    return spark


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Any]]]:
    """Each scale's data, generated and written lazily."""
    return {}


def _data(inputs: dict[str, Any], scale_name: str, smoke: bool, root: Path) -> tuple[Path, Any]:
    key = f"{scale_name}-{smoke}"
    if key not in inputs:
        scale = (SMOKE if smoke else FULL)[scale_name][0]
        batches = spark_asof.generate(scale)
        data_dir = root / key
        spark_asof.write_inputs(batches, data_dir)
        inputs[key] = (data_dir, batches)
    return inputs[key]  # type: ignore[no-any-return]


@pytest.mark.benchmark(group="spark_asof_join")
@pytest.mark.parametrize(("scale_name", "pipeline"), CASES)
def test_spark_asof_join(
    benchmark: Any,
    warm_spark: Any,
    inputs: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    scale_name: str,
    pipeline: str,
) -> None:
    smoke = benchmark.disabled or os.environ.get("VERSTORE_BENCH_SPARK_SCALE") == "smoke"
    data_dir, batches = _data(inputs, scale_name, smoke, tmp_path_factory.getbasetemp())
    results: list[spark_asof.Result] = []

    def run() -> None:
        results.append(
            spark_asof.run(warm_spark, pipeline, data_dir, tmp_path / "work", batches, PARTITIONS)
        )

    benchmark.pedantic(run, rounds=1, iterations=1)
    result = results[-1]
    assert not result.problems, result.problems[:5]
    scale = (SMOKE if smoke else FULL)[scale_name][0]
    if pipeline == "asof_join":
        ASOF_RATES[scale_name] = result.rows_per_s
    benchmark.extra_info.update(
        rows_per_s=result.rows_per_s,
        rows=result.stream_rows,
        batch_seconds=result.seconds,
        keys=scale.keys,
        rows_per_batch=scale.rows,
        pipeline=pipeline,
        loadavg=os.getloadavg()[0],
    )


@pytest.mark.benchmark(group="spark_asof_join")
@pytest.mark.parametrize(("scale_name", "pipeline"), FLINK_CASES)
def test_flink_temporal_join(
    benchmark: Any,
    inputs: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    scale_name: str,
    pipeline: str,
) -> None:
    """The peer on the files the Spark pipelines read (a child process in PyFlink's
    environment, timed by the job's net runtime: ``flink_asof.py``)."""
    if not flink_asof.PYTHON.exists():
        pytest.skip(f"no PyFlink environment at {flink_asof.PYTHON}: make flink-env")
    smoke = benchmark.disabled or os.environ.get("VERSTORE_BENCH_SPARK_SCALE") == "smoke"
    data_dir, _ = _data(inputs, scale_name, smoke, tmp_path_factory.getbasetemp())
    backend = pipeline.removeprefix("flink_")
    results: list[dict[str, Any]] = []

    def run() -> None:
        results.append(flink_asof.run(data_dir, tmp_path / "work", backend))

    benchmark.pedantic(run, rounds=1, iterations=1)
    result = results[-1]
    assert not result["problems"], result["problems"][:5]
    scale = (SMOKE if smoke else FULL)[scale_name][0]
    asof = ASOF_RATES.get(scale_name)
    benchmark.extra_info.update(
        rows_per_s=result["rows_per_s"],
        rows=result["rows"],
        batch_seconds=result["seconds"],
        wall_seconds=result["wall_seconds"],
        keys=scale.keys,
        rows_per_batch=scale.rows,
        pipeline=pipeline,
        flink=result["flink"],
        checkpoint_interval_s=result["checkpoint_interval_s"],
        differs_from_arrival=result["differs_from_arrival"],
        loadavg=os.getloadavg()[0],
    )
    if asof is not None:
        benchmark.extra_info["asof_join_ratio"] = asof / result["rows_per_s"]


@pytest.mark.parametrize("in_memory", [False, True], ids=["durable", "in_memory"])
def test_profile_partition_joins_as_the_oracle(in_memory: bool) -> None:
    """The one-partition profile (``python benches/spark_asof.py``) runs the join's partition
    function as a task does, checks its output against the oracle, and times its parts, which
    nest. (No bound on a time: an in-memory run's empty commit took 8 ms once on a loaded
    machine.)"""
    scale = Scale(keys=300, rows=2_000, batches=3)
    rows = spark_asof.profile_partition(scale, in_memory=in_memory)
    assert [r["batch"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["rows"] > 0
        assert r["task"] >= r["function"] >= r["put_batch"] + r["get_batch"] - 0.2


def test_profile_partition_runs_the_tasks_of_several_partitions_in_one_worker() -> None:
    """``--held 2``: each micro-batch, the tasks of two partitions in turn, their stores kept in
    one process, each task one row with what the memory budget's holders used as it began."""
    rows = spark_asof.profile_partition(Scale(keys=300, rows=2_000, batches=2), held=2)
    assert [(r["batch"], r["partition"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r["usage_buffers"] >= 0 for r in rows)


def test_partition_kernel_harness_runs_both_paths_alike() -> None:
    """``python -m benches.asof_partition`` times the Rust kernel against the pyarrow path and
    checks that every task's output is the same for both."""
    from . import asof_partition

    results = asof_partition.run(Scale(keys=300, rows=2_000, batches=3), rounds=2)
    assert {k: len(v) for k, v in results.items()} == {"kernel": 2, "pyarrow": 2}
