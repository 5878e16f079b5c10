"""``latest_by_timestamp`` and ``versioned_table_join`` on streaming micro-batches.

Inputs are parquet files, one per micro-batch (``table_streams.py``); queries run with
``trigger(availableNow=True)`` into a ``foreachBatch`` collector, and the output of every batch
is compared with a per-key pure-Python reference model of the store's put return codes.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from verstore import VersionedStore
from verstore._core import TUPLE_ENCODING
from verstore.checkpoint import ColumnLayout, StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.spark import latest_by_timestamp, versioned_table_join
from verstore.spark._faults import FAIL_AFTER_COMMIT
from verstore.spark._runtime import PartitionContext
from verstore.spark._spill import SpillArea

pytest.register_assert_rewrite("streams", "table_streams")
from streams import Collector, batch_input_rows, ms, run_available_now, ts  # noqa: E402
from table_streams import (  # noqa: E402
    generate_tables,
    generate_updates,
    join_reference,
    late_updates,
    latest_reference,
    read_stream,
    write_stream,
)

# Every case here runs on classic and Spark Connect sessions alike (conftest.py).
pytestmark = pytest.mark.connect

VOTES_DDL = "customer STRING, item STRING, t LONG"
VOTES = pa.schema([("customer", pa.string()), ("item", pa.string()), ("t", pa.int64())])


def plain_codec(values: pa.Schema) -> ValueCodec:
    """The values of a store that never evolved (its keys do not matter here)."""
    layout = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("k", pa.binary())]), values)
    return ValueCodec(StoreSettings(10**9, None, None, layout))


def vote(customer: str, item: str, t: int) -> dict[str, Any]:
    return {"customer": customer, "item": item, "t": t}


def test_vote_tally_ignores_a_late_vote(spark: Any, verstore_root: Path, tmp_path: Path) -> None:
    """Seed case: Anna's late t=3 vote arrives after her t=4 vote; the tally does not move."""
    batches = [
        [
            vote("Anna", "mint pizza", 1),
            vote("Bob", "mint pizza", 2),
            vote("Anna", "berry sandwich", 4),
        ],
        [vote("Anna", "ice-cream noodles", 3)],
    ]
    write_stream(tmp_path / "votes", batches, VOTES)
    votes = read_stream(spark, tmp_path / "votes", VOTES_DDL)
    changes = latest_by_timestamp(
        votes, key="customer", time_col="t", value_cols=["item"], previous=True
    )
    assert changes.columns == ["customer", "t", "item", "change", "previous_item"]
    sink = Collector()
    query = run_available_now(changes, tmp_path / "chk", sink)
    assert batch_input_rows(query, tmp_path / "votes") == {0: 3, 1: 1}
    assert sorted(
        (r["customer"], r["t"], r["item"], r["change"], r["previous_item"]) for r in sink.batches[0]
    ) == [
        ("Anna", 1, "mint pizza", "upsert", None),
        ("Anna", 4, "berry sandwich", "upsert", "mint pizza"),
        ("Bob", 2, "mint pizza", "upsert", None),
    ]
    assert sink.batches[1] == []  # the late vote only rewrote Anna's history

    # The tally, a table aggregation over the changes: +1 for the new vote, -1 for the vote it
    # replaced (KIP-914: out-of-order votes never reach it).
    tally: Counter[str] = Counter()
    after: dict[int, dict[str, int]] = {}
    for batch_id in sorted(sink.batches):
        for row in sink.batches[batch_id]:
            if row["change"] == "upsert":
                tally[row["item"]] += 1
            if row["previous_item"] is not None:
                tally[row["previous_item"]] -= 1
        after[batch_id] = {item: n for item, n in tally.items() if n}
    assert after == {
        0: {"berry sandwich": 1, "mint pizza": 1},
        1: {"berry sandwich": 1, "mint pizza": 1},
    }


UPDATES_DDL = "customer STRING, t {time}, item STRING, qty INT, removed BOOLEAN"


def updates_schema(timestamps: bool) -> pa.Schema:
    return pa.schema(
        [
            ("customer", pa.string()),
            ("t", pa.timestamp("us", tz="UTC") if timestamps else pa.int64()),
            ("item", pa.string()),
            ("qty", pa.int32()),
            ("removed", pa.bool_()),
        ]
    )


