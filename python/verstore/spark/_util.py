"""Small helpers shared by the Spark helpers: duration parsing and column arguments."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

_UNITS_MS = {
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1_000,
    "sec": 1_000,
    "secs": 1_000,
    "second": 1_000,
    "seconds": 1_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "hrs": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
    "w": 604_800_000,
    "week": 604_800_000,
    "weeks": 604_800_000,
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]+)\s*$")


def parse_duration_ms(value: str | int | timedelta, *, name: str = "duration") -> int:
    """A duration in milliseconds from ``"7 days"``-style text, an int (ms) or a timedelta.

    Units: ``ms``/``milliseconds``, ``s``/``seconds``, ``min``/``minutes``, ``h``/``hours``,
    ``d``/``days``, ``w``/``weeks`` (singular, plural and the short forms; case-insensitive).
    A fractional amount is allowed and rounded down to whole milliseconds (``"1.5 s"`` is 1500).

    Args:
        value: The duration.
        name: The argument's name, for error messages.

    Returns:
        The duration in milliseconds, >= 0.

    Raises:
        TypeError: ``value`` is neither text, an int nor a timedelta (``bool`` is refused).
        ValueError: Unparseable text, an unknown unit or a negative duration.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a duration string, int (ms) or timedelta, got bool")
    if isinstance(value, int):
        ms = value
    elif isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(
                f"{name}: cannot parse {value!r}; expected e.g. '7 days', '6 hours', '500 ms'"
            )
        amount, unit = match.groups()
        factor = _UNITS_MS.get(unit.lower())
        if factor is None:
            raise ValueError(
                f"{name}: unknown unit {unit!r} in {value!r}; use ms, seconds, minutes, hours, "
                "days or weeks"
            )
        ms = math.floor(Decimal(amount) * factor)
    else:
        raise TypeError(
            f"{name} must be a duration string, int (ms) or timedelta, got {type(value).__name__}"
        )
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return ms


def column_names(value: str | Sequence[str], arg: str) -> list[str]:
    """One column name or a list of them, as a list; ``arg`` names the argument in errors."""
    if isinstance(value, str):
        return [value]
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{arg} must be a column name or a list of column names")
    if len(set(names)) != len(names):
        raise ValueError(f"{arg} names a column twice: {names}")
    return names


def require_columns(schema: dict[str, Any], columns: list[str], what: str) -> None:
    """Raises ``ValueError`` naming ``what`` when ``schema`` lacks any of ``columns``."""
    missing = [c for c in columns if c not in schema]
    if missing:
        raise ValueError(f"{what} has no column(s) {missing}; it has {list(schema)}")
