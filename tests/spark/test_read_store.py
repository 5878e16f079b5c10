"""``read_store``: a store's committed state as a batch DataFrame, checked against a model of the
table updates the query applied (an ``asof_join`` store: key = the ``on`` columns, value = the
table values and the tie-breaker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import verstore.spark
from verstore.exceptions import MissingVersionError

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    Batch,
    Collector,
    gen_join,
    gen_schemas,
    generate,
    ms,
    run_available_now,
    to_arrow,
    write_batches,
)

# Every case here runs on classic and Spark Connect sessions alike (conftest.py).
pytestmark = pytest.mark.connect

KEY = ("region", "item")


def table_model(batches: list[Batch]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Per key, its versions after ``batches``: the winner of each (key, time) as asof_join
    documents it (largest tie-breaker, then the later batch, then the larger value), oldest
    first. Nothing expires: the generated times are far inside the default retention."""
    best: dict[tuple[Any, ...], dict[int, tuple[Any, ...]]] = {}
    for b, batch in enumerate(batches):
        for row in batch.table:
            if any(row[c] is None for c in KEY) or row["valid_from"] is None:
                continue
            t = ms(row["valid_from"])
            rank = (row["seq"], b, row["price"], row["currency"] or "")
            slot = best.setdefault(tuple(row[c] for c in KEY), {})
            if t not in slot or rank >= slot[t][0]:
                slot[t] = (rank, row)
    model = {}
    for key, slots in best.items():
        times = sorted(slots)
        model[key] = [
            {
                "price": slots[t][1]["price"],
                "currency": slots[t][1]["currency"],
                "seq": slots[t][1]["seq"],
                "valid_from": t,
                "valid_to": times[i + 1] if i + 1 < len(times) else None,
            }
            for i, t in enumerate(times)
        ]
    return model


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["region"],
            r["item"],
            r["price"],
            r["currency"],
            r["seq"],
            r["valid_from"],
            r["valid_to"],
        )
        for r in to_arrow(df).to_pylist()
    )


def expected(model: dict[tuple[Any, ...], list[dict[str, Any]]], as_of: int | None) -> list[Any]:
    out = []
    for key, versions in model.items():
        valid = [v for v in versions if as_of is None or v["valid_from"] <= as_of]
        if valid:
            v = valid[-1]
            out.append((*key, v["price"], v["currency"], v["seq"], v["valid_from"], v["valid_to"]))
    return sorted(out)


@pytest.fixture(scope="module")
def written(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Batch]]:
    """A finished as-of join query (4 micro-batches) and its input."""
    tmp = tmp_path_factory.mktemp("read-store")
    # Stores closed at their commits: a store a worker keeps open is settled by its keeper a
    # while later (a flush), which would change the local copies under the test that checks a
    # read leaves them alone (a read takes no lock: test_kept_stores, reader test).
    verstore.spark.configure(
        spark, str(tmp / "verstore"), local_dir=str(tmp / "local"), kept_stores_per_worker=0
    )
    batches = generate(91, batches=4)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp / "orders", tmp / "prices", batches, stream_pa, table_pa)
    run_available_now(gen_join(spark, tmp), tmp / "chk", Collector())
    return tmp / "verstore", batches


def test_the_newest_state_is_each_keys_latest_version(spark: Any, written: Any) -> None:
    root, batches = written
    df = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root))
    assert df.columns == [*KEY, "price", "currency", "seq", "valid_from", "valid_to", "partition"]
    assert rows_of(df) == expected(table_model(batches), None)


@pytest.mark.parametrize("as_of", [0, 17, 30, 55, 10_000])
def test_as_of_a_time_every_key_has_the_version_valid_then(
    spark: Any, written: Any, as_of: int
) -> None:
    root, batches = written
    df = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), as_of=as_of)
    assert rows_of(df) == expected(table_model(batches), as_of)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_version_is_the_state_after_its_micro_batch(
    spark: Any, written: Any, version: int
) -> None:
    root, batches = written
    df = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), version=version)
    assert rows_of(df) == expected(table_model(batches[:version]), None)


