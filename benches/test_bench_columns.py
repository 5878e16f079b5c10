"""Throughput of the tuple encoding (encode_rows / decode_rows), as the Spark helpers use it.

Groups:

* tuple_encode: the key columns (string symbol, int64 id) and the value columns (float64,
  int32, timestamp, string) of n rows to one binary value per row;
* tuple_decode: the encoded values back into typed columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from verstore._core import decode_rows, encode_rows

from .conftest import KEYS


@pytest.fixture(scope="module")
def rows() -> pa.RecordBatch:
    rng = np.random.default_rng(7)
    n = KEYS
    return pa.record_batch(
        {
            "symbol": pa.array([f"SYM{i % 5000:05d}" for i in range(n)]),
            "id": pa.array(rng.integers(0, 2**40, n), pa.int64()),
            "price": pa.array(rng.normal(100, 5, n), pa.float64()),
            "qty": pa.array(rng.integers(1, 1000, n).astype(np.int32)),
            "ts": pa.array(rng.integers(0, 2**50, n), pa.timestamp("us", tz="UTC")),
            "note": pa.array([None if i % 7 == 0 else f"note {i}" for i in range(n)]),
        }
    )


KEY = ["symbol", "id"]
VALUE = ["price", "qty", "ts", "note"]


@pytest.mark.benchmark(group="tuple_encode")
def test_encode_keys(benchmark: Any, rows: pa.RecordBatch) -> None:
    encoded = benchmark(encode_rows, rows, KEY)
    assert len(encoded) == rows.num_rows and encoded.null_count == 0


@pytest.mark.benchmark(group="tuple_encode")
def test_encode_values(benchmark: Any, rows: pa.RecordBatch) -> None:
    encoded = benchmark(encode_rows, rows, VALUE)
    assert len(encoded) == rows.num_rows


@pytest.mark.benchmark(group="tuple_decode")
def test_decode_values(benchmark: Any, rows: pa.RecordBatch) -> None:
    values = rows.select(VALUE)
    encoded = encode_rows(values)
    decoded = benchmark(decode_rows, encoded, values.schema)
    assert decoded.equals(values)
