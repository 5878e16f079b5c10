"""verstore's exception hierarchy, rooted at :class:`VerstoreError`.

Bad arguments raise the built-in ``TypeError`` or ``ValueError`` with a message naming the
argument; a write older than the grace period is an outcome (``NOT_PUT``), not an error.
"""

from verstore._core import (
    CorruptionError,
    IncompatibleConfigError,
    IncompatibleFormatError,
    StorageError,
    StoreClosedError,
    StoreLockedError,
    VerstoreError,
)

__all__ = [
    "CorruptionError",
    "FencedError",
    "IncompatibleConfigError",
    "IncompatibleFormatError",
    "MissingVersionError",
    "StorageError",
    "StoreClosedError",
    "StoreLockedError",
    "VerstoreError",
]


class MissingVersionError(VerstoreError):
    """A checkpoint lacks a version that was asked for, or its version chain has a gap."""


class FencedError(VerstoreError):
    """A checkpointed store refused an attempt that its lineage has moved past (a zombie)."""
