"""Shared pytest fixtures for the verstore Python API tests.

Kept deliberately generic: ``make_store`` opens a store of either kind with any configuration,
``store_kind`` parametrizes a test over both kinds, and ``store`` is the common case: a store with
the configuration of Kafka's ``RocksDBVersionedStoreTest`` (history retention 300 000 ms, segment
interval 100 000 ms). Every store opened through these fixtures is closed at teardown.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import verstore

#: History retention of Kafka's ``RocksDBVersionedStoreTest`` (also its grace period).
DEFAULT_HISTORY_RETENTION_MS = 300_000
#: Segment interval of Kafka's ``RocksDBVersionedStoreTest`` (``HISTORY_RETENTION / 3``).
DEFAULT_SEGMENT_INTERVAL_MS = 100_000

STORE_KINDS = ("persistent", "in_memory")

MakeStore = Callable[..., verstore.VersionedStore]


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Parametrizes a test over the persistent (RocksDB) store and the in-memory variant."""
    return str(request.param)


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[MakeStore]:
    """Factory opening stores; every store it opened is closed at teardown.

    ``make_store(path=None, *, history_retention_ms=300_000, segment_interval_ms=100_000,
    kind="persistent", **options)``. A persistent store without ``path`` gets a fresh directory
    under ``tmp_path``; pass the same ``path`` again to reopen it. ``kind="in_memory"`` ignores
    ``path``. ``options`` (``latest_ttl_ms``, ...) go to the constructor as given.
    """
    opened: list[verstore.VersionedStore] = []
    counter = itertools.count()

    def factory(
        path: str | os.PathLike[str] | None = None,
        *,
        history_retention_ms: int = DEFAULT_HISTORY_RETENTION_MS,
        segment_interval_ms: int | None = DEFAULT_SEGMENT_INTERVAL_MS,
        kind: str = "persistent",
        **options: Any,
    ) -> verstore.VersionedStore:
        if kind == "in_memory":
            new = verstore.VersionedStore.in_memory(
                history_retention_ms=history_retention_ms,
                segment_interval_ms=segment_interval_ms,
                **options,
            )
        elif kind == "persistent":
            if path is None:
                path = tmp_path / f"store-{next(counter)}"
            new = verstore.VersionedStore(
                path,
                history_retention_ms=history_retention_ms,
                segment_interval_ms=segment_interval_ms,
                **options,
            )
        else:
            raise AssertionError(f"unknown store kind {kind!r}")
        opened.append(new)
        return new

    yield factory
    for opened_store in reversed(opened):
        opened_store.close()


@pytest.fixture
def store(make_store: MakeStore, store_kind: str) -> verstore.VersionedStore:
    """A fresh store of each kind with Kafka's test configuration (R = 300 000, I = 100 000)."""
    return make_store(kind=store_kind)
