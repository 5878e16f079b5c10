"""Writes a golden checkpoint set: ``python tests/golden/make_golden.py``, from the repository.

Every later verstore must open, read and continue the checkpoints of this one
(``tests/checkpoint/test_golden.py``). A release that changes any on-disk format (the checkpoint's
``FORMAT_VERSION``, the store's or the changelog's layout, the tuple encoding) adds its own set,
``tests/golden/verstore-<version>/``, with this script and keeps every older set: a set is
never regenerated once committed (``--add`` writes only the stores a set lacks, for a store
added to this script within the same release).

A set is a checkpoint root written through the public checkpoint API, as a query's tasks write
it, plus ``golden.json``: the settings, every commit's writes (per store, partition and
version) and what each version reads. Two stores:

* ``kv``: bytes keys and values, two partitions, seven versions: puts, deletes, history
  across several segments, expired segments, writes rejected as too old; a snapshot every
  three commits and changelogs between, so opening a version rebuilds from a snapshot plus
  replay.
* ``prices``: typed columns as the Spark helpers store them (``ColumnLayout``, the tuple
  encoding): a ``(symbol, venue)`` key and ``(price, size, at)`` value, four versions.
* ``quotes``: typed columns across a value schema evolution: versions 1-2 in a first layout,
  3-4 with a column added, two widened and one dropped (``_columns-1.json``, marked values).
* ``sessions``: a store with a latest TTL (``latest_ttl_ms``, store format 4 and a
  ``_meta.json`` of checkpoint format 3): keys that churn and expire, reclaimed at every commit.
* ``pushed``: a store of format 5 (latest values with unsettled history, docs/format.md): puts
  in time order over more keys than a 1 MB store's cache holds take the read-free path, late
  writes and deletes settle some keys, and snapshots hold the rest unsettled.
* ``moved``: typed columns repartitioned: versions 1-3 on two partitions, then moved to three
  at version 3 (``_partitioning-1.json``, changelogs of format 2 with their stream-time
  record), versions 4-5 on three; keys routed by the CRC-32 of their stored bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import verstore
from verstore import committed
from verstore._core import TUPLE_ENCODING, encode_rows
from verstore.checkpoint import CheckpointOptions, ColumnLayout, PartitionStore
from verstore.checkpoint.layout import FORMAT_VERSION

LINEAGE = "golden-query"
RETENTION_MS = 40
SEGMENT_MS = 10
# Every version stays rebuildable (cleanup keeps them), so the test can open each one.
OPTIONS = CheckpointOptions(snapshot_interval=3, min_versions_to_retain=100, lock_timeout_s=5)
KV_KEYS = [b"a", b"b", b"c", b"d", b"e", b"\x00", b"\xff\xfe"]
KV = {"store": "kv", "partitions": 2, "versions": 7, "seed": 2026}
PRICES = {"store": "prices", "partitions": 1, "versions": 4, "seed": 11}


def kv_ops(rng: random.Random, stream_time: int) -> list[list[Any]]:
    """One commit's writes: ``[kind, key hex, value hex or None, timestamp]``."""
    ops: list[list[Any]] = []
    for _ in range(rng.randint(4, 12)):
        key = rng.choice(KV_KEYS)
        ts = max(0, stream_time + rng.randint(-RETENTION_MS - 10, 15))
        stream_time = max(stream_time, ts)
        if rng.random() < 0.2:
            ops.append(["delete", key.hex(), None, ts])
        else:
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 9))
            ops.append(["put", key.hex(), None if value is None else value.hex(), ts])
    return ops


def apply_kv(store: verstore.VersionedStore, ops: list[list[Any]]) -> None:
    for kind, key, value, ts in ops:
        if kind == "put":
            store.put(bytes.fromhex(key), None if value is None else bytes.fromhex(value), ts)
        else:
            store.delete(bytes.fromhex(key), ts)


def record(rec: Any) -> list[Any] | None:
    return None if rec is None else [rec.value.hex(), rec.timestamp, rec.valid_to]


def kv_reads(store: verstore.VersionedStore, keys: list[bytes]) -> dict[str, Any]:
    """Every read the golden test compares, in JSON form."""
    ost = store.observed_stream_time
    low = max(0, ost - RETENTION_MS - 2 * SEGMENT_MS)
    out: dict[str, Any] = {"observed_stream_time": ost}
    for key in keys:
        out[f"get {key.hex()}"] = record(store.get(key))
        out[f"as_of {key.hex()}"] = [record(store.get(key, as_of=t)) for t in range(low, ost + 2)]
        out[f"versions {key.hex()}"] = [record(r) for r in store.versions(key, ascending=True)]
    return out


