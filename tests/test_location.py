"""Checkpoint files are never seen half-written, on every filesystem (docs/checkpoint.md, "Durable
layout"; issue 8 point 7). Durable files are written once under unique names; what differs is
how a writer keeps readers from seeing a file while it is written: one PUT on S3 and GCS, a
temporary name and a rename elsewhere (local disks, HDFS, and Azure, whose writer creates the
blob empty before committing its blocks)."""

from __future__ import annotations

import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from verstore.location import TMP_MARK, Location

pytest_plugins = ["checkpoint_helpers"]


class Recording(pafs.FileSystemHandler):
    """A local filesystem that records which paths are opened for writing and moved."""

    def __init__(self, fail_moves: bool = False) -> None:
        self.local = pafs.LocalFileSystem()
        self.calls: list[tuple[str, str]] = []
        self.fail_moves = fail_moves

    def get_type_name(self) -> str:
        return "recording"

    def equals(self, other: Any) -> bool:
        return self is other

    def get_file_info(self, paths: Any) -> Any:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.local.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("not here")

    def delete_file(self, path: str) -> None:
        self.calls.append(("delete", path))
        self.local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.calls.append(("move", f"{src} -> {dest}"))
        if self.fail_moves:
            raise OSError("this filesystem cannot rename")
        self.local.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.local.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.local.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        return self.local.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        self.calls.append(("write", path))
        return self.local.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        raise OSError("no appends")

    def normalize_path(self, path: str) -> str:
        return path


def test_a_non_atomic_filesystem_writes_a_temporary_name_then_renames(tmp_path: Path) -> None:
    handler = Recording()
    loc = Location(pafs.PyFileSystem(handler), str(tmp_path))
    assert not loc.atomic_put
    target = loc.path("s", "q=a", "p=0", "1-" + "1" * 32 + "-0-" + "0" * 32 + ".changelog")
    loc.write_new(target, b"changelog bytes")
    (write, move) = handler.calls
    assert write[0] == "write" and Path(write[1]).name.startswith(TMP_MARK)
    assert Path(write[1]).parent == Path(target).parent  # same directory: a rename, not a copy
    assert move == ("move", f"{write[1]} -> {target}")
    assert loc.read_bytes(target) == b"changelog bytes"
    assert [p.name for p in Path(target).parent.iterdir()] == [Path(target).name]


def test_a_filesystem_that_cannot_rename_fails_clearly_and_leaves_nothing(tmp_path: Path) -> None:
    handler = Recording(fail_moves=True)
    loc = Location(pafs.PyFileSystem(handler), str(tmp_path))
    target = loc.path("dir", "file")
    with pytest.raises(OSError, match="hierarchical namespace"):
        loc.write_new(target, b"x")
    assert not any((tmp_path / "dir").iterdir())  # the temporary file is removed


def test_which_filesystems_upload_atomically(tmp_path: Path) -> None:
    """S3 and GCS make an upload visible whole; Azure and local disks need the rename."""
    assert Location(pafs.S3FileSystem(anonymous=True), "bucket").atomic_put
    assert not Location(pafs.AzureFileSystem(account_name="account"), "container").atomic_put
    assert not Location.resolve(str(tmp_path)).atomic_put
    if hasattr(pafs, "GcsFileSystem"):
        assert Location(pafs.GcsFileSystem(anonymous=True), "bucket").atomic_put


def _object_keys(s3_server: dict[str, Any], prefix: str) -> list[str]:
    """Every key under ``prefix`` as the S3 API lists it (unsigned: moto does not check)."""
    url = f"http://{s3_server['endpoint_override']}/bucket?list-type=2&prefix={prefix}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return sorted(re.findall(r"<Key>([^<]*)</Key>", answer.read().decode()))


def test_object_storage_writes_no_directory_markers(s3_server: dict[str, Any]) -> None:
    """A directory on S3 is a key prefix: a write creates its file, not an empty ``dir/`` object
    per level (a bucket check and one request each, before every file), and leaves no temporary
    copy, while reads and listings still see the directories."""
    prefix = uuid.uuid4().hex
    loc = Location.resolve(f"s3://bucket/{prefix}", s3_server)
    changelog = loc.path("s", "q=a", "p=0", "1.changelog")
    loc.write_new(changelog, b"changelog bytes")
    sst = loc.path("s", "q=a", "p=0", "SSTs", "1-abc.sst")
    local = Path(__file__)
    loc.upload(str(local), sst)
    keys = _object_keys(s3_server, prefix)
    files = [k for k in keys if not k.endswith("/")]
    assert files == [f"{prefix}/s/q=a/p=0/1.changelog", f"{prefix}/s/q=a/p=0/SSTs/1-abc.sst"]
    # At most the marker of the file's own directory: pyarrow puts one back when the temporary
    # copy beside the file is deleted, once per directory.
    assert set(keys) - set(files) <= {f"{prefix}/s/q=a/p=0/"}
    assert loc.read_bytes(changelog) == b"changelog bytes"
    assert loc.read_bytes(sst) == local.read_bytes()
    assert sorted(i.base_name for i in loc.list(loc.path("s", "q=a", "p=0"))) == [
        "1.changelog",
        "SSTs",
    ]
    assert loc.exists(loc.path("s", "q=a")) and not loc.exists(loc.path("s", "q=b"))


def test_s3_uploads_open_lazily_unless_told_otherwise() -> None:
    """A small file is one PutObject, not a multipart upload's three requests, where pyarrow
    offers it (21 and later; an older one still resolves, without); the user's choice stands."""
    base = {"anonymous": True, "region": "us-east-1"}
    chosen = Location.resolve("s3://bucket/x", base).filesystem.__reduce__()[1][0]
    if not _has_delayed_open():
        assert "allow_delayed_open" not in chosen
        return
    assert chosen["allow_delayed_open"] is True
    own = Location.resolve("s3://bucket/x", {**base, "allow_delayed_open": False})
    assert own.filesystem.__reduce__()[1][0]["allow_delayed_open"] is False


def _has_delayed_open() -> bool:
    try:
        pafs.S3FileSystem(anonymous=True, allow_delayed_open=True)
    except TypeError:
        return False
    return True
