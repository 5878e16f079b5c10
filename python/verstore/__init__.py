"""verstore: a versioned key-value state store for stream processing.

Kafka Streams' versioned-store semantics (KIP-889 and successors) on RocksDB, with a Rust core:
point-in-time reads, multi-version queries, and put return codes that tell an in-order update
(``VALID_TO_UNDEFINED``) from an out-of-order one (a valid-to) or an expired one (``NOT_PUT``).

    >>> import verstore
    >>> store = verstore.VersionedStore.in_memory(history_retention_ms=10_000)
    >>> store.put(b"curry", b"8", 0)
    -1
    >>> store.put(b"curry", b"10", 4)
    -1
    >>> store.get(b"curry", as_of=3)
    VersionedRecord(value=b'8', timestamp=0, valid_to=4)
"""

from verstore._core import (
    DEFAULT_MEMORY_LIMIT_MB,
    NOT_PUT,
    VALID_TO_UNDEFINED,
    GroupHistory,
    MemoryUsage,
    Scan,
    StoreStats,
    VersionedRecord,
    VersionedStore,
    __version__,
    default_segment_interval_ms,
    memory_usage,
    set_memory_limit,
)
from verstore.exceptions import (
    CorruptionError,
    FencedError,
    IncompatibleConfigError,
    IncompatibleFormatError,
    MissingVersionError,
    StorageError,
    StoreClosedError,
    StoreLockedError,
    VerstoreError,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT_MB",
    "NOT_PUT",
    "VALID_TO_UNDEFINED",
    "CorruptionError",
    "FencedError",
    "GroupHistory",
    "IncompatibleConfigError",
    "IncompatibleFormatError",
    "MemoryUsage",
    "MissingVersionError",
    "Scan",
    "StorageError",
    "StoreClosedError",
    "StoreLockedError",
    "StoreStats",
    "VersionedRecord",
    "VersionedStore",
    "VerstoreError",
    "__version__",
    "default_segment_interval_ms",
    "memory_usage",
    "set_memory_limit",
]
