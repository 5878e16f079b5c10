"""Rows and records as the ``verstore`` command prints them: an aligned table, or JSON for
scripts. Times (``valid_from``, ``valid_to``) are ISO 8601 in UTC beside their epoch
milliseconds in a table, and both, as ``<name>`` (ms) and ``<name>_iso``, in JSON; a null
``valid_to`` (the newest version) is ``-`` in a table and ``null`` in JSON. Values are their
columns' Python values; bytes print as Python bytes in a table and as hex in JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, TextIO

from verstore.times import iso, shown

#: The columns that hold epoch milliseconds.
TIME_COLUMNS = ("valid_from", "valid_to")


def json_value(value: Any) -> Any:
    """A column value as JSON can hold it."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as a JSON object: times as milliseconds and ``<name>_iso``."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        out[name] = json_value(value)
        if name in TIME_COLUMNS:
            out[f"{name}_iso"] = None if value is None else iso(value)
    return out


def cell(name: str, value: Any) -> str:
    """A value as a table shows it."""
    if name in TIME_COLUMNS:
        return shown(value)
    if value is None:
        return "-"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def table(rows: Iterable[Mapping[str, Any]], names: list[str], out: TextIO) -> int:
    """``rows`` as an aligned table under ``names``; returns the rows printed."""
    cells = [[cell(n, row[n]) for n in names] for row in rows]
    if not cells:
        print("(no rows)", file=out)
        return 0
    widths = [max(len(n), *(len(r[i]) for r in cells)) for i, n in enumerate(names)]
    for line in ([*names], *cells):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip(), file=out)
    return len(cells)


def record(fields: Mapping[str, Any], out: TextIO) -> None:
    """One record as ``name  value`` lines."""
    width = max(len(n) for n in fields)
    for name, value in fields.items():
        text = cell(name, value)
        if name == "valid_to" and value is None:
            text = "- (the newest version)"
        print(f"{name.ljust(width)}  {text}", file=out)


def json_line(obj: Any, out: TextIO) -> None:
    print(json.dumps(obj, ensure_ascii=False), file=out)


__all__ = ["cell", "json_line", "json_row", "json_value", "record", "table"]
