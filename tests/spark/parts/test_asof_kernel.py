"""The as-of join's Rust partition kernel (``rust/asof.rs``, through ``verstore._core.asof_*``)
against the pyarrow path it replaced (``asof_reference.py``): on random micro-batches
with nulls, ties, tie-breakers, strictness, tolerances, negative and extreme times and evolved
value layouts, both give the same output, bit for bit, the same put outcomes and the same
stored state."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import verstore
from asof_reference import AsofPartitionArrow
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verstore._core import TUPLE_ENCODING, asof_compact, asof_lookup, encode_rows
from verstore.checkpoint import StoreSettings
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.values import ValueCodec
from verstore.spark._runtime import PartitionContext
from verstore.spark._spill import SpillArea
from verstore.spark.joins import _AsofPartition

SCHEMA = pa.schema(
    [
        ("__vs_side", pa.int8()),
        ("__vs_k0", pa.string()),
        ("__vs_t", pa.int64()),
        ("__vs_s0", pa.int64()),
        ("__vs_v0", pa.float64()),
        ("__vs_b0", pa.int32()),
    ]
)
EXTREMES = [-(2**63), -(2**63) + 1, 2**63 - 1, 2**63 - 2]

# Few keys and a narrow range of times, so that rows meet: ties, exact matches, matches at
# exactly the tolerance. Nulls and extreme times now and then.
times = st.one_of(st.integers(-2, 14), st.integers(-2, 14), st.integers(-2, 14), st.none(),
                  st.sampled_from(EXTREMES))  # fmt: skip
rows = st.fixed_dictionaries(
    {
        "__vs_side": st.sampled_from([0, 1, 0, 1, 0, 1, None]),
        "__vs_k0": st.sampled_from(["a", "b", "a", "b", "\x00", None]),
        "__vs_t": times,
        "__vs_s0": st.integers(0, 1_000),
        "__vs_v0": st.one_of(st.sampled_from([0.0, -0.0, 1.5, 2.5, float("nan")]), st.none()),
        "__vs_b0": st.one_of(st.integers(0, 3), st.none()),
    }
)


def codec(evolved: bool, tie_breaker: bool = True) -> ValueCodec:
    stored = ["__vs_v0", "__vs_b0"] if tie_breaker else ["__vs_v0"]
    values = pa.schema([SCHEMA.field(c) for c in stored])
    layout = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("k", pa.string())]), values)
    layouts = (layout, layout) if evolved else ()
    return ValueCodec(StoreSettings(25, 5, None, layout, layouts))


def run(fn: Any, micro_batches: list[list[pa.RecordBatch]], evolved: bool, tmp: Any) -> Any:
    stored_codec = codec(evolved, bool(fn.tie_breakers))
    store = verstore.VersionedStore.in_memory(history_retention_ms=25, segment_interval_ms=5)
    outputs, expired = [], []
    for b, batches in enumerate(micro_batches):
        with SpillArea(tmp, 1 << 30) as area:
            ctx = PartitionContext(
                stores={"asof": store},
                batch_id=b,
                partition=0,
                rebuilt={},
                spill=area,
                codecs={"asof": stored_codec},
            )
            out = list(fn(ctx, iter(batches)))
        outputs.append(out)
        expired.append(ctx.metrics.rows_expired)
    keys = {k for batches in micro_batches for x in batches for k in encode_rows(x, ["__vs_k0"])}
    state = [(k, store.versions(k.as_py())) for k in sorted(keys, key=lambda k: k.as_py())]
    return outputs, expired, store.observed_stream_time, state


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.lists(st.lists(rows, min_size=1, max_size=60), min_size=1, max_size=4),
    chunk=st.integers(1, 17),
    inner=st.booleans(),
    tie_breaker=st.booleans(),
    strict=st.booleans(),
    tolerance=st.sampled_from([None, 0, 1, 2, 3, 7]),
    evolved=st.booleans(),
)
def test_the_kernel_gives_what_the_pyarrow_path_gives(
    tmp_path: Any,
    data: list[list[dict[str, Any]]],
    chunk: int,
    inner: bool,
    tie_breaker: bool,
    strict: bool,
    tolerance: int | None,
    evolved: bool,
) -> None:
    micro_batches = [
        [
            pa.RecordBatch.from_pylist(rows[i : i + chunk], schema=SCHEMA)
            for i in range(0, len(rows), chunk)
        ]
        for rows in data
    ]
    args = dict(
        store="asof",
        keys=["__vs_k0"],
        stream_cols=["__vs_s0", "__vs_k0", "__vs_t"],
        values=["__vs_v0"],
        tie_breakers=["__vs_b0"] if tie_breaker else [],
        out_names=["order", "key", "time", "price", "from", "to"],
        inner=inner,
        tolerance_ms=tolerance,
        strict=strict,
    )
    got = run(_AsofPartition(**args), micro_batches, evolved, tmp_path)  # type: ignore[arg-type]
    want = run(AsofPartitionArrow(**args), micro_batches, evolved, tmp_path)  # type: ignore[arg-type]
    got_out, want_out = got[0], want[0]
    assert len(got_out) == len(want_out)
    for g, w in zip(got_out, want_out, strict=True):
        # the same batches, schemas and values (repr: NaN equals NaN, -0.0 differs from 0.0)
        assert [x.schema for x in g] == [x.schema for x in w]
        assert [repr(x.to_pylist()) for x in g] == [repr(x.to_pylist()) for x in w]
    assert got[1:] == want[1:]


def test_compact_matches_the_value_codec_and_the_encodings_of_its_columns() -> None:
    batch = pa.RecordBatch.from_pylist(
        [
            {
                "__vs_side": 0,
                "__vs_k0": "a",
                "__vs_t": 3,
                "__vs_s0": 1,
                "__vs_v0": 1.5,
                "__vs_b0": 2,
            },
            {
                "__vs_side": 1,
                "__vs_k0": "a",
                "__vs_t": 3,
                "__vs_s0": 1,
                "__vs_v0": 1.5,
                "__vs_b0": 2,
            },
            {
                "__vs_side": 0,
                "__vs_k0": "b",
                "__vs_t": -1,
                "__vs_s0": 1,
                "__vs_v0": None,
                "__vs_b0": None,
            },
        ],
        schema=SCHEMA,
    )
    for evolved in (False, True):
        c = codec(evolved)
        prefix = b"\xfe\x00\x01" if evolved else b""
        out = asof_compact(
            batch, side="__vs_side", table_side=0, keys=["__vs_k0"], time="__vs_t",
            tie_breakers=["__vs_b0"], values=["__vs_v0"], value_prefix=prefix,
            names=["sk", "k", "t", "v", "b"],
        )  # fmt: skip
        first = batch.slice(0, 1)
        assert out.num_rows == 1
        assert out["v"].to_pylist() == c.encode(first, ["__vs_v0", "__vs_b0"]).to_pylist()
        assert (
            out["sk"].to_pylist()
            == encode_rows(first, ["__vs_t", "__vs_k0", "__vs_b0", "__vs_v0"]).to_pylist()
        )
        assert out["b"].to_pylist() == encode_rows(first, ["__vs_b0"]).to_pylist()


def test_the_kernel_refuses_bad_columns_and_closed_stores() -> None:
    batch = pa.RecordBatch.from_pylist([{"k": "a", "t": 1.5}])
    store = verstore.VersionedStore.in_memory(history_retention_ms=25)
    with pytest.raises(ValueError, match='no column named "x"'):
        asof_lookup(store, batch, keys=["x"], time="t")
    with pytest.raises(ValueError, match="must be int64"):
        asof_lookup(store, batch, keys=["k"], time="t")
    store.close()
    ok = pa.RecordBatch.from_pylist([{"k": "a", "t": 1}])
    with pytest.raises(verstore.StoreClosedError):
        asof_lookup(store, ok, keys=["k"], time="t")
