"""Update streams and reference models for the versioned-table tests.

:func:`write_stream` writes micro-batch ``i`` of one input as ``part-<i>.parquet`` (increasing
modification times, as ``streams.write_batches`` does for two inputs); read back with
``maxFilesPerTrigger=1`` each file is one micro-batch of a ``trigger(availableNow=True)`` query.

The reference models are per-key pure Python: a key's versions as a dict ``time -> value``
(``None`` for a tombstone), and ``put`` returns -1 exactly when the time is at or after the
key's newest version. They assume nothing expires (the tests use a long retention for them).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from streams import BASE_MTIME

Rows = list[dict[str, Any]]


def write_stream(directory: Path, batches: list[Rows], schema: pa.Schema) -> None:
    """Writes batch ``i`` as ``part-<i>.parquet`` (an empty file for an empty batch)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(batches):
        path = directory / f"part-{index:05d}.parquet"
        tmp = directory / f".tmp-part-{index:05d}.parquet"  # hidden: Spark skips dot files
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
        os.utime(tmp, (BASE_MTIME + index, BASE_MTIME + index))
        os.replace(tmp, path)


def read_stream(spark: Any, directory: Path, ddl: str) -> Any:
    return spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(directory))


def late_updates(batches: list[Rows], *, key: str, time: str) -> int:
    """How many updates are older than their key's newest time of an earlier batch."""
    newest: dict[Any, int] = {}
    late = 0
    for rows in batches:
        late += sum(r[key] in newest and r[time] < newest[r[key]] for r in rows)
        for r in rows:
            newest[r[key]] = max(newest.get(r[key], r[time]), r[time])
    return late


# --- latest_by_timestamp -------------------------------------------------------------------------


def generate_updates(
    seed: int, *, batches: int = 4, rows: int = 12, deletes: bool = True
) -> list[Rows]:
    """Updates ``(customer, t, item, qty, removed)`` with times drawn from the whole range in
    every batch: late updates across batches, equal (key, time) pairs within and across them."""
    rng = random.Random(seed)
    customers = ["anna", "bob", "carl", "dora", "emil"]
    items = ["berry sandwich", "ice-cream noodles", "mint pizza", "sushi cake"]
    out = []
    for _ in range(batches):
        out.append(
            [
                {
                    "customer": rng.choice(customers),
                    "t": rng.randrange(30),
                    "item": rng.choice(items),
                    "qty": rng.randint(-3, 3),
                    "removed": deletes and rng.random() < 0.15,
                }
                for _ in range(rows)
            ]
        )
    return out


