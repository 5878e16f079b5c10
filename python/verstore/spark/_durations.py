"""Durations as the Spark helpers take them: the one grammar of docs/spark.md, "Durations".

A duration is an ``int`` (milliseconds), a ``timedelta``, or text: one or more ``<amount>
<unit>`` terms (``"7 days"``, ``"30m"``, ``"1h 30m"``, ``"1.5 s"``; the space between amount
and unit is optional, and so is the one between terms) or an ISO 8601 duration of weeks, days,
hours, minutes and seconds (``"PT30M"``, ``"P7D"``, ``"P1DT12H"``, ``"PT0.5S"``). Years and
months have no fixed length in milliseconds, so ISO's ``Y`` and date ``M`` are refused. A
fraction rounds down to whole milliseconds. Every negative duration, however it is written, is
refused with the same message.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from decimal import Decimal

#: Every unit the text form accepts (case-insensitive), by its length in milliseconds. The
#: table of docs/spark.md, "Durations", lists exactly these.
UNITS_MS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
    **dict.fromkeys(("w", "week", "weeks"), 604_800_000),
}

_AMOUNT = r"(\d+(?:\.\d*)?|\.\d+)"
_TERM = re.compile(_AMOUNT + r"\s*([a-zA-Z]+)\s*")
_ISO = re.compile(
    rf"P(?:{_AMOUNT}W)?(?:{_AMOUNT}D)?(?:T(?:{_AMOUNT}H)?(?:{_AMOUNT}M)?(?:{_AMOUNT}S)?)?",
    re.IGNORECASE,
)
_ISO_FACTORS = (604_800_000, 86_400_000, 3_600_000, 60_000, 1_000)
_EXAMPLES = "such as '7 days', '30m', '1h 30m' or ISO 8601 'PT30M' (docs/spark.md, Durations)"


def parse_duration_ms(value: str | int | timedelta, *, name: str = "duration") -> int:
    """A duration in whole milliseconds, >= 0 (the grammar: see the module).

    Args:
        value: The duration.
        name: The argument's name, for error messages.

    Raises:
        TypeError: ``value`` is neither text, an int nor a timedelta (``bool`` is refused).
        ValueError: Text outside the grammar, an unknown unit, or a negative duration.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | timedelta):
        kind = type(value).__name__
        raise TypeError(f"{name} must be a duration string, int (ms) or timedelta, got {kind}")
    if isinstance(value, int):
        ms = value
    elif isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    else:
        text = value.strip()
        negative = text.startswith("-")
        ms = _parse_text(text[1:].lstrip() if negative else text, value, name)
        ms = -1 if negative else ms  # "-0 s" is as refused as "-7 days"
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return ms


def _parse_text(text: str, value: str, name: str) -> int:
    """The milliseconds of ``text`` (without its sign)."""
    iso = _ISO.fullmatch(text)
    if iso is not None and len(text) > 1 and not text.upper().endswith("T"):
        return sum(
            math.floor(Decimal(amount) * factor)
            for amount, factor in zip(iso.groups(), _ISO_FACTORS, strict=True)
            if amount is not None
        )
    if text[:1] in ("P", "p") and re.fullmatch(r"P[\dYMWDTHS.]*", text, re.IGNORECASE):
        raise ValueError(
            f"{name}: cannot parse {value!r}: an ISO 8601 duration here has weeks, days, "
            "hours, minutes and seconds only (years and months have no fixed length), "
            f"{_EXAMPLES}"
        )
    total, at = Decimal(0), 0
    for term in _TERM.finditer(text):
        if term.start() != at:
            break
        amount, unit = term.groups()
        factor = UNITS_MS.get(unit.lower())
        if factor is None:
            raise ValueError(
                f"{name}: unknown unit {unit!r} in {value!r}; the units are ms, s, m (min), "
                "h, d and w, singular or plural (docs/spark.md, Durations)"
            )
        total += Decimal(amount) * factor
        at = term.end()
    if at == 0 or at != len(text):
        raise ValueError(f"{name}: cannot parse {value!r}; expected a duration {_EXAMPLES}")
    return math.floor(total)


def parse_ttl_ms(value: str | int | timedelta | None, *, name: str = "latest_ttl") -> int | None:
    """A time-to-live in milliseconds (:func:`parse_duration_ms`), at least 1; None: none.

    Raises:
        TypeError: As :func:`parse_duration_ms`.
        ValueError: As :func:`parse_duration_ms`, or a TTL below 1 ms.
    """
    if value is None:
        return None
    ttl = parse_duration_ms(value, name=name)
    if ttl < 1:
        raise ValueError(f"{name} must be at least 1 ms or None, got {value!r}")
    return ttl


__all__ = ["UNITS_MS", "parse_duration_ms", "parse_ttl_ms"]
