"""One local SparkSession for the whole test session; every test here is a Spark test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2,3]")  # 2 cores, up to 3 attempts per task
        .appName("verstore-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "1g")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def verstore_root(spark: Any, tmp_path: Path) -> Path:
    """A fresh checkpoint root, configured on the session."""
    import verstore.spark

    root = tmp_path / "verstore"
    verstore.spark.configure(spark, str(root), local_dir=str(tmp_path / "local"))
    return root


@pytest.fixture
def local_cluster_work() -> Iterator[None]:
    """Removes the application directories a ``local-cluster`` job leaves in Spark's own work
    directory (``$SPARK_HOME/work``, where the standalone workers of local-cluster mode keep
    each executor's files, unpacked archives included)."""
    import shutil

    import pyspark

    work = Path(pyspark.__file__).parent / "work"
    before = set(work.glob("app-*")) if work.is_dir() else set()
    yield
    for app in set(work.glob("app-*")) - before if work.is_dir() else ():
        shutil.rmtree(app, ignore_errors=True)