def reference(ops_by_version: dict[str, list[list[Any]]], version: int) -> Any:
    """An in-memory store with the writes of versions 1..``version``."""
    store = verstore.VersionedStore.in_memory(
        history_retention_ms=RETENTION_MS, segment_interval_ms=SEGMENT_MS
    )
    for v in range(1, version + 1):
        apply_kv(store, ops_by_version.get(str(v), []))
    return store


def open_partition(
    root: Path, store: str, partition: int, version: int, local: Path, **kwargs: Any
) -> PartitionStore:
    return PartitionStore.open(
        str(root),
        store,
        partition,
        version,
        str(local),
        lineage=LINEAGE,
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=SEGMENT_MS,
        options=OPTIONS,
        **kwargs,
    )


def checkpoint_reads(root: Path, partition: int, version: int, local: Path) -> dict[str, Any]:
    """:func:`kv_reads` of ``kv``'s ``partition`` at ``version``, opened read-only in
    ``local`` (a fresh directory: rebuilt from the checkpoint)."""
    part = open_partition(root, "kv", partition, version, local, read_only=True)
    try:
        assert part.stats.rebuilt or version == 0, "a fresh directory must be rebuilt"
        return kv_reads(part.store, KV_KEYS)
    finally:
        part.abort()


def write_kv(root: Path, scratch: Path) -> dict[str, Any]:
    rng = random.Random(KV["seed"])
    partitions: dict[str, Any] = {}
    for p in range(KV["partitions"]):
        ops_by_version: dict[str, list[list[Any]]] = {}
        stream_time = 100
        for version in range(KV["versions"]):  # opens version, commits version + 1
            ops = kv_ops(rng, stream_time)
            stream_time = max([stream_time] + [op[3] for op in ops])
            part = open_partition(root, "kv", p, version, scratch / f"kv-{p}")
            apply_kv(part.store, ops)
            part.commit()
            ops_by_version[str(version + 1)] = ops
        reads = {}
        for v in range(1, KV["versions"] + 1):
            with reference(ops_by_version, v) as store:
                reads[str(v)] = kv_reads(store, KV_KEYS)
            # A set is written only when the checkpoint reads what was written.
            assert checkpoint_reads(root, p, v, scratch / f"check-{p}-{v}") == reads[str(v)]
        partitions[str(p)] = {"ops": ops_by_version, "reads": reads}
    return {**KV, "partitions_data": partitions}


def prices_layout() -> ColumnLayout:
    import pyarrow as pa

    key = pa.schema([("symbol", pa.string()), ("venue", pa.int32())])
    value = pa.schema(
        [("price", pa.float64()), ("size", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))]
    )
    return ColumnLayout.of(TUPLE_ENCODING, key, value)


def prices_rows(rng: random.Random, version: int) -> list[dict[str, Any]]:
    """One commit's typed rows: ``symbol, venue, price, size, at (us), t (ms)``."""
    rows = []
    for i in range(rng.randint(3, 7)):
        rows.append(
            {
                "symbol": rng.choice(["ACME", "INIT", "Ünï", ""]),
                "venue": rng.choice([1, 2, -7]),
                "price": rng.choice([None, -0.0, 1.5, 1e300, round(rng.uniform(1, 99), 3)]),
                "size": rng.choice([None, 0, -(2**63), 2**63 - 1, rng.randint(1, 1000)]),
                "at": version * 1_000_000 + i,
                "t": 100 + 10 * version + rng.randint(-15, 5),
            }
        )
    return rows


def encode_prices(rows: list[dict[str, Any]]) -> tuple[Any, Any, list[int]]:
    import pyarrow as pa

    key_schema, value_schema = prices_layout().schemas()
    keys = pa.RecordBatch.from_pylist(rows, schema=key_schema)
    values = pa.RecordBatch.from_pylist(rows, schema=value_schema)
    return encode_rows(keys), encode_rows(values), [r["t"] for r in rows]


def plain_rows(batches: Any) -> list[dict[str, Any]]:
    """Decoded reader rows as JSON-ready dicts (timestamps as integers)."""
    import pyarrow as pa

    out: list[dict[str, Any]] = []
    for batch in batches:
        columns = [
            c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in batch.columns
        ]
        out += pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pylist()
    return out


