"""Shared helpers and fixtures for the checkpoint durability tests (docs/checkpoint.md).

Test modules load this file as a plugin (``pytest_plugins = ["checkpoint_helpers"]``) so that the
session-scoped S3 server starts once per session, however many modules use it.

* ``target``: a checkpoint location, parametrized over ``local`` (a directory under
  ``tmp_path``) and ``s3`` (a fresh prefix in a bucket of the .venv's ``moto_server`` on
  127.0.0.1, started once per session; the ``s3`` cases skip when it is not installed). It opens
  partition stores, commits op batches, finds a partition's commits and snapshots by version
  and reads or damages durable files.
* ``make_target``/``share``/``replaced``: modules build one checkpoint per kind and share it
  between read-only tests; a test that damages a file restores it (S3 round trips are slow).
  ``built`` is such a checkpoint (``seven_versions``: versions 1..7, snapshots at 3 and 6).
* ``moto_options``: the storage options of a moto server once it answers, with its bucket.
* ``fsyncs``: the ``os.fsync`` and ``os.replace`` calls of a test, in order.
* ``Reference``: the ops of each commit of the winning chain, by version; it replays them into
  ``VersionedStore.in_memory`` with the same retention and interval. Versions may be sparse: a
  version without a commit of its own has the state of the newest commit below it.
* ``reads``: every read the tests compare (get latest and as-of, versions, stream time).
* ``ordered_attempts``: attempt ids that strictly increase in the order attempts open (real
  ones carry the open time in milliseconds, so two opens within one millisecond would tie-break
  at random).
* ``forge_manifest``: a snapshot manifest with any content and a *valid* checksum.

Retention and segment interval are small (40 ms and 10 ms) so that op batches span several
segments, expire old ones and get writes rejected; checkpoints take a snapshot every 3 commits
and retain 4 versions, so snapshots, SST reuse and cleanup all happen within a few commits.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import posixpath
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
import verstore
from verstore.checkpoint import (
    CheckpointOptions,
    CommitRef,
    LineageFiles,
    Manifest,
    PartitionFiles,
    PartitionStore,
    decode_manifest,
    faults,
    layout,
)
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.uploads import ManifestFile
from verstore.location import TMP_MARK, Location

RETENTION_MS = 40
SEGMENT_MS = 10
STORE = "orders"
LINEAGE = "default"
OPTIONS = CheckpointOptions(
    snapshot_interval=3, min_versions_to_retain=4, orphan_grace_s=0, lock_timeout_s=5
)
#: Options of a store that never snapshots (so only changelogs matter).
NO_SNAPSHOTS = CheckpointOptions(
    snapshot_interval=1_000, min_versions_to_retain=4, orphan_grace_s=0, lock_timeout_s=5
)
KEYS = [b"", b"a", b"b", b"k\x00", b"\xff\xff\xff"]
#: The commit steps at which ``verstore.checkpoint.faults`` calls the hook, in order.
COMMIT_STEPS = list(faults.COMMIT_STEPS)
#: Steps at or after which a commit that dies there is durable (the changelog is the commit).
DURABLE_STEPS = COMMIT_STEPS[COMMIT_STEPS.index("after_changelog") :]
#: Steps at or after which the local copy is recorded clean at the new commit.
CLEAN_STEPS = COMMIT_STEPS[COMMIT_STEPS.index("after_local_state") :]

Op = tuple[str, bytes, "bytes | None", int]
"""``("put" | "delete", key, value or None, timestamp)``."""


# --- ops and the reference ----------------------------------------------------------------------


def generate_ops(rng: random.Random, n: int, stream_time: int) -> list[Op]:
    """A batch of ``n`` puts, tombstone puts and deletes continuing from ``stream_time``.

    Timestamps trail the running stream time by up to the retention plus 5 (so some writes are
    rejected) or lead it by up to one segment, with an occasional jump past the retention that
    expires whole segments.
    """
    ops: list[Op] = []
    for _ in range(n):
        if rng.random() < 0.06:
            ts = max(stream_time, 0) + RETENTION_MS + rng.randint(0, 2 * SEGMENT_MS)
        else:
            ts = max(0, stream_time + rng.randint(-RETENTION_MS - 5, SEGMENT_MS))
        key = rng.choice(KEYS)
        roll = rng.random()
        if roll < 0.18:
            ops.append(("delete", key, None, ts))
        elif roll < 0.25:
            ops.append(("put", key, None, ts))
        else:
            size = rng.choice([0, 1, 3, 8, 200])
            ops.append(("put", key, rng.randbytes(size), ts))
        stream_time = max(stream_time, ts)
    return ops


def record(rec: Any) -> tuple[bytes, int, int | None] | None:
    """A record as a plain tuple (readable diffs), or None."""
    return None if rec is None else (rec.value, rec.timestamp, rec.valid_to)


def apply_ops(store: verstore.VersionedStore, ops: list[Op]) -> list[Any]:
    """Applies ``ops`` in order; returns each op's result (put code or deleted record)."""
    results: list[Any] = []
    for kind, key, value, ts in ops:
        if kind == "put":
            results.append(store.put(key, value, ts))
        else:
            results.append(record(store.delete(key, ts)))
    return results


