"""What a ``read_store`` call reads, as a JSON-able request, and the reading of one of its
partitions: shared by the two routes that run it, the Python data source (PySpark >= 4.0,
``_datasource``) and ``mapInArrow`` over one row per partition (``_read_store``, PySpark 3.5).

A request holds only public storage options (it is part of the plan); the secret ones travel
beside it, pickled into the reading function or data source class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from verstore.changes import changes_schema, read_changes
from verstore.committed import output_schema, read_partition, resolve


def arrow_schema(request: Mapping[str, Any], storage_options: Mapping[str, Any]) -> Any:
    """The Arrow schema of the request's rows: the store's state, or its change feed."""
    _, settings = resolve(request["root"], request["store"], request["lineage"], storage_options)
    if request.get("changes") is not None:
        return changes_schema(settings.columns)
    return output_schema(settings.columns)


def read_part(
    request: Mapping[str, Any], storage_options: Mapping[str, Any], part: Any
) -> Iterator[Any]:
    """The ``pyarrow.RecordBatch`` es of one partition of the request: ``part`` is an item of
    ``request["partitions"]``."""
    r = request
    ref, settings = resolve(r["root"], r["store"], r["lineage"], storage_options)
    if r.get("changes") is not None:
        partitioning, number = part
        bounds = r["changes"]
        yield from read_changes(ref, settings, number, partitioning=partitioning, **bounds)
        return
    yield from read_partition(
        ref,
        settings,
        part,
        version=r["version"],
        as_of=r["as_of"],
        history=r["history"],
        from_time=r["from_time"],
        to_time=r["to_time"],
        start=_unhex(r["start"]),
        end=_unhex(r["end"]),
        prefix=_unhex(r["prefix"]),
    )


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)