def prices_reads(root: Path, version: int) -> dict[str, Any]:
    """The ``prices`` store at ``version`` as the reader decodes it: latest and history."""
    return typed_reads(root, "prices", version)


def typed_reads(root: Path, store: str, version: int) -> dict[str, Any]:
    """A typed store at ``version`` as the reader decodes it: latest and history."""
    ref, settings = committed.resolve(str(root), store, LINEAGE)
    return {
        "latest": plain_rows(committed.read_partition(ref, settings, 0, version=version)),
        "history": plain_rows(
            committed.read_partition(ref, settings, 0, version=version, history=True)
        ),
    }


def write_prices(root: Path, scratch: Path) -> dict[str, Any]:
    rng = random.Random(PRICES["seed"])
    rows_by_version: dict[str, list[dict[str, Any]]] = {}
    for version in range(PRICES["versions"]):
        rows = prices_rows(rng, version + 1)
        part = open_partition(
            root, "prices", 0, version, scratch / "prices", columns=prices_layout()
        )
        keys, values, times = encode_prices(rows)
        part.store.put_batch(keys, values, times)
        part.commit()
        rows_by_version[str(version + 1)] = rows
    reads = {str(v): prices_reads(root, v) for v in range(1, PRICES["versions"] + 1)}
    return {**PRICES, "rows": rows_by_version, "reads": reads}


STORES = {"kv": lambda root, scratch: write_kv(root, scratch),
          "prices": lambda root, scratch: write_prices(root, scratch),
          "quotes": lambda root, scratch: write_quotes(root, scratch)}  # fmt: skip


QUOTES = {"store": "quotes", "versions": 4, "evolved_from": 3, "seed": 13}


def quotes_layouts() -> tuple[ColumnLayout, ColumnLayout]:
    """The ``quotes`` store's layouts: the first, then one column added, two widened, one
    dropped (a value schema evolution)."""
    import pyarrow as pa

    key = pa.schema([("sym", pa.string())])
    first = pa.schema([("bid", pa.float32()), ("size", pa.int32()), ("note", pa.string())])
    then = pa.schema([("bid", pa.float64()), ("size", pa.int64()), ("venue", pa.string())])
    return ColumnLayout.of(TUPLE_ENCODING, key, first), ColumnLayout.of(TUPLE_ENCODING, key, then)


def quotes_rows(rng: random.Random, version: int) -> list[dict[str, Any]]:
    evolved = version >= QUOTES["evolved_from"]
    return [
        {
            "sym": rng.choice(["A", "B", "C"]),
            "bid": rng.choice([None, 0.5, 2.25, 1e30 if evolved else 3.5]),
            "size": rng.choice([None, 1, 2**40 if evolved else 7]),
            "t": 100 + 10 * version + rng.randint(-5, 5),
        }
        | ({"venue": rng.choice(["X", None])} if evolved else {"note": rng.choice(["n", None])})
        for _ in range(rng.randint(3, 6))
    ]


def put_typed(part: PartitionStore, rows: list[dict[str, Any]], layout: ColumnLayout) -> None:
    """Puts typed rows through the store's value codec (its newest layout) and commits."""
    import pyarrow as pa
    from verstore.checkpoint.values import ValueCodec

    key_schema, value_schema = layout.schemas()
    keys = encode_rows(pa.RecordBatch.from_pylist(rows, schema=key_schema))
    values = ValueCodec(part.settings).encode(pa.RecordBatch.from_pylist(rows, schema=value_schema))
    part.store.put_batch(keys, values, [r["t"] for r in rows])
    part.commit()


def write_quotes(root: Path, scratch: Path) -> dict[str, Any]:
    rng = random.Random(QUOTES["seed"])
    first, then = quotes_layouts()
    rows_by_version: dict[str, list[dict[str, Any]]] = {}
    for version in range(QUOTES["versions"]):
        layout = then if version + 1 >= QUOTES["evolved_from"] else first
        rows = quotes_rows(rng, version + 1)
        part = open_partition(root, "quotes", 0, version, scratch / "quotes", columns=layout)
        put_typed(part, rows, layout)
        rows_by_version[str(version + 1)] = rows
    reads = {str(v): typed_reads(root, "quotes", v) for v in range(1, QUOTES["versions"] + 1)}
    return {**QUOTES, "rows": rows_by_version, "reads": reads}


