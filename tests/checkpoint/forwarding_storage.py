"""A storage that forwards every call to another: the base of the faulty storages of the
checkpoint tests, which override the writes they break (imported by the harsh simulation's
task processes too, so it needs nothing of pytest)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import pyarrow.fs as pafs
from verstore.storage import Storage


class ForwardingStorage(Storage):
    """Every call goes to ``inner``, which it also takes its name and kind of create from."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.name, self.conditional_create = inner.name, inner.conditional_create

    def create(self, path: str, data: bytes) -> None:
        self.inner.create(path, data)

    def put_file(self, path: str, source: IO[bytes]) -> None:
        self.inner.put_file(path, source)

    def info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.inner.info(paths)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def list(self, path: str) -> Iterator[pafs.FileInfo]:
        return self.inner.list(path)

    def walk(self, path: str) -> Iterator[pafs.FileInfo]:
        return self.inner.walk(path)

    def chunks(self, path: str) -> Iterator[bytes]:
        return self.inner.chunks(path)

    def delete(self, path: str) -> None:
        self.inner.delete(path)
