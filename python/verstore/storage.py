"""Storages: a local disk, object storage through obstore, HDFS through ``pyarrow.fs``.

A :class:`Storage` reads, lists and deletes files, and writes them in the two ways
``location.py`` needs, both never replacing a file and never showing one half-written:

* :meth:`Storage.create`: a small file given whole, created only if its name is free
  (``FileExistsError`` otherwise). Object storage: one conditional PUT. A PUT whose answer
  was lost is retried by the client and then finds the name taken: the object is read back,
  and the same bytes are this writer's own create, not a conflict. Local disk: ``link()`` of a
  synced temporary file (``.tmp-`` in the same directory), which never replaces a name.
* :meth:`Storage.put_file`: a local file streamed to a name no other writer uses. Object
  storage: a multipart upload for a large file (aborted on failure, visible only once
  complete), one PUT for a small one. Local disk: as ``create``.

Paths are ``<bucket>/<key>`` on object storage, as ``pyarrow.fs`` names them; entries come back
as ``pyarrow.fs.FileInfo``. Storage failures are ``OSError`` (``FileNotFoundError`` for a
missing file), with obstore's messages cut to their first line.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from typing import IO, Any

import pyarrow.fs as pafs

TMP_MARK = ".tmp-"
_URL_QUERY = re.compile(r"(https?://[^\s?]+)\?\S*")
#: Uploads above this size go in parts of this size (obstore's default).
PART_SIZE = 5 << 20

log = logging.getLogger("verstore.checkpoint")


def sync_dir(path: str | os.PathLike[str]) -> None:
    """Makes the entries of the local directory ``path`` durable (a rename or a new file in it
    survives a crash of the machine only once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Storage:
    """What a checkpoint location needs of a storage (see the module)."""

    #: The storage as an error message names it.
    name = "storage"
    #: Whether :meth:`create` refuses an existing name atomically.
    conditional_create = True

    def info(self, paths: list[str]) -> list[pafs.FileInfo]:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        raise NotImplementedError

    def walk(self, path: str) -> Iterator[pafs.FileInfo]:
        raise NotImplementedError

    def chunks(self, path: str) -> Iterator[bytes]:
        raise NotImplementedError

    def create(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def put_file(self, path: str, source: IO[bytes]) -> None:
        raise NotImplementedError

    def delete(self, path: str) -> None:
        raise NotImplementedError


class _FileSystemStorage(Storage):
    """Reads, listings and deletes through a ``pyarrow.fs`` filesystem."""

    def __init__(self, filesystem: pafs.FileSystem) -> None:
        self.filesystem = filesystem

    def info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self.filesystem.get_file_info(paths))

    def exists(self, path: str) -> bool:
        return bool(self.filesystem.get_file_info(path).type != pafs.FileType.NotFound)

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        yield from self.filesystem.get_file_info(selector)

    def walk(self, path: str) -> Iterator[pafs.FileInfo]:
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=True)
        for info in self.filesystem.get_file_info(selector):
            if info.type == pafs.FileType.File:
                yield info

    def chunks(self, path: str) -> Iterator[bytes]:
        with self.filesystem.open_input_stream(path) as stream:
            while chunk := stream.read(1 << 20):
                yield bytes(chunk)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(path)


