"""Event times as people read and write them: ISO 8601 beside epoch milliseconds.

Stores keep times as epoch milliseconds (UTC). The ``verstore`` command takes a time as either
(``1772359200000``, ``2026-03-01T10:00:00Z``, ``2026-03-01T11:00:00+01:00``, ``2026-03-01``; a
time without a zone is UTC) and prints each as ISO 8601 in UTC with its milliseconds beside it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_datetime(text: str, argument: str) -> datetime:
    """An aware datetime from ISO 8601 text (a time without a zone is UTC).

    Raises:
        ValueError: Not ISO 8601, naming ``argument``.
    """
    try:
        found = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{argument} must be epoch milliseconds or an ISO 8601 time such as "
            f"2026-03-01T10:00:00Z, got {text!r}"
        ) from None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def parse_time(text: str, argument: str) -> int:
    """Epoch milliseconds from digits (taken as milliseconds) or ISO 8601 text.

    Raises:
        ValueError: Neither, naming ``argument``.
    """
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    return (parse_datetime(stripped, argument) - EPOCH) // timedelta(milliseconds=1)


def iso(ms: int) -> str:
    """``ms`` as ISO 8601 in UTC with milliseconds (the digits alone when out of range)."""
    try:
        return (EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")[:-6] + "Z"
    except OverflowError:
        return str(ms)


def shown(ms: int | None, none: str = "-") -> str:
    """``ms`` for a person: ISO 8601 with the epoch milliseconds beside it."""
    return none if ms is None else f"{iso(ms)} ({ms})"


__all__ = ["iso", "parse_datetime", "parse_time", "shown"]