def latest_reference(
    batches: list[Rows],
    *,
    emit: str,
    key: str,
    time: str,
    values: list[str],
    deletes: str,
    ttl: int | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """The expected output of ``latest_by_timestamp(..., previous=True)`` per batch, on one
    partition (one stream time), for updates within the grace period.

    Equal (key, time) updates of a batch: a delete wins, then the largest value tuple (the
    arrow-row order of the tested types: strings and ints compare naturally). With ``ttl``
    (docs/spark.md, "State that ends"): an update (not a delete) that becomes its key's newest
    but is older than the stream time before its batch minus the TTL expired on arrival and
    changes nothing; ``previous`` is the key's newest version just before the update, while it lived
    at the update's time.
    """
    versions: dict[Any, dict[int, tuple[Any, ...] | None]] = {}
    out: dict[int, list[dict[str, Any]]] = {}
    stream_time = -1
    for b, rows in enumerate(batches):
        winners: dict[tuple[Any, int], tuple[bool, tuple[Any, ...]]] = {}
        for r in rows:
            slot = (r[key], r[time])
            candidate = (bool(r[deletes]), () if r[deletes] else tuple(r[v] for v in values))
            if slot not in winners or candidate >= winners[slot]:
                winners[slot] = candidate
        before = {k: _newest(versions.get(k, {})) for k, _ in winners}
        first_prev: dict[Any, tuple[Any, ...] | None] = {}
        emitted = []
        batch_start = stream_time
        for k, t in sorted(winners):
            removed, value = winners[(k, t)]
            mine = versions.setdefault(k, {})
            prev = _newest(mine)
            if ttl is not None and mine and max(mine) + ttl <= t:
                prev = None  # the key's newest version had ended by the update's time
            is_latest = not mine or t >= max(mine)
            # (a delete is never ended by the TTL: it ends its key itself)
            arrived_expired = ttl is not None and not removed and t + ttl <= batch_start
            mine[t] = None if removed else value
            stream_time = max(stream_time, t)
            if is_latest and not arrived_expired:
                change = "delete" if removed else "upsert"
                first_prev.setdefault(k, prev)
            elif emit == "all":
                change = "out_of_order"
            else:
                continue
            changed = is_latest and not arrived_expired
            row = {key: k, time: t, "change": change}
            for i, v in enumerate(values):
                row[v] = None if removed else value[i]
                row["previous_" + v] = prev[i] if (prev is not None and changed) else None
            emitted.append(row)
        if emit == "latest":
            last = {row[key]: row for row in emitted}
            emitted = []
            for k, row in last.items():
                was = before[k] if ttl is None else first_prev[k]
                for i, v in enumerate(values):
                    row["previous_" + v] = was[i] if was is not None else None
                emitted.append(row)
        out[b] = emitted
    return out


def _newest(versions: dict[int, tuple[Any, ...] | None]) -> tuple[Any, ...] | None:
    return versions[max(versions)] if versions else None


# --- versioned_table_join ------------------------------------------------------------------------


def generate_tables(seed: int, *, batches: int = 4, rows: int = 9) -> tuple[list[Rows], list[Rows]]:
    """Left ``(id, lt, name)`` and right ``(id, rt, city)`` updates, out of order across and
    within batches, with equal (key, time) pairs."""
    rng = random.Random(seed)
    left: list[Rows] = []
    right: list[Rows] = []
    for _ in range(batches):
        left.append(
            [
                {"id": rng.randrange(4), "lt": rng.randrange(25), "name": rng.choice("ABCDE")}
                for _ in range(rng.randrange(rows + 1))
            ]
        )
        right.append(
            [
                {"id": rng.randrange(4), "rt": rng.randrange(25), "city": rng.choice("vwxyz")}
                for _ in range(rng.randrange(rows + 1))
            ]
        )
    return left, right


def join_reference(
    left: list[Rows], right: list[Rows], *, how: str, lookup: str
) -> dict[int, list[tuple[Any, ...]]]:
    """The expected ``versioned_table_join`` per batch, rows ``(id, name, lt, city, rt)``.

    Within a batch: per side, equal (key, time) updates collapse to the largest value; then
    updates are processed in (time, side) order, left first; an update that becomes its key's
    newest version is joined with the other side's version at its time (``as_of``) or the
    other side's newest version (``latest``).
    """
    sides: list[dict[int, dict[int, str]]] = [{}, {}]
    out: dict[int, list[tuple[Any, ...]]] = {}
    for b, (lrows, rrows) in enumerate(zip(left, right, strict=True)):
        winners: list[dict[tuple[int, int], str]] = [{}, {}]
        for s, rows, t_col, v_col in ((0, lrows, "lt", "name"), (1, rrows, "rt", "city")):
            for r in rows:
                slot = (r["id"], r[t_col])
                if slot not in winners[s] or r[v_col] >= winners[s][slot]:
                    winners[s][slot] = r[v_col]
        sequence = sorted((t, s, k, v) for s in (0, 1) for (k, t), v in winners[s].items())
        emitted = []
        for t, s, k, v in sequence:
            mine = sides[s].setdefault(k, {})
            is_latest = not mine or t >= max(mine)
            mine[t] = v
            if not is_latest:
                continue
            theirs = sides[1 - s].get(k, {})
            times = [x for x in theirs if x <= t] if lookup == "as_of" else list(theirs)
            other = (theirs[max(times)], max(times)) if times else None
            if other is None and (how == "inner" or (how == "left" and s == 1)):
                continue
            own = (v, t)
            lv, rv = (own, other) if s == 0 else (other, own)
            emitted.append((k, *(lv or (None, None)), *(rv or (None, None))))
        out[b] = emitted
    return out


# --- as-of joins written with the stateful helpers ----------------------------------------------


def generate_asof(seed: int, *, batches: int = 4, orders: int = 10, prices: int = 5) -> list[Any]:
    """Orders ``(order_id, item, qty, t)`` and price updates ``(item, price, valid_from)``,
    late on both sides; price times are unique per item (no equal-time winner to decide)."""
    from streams import Batch

    rng = random.Random(seed)
    items = ["curry", "naan", "dal", "soup"]
    free = {item: list(range(0, 60, 3)) for item in items}
    for times in free.values():
        rng.shuffle(times)
    out = []
    order_id = 0
    for _ in range(batches):
        batch = Batch()
        for _ in range(orders):
            batch.stream.append(
                {
                    "order_id": order_id,
                    "item": rng.choice(items),
                    "qty": rng.randint(1, 4),
                    "t": rng.randrange(65),
                }
            )
            order_id += 1
        for _ in range(prices):
            item = rng.choice(items[:3])  # "soup" never gets a price
            batch.table.append(
                {"item": item, "price": float(rng.randint(1, 30)), "valid_from": free[item].pop()}
            )
        out.append(batch)
    return out
