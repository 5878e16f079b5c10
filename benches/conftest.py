"""Shared benchmark data: seeded, fixed sizes.

Sizes (environment, for smoke runs in CI):

* ``VERSTORE_BENCH_KEYS`` — distinct keys of the write/read workload (default 50 000); each
  gets ``VERSIONS_PER_KEY`` versions written in time order, so a run writes 4x that many rows;
* ``VERSTORE_BENCH_PROBES`` — as-of reads per run (default 100 000);
* ``VERSTORE_BENCH_VERSIONS`` — versions of the checkpoint benchmark and of the scaling
  workloads (default 200 000);
* ``VERSTORE_BENCH_SPARK_SCALE`` — see ``test_bench_spark.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

KEYS = int(os.environ.get("VERSTORE_BENCH_KEYS", "50000"))
PROBES = int(os.environ.get("VERSTORE_BENCH_PROBES", str(max(KEYS * 2, 2_000))))
VERSIONS_PER_KEY = 4
BATCH_ROWS = 10_000
#: Nothing expires during a run.
RETENTION_MS = 10**12


@dataclass(frozen=True)
class Workload:
    """``KEYS`` random 16-byte keys, ``VERSIONS_PER_KEY`` versions each with 32-byte values,
    in time order (round r writes every key, at times ``r * KEYS + i``), and as-of probes:
    random keys at random times of the run."""

    keys: pa.BinaryArray
    values: pa.BinaryArray
    timestamps: pa.Int64Array
    key_list: list[bytes]
    value_list: list[bytes]
    ts_list: list[int]
    probe_keys: list[bytes]
    probe_times: list[int]
    probe_key_array: pa.BinaryArray
    probe_time_array: pa.Int64Array

    @property
    def rows(self) -> int:
        return len(self.key_list)

    def batches(self) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray, pa.Int64Array]]:
        for start in range(0, self.rows, BATCH_ROWS):
            yield (
                self.keys.slice(start, BATCH_ROWS),
                self.values.slice(start, BATCH_ROWS),
                self.timestamps.slice(start, BATCH_ROWS),
            )

    def probe_batches(self) -> Iterator[tuple[pa.BinaryArray, pa.Int64Array]]:
        for start in range(0, len(self.probe_keys), BATCH_ROWS):
            yield (
                self.probe_key_array.slice(start, BATCH_ROWS),
                self.probe_time_array.slice(start, BATCH_ROWS),
            )


@pytest.fixture(scope="session")
def workload() -> Workload:
    rng = np.random.default_rng(42)
    distinct = [rng.bytes(16) for _ in range(KEYS)]
    key_list = distinct * VERSIONS_PER_KEY
    value_list = [rng.bytes(32) for _ in range(len(key_list))]
    ts_list = list(range(len(key_list)))
    probe_keys = [distinct[i] for i in rng.integers(0, KEYS, PROBES)]
    probe_times = rng.integers(0, len(key_list), PROBES).tolist()
    return Workload(
        keys=pa.array(key_list, type=pa.binary()),
        values=pa.array(value_list, type=pa.binary()),
        timestamps=pa.array(ts_list, type=pa.int64()),
        key_list=key_list,
        value_list=value_list,
        ts_list=ts_list,
        probe_keys=probe_keys,
        probe_times=probe_times,
        probe_key_array=pa.array(probe_keys, type=pa.binary()),
        probe_time_array=pa.array(probe_times, type=pa.int64()),
    )


def expected_as_of(workload: Workload) -> int:
    """How many probes find a version: those at or after their key's first version."""
    first = {k: i for i, k in reversed(list(enumerate(workload.key_list[:KEYS])))}
    return sum(
        1 for k, t in zip(workload.probe_keys, workload.probe_times, strict=True) if t >= first[k]
    )


def per_row(benchmark: Any, rows: int) -> None:
    """Records the rows one round handles, for rows/s in the report, and the machine's load."""
    benchmark.extra_info["rows"] = rows
    benchmark.extra_info["loadavg"] = os.getloadavg()[0]