def test_history_is_every_version_with_its_validity(spark: Any, written: Any) -> None:
    root, batches = written
    df = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), history=True)
    model = table_model(batches)
    want = sorted(
        (*key, v["price"], v["currency"], v["seq"], v["valid_from"], v["valid_to"])
        for key, versions in model.items()
        for v in versions
    )
    assert rows_of(df) == want
    window = verstore.spark.read_store(
        spark, "asof", checkpoint_root=str(root), history=True, from_time=20, to_time=30
    )
    in_window = [
        r for r in want if r[5] <= 30 and (r[6] is None or r[6] > 20)
    ]  # valid at some point of [20, 30]
    assert rows_of(window) == sorted(in_window)


def test_key_bounds_are_typed_values(spark: Any, written: Any) -> None:
    root, batches = written
    everything = expected(table_model(batches), None)
    region_2 = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), prefix=(2,))
    assert rows_of(region_2) == [r for r in everything if r[0] == 2]
    ranged = verstore.spark.read_store(
        spark, "asof", checkpoint_root=str(root), start=(1, "dal"), end=(2, "curry")
    )
    assert rows_of(ranged) == [r for r in everything if (1, "dal") <= r[:2] < (2, "curry")]


def test_reading_never_touches_the_querys_local_copies(spark: Any, written: Any) -> None:
    root, _ = written
    local = root.parent / "local"
    before = sorted((p, p.stat().st_mtime_ns) for p in local.rglob("*") if p.is_file())
    verstore.spark.read_store(spark, "asof", checkpoint_root=str(root)).collect()
    after = sorted((p, p.stat().st_mtime_ns) for p in local.rglob("*") if p.is_file())
    assert after == before


def test_bad_requests_name_the_problem(spark: Any, written: Any) -> None:
    root, _ = written
    with pytest.raises(MissingVersionError, match="holds no state"):
        verstore.spark.read_store(spark, "nope", checkpoint_root=str(root))
    with pytest.raises(ValueError, match="with history=True use from_time"):
        verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), history=True, as_of=3)
    with pytest.raises(ValueError, match="prefix cannot be combined"):
        verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), prefix=(1,), start=(1,))
    with pytest.raises(ValueError, match="a key bound has 1 to 2 values"):
        verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), prefix=(1, "a", 3))


def test_the_change_feed_replays_into_each_versions_state(spark: Any, written: Any) -> None:
    """``changes=True``: each micro-batch's accepted writes. Applied in order to an empty table,
    batch by batch, they give the state of each version (the oracle's), and each comes from a
    table row of its own micro-batch."""
    root, batches = written
    df = verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), changes=True)
    assert df.columns == [
        "batch_id", "partition", "change_seq", "change_type", *KEY, "price", "currency", "seq",
        "valid_from",
    ]  # fmt: skip
    rows = sorted(to_arrow(df).to_pylist(), key=lambda r: (r["batch_id"], r["partition"]))
    assert {r["batch_id"] for r in rows} == set(range(len(batches)))
    state: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for b, batch in enumerate(batches):
        table_rows = {(*(t[c] for c in KEY), ms(t["valid_from"])) for t in batch.table}
        for r in (r for r in rows if r["batch_id"] == b):
            key = tuple(r[c] for c in KEY)
            assert (*key, r["valid_from"]) in table_rows
            assert r["change_type"] == "put"
            state.setdefault(key, {})[r["valid_from"]] = r
        replayed = sorted(
            (*key, v[t]["price"], v[t]["currency"], t) for key, v in state.items() for t in v
        )
        model = table_model(batches[: b + 1])
        want = sorted(
            (*key, m["price"], m["currency"], m["valid_from"])
            for key, versions in model.items()
            for m in versions
        )
        assert replayed == want, b
    some = verstore.spark.read_store(
        spark, "asof", checkpoint_root=str(root), changes=True, from_batch=1, to_batch=2
    )
    assert sorted(r["batch_id"] for r in to_arrow(some).to_pylist()) == sorted(
        r["batch_id"] for r in rows if 1 <= r["batch_id"] <= 2
    )


def test_the_change_feed_refuses_state_arguments(spark: Any, written: Any) -> None:
    root, _ = written
    with pytest.raises(ValueError, match=r"as_of.*cannot be combined"):
        verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), changes=True, as_of=5)
    with pytest.raises(ValueError, match="from_batch and to_batch go with changes=True"):
        verstore.spark.read_store(spark, "asof", checkpoint_root=str(root), from_batch=1)
    with pytest.raises(ValueError, match=r"from_batch \(3\) is after to_batch \(1\)"):
        verstore.spark.read_store(
            spark, "asof", checkpoint_root=str(root), changes=True, from_batch=3, to_batch=1
        )
