"""Checkpoint locations: a local directory or a ``pyarrow.fs`` URI, and atomic file writes.

A location is a root path on a filesystem. Local paths (and ``file://`` URIs) use
``pyarrow.fs.LocalFileSystem``; ``s3://``, ``gs://``, ``abfs://`` and ``hdfs://`` URIs use the
matching ``pyarrow.fs`` filesystem, configured with ``storage_options`` (for S3:
``endpoint_override``, ``access_key``, ``secret_key``, ``region``, ``scheme``...).

Atomicity: verstore never replaces a durable file (every name is written once), but a reader
must never see a file half-written, and a write that fails must leave nothing under its name.
Every :meth:`Location.write_new` therefore uploads to a temporary name in the same directory
first, and publishes only a complete upload in one step:

* S3 and GCS: a server-side copy to the final name (an object appears whole when the copy
  completes), then the temporary object is deleted. One upload straight to the final name is
  not enough: pyarrow's output streams complete the upload at ``close()`` even when the copy
  into them raised half way (they offer no abort in Python), which would publish a truncated
  file under a name that can never be rewritten.
* Local disks, HDFS and Azure: a rename. pyarrow's Azure output stream creates the blob empty
  before committing its blocks, and HDFS and local files are visible while they are written. On
  Azure this needs a storage account with a hierarchical namespace (ADLS Gen2), where a rename
  is atomic; plain blob storage cannot rename and is refused when verstore first writes to it.
  On a local disk, the file is synced before the rename and its directory after it (and so is
  every directory the write created), so the rename survives a crash of the machine.

A write that fails deletes its temporary file; one that dies with its process leaves a
temporary name, which cleanup removes. :meth:`Location.upload` writes under a unique name that
nothing references until a snapshot manifest does: it deletes a partial upload when it fails,
and the manifest is checked against the files it names after it is written.
"""

from __future__ import annotations

import contextlib
import logging
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

log = logging.getLogger("verstore.checkpoint")


def sync_dir(path: str | os.PathLike[str]) -> None:
    """Makes the entries of the local directory ``path`` durable (a rename or a new file in it
    survives a crash of the machine only once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_file_into(local_path: str, out: Any) -> None:
    with open(local_path, "rb") as source:
        shutil.copyfileobj(source, out, 1 << 20)


def _s3_filesystem(options: dict[str, Any]) -> pafs.S3FileSystem:
    """An S3 filesystem that, unless told otherwise, opens uploads lazily: a small file is then
    one PutObject instead of a multipart upload's three requests (create, part, complete).
    pyarrow before 21 has no such option and keeps the multipart upload."""
    if "allow_delayed_open" not in options:
        try:
            return pafs.S3FileSystem(**options, allow_delayed_open=True)
        except TypeError:  # an older pyarrow; a bad option raises again below
            pass
    return pafs.S3FileSystem(**options)


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
            return Location(_s3_filesystem(options), rest, uri)
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

    def create_new(self, path: str, data: bytes) -> None:
        """:meth:`write_new`, failing with ``FileExistsError`` when ``path`` exists: atomically
        on a local disk (a hard link of the complete file, which never replaces a name);
        elsewhere by a check before the write, as conditional writes are not offered."""
        if not self._local:
            if self.exists(path):
                raise FileExistsError(self.describe(path))
            self.write_new(path, data)
            return
        parent = posixpath.dirname(path)
        self._create_dir(parent)
        tmp = posixpath.join(parent, f"{TMP_MARK}{uuid.uuid4().hex}-{posixpath.basename(path)}")
        self._write_or_delete(tmp, lambda out: out.write(data))
        try:
            os.link(tmp, path)
        finally:
            os.unlink(tmp)
        sync_dir(parent)

    def write_new_from(self, path: str, local_path: str) -> None:
        """:meth:`write_new` of a local file's contents, streamed (never whole in memory)."""
        self._write_new(path, lambda out: _copy_file_into(local_path, out))

    def _write_new(self, path: str, write: Callable[[Any], object]) -> None:
        parent = posixpath.dirname(path)
        self._create_dir(parent)
        tmp = posixpath.join(parent, f"{TMP_MARK}{uuid.uuid4().hex}-{posixpath.basename(path)}")
        self._write_or_delete(tmp, write)
        if self.atomic_put:
            self._copy_into_place(tmp, path)
        else:
            self._rename_into_place(tmp, path)

    def _write_or_delete(self, path: str, write: Callable[[Any], object]) -> None:
        """Writes ``path``; if the write fails, deletes what the stream's ``close()`` may have
        completed, so that a failed write leaves no file behind."""
        try:
            with self.filesystem.open_output_stream(path) as out:
                write(out)
            if self._local:
                with open(path, "rb+") as handle:
                    os.fsync(handle.fileno())
        except BaseException:
            try:
                self.delete(path)
            except OSError as e:  # the write's own error is the one to report
                log.warning("cannot remove the failed upload %s: %s", self.describe(path), e)
            raise

    def _copy_into_place(self, tmp: str, path: str) -> None:
        try:
            self.filesystem.copy_file(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                self.delete(tmp)
            raise
        try:
            self.delete(tmp)
        except OSError as e:  # ``path`` is complete; cleanup removes the leftover later
            log.warning("cannot remove the temporary file %s: %s", self.describe(tmp), e)

    def _rename_into_place(self, tmp: str, path: str) -> None:
        try:
            self.filesystem.move(tmp, path)
        except OSError as e:
            self.delete(tmp)
            if not self._local and not isinstance(self.filesystem, pafs.HadoopFileSystem):
                raise OSError(
                    f"{self.describe(path)}: cannot rename a temporary file into place ({e}); "
                    "on Azure, verstore needs a storage account with a hierarchical namespace"
                ) from e
            raise
        if self._local:
            sync_dir(posixpath.dirname(path))  # the rename is durable once the entry is

    def _create_dir(self, path: str) -> None:
        """Creates ``path`` and its missing parents; on a local disk, syncs each new directory's
        entry into its parent (a durable file in a directory a crash forgot is lost too).

        On S3 and GCS, nothing: a directory there is only a key prefix, and creating one writes an
        empty marker object per level after a bucket check, six requests before every file a
        commit writes, which reads and listings do not need."""
        if self.atomic_put:
            return
        if not self._local:
            self.filesystem.create_dir(path, recursive=True)
            return
        missing = []
        while not os.path.isdir(path) and posixpath.dirname(path) != path:
            missing.append(path)
            path = posixpath.dirname(path)
        for directory in reversed(missing):
            os.makedirs(directory, exist_ok=True)
            sync_dir(posixpath.dirname(directory))

    @property
    def _local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def upload(self, local_path: str, path: str) -> None:
        """Copies a local file to ``path``, a unique name (no atomic rename needed: nothing
        references it until a snapshot manifest does). A failed upload leaves no file."""
        parent = posixpath.dirname(path)
        self._create_dir(parent)
        self._write_or_delete(path, lambda out: _copy_file_into(local_path, out))
        if self._local:
            sync_dir(parent)

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
