"""Argument checks shared by the Spark helpers: durations, column names, store names, the
number of partitions, time columns and the column layout a store records.

Everything here runs on the driver when a helper builds its query, so that a bad argument fails
there with a message naming it, not later in every task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verstore._checks import check_whole

# The helpers' durations (re-exported: the argument checks are read here).
from verstore.spark._durations import parse_duration_ms as parse_duration_ms
from verstore.spark._durations import parse_ttl_ms as parse_ttl_ms


def ttl_staleness_ms(ttl_ms: int) -> int:
    """The largest staleness at which a version lives under a latest TTL of ``ttl_ms``: a
    version that took effect at ``t`` ends at ``t + ttl_ms`` (docs/semantics.md §2.15), so it
    lives at ``t + ttl_ms - 1`` and not after. The helpers derive the end from here only."""
    return ttl_ms - 1


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


def check_unique(names: list[str], what: str) -> None:
    """``ValueError`` when an output would have two columns of one name."""
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise ValueError(f"{what} output would have duplicate columns {clashes}: rename them")


def check_store_name(store: str) -> str:
    """``store`` if it is a valid store name (one path segment)."""
    from verstore.checkpoint.layout import check_name

    return check_name(store, "store")


def num_partitions(df: Any, value: int | None) -> int:
    """``value``, or the session's ``spark.sql.shuffle.partitions``; >= 1."""
    n = (
        value
        if value is not None
        else int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    )
    return check_num_partitions(n)


def check_num_partitions(value: Any) -> int:
    """``value`` as a number of partitions: an int >= 1 (ValueError otherwise)."""
    return check_whole(value, "num_partitions", 1)


def col(name: str) -> Any:
    """A column by its exact name (backquoted: dots and spaces are part of the name)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def fields_by_name(df: Any) -> dict[str, Any]:
    """The Spark fields of ``df``'s schema by column name, in the schema's order."""
    return {f.name: f for f in df.schema.fields}


def storable(keys: Sequence[str], time_ms: str) -> Any:
    """The condition that a row can be stored: no key column null, a time of the epoch or
    later (the store keeps non-negative times, Kafka drops null keys)."""
    from pyspark.sql import functions as F

    valid = F.lit(True)
    for c in keys:
        valid = valid & col(c).isNotNull()
    return valid & F.col(time_ms).isNotNull() & (F.col(time_ms) >= 0)


def keys_as(
    columns: Sequence[str], names: Sequence[str], fields: dict[str, Any], types: dict[str, Any]
) -> list[Any]:
    """The key ``columns`` (Spark ``fields`` by name) renamed to ``names`` and cast to the
    type of the same column in ``types`` where they differ: both inputs of a join then shuffle
    and encode their keys alike."""
    return [
        col(c).cast(types[c].dataType).alias(k)
        if fields[c].dataType != types[c].dataType
        else col(c).alias(k)
        for c, k in zip(columns, names, strict=True)
    ]


def epoch_ms(field: Any, arg: str) -> tuple[Any, bool]:
    """``(epoch-ms long column, is_timestamp)`` for a timestamp or integer time column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(field.dataType, T.TimestampType | T.TimestampNTZType):
        return F.unix_millis(col(field.name)), True
    if isinstance(field.dataType, T.LongType | T.IntegerType | T.ShortType | T.ByteType):
        return col(field.name).cast("long"), False
    raise TypeError(
        f"{arg} column {field.name!r} must be a timestamp or an integer (epoch ms), "
        f"got {field.dataType.simpleString()}"
    )


def arrow_schema(fields: Sequence[Any], names: Sequence[str] | None = None) -> Any:
    """The Arrow schema (all fields nullable) of Spark ``fields``, renamed to ``names``, checked
    to be storable in the tuple encoding: a ``TypeError`` naming the column here, on the
    driver, rather than in every task."""
    import pyarrow as pa

    from verstore._core import encode_rows
    from verstore.spark._compat import to_arrow_type

    arrow = []
    for i, f in enumerate(fields):
        try:
            # Spark's Arrow path gives timestamps a time zone; the encoding ignores it.
            arrow_type = to_arrow_type(f.dataType)
            arrow.append(pa.field(names[i] if names else f.name, arrow_type, True))
        except Exception as e:  # pyspark raises its own error types for unsupported types
            raise TypeError(
                f"column {f.name!r} of type {f.dataType.simpleString()} cannot be stored: {e}"
            ) from None
    schema = pa.schema(arrow)
    try:
        encode_rows(pa.RecordBatch.from_pylist([], schema=schema))
    except TypeError as e:
        raise TypeError(f"{e} (Spark fields: {[f.name for f in fields]})") from None
    return schema


def column_layout(keys: Any, values: Any) -> Any:
    """The :class:`~verstore.checkpoint.ColumnLayout` a store records for keys and values that
    are the tuple encoding of the Arrow schemas ``keys`` and ``values``."""
    from verstore._core import TUPLE_ENCODING
    from verstore.checkpoint import ColumnLayout

    return ColumnLayout.of(TUPLE_ENCODING, keys, values)