def reads(store: verstore.VersionedStore) -> dict[str, Any]:
    """Every read the tests compare: stream time, latest, as-of around the horizon, versions."""
    ost = store.observed_stream_time
    low = max(0, ost - RETENTION_MS - 2 * SEGMENT_MS)
    out: dict[str, Any] = {"observed_stream_time": ost}
    for key in KEYS:
        out[f"get {key!r}"] = record(store.get(key))
        out[f"as_of {key!r}"] = [record(store.get(key, as_of=t)) for t in range(low, ost + 2)]
        out[f"versions {key!r}"] = [record(r) for r in store.versions(key, ascending=True)]
        out[f"versions {key!r} near horizon"] = [
            record(r)
            for r in store.versions(key, from_time=max(0, ost - RETENTION_MS), to_time=ost + 1)
        ]
    return out


class Reference:
    """The ops of each commit of the winning chain, by version, replayed in memory on demand."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Op]] = {}

    def commit(self, version: int, ops: list[Op]) -> None:
        """Records the commit of ``version``: a retry of it (a sibling that wins) drops every
        version of the old chain from ``version`` on. Versions may be sparse."""
        assert version >= 1
        for v in [v for v in self.batches if v >= version]:
            del self.batches[v]
        self.batches[version] = list(ops)

    @property
    def newest(self) -> int:
        return max(self.batches, default=0)

    def store_at(self, version: int) -> verstore.VersionedStore:
        store = verstore.VersionedStore.in_memory(
            history_retention_ms=RETENTION_MS, segment_interval_ms=SEGMENT_MS
        )
        for v in sorted(self.batches):
            if v <= version:
                apply_ops(store, self.batches[v])
        return store

    def reads_at(self, version: int) -> dict[str, Any]:
        with self.store_at(version) as store:
            return reads(store)

    def stream_time_at(self, version: int) -> int:
        with self.store_at(version) as store:
            return store.observed_stream_time


# --- checkpoint locations -----------------------------------------------------------------------


@dataclass
class Target:
    """A checkpoint location (local or S3) plus a scratch area for local directories."""

    kind: str
    uri: str
    storage_options: dict[str, Any] | None
    scratch: Path
    _counter: Iterator[int] = field(default_factory=lambda: iter(range(1_000_000)))

    @property
    def location(self) -> Location:
        return Location.resolve(self.uri, self.storage_options)

    def lineage_files(self, store: str = STORE, lineage: str = LINEAGE) -> LineageFiles:
        return LineageFiles(self.location, store, lineage)

    def files(
        self, partition: int = 0, store: str = STORE, lineage: str = LINEAGE
    ) -> PartitionFiles:
        return self.lineage_files(store, lineage).partition(partition)

    def new_local_dir(self) -> Path:
        """A fresh, empty local directory (a new executor)."""
        path = self.scratch / f"local-{next(self._counter)}"
        path.mkdir(parents=True)
        return path

    def open(
        self,
        version: int,
        local_dir: Path | None = None,
        *,
        options: CheckpointOptions = OPTIONS,
        partition: int = 0,
        store: str = STORE,
        lineage: str = LINEAGE,
        **kwargs: Any,
    ) -> PartitionStore:
        kwargs.setdefault("history_retention_ms", RETENTION_MS)
        kwargs.setdefault("segment_interval_ms", SEGMENT_MS)
        return PartitionStore.open(
            self.uri,
            store,
            partition,
            version,
            local_dir if local_dir is not None else self.new_local_dir(),
            storage_options=self.storage_options,
            options=options,
            lineage=lineage,
            **kwargs,
        )

    def commit(
        self,
        version: int,
        ops: list[Op],
        local_dir: Path | None = None,
        *,
        options: CheckpointOptions = OPTIONS,
        partition: int = 0,
        store: str = STORE,
        lineage: str = LINEAGE,
    ) -> CommitRef:
        """Opens ``version``, applies ``ops`` and commits; returns the new commit."""
        part = self.open(
            version, local_dir, options=options, partition=partition, store=store, lineage=lineage
        )
        apply_ops(part.store, ops)
        attempt = part.attempt
        return CommitRef(part.commit(), attempt)

    # the version graph

    def graph(self, partition: int = 0, lineage: str = LINEAGE) -> Graph:
        files = self.files(partition, lineage=lineage)
        return Graph(files, files.listing())

    def tip(self, partition: int = 0, lineage: str = LINEAGE) -> CommitRef:
        return self.graph(partition, lineage).tip()

    def winning(self, version: int, partition: int = 0, lineage: str = LINEAGE) -> CommitRef:
        """The winning chain's commit of exactly ``version``."""
        graph = self.graph(partition, lineage)
        [ref] = [r for r in graph.walk(graph.tip()) if r.version == version]
        return ref

    def changelog(self, version: int, partition: int = 0, lineage: str = LINEAGE) -> str:
        """The path of the winning chain's changelog of ``version``."""
        graph = self.graph(partition, lineage)
        return graph.commits[self.winning(version, partition, lineage)].path

    def snapshot(self, version: int, partition: int = 0, lineage: str = LINEAGE) -> str:
        """The path of the snapshot manifest of the winning chain's commit of ``version``."""
        return self.files(partition, lineage=lineage).snapshot(
            self.winning(version, partition, lineage)
        )

    def manifest(self, version: int, partition: int = 0, lineage: str = LINEAGE) -> Manifest:
        ref = self.winning(version, partition, lineage)
        path = self.files(partition, lineage=lineage).snapshot(ref)
        return decode_manifest(self.read(path), self.describe(path), ref)

    # durable files

    def path(self, name: str, partition: int = 0, store: str = STORE) -> str:
        """A path inside a partition's durable directory (``"SSTs/..."``)."""
        return posixpath.join(self.files(partition, store).dir, name)

    def describe(self, path: str) -> str:
        return self.location.describe(path)

    def read(self, path: str) -> bytes:
        return self.location.read_bytes(path)

    def write(self, path: str, data: bytes) -> None:
        """Writes (or overwrites: tests damage files) ``path``."""
        self.location.delete(path)
        self.location.create_new(path, data)

    def remove(self, path: str) -> None:
        if not self.location.info([path])[0].type == pafs.FileType.File:
            raise FileNotFoundError(path)
        self.location.delete(path)

    def exists(self, path: str) -> bool:
        return self.location.exists(path)

    def names(self, directory: str) -> set[str]:
        return {info.base_name for info in self.location.list(directory)}

    def tree(self) -> dict[str, int]:
        """Every file under the location: relative path -> size."""
        root = self.location.root.rstrip("/")
        return {info.path[len(root) + 1 :]: info.size for info in self.location.walk(root)}

    def cli_args(self) -> list[str]:
        """The URI and ``--storage-option`` flags for the CLI (string options only: the CLI
        types the others from their text)."""
        args = [self.uri]
        for key, value in (self.storage_options or {}).items():
            if isinstance(value, str):
                args += ["--storage-option", f"{key}={value}"]
        return args


