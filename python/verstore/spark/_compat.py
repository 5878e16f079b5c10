"""What differs between the PySpark lines verstore runs on (3.5, 4.0, 4.1, 4.2, 4.3), in one
place: the other modules call these instead of the APIs that changed, and what a line cannot do
is refused here, naming the version it needs (docs/spark.md, Spark lines).

* Spark's Arrow types: ``to_arrow_type`` and ``to_arrow_schema`` take ``timezone=`` from 4.2,
  ``timestamp_utc=`` (default true) in 4.0 and 4.1, neither in 3.5. Every line maps a Spark
  timestamp to ``timestamp[us, tz=UTC]`` as called here, the type Spark's Arrow path uses.
* ``transformWithStateInPandas`` (``pyspark.sql.streaming.stateful_processor``) from 4.0.
* Python data sources (``pyspark.sql.datasource``) from 4.0: before, ``read_store`` reads a
  store through ``mapInArrow`` over one row per partition instead.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

#: The first line with ``transformWithStateInPandas`` and with Python data sources.
TRANSFORM_WITH_STATE = (4, 0)
DATA_SOURCES = (4, 0)


@cache
def pyspark_version() -> tuple[int, int]:
    """The running PySpark's line, ``(major, minor)``."""
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def has(line: tuple[int, int]) -> bool:
    """Whether the running PySpark is of ``line`` or newer."""
    return pyspark_version() >= line


def require(line: tuple[int, int], what: str) -> None:
    """Raises the error that says ``what`` needs PySpark ``line`` when the running one is older.

    Raises:
        RuntimeError: PySpark is older than ``line``.
    """
    if not has(line):
        import pyspark

        raise RuntimeError(
            f"verstore.spark: {what} needs PySpark >= {line[0]}.{line[1]}; this is PySpark "
            f"{pyspark.__version__} (docs/spark.md, Spark lines)"
        )


def to_arrow_type(data_type: Any) -> Any:
    """The Arrow type of a Spark data type as Spark's Arrow path gives it (timestamps in UTC).

    Raises:
        Exception: PySpark's own error for a type without an Arrow form.
    """
    from pyspark.sql.pandas import types

    return _call_with_utc(types.to_arrow_type, data_type)


def to_arrow_schema(schema: Any) -> Any:
    """The Arrow schema of a Spark ``StructType``, as :func:`to_arrow_type` maps its fields."""
    from pyspark.sql.pandas import types

    return _call_with_utc(types.to_arrow_schema, schema)


def _call_with_utc(convert: Any, spark_type: Any) -> Any:
    if _takes_timezone(convert):  # 4.2 on; before, UTC is the (only or default) form
        return convert(spark_type, timezone="UTC")
    return convert(spark_type)


@cache
def _takes_timezone(convert: Any) -> bool:
    return "timezone" in inspect.signature(convert).parameters


def unavailable(name: str, line: tuple[int, int], what: str) -> type:
    """A stand-in base class for ``name`` on lines before ``line``: importing and subclassing
    it work (a module that defines a processor imports everywhere); making an instance raises
    :func:`require`'s error."""

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        require(line, what)
        return object.__new__(cls)

    return type(name, (), {"__new__": __new__, "__module__": __name__})
