"""The steps of a repartition (``verstore.checkpoint.repartition``) run in this process, as tests
and the golden set's generator run them: ``verstore.spark.repartition_store`` runs the same
steps as Spark tasks, routing keys by Spark's hash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from verstore.checkpoint import repartition as steps
from verstore.checkpoint.settings import StoreSettings
from verstore.location import Location


def run_in_process(
    location: Location,
    plan: steps.Plan,
    route: Callable[[bytes, int], int],
    local_dir: str,
) -> StoreSettings:
    """Steps 1 to 4 in this process, each key routed to ``route(stored key bytes, count)``.
    Holds every version of the store in memory."""
    count = plan.target.num_partitions or 0
    steps.mark_sources(location, plan)
    routed: dict[int, list[tuple[Any, ...]]] = {p: [] for p in range(count)}
    for p in plan.source.partitions(plan.files(location)):
        with steps.read_source(location, plan, p, local_dir) as (stream_time, scan):
            for batch in scan:
                for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                    routed[route(row[0], count)].append((*row, stream_time))
    types = [pa.binary(), pa.binary(), pa.int64(), pa.int64()]
    for p, rows in routed.items():
        rows.sort(key=steps.write_order)
        table = pa.table(
            [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)],
            names=["key", "value", "timestamp", "stream_time"],
        )
        steps.write_target(location, plan, p, local_dir, table.to_batches())
    return steps.publish(location, plan)
