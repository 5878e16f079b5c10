"""Requests a checkpoint makes to S3 per commit, counted at a proxy in front of moto.

``python -m benches.requests_per_commit [--versions N] [--interval I]`` starts a moto S3 server
on loopback and a counting proxy in front of it, then runs ``N`` micro-batches of one partition
as Spark tasks do (open the version, 200 writes, commit; the local copy reused between them, no
keeper), with a snapshot every ``I`` commits and cleanup after each. It prints, per kind of
commit (without and with a snapshot, the cleanup after it included), the median requests of an
open and of a commit, by S3 operation (a copy and a multipart call are told from a plain PUT
by their headers and query). Nothing is timed: the counts depend only on the protocol.
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

# The proxy in front of moto is the race tests' (tests/s3_proxy.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from s3_proxy import S3Proxy

OPERATIONS = ("PUT", "COPY", "GET", "HEAD", "LIST", "DELETE", "MULTIPART")


class _Counting(S3Proxy):
    """Counts the requests it forwards, by S3 operation."""

    def __init__(self, upstream: int) -> None:
        super().__init__(upstream)
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def seen(self, method: str, path: str, headers: Any) -> None:
        query = urllib.parse.urlsplit(path).query
        if "uploads" in query or "uploadId" in query:
            kind = "MULTIPART"
        elif method == "PUT" and headers.get("x-amz-copy-source"):
            kind = "COPY"
        elif method == "GET" and ("list-type" in query or "delimiter" in query):
            kind = "LIST"
        elif method == "POST" and "delete" in query:
            kind = "DELETE"
        else:
            kind = method
        with self.lock:
            self.counts[kind] += 1

    def take(self) -> Counter[str]:
        with self.lock:
            counts, self.counts = self.counts, Counter()
        return counts


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _moto(port: int) -> subprocess.Popen[bytes]:
    executable = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    server = subprocess.Popen(
        [executable, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                return server
        except urllib.error.HTTPError:
            return server
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)


def run(versions: int, interval: int) -> dict[str, dict[str, float]]:
    """Median requests by operation, for the opens and the commits of each kind."""
    import pyarrow.fs as pafs
    from verstore.checkpoint import CheckpointOptions, PartitionStore

    port = _port()
    server = _moto(port)
    proxy = _Counting(port)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    options = {
        "endpoint_override": f"127.0.0.1:{proxy.server_address[1]}",
        "scheme": "http",
        "access_key": "testing",
        "secret_key": "testing",
        "region": "us-east-1",
    }
    pafs.S3FileSystem(**options, allow_bucket_creation=True).create_dir("bucket")
    uri = f"s3://bucket/{uuid.uuid4().hex}"
    checkpoint = CheckpointOptions(snapshot_interval=interval, min_versions_to_retain=2 * interval)
    rng = random.Random(7)
    samples: dict[str, list[Counter[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="verstore-requests-") as local:
        try:
            for version in range(versions):
                proxy.take()
                part = PartitionStore.open(
                    uri, "s", 0, version, local, storage_options=options,
                    history_retention_ms=10**9, options=checkpoint,
                )  # fmt: skip
                opened = proxy.take()
                for _ in range(200):
                    part.store.put(rng.randbytes(8), rng.randbytes(32), 1000 * version)
                part.commit()
                committed = proxy.take()
                kind = "snapshot" if part.commit_stats and part.commit_stats.snapshot else "plain"
                if version > interval:  # past the first snapshot and cleanup
                    samples.setdefault(f"open ({kind} commit)", []).append(opened)
                    samples.setdefault(f"commit ({kind})", []).append(committed)
        finally:
            proxy.shutdown()
            server.terminate()
            server.wait(timeout=10)
    out: dict[str, dict[str, float]] = {}
    for what, counts in samples.items():
        medians = {op: statistics.median(c[op] for c in counts) for op in OPERATIONS}
        out[what] = {op: n for op, n in medians.items() if any(c[op] for c in counts)}
        out[what]["total"] = statistics.median(sum(c.values()) for c in counts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", type=int, default=41)
    parser.add_argument("--interval", type=int, default=10)
    args = parser.parse_args()
    for what, ops in sorted(run(args.versions, args.interval).items()):
        print(f"{what:28} " + "  ".join(f"{op} {n:g}" for op, n in ops.items()))


if __name__ == "__main__":
    main()
