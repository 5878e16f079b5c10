"""Checkpoint files are created once and never seen half-written, on every storage
(docs/checkpoint.md, "Durable layout"): a conditional create for a small file (one PUT with
``If-None-Match: *`` on S3, a hard link of a synced temporary file on a local disk), a
multipart upload aborted on failure for a streamed one; of two writers of one name, exactly
one succeeds, even when they race from two processes."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from verstore.location import Location
from verstore.storage import PART_SIZE, TMP_MARK, HadoopStorage, ObjectStorage

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    STORE,
    Target,
    free_port,
    moto_options,
)

pytest_plugins = ["checkpoint_helpers"]

#: Rounds of the two-process race per storage.
RACE_ROUNDS = 40


def _object_keys(options: dict[str, Any], query: str) -> str:
    """The S3 API's answer to ``GET /bucket?<query>`` (unsigned: moto does not check)."""
    url = f"http://{options['endpoint_override']}/bucket?{query}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())


def _keys(options: dict[str, Any], prefix: str) -> list[str]:
    found = _object_keys(options, f"list-type=2&prefix={prefix}")
    return sorted(re.findall(r"<Key>([^<]*)</Key>", found))


def test_a_local_create_links_a_synced_temporary_and_never_replaces(tmp_path: Path) -> None:
    loc = Location.resolve(str(tmp_path))
    target = loc.path("s", "q=a", "p=0", "1-" + "1" * 32 + "-0-" + "0" * 32 + ".changelog")
    loc.create_new(target, b"changelog bytes")
    with pytest.raises(FileExistsError):
        loc.create_new(target, b"other bytes")
    assert loc.read_bytes(target) == b"changelog bytes"
    assert [p.name for p in Path(target).parent.iterdir()] == [Path(target).name]
    assert os.stat(target).st_nlink == 1  # the temporary link is gone


def test_a_local_upload_cut_half_way_leaves_nothing(tmp_path: Path) -> None:
    loc = Location.resolve(str(tmp_path / "root"))
    source = tmp_path / "big"
    source.write_bytes(os.urandom(3 << 20))
    target = loc.path("p=0", "SSTs", "x.sst")
    with open(source, "rb") as whole, pytest.raises(OSError, match="reset"):
        loc.storage.put_file(target, _Cut(whole, 1 << 20))
    assert not loc.exists(target)
    assert not any(p.name.startswith(TMP_MARK) for p in Path(target).parent.iterdir())