def open_and_read(
    target: Target, version: int, local_dir: Path | None = None
) -> tuple[dict[str, Any], bool]:
    """Opens ``version`` and aborts: ``(reads, rebuilt)``.

    Without ``local_dir``, a read-only open in a fresh directory (any kept version, a rebuild);
    with it, an open for writing there (a task: the local copy may be reused or caught up).
    """
    if local_dir is None:
        part = target.open(version, read_only=True)
    else:
        part = target.open(version, local_dir)
    try:
        return reads(part.store), part.rebuilt
    finally:
        part.abort()


def assert_version_matches(
    target: Target, ref: Reference, version: int, local_dir: Path | None = None
) -> bool:
    """Asserts that ``version`` opens with the reference's reads; returns whether it rebuilt."""
    actual, rebuilt = open_and_read(target, version, local_dir)
    assert actual == ref.reads_at(version), f"version {version} differs from the reference"
    return rebuilt


def commit_batches(
    target: Target,
    ref: Reference,
    rng: random.Random,
    start: int,
    stop: int,
    local_dir: Path,
    *,
    ops_per_batch: int = 25,
    options: CheckpointOptions = OPTIONS,
    partition: int = 0,
    lineage: str = LINEAGE,
) -> None:
    """Commits versions ``start + 1 .. stop`` from ``start`` with seeded batches."""
    for version in range(start, stop):
        ops = generate_ops(rng, ops_per_batch, ref.stream_time_at(version))
        new = target.commit(
            version, ops, local_dir, options=options, partition=partition, lineage=lineage
        )
        assert new.version == version + 1
        ref.commit(version + 1, ops)


