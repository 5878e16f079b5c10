"""Checkpoint locations: a local directory or an object-storage URI, and files created once.

A location is a root path on a storage (``storage.py``'s :class:`Storage`): a local disk for a
path or ``file://`` URI; object storage through obstore (the Python binding of the Rust
``object_store`` crate) for ``s3://``, ``gs://`` and ``abfs://`` URIs, configured with
``storage_options`` (for S3: ``endpoint_override``, ``access_key``, ``secret_key``,
``region``, ``scheme``...; the same names as ``pyarrow.fs`` takes); ``hdfs://`` through
``pyarrow.fs``, for reading only.

How a location meets the storage contract (stated once, in ``verstore/checkpoint/__init__.py``:
every durable name written once, whole or not at all):

* :meth:`Location.create_new`, a small file given whole (a record, a manifest, a claim): one
  conditional create. On object storage one PUT of the whole body that succeeds only if the
  name is free (S3 ``If-None-Match: *``, GCS generation 0, Azure ``If-None-Match: *``); on a
  local disk a synced temporary file in the same directory, hard-linked to the name (``link``
  never replaces) and removed. An existing name is ``FileExistsError``: of two writers of one
  name exactly one succeeds.
* :meth:`Location.write_new_from` and :meth:`Location.upload`, a local file streamed (a
  changelog, a snapshot's file: names no other writer uses): on object storage an
  unconditional multipart upload (one PUT for a small file), visible only once complete and
  aborted on failure (no copy, so no size limit but the storage's); on a local disk as above.

Storage without a conditional create (HDFS through ``pyarrow.fs``) is refused when a store is
opened for writing (:meth:`Location.require_conditional_create`), naming what is missing.
"""

from __future__ import annotations

import logging
import os
import posixpath
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from verstore.storage import (
    TMP_MARK,
    HadoopStorage,
    LocalStorage,
    Storage,
    object_storage,
    sync_dir,
)

log = logging.getLogger("verstore.checkpoint")


@dataclass(frozen=True)
class Location:
    """A root directory on a storage."""

    storage: Storage
    root: str
    uri: str = field(default="")

    @staticmethod
    def resolve(uri: str, storage_options: Mapping[str, Any] | None = None) -> Location:
        """Parses ``uri`` (a local path or a storage URI) into a location.

        Args:
            uri: ``/path``, ``file:///path``, ``s3://bucket/prefix``, ``gs://bucket/prefix``,
                ``abfs://container/prefix`` or ``hdfs://...``.
            storage_options: Options of the storage (e.g. S3 credentials and
                ``endpoint_override``), by ``pyarrow.fs``'s names.

        Raises:
            ValueError: The URI names no supported storage, or an option is not supported.
        """
        options = dict(storage_options or {})
        uri = str(uri)
        if "://" not in uri:
            return Location(LocalStorage(), os.path.abspath(uri), uri)
        scheme, _, rest = uri.partition("://")
        rest = rest.rstrip("/")
        if scheme == "file":
            return Location(LocalStorage(), "/" + rest.lstrip("/"), uri)
        if scheme in ("s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"):
            return Location(object_storage(scheme, rest, options), rest, uri)
        if scheme == "hdfs":
            filesystem, path = pafs.FileSystem.from_uri(uri)
            return Location(HadoopStorage(filesystem), path, uri)
        raise ValueError(f"checkpoint location {uri!r}: unsupported scheme {scheme!r}")

    def require_conditional_create(self) -> None:
        """Refuses a storage that cannot create a file only if its name is free: two attempts
        could then both publish one record, and verstore's protocol needs exactly one to.

        Raises:
            ValueError: Naming the location and what it lacks.
        """
        if not self.storage.conditional_create:
            raise ValueError(
                f"checkpoint location {self.uri or self.root}: {self.storage.name} offers no "
                "conditional create (create a file only if its name is free), which verstore "
                "needs to write checkpoints; use a local disk, S3, GCS or Azure Blob Storage "
                "(HDFS checkpoints can still be read)"
            )

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
        out = bytearray()
        for chunk in self.storage.chunks(path):
            out += chunk
            if limit is not None and len(out) > limit:
                raise ValueError(f"{self.describe(path)} is larger than {limit} bytes")
        return bytes(out)

    def read_head(self, path: str, size: int) -> bytes:
        """The first ``size`` bytes of the file (fewer if it is shorter)."""
        out = bytearray()
        for chunk in self.storage.chunks(path):
            out += chunk
            if len(out) >= size:
                break
        return bytes(out[:size])

    def create_new(self, path: str, data: bytes) -> None:
        """Creates ``path`` holding ``data``, whole or not at all (see the module).

        Raises:
            FileExistsError: ``path`` exists (another writer created it first).
        """
        self.storage.create(path, data)

    def write_new(self, path: str, data: bytes) -> None:
        """:meth:`create_new`: every durable file is created once."""
        self.create_new(path, data)

    def write_new_from(self, path: str, local_path: str) -> None:
        """Creates ``path`` with a local file's contents, streamed (never whole in memory)."""
        with open(local_path, "rb") as source:
            self.storage.put_file(path, source)

    def upload(self, local_path: str, path: str) -> None:
        """Copies a local file to ``path``, a unique name; a failed upload leaves no file."""
        self.write_new_from(path, local_path)

    def download(self, path: str, local_path: str) -> None:
        with open(local_path, "wb") as out:
            for chunk in self.storage.chunks(path):
                out.write(chunk)

    def fetch(self, path: str, local_path: str, limit: int) -> tuple[int, int]:
        """Copies the file ``path`` to a new local file, reading at most ``limit + 1`` bytes;
        returns ``(size, crc32)`` of what it copied (a size above ``limit``: the file is larger,
        and the copy was cut there). A local file of that name must not exist yet.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            OSError: ``path`` cannot be read (a storage error, or it is a directory).
        """
        size = crc = 0
        with open(local_path, "xb") as out:
            for chunk in self.storage.chunks(path):
                chunk = chunk[: limit + 1 - size]
                out.write(chunk)
                size += len(chunk)
                crc = zlib.crc32(chunk, crc)
                if size > limit:
                    break
        return size, crc

    def info(self, paths: list[str]) -> list[pafs.FileInfo]:
        """What storage knows of each of ``paths`` (type ``NotFound`` for a missing one)."""
        return self.storage.info(paths) if paths else []

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file or a directory (a key prefix, on object storage)."""
        return self.storage.exists(path)

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        """Entries directly under ``path`` (nothing if it does not exist)."""
        yield from self.storage.list(path)

    def walk(self, path: str) -> Iterator[pafs.FileInfo]:
        """Every file below ``path``, at any depth."""
        yield from self.storage.walk(path)

    def delete(self, path: str) -> None:
        """Deletes the file ``path``; nothing if it does not exist."""
        self.storage.delete(path)


__all__ = ["TMP_MARK", "Location", "sync_dir"]
