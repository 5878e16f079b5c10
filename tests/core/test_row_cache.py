"""Long history rows answer single as-of reads from a cache of decoded rows: every write that
changes such a row (a late version inside it, a delete, a replaced value, a reopen, expiry)
must be seen by the next read, in both write modes (rust/backend/rocks/row_cache.rs)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import verstore
from reference_model import ReferenceModel, as_tuple

HOT = [b"hot-a", b"hot-b"]


def _check(store: verstore.VersionedStore, model: ReferenceModel, rng: random.Random) -> None:
    top = model.observed_stream_time
    times = [rng.randrange(-5, top + 5) for _ in range(60)]
    for key in HOT:
        for t in times:
            assert as_tuple(store.get(key, t)) == as_tuple(model.get(key, t)), (key, t)
    keys = [k for k in HOT for _ in times]
    batch = store.get_batch(keys, [t for _ in HOT for t in times])
    for i, (key, t) in enumerate(zip(keys, [t for _ in HOT for t in times], strict=True)):
        want = model.get(key, t)
        assert batch.column("value")[i].as_py() == (want.value if want else None), (key, t)


@pytest.mark.parametrize("wal", [True, False], ids=["wal_on", "wal_off"])
def test_writes_into_cached_rows_are_read_back(tmp_path: Path, wal: bool) -> None:
    rng = random.Random(7)
    kwargs = {"history_retention_ms": 4_000, "segment_interval_ms": 1_000}
    store = verstore.VersionedStore(tmp_path / "s", write_ahead_log=wal, **kwargs)  # type: ignore[arg-type]
    model = ReferenceModel(**kwargs)  # type: ignore[arg-type]

    def put(key: bytes, value: bytes | None, t: int) -> None:
        if value is None:
            assert as_tuple(store.delete(key, t)) == as_tuple(model.delete(key, t))
        else:
            assert store.put(key, value, t) == model.put(key, value, t)

    t = 0
    for round_ in range(12):
        # Many versions a row (rows of well over a kilobyte, which the cache takes) ...
        for _ in range(60):
            t += rng.randrange(1, 6)
            put(rng.choice(HOT), bytes([round_]) * rng.randrange(20, 40), t)
        _check(store, model, rng)
        # ... then writes into what was just read: late versions inside rows, replaced values,
        # deletes, in and out of order.
        for _ in range(15):
            late = max(0, t - rng.randrange(0, 900))
            value = None if rng.random() < 0.2 else b"late" * rng.randrange(1, 5)
            put(rng.choice(HOT), value, late)
        _check(store, model, rng)
        if round_ % 4 == 3:
            store.flush()
        if round_ % 5 == 4:
            store.close()
            store = verstore.VersionedStore(tmp_path / "s", write_ahead_log=wal, **kwargs)  # type: ignore[arg-type]
            _check(store, model, rng)
    store.close()
