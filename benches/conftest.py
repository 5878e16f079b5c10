"""Shared benchmark data: seeded, fixed sizes (override with VERSTORE_BENCH_KEYS)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

KEYS = int(os.environ.get("VERSTORE_BENCH_KEYS", "100000"))
RETENTION_MS = 3_600_000


@dataclass(frozen=True)
class Workload:
    """`n` distinct keys, one in-order version each, plus as-of probe times."""

    keys: pa.BinaryArray
    values: pa.BinaryArray
    timestamps: pa.Int64Array
    key_list: list[bytes]
    value_list: list[bytes]
    ts_list: list[int]


@pytest.fixture(scope="session")
def workload() -> Workload:
    rng = np.random.default_rng(42)
    n = KEYS
    key_list = [f"key-{i:09d}".encode() for i in rng.permutation(n)]
    value_list = [rng.bytes(32) for _ in range(n)]
    ts_list = list(range(n))
    return Workload(
        keys=pa.array(key_list, type=pa.binary()),
        values=pa.array(value_list, type=pa.binary()),
        timestamps=pa.array(ts_list, type=pa.int64()),
        key_list=key_list,
        value_list=value_list,
        ts_list=ts_list,
    )
