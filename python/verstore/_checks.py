"""Checks of values read from files and given by callers, shared by the layers above."""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def whole(value: Any, low: int, high: float = 2**63) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (not a ``bool``) with ``low <= value < high``.

    A JSON file's numbers and a caller's arguments both arrive as ``Any``; ``True`` is an
    ``int`` to Python but never a count, size or version.
    """
    return isinstance(value, int) and not isinstance(value, bool) and low <= value < high


def check_whole(value: Any, name: str, low: int, high: float = math.inf) -> int:
    """``value``, when :func:`whole` holds for it.

    Raises:
        ValueError: ``"<name> must be an int >= <low>, got <value>"``.
    """
    if not whole(value, low, high):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


__all__ = ["check_whole", "whole"]
