"""``spark.read.format("verstore")``: the Python data source ``read_store`` registers on
PySpark >= 4.0 (the line that brought ``pyspark.sql.datasource``), one input partition per
store partition.

The source's one option, ``request`` (``_request``), is part of the plan (shown in the Spark UI
and written to the event log), so it holds only the public storage options. The secret ones
travel in the class that ``read_store`` registers: a subclass made for the call, which
``cloudpickle`` ships by value to the Python workers that plan and read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from verstore.spark import _compat
from verstore.spark._conf import StorageCredentials
from verstore.spark._request import arrow_schema, read_part

_compat.require(_compat.DATA_SOURCES, "the verstore data source (Python data sources)")

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

FORMAT = "verstore"


class VerstoreDataSource(DataSource):
    """``spark.read.format("verstore")``: built by ``read_store``, which fills its one option,
    ``request`` (JSON), and subclasses it to carry secret storage options."""

    credentials: StorageCredentials | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    @classmethod
    def carrying(cls, hidden: dict[str, Any]) -> type[VerstoreDataSource]:
        """A subclass that carries the secret storage options ``hidden``: not importable by
        name, so pickled with its class attributes."""
        return type(
            "VerstoreDataSource",
            (cls,),
            {
                "credentials": StorageCredentials("read_store", hidden),
                "__module__": __name__,
                "__qualname__": "VerstoreDataSource.with_credentials",
            },
        )

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        request = json.loads(self.options["request"])
        return from_arrow_schema(arrow_schema(request, self._options(request)))

    def reader(self, schema: Any) -> DataSourceReader:
        request = json.loads(self.options["request"])
        return _StoreReader(request, self._options(request))

    def _options(self, request: Mapping[str, Any]) -> dict[str, Any]:
        hidden = {} if self.credentials is None else self.credentials.options
        return {**request["storage_options"], **hidden}


class _StoreReader(DataSourceReader):
    def __init__(self, request: dict[str, Any], storage_options: dict[str, Any]) -> None:
        self.request = request
        # Pickled into the read tasks (their function, not a conf or the plan).
        self.storage_options = StorageCredentials("read_store", storage_options)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in self.request["partitions"]]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from read_part(self.request, self.storage_options.options, partition.value)


def load(spark: Any, request: Mapping[str, Any], hidden: dict[str, Any]) -> Any:
    """The request read through the data source (registered on ``spark`` for the call)."""
    source = VerstoreDataSource.carrying(hidden) if hidden else VerstoreDataSource
    spark.dataSource.register(source)
    return spark.read.format(FORMAT).option("request", json.dumps(request)).load()


__all__ = ["FORMAT", "VerstoreDataSource", "load"]