MOVED = {"store": "moved", "versions": 5, "moved_at": 3, "partitions": [2, 3], "seed": 17}


def moved_layout() -> ColumnLayout:
    import pyarrow as pa

    return ColumnLayout.of(
        TUPLE_ENCODING, pa.schema([("sym", pa.string())]), pa.schema([("px", pa.float64())])
    )


def moved_count(version: int) -> int:
    """The partition count the ``moved`` store's micro-batch making ``version`` ran on."""
    return MOVED["partitions"][0] if version <= MOVED["moved_at"] else MOVED["partitions"][1]


def moved_rows(rng: random.Random, version: int) -> list[dict[str, Any]]:
    return [
        {
            "sym": rng.choice("ABCDEFG"),
            "px": rng.choice([None, 1.5, float(version)]),
            "t": 20 + 10 * version + rng.randint(-15, 5),
        }
        for _ in range(rng.randint(3, 7))
    ]


def moved_put(root: Path, scratch: Path, version: int, rows: list[dict[str, Any]]) -> None:
    """Micro-batch ``version - 1`` of the ``moved`` store: each partition its keys' rows,
    routed as the repartition routes them (:func:`moved_route`)."""
    import pyarrow as pa
    from verstore.checkpoint.values import ValueCodec

    layout, count = moved_layout(), moved_count(version)
    key_schema, value_schema = layout.schemas()
    encoded = encode_rows(pa.RecordBatch.from_pylist(rows, schema=key_schema)).to_pylist()
    for p in range(count):
        mine = [r for r, k in zip(rows, encoded, strict=True) if moved_route(k, count) == p]
        part = open_partition(
            root, "moved", p, version - 1, scratch / f"moved-{p}",
            columns=layout, num_partitions=count,
        )  # fmt: skip
        if mine:
            keys = encode_rows(pa.RecordBatch.from_pylist(mine, schema=key_schema))
            codec = ValueCodec(part.settings)
            values = codec.encode(pa.RecordBatch.from_pylist(mine, schema=value_schema))
            part.store.put_batch(keys, values, [r["t"] for r in mine])
        part.commit()


def moved_reads(root: Path, version: int) -> dict[str, Any]:
    """The ``moved`` store at ``version`` as the reader decodes it, every partition."""
    ref, settings = committed.resolve(str(root), "moved", LINEAGE)
    partitions = settings.partitioning_at(version).partitions(ref.files)

    def rows(history: bool) -> list[dict[str, Any]]:
        out = []
        for p in partitions:
            out += plain_rows(
                committed.read_partition(ref, settings, p, version=version, history=history)
            )
        return sorted(out, key=lambda r: (r["sym"], r["valid_from"]))

    return {"latest": rows(False), "history": rows(True)}


def moved_route(key: bytes, count: int) -> int:
    """The ``moved`` store's partition of a stored (tuple-encoded) key."""
    import zlib

    return zlib.crc32(key) % count


def move(root: Path, scratch: Path, version: int, count: int) -> None:
    """The ``moved`` store repartitioned at ``version`` (the steps of
    ``verstore.spark.repartition_store``, keys routed by :func:`moved_route`)."""
    from verstore.checkpoint import repartition as steps
    from verstore.location import Location

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
    from repartition_helpers import run_in_process

    location = Location.resolve(str(root))
    plan = steps.plan(location, "moved", LINEAGE, version, count)
    assert plan is not None
    run_in_process(location, plan, moved_route, str(scratch))


def write_moved(root: Path, scratch: Path) -> dict[str, Any]:
    rng = random.Random(MOVED["seed"])
    rows_by_version: dict[str, list[dict[str, Any]]] = {}
    for version in range(1, MOVED["versions"] + 1):
        if version == MOVED["moved_at"] + 1:
            move(root, scratch, MOVED["moved_at"], MOVED["partitions"][1])
        rows = moved_rows(rng, version)
        moved_put(root, scratch, version, rows)
        rows_by_version[str(version)] = rows
    reads = {str(v): moved_reads(root, v) for v in range(1, MOVED["versions"] + 1)}
    return {**MOVED, "rows": rows_by_version, "reads": reads}


STORES["moved"] = write_moved

SESSIONS = {"store": "sessions", "partitions": 1, "versions": 8, "seed": 37, "latest_ttl_ms": 25}


