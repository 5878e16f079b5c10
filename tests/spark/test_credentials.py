"""Secret storage options never appear in clear in what Spark or verstore writes.

The queries run in a subprocess (``credentials_job.py``) with Spark's event log on and
uncompressed: one SparkContext per process, and the event log is fixed when it starts. The
event log holds what the history server and the Spark UI show (the session's properties, every
job's properties, plans, task errors). The test then reads every file the job wrote (event log,
Spark checkpoints, local and Spark-local directories, every object under the S3 root) and the
job's output, and finds none of the secrets.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.fs as pafs
import pytest

pytest.register_assert_rewrite("streams")
from streams import gen_oracle, gen_schemas, generate, write_batches  # noqa: E402

pytest_plugins = ["checkpoint_helpers"]  # the session's moto_server (fixture s3_server)

JOB = Path(__file__).with_name("credentials_job.py")

S3_ACCESS_KEY = "VSTESTACCESSKEY7F3A9C01"
S3_SECRET_KEY = "vstest-s3-secret-key-3e9f1b7d0c55"
AZURE_ACCOUNT_KEY = base64.b64encode(b"vstest-azure-account-key-5b2e8a1f").decode()


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def _s3_objects(root: str, options: dict[str, Any]) -> dict[str, bytes]:
    fs = pafs.S3FileSystem(**options)
    prefix = root.removeprefix("s3://")
    found = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    out = {}
    for info in found:
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as stream:
                out[info.path] = bytes(stream.read())
    return out


def test_no_secret_in_event_log_checkpoints_or_store_files(
    tmp_path: Path, s3_server: dict[str, Any]
) -> None:
    batches = generate(19, batches=2)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    s3_root = f"s3://bucket/{uuid.uuid4().hex}/verstore"
    s3_options = {**s3_server, "access_key": S3_ACCESS_KEY, "secret_key": S3_SECRET_KEY}
    azure_authority = f"127.0.0.1:{_unused_port()}"  # nothing listens: requests fail at once
    azure_options = {
        "account_name": "vstestaccount",
        "account_key": AZURE_ACCOUNT_KEY,
        "blob_storage_authority": azure_authority,
        "dfs_storage_authority": azure_authority,
        "blob_storage_scheme": "http",
        "dfs_storage_scheme": "http",
    }
    secrets = {"s3": s3_options, "s3_root": s3_root, "azure": azure_options}
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(JOB), str(tmp_path)],
        input=json.dumps(secrets),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"credentials job failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    )
    result = json.loads(lines[-1].removeprefix("RESULT "))

    # The queries did what they should: the S3 join ran through (so its tasks had the
    # credentials), and the Azure tasks reached the filesystem with the options configured.
    assert result["s3_rows"] == len(gen_oracle(batches, how="left", tie_breaker="seq"))
    assert result["read_store_rows"] > 0
    assert result["azure_failed"], result
    assert azure_authority in result["azure_error"], result["azure_error"][:4000]
    events = _files(tmp_path / "events")
    assert sum(e.stat().st_size for e in events) > 0
    # Job properties are in the event log: what the search below looks at is really there.
    assert any(b"spark.verstore.checkpointRoot" in e.read_bytes() for e in events)

    written = {str(p): p.read_bytes() for p in _files(tmp_path)}
    stored = _s3_objects(s3_root, s3_server)
    assert stored, "the S3 query wrote no checkpoint files"
    written.update({f"s3://{path}": data for path, data in stored.items()})
    written["<job stdout>"] = done.stdout.encode()
    written["<job stderr>"] = done.stderr.encode()
    leaks = {
        secret[:6] + "...": sorted(
            name for name, data in written.items() if secret.encode() in data
        )
        for secret in (S3_ACCESS_KEY, S3_SECRET_KEY, AZURE_ACCOUNT_KEY)
    }
    assert not any(leaks.values()), f"secrets written in clear: {leaks}"


# --- the pieces, without Spark -------------------------------------------------------------------


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self) -> None:
        self.conf = _Conf()


class _Task:
    """A stand-in for the running task's ``TaskContext``: local properties from a conf."""

    def __init__(self, conf: _Conf) -> None:
        self.properties = {
            **conf.values,
            "streaming.sql.batchId": "3",
            "sql.streaming.queryId": "q",
        }

    def getLocalProperty(self, name: str) -> str | None:
        return self.properties.get(name)

    def partitionId(self) -> int:
        return 0