@pytest.mark.parametrize(
    ("emit", "timestamps", "num_partitions", "fail_after_commit"),
    [
        ("changes", False, 3, False),
        ("latest", True, None, False),
        ("all", False, 2, True),
    ],
)
def test_latest_by_timestamp_matches_reference(
    spark: Any,
    verstore_root: Path,
    tmp_path: Path,
    emit: str,
    timestamps: bool,
    num_partitions: int | None,
    fail_after_commit: bool,
) -> None:
    # a failing task is retried in a new Python worker: slower, so fewer batches
    batches = generate_updates(7)[: 3 if fail_after_commit else 4]
    expected = latest_reference(
        batches, emit=emit, key="customer", time="t", values=["item", "qty"], deletes="removed"
    )
    if timestamps:
        batches = [[{**r, "t": ts(r["t"])} for r in rows] for rows in batches]
    write_stream(tmp_path / "updates", batches, updates_schema(timestamps))
    updates = read_stream(
        spark, tmp_path / "updates", UPDATES_DDL.format(time="TIMESTAMP" if timestamps else "LONG")
    )
    out = latest_by_timestamp(
        updates,
        key="customer",
        time_col="t",
        deletes="removed",
        emit=emit,
        num_partitions=num_partitions,
        previous=True,
        history_retention="1 day",
    )
    assert out.columns == [
        "customer", "t", "item", "qty", "change", "previous_item", "previous_qty"
    ]  # fmt: skip
    sink = Collector()
    if fail_after_commit:  # every task fails once right after committing its stores
        spark.conf.set(FAIL_AFTER_COMMIT, "true")
    try:
        query = run_available_now(out, tmp_path / "chk", sink)
    finally:
        spark.conf.unset(FAIL_AFTER_COMMIT)
    assert batch_input_rows(query, tmp_path / "updates") == {
        i: len(rows) for i, rows in enumerate(batches)
    }
    columns = list(out.columns)
    got = {b: Counter(tuple(ms(r[c]) for c in columns) for r in rows)
           for b, rows in sink.batches.items()}  # fmt: skip
    want = {b: Counter(tuple(r[c] for c in columns) for r in rows) for b, rows in expected.items()}
    assert got == want
    # the data exercises what it should
    changes = [r for rows in expected.values() for r in rows]
    assert any(r["change"] == "delete" for r in changes)
    assert any(r["previous_item"] is not None for r in changes)
    assert late_updates(generate_updates(7), key="customer", time="t") >= 5


