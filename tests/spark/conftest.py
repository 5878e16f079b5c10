"""One local SparkSession for the whole test session; every test here is a Spark test but those
of ``parts/``, which test Spark's parts (spill, kernels) without a session.

With ``VERSTORE_SPARK_CONNECT=1`` the session is a Spark Connect session on a local Connect
server (``SparkSession.builder.remote("local[2,3]")``), as on Spark Connect clusters and
serverless platforms; ``make test`` runs the tests marked ``connect`` that way too. A process
holds one kind of session only: a Connect server cannot start beside a classic SparkContext.
"""

from __future__ import annotations

import os
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# The driver JVMs of these tests (this session's, a Connect server's, the job subprocesses') live
# for a minute or two: C2's compilations never pay back in that time and took 40% of their CPU.
# spark-submit passes SPARK_SUBMIT_OPTS to the driver JVM; nothing the tests check depends on the
# JIT or the collector. Benchmarks (benches/) keep the JVM's defaults, as users run it.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

#: Whether this test session runs on Spark Connect.
CONNECT = os.environ.get("VERSTORE_SPARK_CONNECT") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath).replace(os.sep, "/")
        if "tests/spark/" in path and "tests/spark/parts/" not in path:
            item.add_marker(pytest.mark.spark)
    line = pyspark_line()
    other = [item for item in items if not CONNECT and item.get_closest_marker("connect_only")]
    # A test without a Spark session checks nothing of Connect: the classic run has it.
    other += [item for item in items if CONNECT and "spark" not in _fixtures(item)]
    other += [item for item in items if not _for_line(item, line)]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


def _fixtures(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", []))


def pyspark_line() -> tuple[int, int]:
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def _for_line(item: pytest.Item, line: tuple[int, int]) -> bool:
    """Whether a test is of the running PySpark line: ``requires_pyspark(4, 0)`` tests what
    4.0 brought (``connect=(4, 1)``: to Spark Connect sessions in 4.1), ``pyspark_before(4,
    0)`` what older lines say instead (make test runs each line: docs/spark.md, Spark lines)."""
    needs = item.get_closest_marker("requires_pyspark")
    before = item.get_closest_marker("pyspark_before")
    needed = None if needs is None else tuple(needs.args)
    if needs is not None and CONNECT:
        needed = tuple(needs.kwargs.get("connect", needed))
    return (needed is None or line >= needed) and (before is None or line < tuple(before.args))


def session_conf(warehouse: Path) -> dict[str, str]:
    return {
        "spark.app.name": "verstore-tests",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.sql.session.timeZone": "UTC",
        # The parquet sink of Connect runs (streams.Collector): timestamps read back as UTC.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "1g",
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
    }


def free_port() -> int:
    """A loopback port free now, for a server of this process (test runs may run side by side)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def connect_session(conf: dict[str, str]) -> Any:
    """A Spark Connect session on a local Connect server of this process, what
    ``SparkSession.builder.remote("local[2,3]")`` starts, but on a free port instead of the
    fixed 15002, so that several test runs can hold a server at once."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    port = free_port()
    opts: dict[str, Any] = {**conf, "spark.connect.grpc.binding.port": str(port)}
    # As pyspark's builder does for a "local" remote: the server's SparkContext takes every
    # setting, the client only the runtime SQL ones (_start_connect_server keeps those in
    # opts); the client would warn about each other one (it cannot change them, and need not).
    os.environ["SPARK_LOCAL_REMOTE"] = "1"
    RemoteSparkSession._start_connect_server("local[2,3]", opts)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (
            RemoteSparkSession.builder.remote(f"sc://localhost:{port}")
            .config(map=opts)
            .getOrCreate()
        )


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    conf = session_conf(tmp_path_factory.mktemp("spark-warehouse"))
    if CONNECT:
        session = connect_session(conf)
    else:
        # 2 cores, up to 3 attempts per task
        session = SparkSession.builder.master("local[2,3]").config(map=conf).getOrCreate()
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
