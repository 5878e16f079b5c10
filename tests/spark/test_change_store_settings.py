"""Changing a running query's settings (docs/spark.md, Changing a running query): sensor
readings enriched with the calibration valid at each reading's time, with a latest TTL.

A restart with another TTL or retention is refused where the query is built, before its first
micro-batch, with one error naming the setting, both values and the command; the command,
``change_store_settings``, rewrites the store with the history it holds, and the join's output
across the change equals ``merge_asof`` with each run's TTL over every calibration so far.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import verstore
import verstore.spark

pytest.register_assert_rewrite("streams")
from streams import BASE_MTIME, Collector, read_sources, run_available_now  # noqa: E402

READINGS = "reading_id long, sensor string, t long"
CALIBRATIONS = "sensor string, t long, offset double"
R_SCHEMA = pa.schema([("reading_id", pa.int64()), ("sensor", pa.string()), ("t", pa.int64())])
C_SCHEMA = pa.schema([("sensor", pa.string()), ("t", pa.int64()), ("offset", pa.float64())])
SENSORS = [f"d{i:02d}" for i in range(30)]
TTL_BEFORE, TTL_AFTER = 400, 150


class Feed:
    """Micro-batches of readings and calibrations as parquet files, and the oracle."""

    def __init__(self, work: Path) -> None:
        self.work, self.rng = work, random.Random(45)
        self.readings: list[list[dict[str, Any]]] = []
        self.calibrations: list[list[dict[str, Any]]] = []
        self.used: set[tuple[str, int]] = set()

    def add(self, batches: int) -> None:
        for _ in range(batches):
            i, base, rng = len(self.readings), 100 * len(self.readings), self.rng
            # Some sensors are recalibrated often, others rarely: the TTL ends those.
            calibrations = []
            while len(calibrations) < 25:
                sensor = rng.choice(SENSORS[:10] if rng.random() < 0.7 else SENSORS)
                t = max(0, base + rng.randrange(-120, 100))
                if (sensor, t) not in self.used:
                    self.used.add((sensor, t))
                    calibrations.append({"sensor": sensor, "t": t, "offset": rng.randrange(99)})
            readings = [
                {"reading_id": i * 1000 + j, "sensor": rng.choice(SENSORS), "t": base + j}
                for j in range(60)
            ]
            self.readings.append(readings)
            self.calibrations.append(calibrations)
            for name, rows, schema in (
                ("readings", readings, R_SCHEMA),
                ("calibrations", calibrations, C_SCHEMA),
            ):
                (self.work / name).mkdir(parents=True, exist_ok=True)
                path = self.work / name / f"part-{i:03}.parquet"
                pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
                os.utime(path, (BASE_MTIME + i, BASE_MTIME + i))

    def oracle(self, batches: range, ttl: int) -> list[tuple[Any, ...]]:
        """Per micro-batch, ``merge_asof`` of its readings against every calibration so far,
        a calibration matching readings within the TTL of its time."""
        out = []
        for b in batches:
            table = pd.DataFrame([c for cs in self.calibrations[: b + 1] for c in cs])
            stream = pd.DataFrame(self.readings[b]).sort_values("t")
            joined = pd.merge_asof(
                stream, table.sort_values("t"), on="t", by="sensor", tolerance=ttl - 1
            )
            out += [
                (r.reading_id, None if pd.isna(r.offset) else r.offset) for r in joined.itertuples()
            ]
        return sorted(out)


def joined(spark: Any, work: Path, ttl: int, retention: str) -> Any:
    readings, calibrations = read_sources(
        spark, work / "readings", work / "calibrations", READINGS, CALIBRATIONS
    )
    return verstore.spark.asof_join(
        readings, calibrations, on="sensor", stream_time="t", table_time="t",
        num_partitions=3, history_retention=retention, latest_ttl=ttl, store="calibrated",
    )  # fmt: skip


def run(spark: Any, work: Path, ttl: int, retention: str) -> list[tuple[Any, ...]]:
    sink = Collector()
    run_available_now(joined(spark, work, ttl, retention), work / "chk", sink)
    return sorted((r["reading_id"], r["offset"]) for r in sink.rows())


@pytest.mark.connect
def test_a_changed_ttl_and_retention_keep_every_version_across_the_change(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    feed = Feed(tmp_path)
    feed.add(3)
    got = run(spark, tmp_path, TTL_BEFORE, "1 day")
    report = verstore.spark.change_store_settings(
        spark, str(verstore_root), "calibrated", latest_ttl="150 ms",
        history_retention="P2D", checkpoint_location=str(tmp_path / "chk"),
    )  # fmt: skip
    assert report["version"] == 3 and report["from_partitions"] == report["to_partitions"] == 3
    assert report["from_settings"] == {
        "history_retention_ms": 86_400_000, "segment_interval_ms": None, "latest_ttl_ms": 400,
    }  # fmt: skip
    assert report["to_settings"] == {
        "history_retention_ms": 172_800_000, "segment_interval_ms": None, "latest_ttl_ms": 150,
    }  # fmt: skip
    assert report["versions"] > 0
    feed.add(3)
    got += run(spark, tmp_path, TTL_AFTER, "2 days")
    expected = feed.oracle(range(3), TTL_BEFORE) + feed.oracle(range(3, 6), TTL_AFTER)
    assert sorted(got) == sorted(expected)
    # the TTL mattered: with the old one kept, later readings would have matched more
    assert sorted(expected) != sorted(feed.oracle(range(3), TTL_BEFORE) + feed.oracle(
        range(3, 6), TTL_BEFORE
    ))  # fmt: skip
    # and the old settings are refused from now on, naming the command
    verstore.spark.configure(
        spark, str(verstore_root), local_dir=str(tmp_path / "local"),
        checkpoint_location=str(tmp_path / "chk"),
    )  # fmt: skip
    with pytest.raises(verstore.IncompatibleConfigError, match="latest_ttl_ms=150, cannot open"):
        joined(spark, tmp_path, TTL_BEFORE, "2 days")


@pytest.mark.connect
def test_a_restart_with_other_settings_is_refused_before_its_first_batch(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    feed = Feed(tmp_path)
    feed.add(2)
    run(spark, tmp_path, TTL_BEFORE, "1 day")
    verstore.spark.configure(
        spark, str(verstore_root), local_dir=str(tmp_path / "local"),
        checkpoint_location=str(tmp_path / "chk"),
    )  # fmt: skip
    for ttl, retention, message in (
        (TTL_AFTER, "1 day", r"latest_ttl_ms=400, cannot open it with latest_ttl_ms=150: .*"
            r"change_store_settings\(spark, checkpoint_root, 'calibrated', latest_ttl=150, "),
        (TTL_BEFORE, "2 days", r"history_retention_ms=86400000, cannot open it with "
            r"history_retention_ms=172800000: .*history_retention=172800000, "),
    ):  # fmt: skip
        with pytest.raises(verstore.IncompatibleConfigError, match=message) as refused:
            joined(spark, tmp_path, ttl, retention)
        assert "or restart it with" in str(refused.value)
        assert "another store name" not in str(refused.value)
    # nothing ran: the store holds what the first run committed (no new data, no new batch)
    assert verstore.spark.inspect(str(verstore_root), "calibrated").num_rows > 0
    # the root inside the query's checkpoint needs no checkpoint_location
    second = tmp_path / "second"
    Feed(second).add(1)
    verstore.spark.configure(spark, str(second / "chk" / "verstore"), local_dir=str(second))
    run(spark, second, TTL_BEFORE, "1 day")
    with pytest.raises(verstore.IncompatibleConfigError, match="latest_ttl_ms=400, cannot"):
        joined(spark, second, TTL_AFTER, "1 day")