def test_expired_updates_are_dropped_and_batches_apply_in_time_order(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """One partition, 10 ms retention: the grace period is the partition's stream time - 10."""
    batches = [
        [vote("k", "first", 100)],
        [
            vote("late", "x", 50),  # 50 < 100 - 10: expired, dropped
            vote("k", "older", 95),  # within the grace period but older: history only
            vote("new", "y", 90),  # 90 >= 90: accepted, a new key's first version
        ],
        # Applied in time order: b@185 is checked against the stream time of earlier batches
        # (100), not against a@200 of the same batch, whatever the keys' order.
        [vote("a", "z", 200), vote("b", "w", 185)],
        [vote("c", "v", 189)],  # 189 < 200 - 10: expired
    ]
    write_stream(tmp_path / "votes", batches, VOTES)
    votes = read_stream(spark, tmp_path / "votes", VOTES_DDL)
    out = latest_by_timestamp(
        votes, key="customer", time_col="t", emit="all", history_retention=10, num_partitions=1
    )
    sink = Collector()
    run_available_now(out, tmp_path / "chk", sink)
    got = {b: sorted((r["customer"], r["t"], r["change"]) for r in rows)
           for b, rows in sink.batches.items()}  # fmt: skip
    assert got == {
        0: [("k", 100, "upsert")],
        1: [("k", 95, "out_of_order"), ("late", 50, "expired"), ("new", 90, "upsert")],
        2: [("a", 200, "upsert"), ("b", 185, "upsert")],
        3: [("c", 189, "expired")],
    }


LEFT_DDL = "id INT, lt {time}, name STRING"
RIGHT_DDL = "id INT, rt {time}, city STRING"


@pytest.mark.parametrize(
    ("how", "lookup", "timestamps"),
    [("inner", "as_of", False), ("outer", "as_of", True), ("left", "latest", False)],
)
def test_versioned_table_join_matches_reference(
    spark: Any, verstore_root: Path, tmp_path: Path, how: str, lookup: str, timestamps: bool
) -> None:
    left, right = generate_tables(10)
    expected = join_reference(left, right, how=how, lookup=lookup)
    time_pa = pa.timestamp("us", tz="UTC") if timestamps else pa.int64()
    if timestamps:
        left = [[{**r, "lt": ts(r["lt"])} for r in rows] for rows in left]
        right = [[{**r, "rt": ts(r["rt"])} for r in rows] for rows in right]
    write_stream(
        tmp_path / "left",
        left,
        pa.schema([("id", pa.int32()), ("lt", time_pa), ("name", pa.string())]),
    )
    write_stream(
        tmp_path / "right",
        right,
        pa.schema([("id", pa.int32()), ("rt", time_pa), ("city", pa.string())]),
    )
    time_ddl = "TIMESTAMP" if timestamps else "LONG"
    joined = versioned_table_join(
        read_stream(spark, tmp_path / "left", LEFT_DDL.format(time=time_ddl)),
        read_stream(spark, tmp_path / "right", RIGHT_DDL.format(time=time_ddl)),
        on="id",
        left_time="lt",
        right_time="rt",
        how=how,
        lookup=lookup,
        history_retention="1 hour",
    )
    assert joined.columns == ["id", "lt", "name", "rt", "city"]
    sink = Collector()
    query = run_available_now(joined, tmp_path / "chk", sink)
    assert batch_input_rows(query, tmp_path / "left") == {i: len(r) for i, r in enumerate(left)}
    assert batch_input_rows(query, tmp_path / "right") == {i: len(r) for i, r in enumerate(right)}
    got = {b: Counter((r["id"], r["name"], ms(r["lt"]), r["city"], ms(r["rt"])) for r in rows)
           for b, rows in sink.batches.items()}  # fmt: skip
    assert got == {b: Counter(rows) for b, rows in expected.items()}
    # the data exercises what it should: late updates on both sides, one-sided results
    emitted = [r for rows in expected.values() for r in rows]
    assert len(emitted) > 15
    if how == "outer":
        assert any(r[1] is None for r in emitted) and any(r[3] is None for r in emitted)
    plain_left, plain_right = generate_tables(10)
    assert late_updates(plain_left, key="id", time="lt") >= 3
    assert late_updates(plain_right, key="id", time="rt") >= 3


def test_join_prefixes_clashing_column_names(spark: Any, verstore_root: Path) -> None:
    left = spark.createDataFrame([], "id INT, t LONG, v STRING")
    right = spark.createDataFrame([], "id INT, t LONG, v STRING, w INT")
    joined = versioned_table_join(left, right, on="id", left_time="t", right_time="t")
    assert joined.columns == ["id", "left_t", "left_v", "right_t", "right_v", "w"]


def test_argument_errors(spark: Any) -> None:
    df = spark.createDataFrame([], "k STRING, t LONG, v STRING, d BOOLEAN, s STRING, change INT")
    with pytest.raises(ValueError, match="emit must be"):
        latest_by_timestamp(df, key="k", time_col="t", emit="some")
    with pytest.raises(ValueError, match=r"no column\(s\) \['nope'\]"):
        latest_by_timestamp(df, key="nope", time_col="t")
    with pytest.raises(TypeError, match="time_col column 's' must be a timestamp or an integer"):
        latest_by_timestamp(df, key="k", time_col="s", value_cols=["v"])
    with pytest.raises(TypeError, match="deletes column 'v' must be boolean"):
        latest_by_timestamp(df, key="k", time_col="t", deletes="v", value_cols=["s"])
    with pytest.raises(ValueError, match=r"duplicate columns \['change'\]"):
        latest_by_timestamp(df, key="k", time_col="t")
    with pytest.raises(ValueError, match="history_retention"):
        latest_by_timestamp(df, key="k", time_col="t", value_cols=["v"], history_retention="-1 s")
    with pytest.raises(ValueError, match="store must be a plain directory name"):
        latest_by_timestamp(df, key="k", time_col="t", value_cols=["v"], store="a/b")
    with pytest.raises(ValueError, match="value_cols must not repeat"):
        latest_by_timestamp(df, key="k", time_col="t", value_cols=["k"])
    with pytest.raises(ValueError, match="how must be"):
        versioned_table_join(df, df, on="k", left_time="t", right_time="t", how="cross")
    with pytest.raises(ValueError, match="lookup must be"):
        versioned_table_join(df, df, on="k", left_time="t", right_time="t", lookup="asof")
    with pytest.raises(ValueError, match="num_partitions must be an int >= 1"):
        versioned_table_join(df, df, on="k", left_time="t", right_time="t", num_partitions=0)


# --- the partition functions alone (no Spark): many seeds, input in random chunks -----------------


def chunks(batch: pa.RecordBatch, rng: random.Random) -> Iterator[pa.RecordBatch]:
    """The batch cut at random points and shuffled, as Spark may deliver a partition's rows."""
    cuts = sorted(rng.sample(range(1, batch.num_rows), max(0, min(3, batch.num_rows - 1))))
    bounds = [0, *cuts, batch.num_rows]
    parts = [batch.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    rng.shuffle(parts)
    return iter(parts)


def spill_area(tmp_path: Path, seed: int) -> SpillArea:
    """Odd seeds get a budget of a few rows, so every buffer and sort spills to disk."""
    return SpillArea(tmp_path, 2_000 if seed % 2 else 1 << 40)


@pytest.mark.parametrize("ttl", [None, 4, 12])
@pytest.mark.parametrize("emit", ["changes", "latest", "all"])
def test_latest_partition_function_matches_reference(
    emit: str, ttl: int | None, tmp_path: Path
) -> None:
    from verstore.spark.latest_by_timestamp import _LatestPartition

    columns = ["customer", "t", "item", "qty", "change", "previous_item", "previous_qty"]
    schema = updates_schema(False).append(pa.field("__vs_ts", pa.int64()))
    for seed in range(40):
        rng = random.Random(seed)
        batches = generate_updates(seed, batches=3, rows=rng.randrange(1, 15))
        store = VersionedStore.in_memory(history_retention_ms=10**9, latest_ttl_ms=ttl)
        fn = _LatestPartition(
            store="s", keys=["customer"], time_col="t", values=["item", "qty"],
            deletes="removed", emit=emit, previous=True, out_names=columns, latest_ttl_ms=ttl,
        )  # fmt: skip
        codecs = {"s": plain_codec(pa.schema([schema.field("item"), schema.field("qty")]))}
        expected = latest_reference(
            batches, emit=emit, key="customer", time="t", values=["item", "qty"],
            deletes="removed", ttl=ttl,
        )  # fmt: skip
        for b, rows in enumerate(batches):
            data = pa.RecordBatch.from_pylist([{**r, "__vs_ts": r["t"]} for r in rows], schema)
            with spill_area(tmp_path, seed) as area:
                ctx = PartitionContext(
                    stores={"s": store}, batch_id=b, partition=0, rebuilt={}, spill=area,
                    codecs=codecs,
                )  # fmt: skip
                got = [r for out in fn(ctx, chunks(data, rng)) for r in out.to_pylist()]
            assert Counter(tuple(r[c] for c in columns) for r in got) == Counter(
                tuple(r[c] for c in columns) for r in expected[b]
            ), (seed, b)


@pytest.mark.parametrize("lookup", ["as_of", "latest"])
@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_join_partition_function_matches_reference(how: str, lookup: str, tmp_path: Path) -> None:
    from verstore.spark.table_join import _JoinPartition

    left_t = pa.struct([("lt", pa.int64()), ("name", pa.string())])
    right_t = pa.struct([("rt", pa.int64()), ("city", pa.string())])
    schema = pa.schema(
        [
            ("__vs_k0", pa.int32()),
            ("__vs_side", pa.int8()),
            ("__vs_ts", pa.int64()),
            ("__vs_left", left_t),
            ("__vs_right", right_t),
        ]
    )
    for seed in range(40):
        rng = random.Random(seed)
        left, right = generate_tables(seed, batches=3, rows=rng.randrange(1, 10))
        stores = {
            name: VersionedStore.in_memory(history_retention_ms=10**9)
            for name in ("j_left", "j_right")
        }
        fn = _JoinPartition(
            stores=("j_left", "j_right"), keys=["__vs_k0"], how=how, lookup=lookup,
            out_names=["id", "lt", "name", "rt", "city"],
            key_schema=pa.schema([schema.field("__vs_k0")]),
        )  # fmt: skip
        codecs = {
            "j_left": plain_codec(pa.schema(list(left_t))),
            "j_right": plain_codec(pa.schema(list(right_t))),
        }
        expected = join_reference(left, right, how=how, lookup=lookup)
        for b, (lrows, rrows) in enumerate(zip(left, right, strict=True)):
            rows = [
                {"__vs_k0": r["id"], "__vs_side": 0, "__vs_ts": r["lt"], "__vs_left": r}
                for r in lrows
            ] + [
                {"__vs_k0": r["id"], "__vs_side": 1, "__vs_ts": r["rt"], "__vs_right": r}
                for r in rrows
            ]
            rng.shuffle(rows)
            data = pa.RecordBatch.from_pylist(rows, schema)
            with spill_area(tmp_path, seed) as area:
                ctx = PartitionContext(
                    stores=stores, batch_id=b, partition=0, rebuilt={}, spill=area, codecs=codecs
                )
                got = [r for out in fn(ctx, chunks(data, rng)) for r in out.to_pylist()]
            assert Counter((r["id"], r["name"], r["lt"], r["city"], r["rt"]) for r in got) == (
                Counter(expected[b])
            ), (seed, b)