def provide_options(checkpoint_root: str) -> dict[str, Any]:
    """A storage options provider (``test_credentials:provide_options``)."""
    return {"session_token": f"vstest-token-for-{checkpoint_root}"}


@pytest.fixture
def in_task(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs ``TaskConf.current`` as a task of ``session`` would."""
    import pyspark
    from verstore.spark._conf import TaskConf

    def current(session: _Session, credentials: Any = None) -> Any:
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Task(session.conf)))
        return TaskConf.current(credentials)

    return current


def test_configure_keeps_secrets_out_of_the_conf(in_task: Any) -> None:
    import pickle

    from verstore.spark import configure
    from verstore.spark._conf import plan_credentials

    session = _Session()
    options = {
        "endpoint_override": "127.0.0.1:9000",
        "region": "eu-west-1",
        "access_key": S3_ACCESS_KEY,
        "secret_key": S3_SECRET_KEY,
    }
    configure(session, "s3://bucket/verstore", storage_options=options)
    conf = json.dumps(session.conf.values)
    assert S3_ACCESS_KEY not in conf and S3_SECRET_KEY not in conf
    assert json.loads(session.conf.values["spark.verstore.storageOptions"]) == {
        "endpoint_override": "127.0.0.1:9000",
        "region": "eu-west-1",
    }
    ref = json.loads(session.conf.values["spark.verstore.storageCredentials"])
    assert ref["keys"] == ["access_key", "secret_key"]

    credentials = plan_credentials(session)
    assert credentials is not None
    assert S3_SECRET_KEY not in repr(credentials) and "secret_key" in repr(credentials)
    carried = pickle.loads(pickle.dumps(credentials))  # as in a partition function
    task = in_task(session, carried)
    assert task.storage_options == options
    assert S3_SECRET_KEY not in repr(task)

    # Configured again with the same credentials: queries built before keep working.
    configure(session, "s3://bucket/verstore", storage_options=dict(options))
    assert in_task(session, carried).storage_options == options


def test_a_task_without_the_configured_credentials_fails(in_task: Any) -> None:
    from verstore.spark import configure
    from verstore.spark._conf import plan_credentials

    session = _Session()
    configure(session, "abfs://c/v", storage_options={"account_name": "a", "account_key": "k1"})
    first = plan_credentials(session)
    with pytest.raises(RuntimeError, match=r"storage credentials \(account_key\) that did not"):
        in_task(session, None)  # a query built before configure()
    configure(session, "abfs://c/v", storage_options={"account_name": "a", "account_key": "k2"})
    with pytest.raises(RuntimeError, match="did not reach this code"):
        in_task(session, first)  # built with other credentials than the query starts with
    assert in_task(session, plan_credentials(session)).storage_options["account_key"] == "k2"


def test_options_without_secrets_and_a_provider(in_task: Any) -> None:
    from verstore.spark import configure

    session = _Session()
    configure(session, "s3://bucket/v", storage_options={"region": "eu-west-1"})
    assert "spark.verstore.storageCredentials" not in session.conf.values
    assert in_task(session).storage_options == {"region": "eu-west-1"}  # the executor's chain

    configure(
        session,
        "s3://bucket/v",
        storage_options={"region": "eu-west-1"},
        storage_options_provider="test_credentials:provide_options",
    )
    assert in_task(session).storage_options == {
        "region": "eu-west-1",
        "session_token": "vstest-token-for-s3://bucket/v",
    }
    with pytest.raises(ValueError, match="module:function"):
        configure(session, "s3://bucket/v", storage_options_provider="no function")


@pytest.mark.requires_pyspark(4, 0)
def test_stateful_processor_carries_the_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import cloudpickle
    from verstore.spark import StoreSpec, VersionedStatefulProcessor, stateful
    from verstore.spark._conf import StorageCredentials

    class Processor(VersionedStatefulProcessor):
        stores: ClassVar[dict[str, StoreSpec]] = {"s": StoreSpec(history_retention_ms=1000)}

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            return iter(())

    credentials = StorageCredentials("id", {"secret_key": S3_SECRET_KEY})
    monkeypatch.setattr(stateful, "active_credentials", lambda: credentials)
    shipped = cloudpickle.loads(cloudpickle.dumps(Processor()))
    monkeypatch.setattr(stateful, "active_credentials", lambda: None)  # as in a worker
    again = cloudpickle.loads(cloudpickle.dumps(shipped))
    assert again._verstore_credentials.options == {"secret_key": S3_SECRET_KEY}
