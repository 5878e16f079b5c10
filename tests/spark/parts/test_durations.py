"""The helpers' one duration grammar (docs/spark.md, "Durations"): what it accepts, what it
refuses and how, and that the docs' table of units is the code's."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from verstore.spark._durations import UNITS_MS, parse_duration_ms, parse_ttl_ms

DOC = Path(__file__).resolve().parents[3] / "docs" / "spark.md"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7 days", 604_800_000),
        ("7days", 604_800_000),
        ("1 day", 86_400_000),
        ("6 hours", 21_600_000),
        ("2 hrs", 7_200_000),
        ("90 minutes", 5_400_000),
        ("30m", 1_800_000),
        ("30 min", 1_800_000),
        ("5 mins", 300_000),
        ("1h 30m", 5_400_000),
        ("1h30m", 5_400_000),
        ("1 hour 30 minutes", 5_400_000),
        ("30s", 30_000),
        ("10 sec", 10_000),
        ("1.5 seconds", 1_500),
        ("250 ms", 250),
        ("2 weeks", 1_209_600_000),
        ("  3 D ", 259_200_000),
        ("PT30M", 1_800_000),
        ("pt30m", 1_800_000),
        ("P7D", 604_800_000),
        ("P1W", 604_800_000),
        ("P1DT12H", 129_600_000),
        ("PT1H30M", 5_400_000),
        ("PT0.5S", 500),
        ("0 s", 0),
        (1234, 1234),
        (timedelta(minutes=30), 1_800_000),
    ],
)
def test_a_duration_in_the_grammar_is_its_milliseconds(text: Any, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("value", [-1, "-7 days", "- 30m", "-PT30M", "-0 s", timedelta(-1)])
def test_every_negative_duration_has_one_message(value: Any) -> None:
    message = f"ttl must not be negative, got {value!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_duration_ms(value, name="ttl")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("days", "ttl: cannot parse 'days'; expected a duration such as '7 days', '30m'"),
        ("7", "cannot parse '7'"),
        ("7 days and more", "cannot parse '7 days and more'"),
        ("", "cannot parse ''"),
        ("3 fortnights", "unknown unit 'fortnights' in '3 fortnights'; the units are ms, s, m"),
        ("P1M", "years and months have no fixed length"),
        ("P1Y2D", "years and months have no fixed length"),
        ("P", "cannot parse 'P'"),
        ("PT", "cannot parse 'PT'"),
    ],
)
def test_text_outside_the_grammar_is_refused_naming_the_argument(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_duration_ms(text, name="ttl")


def test_other_types_are_type_errors() -> None:
    for value in (True, 1.5, None, [1]):
        with pytest.raises(TypeError, match="ttl must be a duration string, int"):
            parse_duration_ms(value, name="ttl")  # type: ignore[arg-type]


def test_a_ttl_is_at_least_one_millisecond() -> None:
    assert parse_ttl_ms(None) is None
    assert parse_ttl_ms("30m") == 1_800_000
    with pytest.raises(ValueError, match="latest_ttl must be at least 1 ms or None, got '0 s'"):
        parse_ttl_ms("0 s")


def test_the_docs_list_exactly_the_units_the_code_accepts() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Durations") :]
    section = section[: section.index("\n## ", 1)]
    documented: dict[str, int] = {}
    for row in re.finditer(r"^\| ([^|]+) \| ([\d,]+) \|$", section, re.MULTILINE):
        for unit in re.findall(r"`([a-z]+)`", row.group(1)):
            documented[unit] = int(row.group(2).replace(",", ""))
    assert documented == UNITS_MS