def sessions_ops(rng: random.Random, version: int) -> list[list[Any]]:
    """One commit of the ``sessions`` store: two new keys and an update of the previous
    commit's, about a segment later than the last; the TTL ends them two commits on."""
    base = 100 + 12 * version
    ops = []
    for i in range(2):
        for v in (version, version - 1):
            if v > 0:
                value = rng.randbytes(rng.randint(0, 9)).hex()
                ops.append(["put", f"s{v}-{i}".encode().hex(), value, base + rng.randint(0, 9)])
    if version % 3 == 0:
        ops.append(["delete", f"s{version}-0".encode().hex(), None, base + 10])
    return ops


def sessions_reference(ops_by_version: dict[str, list[list[Any]]], version: int) -> Any:
    """An in-memory store with the ``sessions`` TTL and the writes of versions 1..``version``."""
    store = verstore.VersionedStore.in_memory(
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=SEGMENT_MS,
        latest_ttl_ms=SESSIONS["latest_ttl_ms"],
    )
    for v in range(1, version + 1):
        apply_kv(store, ops_by_version.get(str(v), []))
    return store


def sessions_keys(versions: int) -> list[bytes]:
    return [f"s{v}-{i}".encode() for v in range(1, versions + 1) for i in range(2)]


def sessions_checkpoint_reads(root: Path, version: int, keys: list[bytes], local: Path) -> Any:
    """:func:`kv_reads` of the ``sessions`` store at ``version``, rebuilt read-only."""
    part = open_partition(
        root, "sessions", 0, version, local, read_only=True,
        latest_ttl_ms=SESSIONS["latest_ttl_ms"],
    )  # fmt: skip
    try:
        return kv_reads(part.store, keys)
    finally:
        part.abort()


def write_sessions(root: Path, scratch: Path) -> dict[str, Any]:
    """A store with a latest TTL (store format 4, a ``_meta.json`` of checkpoint format 3):
    keys that churn and expire, reclaimed along the way."""
    rng = random.Random(SESSIONS["seed"])
    ops_by_version: dict[str, list[list[Any]]] = {}
    for version in range(SESSIONS["versions"]):
        ops = sessions_ops(rng, version + 1)
        part = open_partition(
            root, "sessions", 0, version, scratch / "sessions",
            latest_ttl_ms=SESSIONS["latest_ttl_ms"],
        )  # fmt: skip
        apply_kv(part.store, ops)
        part.store.reclaim_expired()
        part.commit()
        ops_by_version[str(version + 1)] = ops
    keys = sessions_keys(SESSIONS["versions"])
    reads = {}
    for v in range(1, SESSIONS["versions"] + 1):
        with sessions_reference(ops_by_version, v) as store:
            reads[str(v)] = kv_reads(store, keys)
        local = scratch / f"check-sessions-{v}"
        assert sessions_checkpoint_reads(root, v, keys, local) == reads[str(v)]
    return {**SESSIONS, "ops": ops_by_version, "reads": reads}


STORES["sessions"] = write_sessions


PUSHED = {"store": "pushed", "partitions": 1, "versions": 3, "seed": 5, "keys": 3000}
#: A 1 MB store's cache of latest values holds about 2 500 of these keys: the rest are pushed.
PUSHED_MEMORY_MB = 1


def pushed_keys(count: int) -> list[bytes]:
    return [f"p{i:04d}".encode() for i in range(count)]


