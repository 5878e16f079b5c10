"""What differs between the PySpark lines (docs/spark.md, Spark lines): ``make test`` runs this
file with each line's end-to-end tests. The helpers themselves are the same tests on every line;
here, what a line cannot do and says so, the Arrow types every line maps alike, and
``map_partitions_with_stores`` end to end (docs/spark.md's ``first_seen``).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from verstore.spark import StoreSpec, VersionedStatefulProcessor, map_partitions_with_stores
from verstore.spark._compat import to_arrow_schema, to_arrow_type

pytest.register_assert_rewrite("streams")
from pyspark import cloudpickle  # noqa: E402
from streams import BASE_MTIME, Collector, run_available_now  # noqa: E402

pytestmark = pytest.mark.connect

# Spark's Python workers cannot import this test module: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Nothing(VersionedStatefulProcessor):
    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        return iter(())


@pytest.mark.pyspark_before(4, 0)
def test_a_processor_names_the_line_transform_with_state_needs() -> None:
    with pytest.raises(RuntimeError, match=r"transformWithStateInPandas needs PySpark >= 4\.0"):
        Nothing()


@pytest.mark.pyspark_before(4, 0)
def test_the_data_source_names_the_line_it_needs(spark: Any) -> None:
    sys.modules.pop("verstore.spark._datasource", None)
    with pytest.raises(RuntimeError, match=r"data source.*needs PySpark >= 4\.0"):
        importlib.import_module("verstore.spark._datasource")


def test_every_line_maps_spark_types_to_the_same_arrow_types() -> None:
    from pyspark.sql import types as T

    assert to_arrow_type(T.TimestampType()) == pa.timestamp("us", tz="UTC")
    assert to_arrow_type(T.TimestampNTZType()) == pa.timestamp("us")
    assert to_arrow_type(T.StringType()) == pa.string()
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.BinaryType())])
    assert to_arrow_schema(schema) == pa.schema([("k", pa.int64()), ("v", pa.binary())])


def first_seen(ctx: Any, batches: Any) -> Any:
    """docs/spark.md's example: the earliest row of each event id not seen in an earlier batch."""
    received = [b for b in batches if b.num_rows]
    if not received:
        return []
    data = pa.Table.from_batches(received).sort_by(
        [("event_id", "ascending"), ("ts_ms", "ascending"), ("payload", "ascending")]
    )
    ids = data["event_id"].combine_chunks()
    first = np.ones(len(ids), dtype=bool)
    first[1:] = pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)
    data = data.filter(first)
    keys = pc.cast(data["event_id"], pa.binary())
    seen = ctx.store("seen_ids")
    new = pc.is_null(seen.get_batch(keys).column("value"))
    seen.put_batch(keys, [b"1"] * len(keys), data["ts_ms"].to_numpy())
    return data.filter(new).to_batches()


def test_a_partition_function_with_a_store_matches_its_oracle(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    schema = pa.schema([("event_id", pa.string()), ("ts_ms", pa.int64()), ("payload", pa.string())])
    batches = [
        [("a", 5, "a5"), ("b", 3, "b3"), ("a", 2, "a2"), ("c", 9, "c9")],
        [("b", 1, "b1"), ("d", 4, "d4"), ("d", 4, "d4"), ("e", 7, "e7")],
        [("a", 8, "a8"), ("e", 2, "e2"), ("f", 6, "f6")],
    ]
    source = tmp_path / "events"
    source.mkdir()
    for i, rows in enumerate(batches):
        table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows])
        path = source / f"part-{i:05d}.parquet"
        pq.write_table(table.cast(schema), path)
        os.utime(path, (BASE_MTIME + i, BASE_MTIME + i))  # the order the source reads them in
    events = (
        spark.readStream.schema("event_id string, ts_ms long, payload string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
    )
    firsts = map_partitions_with_stores(
        events,
        keys=["event_id"],
        num_partitions=2,
        stores={"seen_ids": StoreSpec(history_retention_ms=86_400_000)},
        fn=first_seen,
        schema="event_id string, ts_ms long, payload string",
    )
    sink = Collector()
    run_available_now(firsts, tmp_path / "chk", sink)

    seen: set[str] = set()
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for i, rows in enumerate(batches):
        earliest = {r[0]: min(x for x in rows if x[0] == r[0]) for r in rows}
        expected[i] = sorted(r for k, r in earliest.items() if k not in seen)
        seen |= set(earliest)
    got = {b: sorted(tuple(r.values()) for r in rows) for b, rows in sink.batches.items()}
    assert got == expected