def assert_no_orphans(target: Target, partition: int = 0) -> None:
    """Right after a cleanup with ``orphan_grace_s=0``: every uploaded file is referenced by a
    manifest or a claim of the partition (a snapshot that died before its manifest keeps its
    files while its version is kept), and no temporary file or retirement is left."""
    files = target.files(partition)
    listing = files.listing()
    referenced = set()
    for ref, snapshot in [*listing.snapshots.items(), *listing.claims.items()]:
        manifest = decode_manifest(target.read(snapshot.path), snapshot.path, ref)
        referenced |= {posixpath.basename(f.durable) for f in manifest.files}
    assert target.names(files.sst_dir) == referenced
    assert not listing.temporaries
    assert not listing.retirements


# --- forged files -------------------------------------------------------------------------------


def forge_manifest(body: dict[str, Any]) -> bytes:
    """``body`` as a manifest file with a valid checksum, computed as ``uploads.py`` does
    (crc32 of the canonical JSON of every field but ``checksum``)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps({**body, "checksum": zlib.crc32(canonical)}, indent=1).encode()


def manifest_body(manifest: Manifest) -> dict[str, Any]:
    """A manifest's fields (without ``checksum``), to edit and :func:`forge_manifest`."""
    body = json.loads(manifest.encode())
    del body["checksum"]
    assert isinstance(body, dict)
    return body


def attempt_id(n: int) -> bytes:
    """A valid-looking attempt id (nonzero)."""
    return n.to_bytes(8, "big") + bytes(7) + b"\x01"


# --- fault injection ----------------------------------------------------------------------------

_CHILD = """
import json, os, signal, sys
from verstore.checkpoint import CheckpointOptions, PartitionStore, faults

args = json.loads(sys.argv[1])

def hook(step):
    if step == args["step"]:
        os.kill(os.getpid(), signal.SIGKILL)

faults.set_hook(hook)
part = PartitionStore.open(
    args["uri"], args["store"], 0, args["version"], args["local_dir"],
    history_retention_ms=args["retention"], segment_interval_ms=args["interval"],
    storage_options=args["storage_options"], options=CheckpointOptions(**args["options"]),
)
print("attempt", part.attempt.hex(), flush=True)
for kind, key, value, ts in args["ops"]:
    key = bytes.fromhex(key)
    if kind == "put":
        part.store.put(key, None if value is None else bytes.fromhex(value), ts)
    else:
        part.store.delete(key, ts)
print("committed", part.commit(), flush=True)
"""


_REBUILD_CHILD = """
import json, os, signal, sys
from verstore.checkpoint import PartitionStore

args = json.loads(sys.argv[1])

def progress(phase, done, total):
    os.kill(os.getpid(), signal.SIGKILL)

PartitionStore.open(
    args["uri"], args["store"], 0, args["version"], args["local_dir"],
    history_retention_ms=args["retention"], segment_interval_ms=args["interval"],
    storage_options=args["storage_options"], progress=progress,
)
print("opened", flush=True)
"""


def _child_args(target: Target, version: int, local_dir: Path) -> dict[str, Any]:
    return {
        "uri": target.uri,
        "storage_options": target.storage_options,
        "store": STORE,
        "version": version,
        "local_dir": str(local_dir),
        "retention": RETENTION_MS,
        "interval": SEGMENT_MS,
    }


