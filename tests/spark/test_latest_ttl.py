"""``latest_by_timestamp(latest_ttl=...)`` over keys that churn (docs/spark.md, "State that
ends"): 100 micro-batches of sessions that live two batches each. The output matches a
reference that applies the TTL, the store's live keys and expirations match the reference
model's count, and the store's key count and disk stay flat while the input grows.

Classic sessions only (it reads the per-partition metrics of the driver); the TTL's rules are
checked on Spark Connect by the partition-function tests of ``test_tables.py``.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
import verstore.spark
from verstore.checkpoint import PartitionStore
from verstore.spark import latest_by_timestamp

pytest.register_assert_rewrite("streams", "table_streams")
from reference_model import ReferenceModel  # noqa: E402
from streams import Collector, batch_input_rows, run_available_now  # noqa: E402
from table_streams import latest_reference, read_stream, write_stream  # noqa: E402

BATCHES = 100
SESSIONS = 40  # new keys per batch, each updated once more in the next batch
PAYLOAD = 2048  # bytes of a value: random, so that compression cannot hide them
TTL_MS, RETENTION_MS = 2_500, 500
DDL = "customer STRING, t LONG, payload STRING, removed BOOLEAN"
SCHEMA = pa.schema(
    [("customer", pa.string()), ("t", pa.int64()), ("payload", pa.string()),
     ("removed", pa.bool_())]
)  # fmt: skip


def sessions() -> list[list[dict[str, Any]]]:
    """Batch ``b``: times in ``[1000 b, 1000 b + 999]``; 40 new sessions, and one more update
    of each session of batch ``b - 1``. No update is older than the grace period."""
    rng = random.Random(37)
    out = []
    for b in range(BATCHES):
        keys = [f"s{b:03d}-{i:02d}" for i in range(SESSIONS)]
        if b:
            keys += [f"s{b - 1:03d}-{i:02d}" for i in range(SESSIONS)]
        out.append(
            [
                {
                    "customer": key,
                    "t": 1000 * b + rng.randrange(1000),
                    "payload": rng.randbytes(PAYLOAD // 2).hex(),
                    "removed": False,
                }
                for key in keys
            ]
        )
    return out


def model_counts(batches: list[list[dict[str, Any]]]) -> list[tuple[int, int]]:
    """Per batch, the reference model's live keys after it and the keys it expired (the store
    applies a batch's updates in time order, then key order)."""
    model = ReferenceModel(history_retention_ms=RETENTION_MS, latest_ttl_ms=TTL_MS)
    counts = []
    for rows in batches:
        expired = model.ttl_expired_keys
        for row in sorted(rows, key=lambda r: (r["t"], r["customer"])):
            model.put(row["customer"].encode(), row["payload"].encode(), row["t"])
        counts.append((model.counted_keys(), model.ttl_expired_keys - expired))
    return counts


def test_latest_by_timestamp_with_a_ttl_keeps_its_state_flat(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    batches = sessions()
    write_stream(tmp_path / "updates", batches, SCHEMA)
    verstore.spark.configure(
        spark,
        str(verstore_root),
        local_dir=str(tmp_path / "local"),
        snapshot_interval=5,
        min_versions_to_retain=10,
    )
    try:
        run_sessions(spark, tmp_path, batches)
    finally:
        verstore.spark.configure(spark, str(verstore_root), local_dir=str(tmp_path / "local"))


def run_sessions(spark: Any, tmp_path: Path, batches: list[list[dict[str, Any]]]) -> None:
    out = latest_by_timestamp(
        read_stream(spark, tmp_path / "updates", DDL),
        key="customer",
        time_col="t",
        value_cols=["payload"],
        deletes="removed",
        previous=True,
        history_retention=RETENTION_MS,
        latest_ttl=TTL_MS,
        num_partitions=1,
        store="sessions",
    )
    sink = Collector()
    query = run_available_now(out, tmp_path / "chk", sink, timeout_s=600)
    inputs = batch_input_rows(query, tmp_path / "updates")  # the progress keeps the last 100
    assert len(inputs) >= BATCHES - 1
    assert inputs == {b: len(batches[b]) for b in inputs}

    # the output is the reference's: every update a change, previous null once expired
    columns = ["customer", "t", "payload", "change", "previous_payload"]
    expected = latest_reference(
        batches, emit="changes", key="customer", time="t", values=["payload"],
        deletes="removed", ttl=TTL_MS,
    )  # fmt: skip
    got = sink.batches
    for b in range(BATCHES):
        want = Counter(tuple(r[c] for c in columns) for r in expected[b])
        assert Counter(tuple(r[c] for c in columns) for r in got[b]) == want, b
    previous = [r["previous_payload"] is not None for rows in expected.values() for r in rows]
    assert any(previous) and not all(previous)

    # live keys and expirations per batch are the model's, and they stay flat
    metrics = {
        r["batch_id"]: r
        for r in verstore.spark.partition_metrics("verstore.sessions").to_pylist()
        if r["batch_id"] < BATCHES
    }
    assert sorted(metrics) == list(range(BATCHES))
    counts = model_counts(batches)
    for b in range(BATCHES):
        assert (metrics[b]["latest_keys"], metrics[b]["keys_ttl_expired"]) == counts[b], b
    assert max(metrics[b]["latest_keys"] for b in range(10, BATCHES)) <= 7 * SESSIONS
    assert sum(metrics[b]["keys_ttl_expired"] for b in range(BATCHES)) >= 95 * SESSIONS
    disk = [metrics[b]["disk_bytes"] for b in range(BATCHES)]
    written = BATCHES * 2 * SESSIONS * PAYLOAD
    assert max(disk[50:]) <= 1.25 * max(disk[20:50]), disk
    assert max(disk[50:]) < written / 4, (max(disk[50:]), written)

    # the query keeps the TTL it started with: its lineage refuses another one
    for other in (None, 2 * TTL_MS):
        with pytest.raises(
            verstore.IncompatibleConfigError,
            match=rf"latest_ttl_ms=2500, cannot open it with latest_ttl_ms={other}",
        ):
            PartitionStore.open(
                str(tmp_path / "verstore"), "sessions", 0, BATCHES, str(tmp_path / "probe"),
                lineage=query.id, history_retention_ms=RETENTION_MS, latest_ttl_ms=other,
                read_only=True,
            )  # fmt: skip