class _Cut:
    """A file that fails to be read past ``room`` bytes (a connection reset mid-upload)."""

    def __init__(self, inner: Any, room: int) -> None:
        self._inner, self._room = inner, room

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if len(data) > self._room:
            raise OSError("injected: connection reset")
        self._room -= len(data)
        return bytes(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_object_storage_creates_once_without_markers_or_temporaries(
    s3_server: dict[str, Any], tmp_path: Path
) -> None:
    """A directory on S3 is a key prefix: a write creates its file and nothing else (no marker,
    no temporary copy); a small file is one conditional PUT, refused on a taken name; a large
    one is a multipart upload, whole once complete."""
    prefix = uuid.uuid4().hex
    loc = Location.resolve(f"s3://bucket/{prefix}", s3_server)
    changelog = loc.path("s", "q=a", "p=0", "1.changelog")
    loc.create_new(changelog, b"changelog bytes")
    with pytest.raises(FileExistsError):
        loc.create_new(changelog, b"another writer's bytes")
    big = tmp_path / "big.sst"
    big.write_bytes(os.urandom(PART_SIZE * 2 + 123))
    sst = loc.path("s", "q=a", "p=0", "SSTs", "1-abc.sst")
    loc.upload(str(big), sst)
    assert _keys(s3_server, prefix) == [
        f"{prefix}/s/q=a/p=0/1.changelog",
        f"{prefix}/s/q=a/p=0/SSTs/1-abc.sst",
    ]
    assert loc.read_bytes(changelog) == b"changelog bytes"
    assert loc.read_bytes(sst) == big.read_bytes()
    assert loc.read_head(sst, 10) == big.read_bytes()[:10]
    assert sorted(i.base_name for i in loc.list(loc.path("s", "q=a", "p=0"))) == [
        "1.changelog",
        "SSTs",
    ]
    assert loc.exists(loc.path("s", "q=a")) and not loc.exists(loc.path("s", "q=b"))
    (info,) = loc.info([sst])
    assert info.size == big.stat().st_size and info.mtime is not None


def test_an_object_upload_cut_half_way_is_aborted(
    s3_server: dict[str, Any], tmp_path: Path
) -> None:
    """A multipart upload whose source fails half way publishes nothing and leaves no upload
    pending (it was aborted)."""
    prefix = uuid.uuid4().hex
    loc = Location.resolve(f"s3://bucket/{prefix}", s3_server)
    big = tmp_path / "big.sst"
    big.write_bytes(os.urandom(PART_SIZE * 3))
    with open(big, "rb") as whole, pytest.raises(OSError, match="reset"):
        loc.storage.put_file(loc.path("x.sst"), _Cut(whole, PART_SIZE * 2))
    assert _keys(s3_server, prefix) == []
    assert prefix not in _object_keys(s3_server, "uploads")


def test_a_create_whose_answer_was_lost_is_its_own(s3_server: dict[str, Any]) -> None:
    """The client retries a create whose answer was lost and finds the name taken: by the same
    bytes it is this writer's own create; by other bytes, another writer's."""
    loc = Location.resolve(f"s3://bucket/{uuid.uuid4().hex}", s3_server)
    storage = loc.storage
    assert isinstance(storage, ObjectStorage)
    path = loc.path("_partitioning-1.json")
    put = storage._put_create

    def lost_answer(key: str, data: bytes) -> None:
        put(key, data)
        raise FileExistsError(key)  # what the retried request meets

    storage._put_create = lost_answer  # type: ignore[method-assign]
    loc.create_new(path, b"mine")
    with pytest.raises(FileExistsError):
        loc.create_new(path, b"someone else's")
    assert loc.read_bytes(path) == b"mine"


def test_storage_options_are_mapped_and_unknown_ones_refused() -> None:
    options = {"region": "eu-west-1", "access_key": "AK", "secret_key": "very-secret"}
    assert isinstance(Location.resolve("s3://b/p", options).storage, ObjectStorage)
    with pytest.raises(ValueError, match="'tls_ca_file_pat' is not supported for S3") as e:
        Location.resolve("s3://b/p", {**options, "tls_ca_file_pat": "very-secret"})
    assert "very-secret" not in str(e.value)  # an option is named, never its value
    azure = {"account_name": "a", "account_key": "a2V5", "blob_storage_authority": "127.0.0.1:1"}
    assert Location.resolve("abfs://container/p", {**azure, "blob_storage_scheme": "http"})
    with pytest.raises(ValueError, match=r"abfs://container: .*Invalid Access Key"):
        Location.resolve("abfs://container/p", {**azure, "account_key": "k"})
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        Location.resolve("ftp://host/path")


def test_storage_without_conditional_create_is_refused_for_writing(tmp_path: Path) -> None:
    """HDFS through pyarrow offers no create-if-absent: a store cannot be opened for writing
    there, and the error says what is missing (a local filesystem stands in for HDFS)."""
    loc = Location(HadoopStorage(pafs.LocalFileSystem()), str(tmp_path), "hdfs://nn/x")
    with pytest.raises(ValueError, match=r"hdfs://nn/x: HDFS .* offers no conditional create"):
        loc.require_conditional_create()
    from verstore.checkpoint import PartitionStore

    with pytest.raises(ValueError, match="no conditional create"):
        PartitionStore.open(loc, "s", 0, 0, tmp_path / "local", history_retention_ms=1000)
    Location.resolve(str(tmp_path)).require_conditional_create()


def test_location_resolves_paths_and_uris(tmp_path: Path) -> None:
    local = Location.resolve(str(tmp_path / "x"))
    assert local.root == str(tmp_path / "x")
    assert local.storage.conditional_create
    assert local.describe(local.path("a")) == str(tmp_path / "x" / "a")
    file_uri = Location.resolve(f"file://{tmp_path}/y/")
    assert file_uri.root == f"{tmp_path}/y"
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        Location.resolve("ftp://host/path")


def test_create_new_writes_whole_files_once_and_leaves_no_temporaries(target: Target) -> None:
    loc = target.location
    path = loc.path("dir", "file.bin")
    loc.create_new(path, b"first")
    with pytest.raises(FileExistsError):
        loc.create_new(path, b"second")
    assert loc.read_bytes(path) == b"first"
    assert loc.read_head(path, 3) == b"fir"
    with pytest.raises(ValueError, match="larger than 4 bytes"):
        loc.read_bytes(path, 4)
    assert loc.read_bytes(path, 5) == b"first"
    assert target.names(loc.path("dir")) == {"file.bin"}
    loc.delete(path)
    loc.delete(path)  # deleting a missing file is not an error
    assert not loc.exists(path)
    assert list(loc.list(loc.path("nothing-here"))) == []
    if target.kind == "s3":
        assert loc.describe(path) == f"s3://{path}"


def test_a_local_commit_syncs_every_directory_it_created(
    tmp_path: Path, fsyncs: list[tuple[str, str]]
) -> None:
    """The first commit of a partition creates its directories: each must be in its parent's
    synced entries, or a crash can lose the directory and the durable commit in it."""
    loc = Location.resolve(str(tmp_path / "root"))
    path = loc.path(STORE, f"q={LINEAGE}", "p=0", "1-" + "1" * 32 + "-0-" + "0" * 32 + ".changelog")
    loc.write_new(path, b"changelog bytes")
    synced = {p for kind, p in fsyncs if kind == "fsync"}
    top = Path(os.path.realpath(tmp_path))
    created = Path(os.path.realpath(path)).parent
    while created != top:
        assert str(created.parent) in synced, f"{created} is not synced into its parent"
        created = created.parent
    assert loc.read_bytes(path) == b"changelog bytes"


# --- two processes race to create one name ------------------------------------------------------


def _racer(uri: str, options: dict[str, Any] | None, me: int, barrier: Any, out: Any) -> None:
    """Creates each race's name at the same moment as the other racer; reports who won."""
    loc = Location.resolve(uri, options)
    for round_ in range(RACE_ROUNDS):
        path = loc.path(f"race-{round_}.json")
        barrier.wait()
        try:
            loc.create_new(path, f"racer {me}".encode())
            out.put((round_, me))
        except FileExistsError:
            pass


def _race(uri: str, options: dict[str, Any] | None) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    racers = [
        context.Process(target=_racer, args=(uri, options, me, barrier, out)) for me in (0, 1)
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=300)
        assert racer.exitcode == 0
    won: dict[int, list[int]] = {}
    while not out.empty():
        round_, me = out.get()
        won.setdefault(round_, []).append(me)
    loc = Location.resolve(uri, options)
    assert sorted(won) == list(range(RACE_ROUNDS)), "a round without a winner"
    for round_, winners in won.items():
        assert len(winners) == 1, f"round {round_}: both racers created the name"
        assert loc.read_bytes(loc.path(f"race-{round_}.json")) == f"racer {winners[0]}".encode()
    assert len({w[0] for w in won.values()}) == 2, "one racer always won: no real race"


def test_two_processes_racing_to_create_one_name_on_a_local_disk(tmp_path: Path) -> None:
    _race(str(tmp_path / "root"), None)


@pytest.fixture(scope="module")
def serial_s3_server() -> Iterator[dict[str, Any]]:
    """A moto S3 server that answers one request at a time. moto checks a condition, then
    writes: served concurrently, two conditional PUTs could both pass its check, which S3
    itself never lets happen. One at a time, it answers as S3 does."""
    port = free_port()
    script = (
        "import sys\n"
        "from moto.server import DomainDispatcherApplication, create_backend_app\n"
        "from werkzeug.serving import make_server\n"
        "app = DomainDispatcherApplication(create_backend_app)\n"
        "make_server('127.0.0.1', int(sys.argv[1]), app, threaded=False).serve_forever()\n"
    )
    server = subprocess.Popen([sys.executable, "-c", script, str(port)])
    try:
        yield moto_options(server, port)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_two_processes_racing_to_create_one_name_on_s3(serial_s3_server: dict[str, Any]) -> None:
    _race(f"s3://bucket/{uuid.uuid4().hex}", serial_s3_server)


def test_a_storage_error_names_no_secret() -> None:
    """An Azure SAS token travels in each request's URL: a failed request's error, which may
    reach a task's error and Spark's logs, carries neither it nor any other option's value."""
    secret = "sv=2024-11-04&sig=vstest-sas-signature"
    loc = Location.resolve(
        "abfs://container/p",
        {
            "account_name": "vstestaccount",
            "sas_token": secret,
            "blob_storage_authority": f"127.0.0.1:{free_port()}",  # nothing listens
            "blob_storage_scheme": "http",
        },
    )
    with pytest.raises(OSError) as failed:
        loc.read_bytes(loc.path("x"))
    assert "vstest-sas-signature" not in str(failed.value)
    assert "sig=" not in str(failed.value)