def rebuild_in_child(
    target: Target, version: int, local_dir: Path
) -> subprocess.CompletedProcess[str]:
    """Opens ``version`` in a child process that SIGKILLs itself after replaying one changelog
    (of a rebuild or of catching up a local copy)."""
    return subprocess.run(
        [sys.executable, "-c", _REBUILD_CHILD, json.dumps(_child_args(target, version, local_dir))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def commit_in_child(
    target: Target,
    version: int,
    ops: list[Op],
    local_dir: Path,
    step: str,
    options: CheckpointOptions = OPTIONS,
) -> subprocess.CompletedProcess[str]:
    """Commits ``ops`` on ``version`` in a child process that SIGKILLs itself at ``step``."""
    args = {
        **_child_args(target, version, local_dir),
        "options": {
            "snapshot_interval": options.snapshot_interval,
            "min_versions_to_retain": options.min_versions_to_retain,
            "orphan_grace_s": options.orphan_grace_s,
            "lock_timeout_s": options.lock_timeout_s,
        },
        "step": step,
        "ops": [(k, key.hex(), None if v is None else v.hex(), ts) for k, key, v, ts in ops],
    }
    return subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- fixtures -----------------------------------------------------------------------------------


def _moto_server_executable() -> str | None:
    """``moto_server`` of the test interpreter's environment (the project's .venv)."""
    beside = Path(sys.executable).parent / "moto_server"
    return str(beside) if beside.exists() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def moto_options(server: subprocess.Popen[bytes], port: int) -> dict[str, Any]:
    """The storage options of the moto server ``server`` started on ``port``, once it answers
    (within 60 s), and with a bucket named ``bucket``."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                break
        except urllib.error.HTTPError as answered:  # any HTTP answer means it is up
            answered.close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto_server did not start (exit code {server.poll()})")
            time.sleep(0.1)
    options: dict[str, Any] = {
        "endpoint_override": f"127.0.0.1:{port}",
        "scheme": "http",
        "access_key": "testing",
        "secret_key": "testing",
        "region": "us-east-1",
    }
    pafs.S3FileSystem(**options, allow_bucket_creation=True).create_dir("bucket")
    return options


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, Any]]:
    """A ``moto_server`` on 127.0.0.1 with a bucket named ``bucket``; yields storage options."""
    executable = _moto_server_executable()
    if executable is None:
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = free_port()
    server = subprocess.Popen(
        [executable, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        options = moto_options(server, port)
        # The AWS SDK's default timeouts (1 s to connect, 3 s per request) are too short for
        # moto on a loaded CI machine: a request that moto completes late is retried by the SDK
        # (a retried CompleteMultipartUpload then fails) and the test fails for no reason.
        yield {**options, "connect_timeout": 30.0, "request_timeout": 60.0}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def make_target(request: pytest.FixtureRequest, kind: str, scratch: Path) -> Target:
    """A fresh, empty checkpoint location of ``kind`` (``local`` or ``s3``)."""
    if kind == "local":
        return Target("local", str(scratch / "checkpoint"), None, scratch)
    options = request.getfixturevalue("s3_server")
    return Target("s3", f"s3://bucket/{uuid.uuid4().hex}", dict(options), scratch)


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A fresh, empty checkpoint location of each kind."""
    return make_target(request, request.param, tmp_path)


@pytest.fixture
def ordered_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt ids that strictly increase in open order within this process (still led by the
    open time in ms, so that they also sort after those of earlier child processes)."""
    last = itertools.count()
    previous = [0]

    def new_attempt() -> bytes:
        ms = max(int(time.time() * 1000), previous[0] + 1)
        previous[0] = ms
        return ms.to_bytes(8, "big") + next(last).to_bytes(7, "big") + b"\x01"

    monkeypatch.setattr(layout, "new_attempt", new_attempt)


@contextlib.contextmanager
def replaced(target: Target, path: str, data: bytes | None) -> Iterator[None]:
    """Replaces the durable file ``path`` by ``data`` (None: deletes it), restoring it after.

    For tests that damage a checkpoint shared by several tests.
    """
    original = target.read(path)
    if data is None:
        target.remove(path)
    else:
        target.write(path, data)
    try:
        yield
    finally:
        target.write(path, original)


def share(
    template: tuple[Target, Reference, Path], scratch: Path
) -> tuple[Target, Reference, Path]:
    """A view of a shared checkpoint with its own scratch area and a copy of its local dir."""
    shared, ref, local = template
    target = Target(shared.kind, shared.uri, shared.storage_options, scratch)
    copy = target.new_local_dir()
    shutil.copytree(local, copy, dirs_exist_ok=True)
    return target, ref, copy


@pytest.fixture(scope="module", params=["local", "s3"])
def seven_versions(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Target, Reference, Path]:
    """Versions 1..7 committed from one local directory, built once per module and kind:
    snapshots at 3 and 6, and the cleanup after snapshot 6 deleted changelogs 1 and 2 (so
    version 3 is the oldest kept and snapshot 3 the only base below 6). Tests that damage a
    file restore it (``replaced``)."""
    target = make_target(request, request.param, tmp_path_factory.mktemp("template"))
    ref = Reference()
    local = target.new_local_dir()
    commit_batches(target, ref, random.Random(5), 0, 7, local)
    return target, ref, local


@pytest.fixture
def built(
    seven_versions: tuple[Target, Reference, Path], tmp_path: Path
) -> tuple[Target, Reference, Path]:
    """The shared checkpoint at version 7, the reference, a private copy of the local dir."""
    return share(seven_versions, tmp_path)


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """``("fsync", path)`` and ``("replace", destination)`` in the order they happen."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        real_replace(src, dst, **kwargs)
        events.append(("replace", os.path.realpath(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    yield events


def largest_file(directory: Path, pattern: str) -> Path:
    """The largest file of ``directory`` matching ``pattern`` (a local copy's biggest SST)."""
    return max(directory.glob(pattern), key=lambda p: p.stat().st_size)


def cut_in_half(path: Path) -> None:
    """Truncates ``path`` to half its size, as a disk or file system that lost writes would."""
    os.truncate(path, path.stat().st_size // 2)


def flip_byte(data: bytes, offset: int) -> bytes:
    """``data`` with the byte at ``offset`` inverted."""
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def first_sst(manifest: Manifest) -> ManifestFile:
    """The manifest entry of the largest SST file."""
    ssts = [f for f in manifest.files if f.is_sst]
    assert ssts, "the snapshot holds no SST file"
    return max(ssts, key=lambda f: f.size)


def local_partition_dir(local_dir: Path, partition: int = 0, lineage: str = LINEAGE) -> Path:
    return local_dir / STORE / f"q={lineage}" / f"p={partition}"


def local_state(local_dir: Path, partition: int = 0, lineage: str = LINEAGE) -> dict[str, Any]:
    """The ``LOCAL.json`` of a local directory."""
    state = json.loads(
        (local_partition_dir(local_dir, partition, lineage) / "LOCAL.json").read_text()
    )
    assert isinstance(state, dict)
    return state


def local_db(local_dir: Path, partition: int = 0, lineage: str = LINEAGE) -> Path:
    """The RocksDB directory of a local copy: the one its ``LOCAL.json`` names."""
    db = local_state(local_dir, partition, lineage)["db"]
    assert re.fullmatch(r"db-[0-9a-f]{32}", db), db
    return local_partition_dir(local_dir, partition, lineage) / db


__all__ = [
    "CLEAN_STEPS",
    "COMMIT_STEPS",
    "DURABLE_STEPS",
    "KEYS",
    "LINEAGE",
    "NO_SNAPSHOTS",
    "OPTIONS",
    "RETENTION_MS",
    "SEGMENT_MS",
    "STORE",
    "TMP_MARK",
    "Op",
    "Reference",
    "Target",
    "apply_ops",
    "assert_no_orphans",
    "assert_version_matches",
    "attempt_id",
    "commit_batches",
    "commit_in_child",
    "cut_in_half",
    "first_sst",
    "flip_byte",
    "forge_manifest",
    "generate_ops",
    "largest_file",
    "local_db",
    "local_partition_dir",
    "local_state",
    "make_target",
    "manifest_body",
    "open_and_read",
    "reads",
    "rebuild_in_child",
    "record",
    "replaced",
    "share",
]
