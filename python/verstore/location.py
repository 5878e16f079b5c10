"""Checkpoint locations: a local directory or a ``pyarrow.fs`` URI, and atomic file writes.

A location is a root path on a filesystem. Local paths (and ``file://`` URIs) use
``pyarrow.fs.LocalFileSystem``; ``s3://``, ``gs://``, ``abfs://`` and ``hdfs://`` URIs use the
matching ``pyarrow.fs`` filesystem, configured with ``storage_options`` (for S3:
``endpoint_override``, ``access_key``, ``secret_key``, ``region``, ``scheme``...).

Atomicity: verstore never replaces a durable file (every name is written once), but a reader
must never see a file half-written. S3 and GCS make an object visible whole when its upload
completes, so one PUT does. Local disks, HDFS and Azure write under a temporary name in the same
directory and rename into place: pyarrow's Azure output stream creates the blob empty before
committing its blocks, and HDFS and local files are visible while they are written. On Azure
this needs a storage account with a hierarchical namespace (ADLS Gen2), where a rename is
atomic; plain blob storage cannot rename and is refused when verstore first writes to it.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

TMP_MARK = ".tmp-"


@dataclass(frozen=True)
class Location:
    """A root directory on a filesystem."""

    filesystem: pafs.FileSystem
    root: str
    uri: str = field(default="")

    @staticmethod
    def resolve(uri: str, storage_options: Mapping[str, Any] | None = None) -> Location:
        """Parses ``uri`` (a local path or a filesystem URI) into a location.

        Args:
            uri: ``/path``, ``file:///path``, ``s3://bucket/prefix``, ``gs://...``,
                ``abfs://...`` or ``hdfs://...``.
            storage_options: Keyword arguments for the filesystem (e.g. S3 credentials and
                ``endpoint_override``).

        Raises:
            ValueError: The URI names no supported filesystem.
        """
        options = dict(storage_options or {})
        uri = str(uri)
        if "://" not in uri:
            return Location(pafs.LocalFileSystem(), os.path.abspath(uri), uri)
        scheme, _, rest = uri.partition("://")
        rest = rest.rstrip("/")
        if scheme == "file":
            return Location(pafs.LocalFileSystem(), "/" + rest.lstrip("/"), uri)
        if scheme in ("s3", "s3a"):
            return Location(pafs.S3FileSystem(**options), rest, uri)
        if scheme in ("gs", "gcs"):
            return Location(pafs.GcsFileSystem(**options), rest, uri)
        if scheme in ("abfs", "abfss", "az"):
            return Location(pafs.AzureFileSystem(**options), rest, uri)
        if scheme == "hdfs":
            filesystem, path = pafs.FileSystem.from_uri(uri)
            return Location(filesystem, path, uri)
        raise ValueError(f"checkpoint location {uri!r}: unsupported scheme {scheme!r}")

    @property
    def atomic_put(self) -> bool:
        """Whether one upload is visible only once complete (S3, GCS)."""
        atomic = [pafs.S3FileSystem, getattr(pafs, "GcsFileSystem", None)]
        return isinstance(self.filesystem, tuple(t for t in atomic if t is not None))

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def describe(self, path: str) -> str:
        """A path as the user would name it (with the URI scheme)."""
        if "://" in self.uri:
            scheme = self.uri.split("://", 1)[0]
            return f"{scheme}://{path}"
        return path

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The whole file; with ``limit``, ``ValueError`` if it is longer than that."""
        with self.filesystem.open_input_stream(path) as stream:
            if limit is None:
                return bytes(stream.read())
            data = bytes(stream.read(limit + 1))
        if len(data) > limit:
            raise ValueError(f"{self.describe(path)} is larger than {limit} bytes")
        return data

    def read_head(self, path: str, size: int) -> bytes:
        with self.filesystem.open_input_file(path) as handle:
            return bytes(handle.read(size))

    def write_new(self, path: str, data: bytes) -> None:
        """Writes ``data`` so that ``path`` appears complete or not at all (see the module)."""
        self._write_new(path, lambda out: out.write(data))

    def write_new_from(self, path: str, local_path: str) -> None:
        """:meth:`write_new` of a local file's contents, streamed (never whole in memory)."""

        def copy(out: Any) -> None:
            with open(local_path, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)

        self._write_new(path, copy)

    def _write_new(self, path: str, write: Callable[[Any], object]) -> None:
        parent = posixpath.dirname(path)
        self.filesystem.create_dir(parent, recursive=True)
        if self.atomic_put:
            with self.filesystem.open_output_stream(path) as out:
                write(out)
            return
        tmp = posixpath.join(parent, f"{TMP_MARK}{uuid.uuid4().hex}-{posixpath.basename(path)}")
        with self.filesystem.open_output_stream(tmp) as out:
            write(out)
        local = isinstance(self.filesystem, pafs.LocalFileSystem)
        if local:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        try:
            self.filesystem.move(tmp, path)
        except OSError as e:
            self.delete(tmp)
            if not local and not isinstance(self.filesystem, pafs.HadoopFileSystem):
                raise OSError(
                    f"{self.describe(path)}: cannot rename a temporary file into place ({e}); "
                    "on Azure, verstore needs a storage account with a hierarchical namespace"
                ) from e
            raise
        if local:
            # The rename is durable once the directory entry is.
            fd = os.open(parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def upload(self, local_path: str, path: str) -> None:
        """Copies a local file to ``path`` (a unique name: no atomic rename needed)."""
        self.filesystem.create_dir(posixpath.dirname(path), recursive=True)
        pafs.copy_files(local_path, path, destination_filesystem=self.filesystem)

    def download(self, path: str, local_path: str) -> None:
        pafs.copy_files(path, local_path, source_filesystem=self.filesystem)

    def fetch(self, path: str, local_path: str, limit: int) -> tuple[int, int]:
        """Copies the file ``path`` to a new local file, reading at most ``limit + 1`` bytes;
        returns ``(size, crc32)`` of what it copied (a size above ``limit``: the file is larger,
        and the copy was cut there). A local file of that name must not exist yet.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            OSError: ``path`` cannot be read (a storage error, or it is a directory).
        """
        size = crc = 0
        with self.filesystem.open_input_stream(path) as source, open(local_path, "xb") as out:
            while size <= limit:
                chunk = source.read(min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                out.write(chunk)
                size += len(chunk)
                crc = zlib.crc32(chunk, crc)
        return size, crc

    def exists(self, path: str) -> bool:
        return bool(self.filesystem.get_file_info(path).type != pafs.FileType.NotFound)

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        """Entries directly under ``path`` (nothing if it does not exist)."""
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        yield from self.filesystem.get_file_info(selector)

    def delete(self, path: str) -> None:
        try:
            self.filesystem.delete_file(path)
        except FileNotFoundError:
            pass