class LocalStorage(_FileSystemStorage):
    """A local disk: files created by ``link()``, directories and entries synced."""

    name = "a local disk"

    def __init__(self) -> None:
        super().__init__(pafs.LocalFileSystem())

    def create(self, path: str, data: bytes) -> None:
        self._link_new(path, lambda out: out.write(data))

    def put_file(self, path: str, source: IO[bytes]) -> None:
        self._link_new(path, lambda out: shutil.copyfileobj(source, out, 1 << 20))

    def _link_new(self, path: str, write: Any) -> None:
        """Writes a temporary file beside ``path``, syncs it, links it to ``path`` (which fails
        on an existing name) and removes it; syncs the directory. Nothing is left on failure."""
        parent = posixpath.dirname(path)
        _make_dirs(parent)
        tmp = posixpath.join(parent, f"{TMP_MARK}{uuid.uuid4().hex}-{posixpath.basename(path)}")
        try:
            with open(tmp, "xb") as out:
                write(out)
                out.flush()
                os.fsync(out.fileno())
            os.link(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        sync_dir(parent)


def _make_dirs(path: str) -> None:
    """Creates ``path`` and its missing parents, syncing each new directory's entry into its
    parent (a durable file in a directory a crash forgot is lost too)."""
    missing = []
    while not os.path.isdir(path) and posixpath.dirname(path) != path:
        missing.append(path)
        path = posixpath.dirname(path)
    for directory in reversed(missing):
        os.makedirs(directory, exist_ok=True)
        sync_dir(posixpath.dirname(directory))


class HadoopStorage(_FileSystemStorage):
    """HDFS through ``pyarrow.fs``: reads only (no conditional create is offered there)."""

    name = "HDFS through pyarrow.fs"
    conditional_create = False

    def create(self, path: str, data: bytes) -> None:
        raise OSError(f"{path}: {self.name} offers no conditional create")

    def put_file(self, path: str, source: IO[bytes]) -> None:
        raise OSError(f"{path}: {self.name} offers no conditional create")


class ObjectStorage(Storage):
    """A bucket (or container) of S3, GCS or Azure through obstore."""

    def __init__(self, store: Any, bucket: str, name: str) -> None:
        self.store, self.bucket, self.name = store, bucket, name

    def _key(self, path: str) -> str:
        head, _, key = path.partition("/")
        if head != self.bucket:
            raise ValueError(f"{path} is not in bucket {self.bucket}")
        return key

    def _info(self, meta: Mapping[str, Any]) -> pafs.FileInfo:
        mtime = meta.get("last_modified")
        return pafs.FileInfo(
            f"{self.bucket}/{meta['path']}",
            pafs.FileType.File,
            size=meta["size"],
            mtime=mtime if isinstance(mtime, datetime.datetime) else None,
        )

    def info(self, paths: list[str]) -> list[pafs.FileInfo]:
        import obstore

        out = []
        for path in paths:
            try:
                with _errors():
                    out.append(self._info(obstore.head(self.store, self._key(path))))
            except FileNotFoundError:
                out.append(pafs.FileInfo(path, pafs.FileType.NotFound))
        return out

    def exists(self, path: str) -> bool:
        if self.info([path])[0].type == pafs.FileType.File:
            return True
        return next(self.walk(path), None) is not None

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        import obstore

        prefix = self._key(path).rstrip("/")
        with _errors():
            found = obstore.list_with_delimiter(self.store, prefix + "/" if prefix else None)
        for directory in found["common_prefixes"]:
            name = f"{self.bucket}/{directory.rstrip('/')}"
            yield pafs.FileInfo(name, pafs.FileType.Directory)
        for meta in found["objects"]:
            yield self._info(meta)

    def walk(self, path: str) -> Iterator[pafs.FileInfo]:
        import obstore

        prefix = self._key(path).rstrip("/")
        with _errors():
            for batch in obstore.list(self.store, prefix + "/" if prefix else None):
                yield from (self._info(meta) for meta in batch)

    def chunks(self, path: str) -> Iterator[bytes]:
        import obstore

        with _errors():
            result = obstore.get(self.store, self._key(path))
            for chunk in result.stream(min_chunk_size=1 << 20):
                yield bytes(chunk)

    def create(self, path: str, data: bytes) -> None:
        try:
            self._put_create(self._key(path), data)
        except FileExistsError:
            if self._holds(path, data):
                return  # this writer's own create, whose answer was lost and retried
            raise FileExistsError(f"{self.bucket}/{self._key(path)} exists") from None

    def _put_create(self, key: str, data: bytes) -> None:
        """One conditional PUT of ``data``; ``FileExistsError`` when ``key`` is taken."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        try:
            with _errors():
                obstore.put(self.store, key, data, mode="create")
        except AlreadyExistsError:
            raise FileExistsError(key) from None

    def _holds(self, path: str, data: bytes) -> bool:
        try:
            found = b"".join(self.chunks(path))
        except FileNotFoundError:
            return False
        return found == data

    def put_file(self, path: str, source: IO[bytes]) -> None:
        import obstore

        with _errors():
            obstore.put(self.store, self._key(path), source, chunk_size=PART_SIZE)

    def delete(self, path: str) -> None:
        import obstore

        with contextlib.suppress(FileNotFoundError), _errors():
            obstore.delete(self.store, self._key(path))


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """obstore's errors as ``OSError`` (a missing file stays ``FileNotFoundError``; a
    refused create stays obstore's ``AlreadyExistsError`` for :meth:`ObjectStorage.create`),
    with the message's first line (its debug dump repeats the request) and no URL's query (an
    Azure SAS token travels there: it must not reach logs or task errors)."""
    from obstore.exceptions import AlreadyExistsError, BaseError

    try:
        yield
    except AlreadyExistsError:
        raise
    except BaseError as e:
        first = str(e).split("\n", 1)[0]
        raise OSError(_URL_QUERY.sub(r"\1?<query hidden>", first)) from None


def object_storage(scheme: str, path: str, options: dict[str, Any]) -> ObjectStorage:
    """The storage of a ``scheme://bucket/prefix`` URI, with ``pyarrow.fs``-named options.

    Raises:
        ValueError: An option this storage does not support (named, never its value).
    """
    from verstore.object_stores import make_store

    bucket = path.split("/", 1)[0]
    if not bucket:
        raise ValueError(f"{scheme}://{path}: no bucket")
    store, name = make_store(scheme, bucket, options)
    return ObjectStorage(store, bucket, name)


__all__ = [
    "PART_SIZE",
    "TMP_MARK",
    "HadoopStorage",
    "LocalStorage",
    "ObjectStorage",
    "Storage",
    "object_storage",
    "sync_dir",
]