def pushed_in_order(version: int) -> list[list[Any]]:
    """The in-order writes of ``pushed``'s commit ``version``: every key once, 20 times with 150
    keys at each, a commit 100 ms after the last (the previous commit's versions stay within the
    retention); key ``i``'s value is the byte ``(7 i + version) mod 251`` (not recorded: this
    rule is)."""
    count = PUSHED["keys"]
    return [
        ["put", key.hex(), bytes([(7 * i + version) % 251]).hex(), 100 * version + i * 20 // count]
        for i, key in enumerate(pushed_keys(count))
    ]


def pushed_late_ops(rng: random.Random, version: int) -> list[list[Any]]:
    """The writes of commit ``version`` after its in-order ones: late writes and deletes below
    the new stream time (puts that read, and settle their keys)."""
    ops: list[list[Any]] = []
    for key in rng.sample(pushed_keys(PUSHED["keys"]), 12):
        late = 100 * version + 19 - rng.randint(1, RETENTION_MS - 1)
        kind = "delete" if rng.random() < 0.3 else "put"
        ops.append([kind, key.hex(), None if kind == "delete" else "6c617465", late])
    return ops


def pushed_ops(late_by_version: dict[str, list[list[Any]]]) -> dict[str, list[list[Any]]]:
    """Every commit's writes: the in-order ones, then the recorded late ones."""
    return {v: pushed_in_order(int(v)) + late for v, late in late_by_version.items()}


def pushed_recorded_keys(late: dict[str, list[list[Any]]]) -> list[bytes]:
    """The keys whose reads the set records: the first and last of every 300, and the keys
    written late."""
    every = [k for i, k in enumerate(pushed_keys(PUSHED["keys"])) if i % 300 in (0, 299)]
    written_late = {bytes.fromhex(op[1]) for ops in late.values() for op in ops}
    return sorted(set(every) | written_late)


def apply_pushed(store: verstore.VersionedStore, ops: list[list[Any]]) -> None:
    """:func:`apply_kv`, the in-order puts in batches (``put_batch``) as a stream task writes."""
    puts = ops[: PUSHED["keys"]]
    for start in range(0, len(puts), 500):
        chunk = puts[start : start + 500]
        store.put_batch(
            [bytes.fromhex(op[1]) for op in chunk],
            [bytes.fromhex(op[2]) for op in chunk],
            [op[3] for op in chunk],
        )
    apply_kv(store, ops[len(puts) :])


def pushed_reads(store: verstore.VersionedStore, keys: list[bytes]) -> dict[str, Any]:
    """:func:`kv_reads` at a few times: the previous commit's versions and this one's."""
    ost = store.observed_stream_time
    out: dict[str, Any] = {"observed_stream_time": ost}
    for key in keys:
        out[f"get {key.hex()}"] = record(store.get(key))
        times = [ost - 120, ost - 100, ost - 85, ost - 20, ost - 12, ost]
        out[f"as_of {key.hex()}"] = [record(store.get(key, as_of=t)) for t in times]
        out[f"versions {key.hex()}"] = [record(r) for r in store.versions(key, ascending=True)]
    return out


def pushed_checkpoint_reads(root: Path, version: int, keys: list[bytes], local: Path) -> Any:
    """:func:`pushed_reads` of ``keys`` at ``version``, rebuilt read-only in ``local``."""
    part = open_partition(root, "pushed", 0, version, local, read_only=True)
    try:
        return pushed_reads(part.store, keys)
    finally:
        part.abort()


def write_pushed(root: Path, scratch: Path) -> dict[str, Any]:
    rng = random.Random(PUSHED["seed"])
    late: dict[str, list[list[Any]]] = {}
    unsettled = []
    for version in range(PUSHED["versions"]):
        late[str(version + 1)] = pushed_late_ops(rng, version + 1)
        part = open_partition(
            root, "pushed", 0, version, scratch / "pushed", memory_limit_mb=PUSHED_MEMORY_MB
        )
        apply_pushed(part.store, pushed_ops(late)[str(version + 1)])
        unsettled.append(part.store.stats().unsettled_puts)
        part.commit()
    assert max(unsettled) > 0, "no put took the read-free path: the set would not be format 5"
    reads = {}
    for v in range(1, PUSHED["versions"] + 1):
        with reference(pushed_ops(late), v) as store:
            reads[str(v)] = pushed_reads(store, pushed_recorded_keys(late))
        local = scratch / f"check-pushed-{v}"
        assert pushed_checkpoint_reads(root, v, pushed_recorded_keys(late), local) == reads[str(v)]
    return {**PUSHED, "late_ops": late, "reads": reads, "unsettled_puts": unsettled}


STORES["pushed"] = write_pushed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default = Path(__file__).parent / f"verstore-{verstore.__version__}"
    parser.add_argument("--out", type=Path, default=default)
    parser.add_argument(
        "--add", action="store_true", help="add the stores a set lacks, leaving the others"
    )
    args = parser.parse_args()
    golden_json = args.out / "golden.json"
    if args.out.exists() and not args.add:
        sys.exit(f"{args.out} exists: a committed golden set is never regenerated")
    golden = json.loads(golden_json.read_text()) if args.add else {
        "verstore": verstore.__version__,
        "format_version": FORMAT_VERSION,
        "tuple_encoding": TUPLE_ENCODING,
        "lineage": LINEAGE,
        "history_retention_ms": RETENTION_MS,
        "segment_interval_ms": SEGMENT_MS,
    }  # fmt: skip
    root = args.out / "root"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, write in STORES.items():
            if name not in golden:
                golden[name] = write(root, Path(scratch))
    golden_json.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
