"""The local working copy of a partition (``<local_dir>/<store>/q=<lineage>/p=<n>/``): its
lock, ``LOCAL.json`` (:class:`LocalState`), its RocksDB directory ``db/`` and a kept store's
saved write buffer.

The copy is a cache: it is trusted only when ``LOCAL.json`` says it is clean at a commit of the
winning chain, and rebuilt from the checkpoint otherwise. Its tree, what each state of
``LOCAL.json`` means and who writes it, and why a rebuild names ``db/`` anew: docs/checkpoint.md,
"Local copy".
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from verstore._checks import whole
from verstore.checkpoint import bell
from verstore.checkpoint.layout import CommitRef
from verstore.exceptions import StoreLockedError
from verstore.location import TMP_MARK, sync_dir


@dataclass(frozen=True)
class SavedBuffer:
    """A kept store's write buffer saved beside ``db/`` (``VersionedStore.close_keeping_buffer``).

    Attributes:
        name: The file's name in the copy's directory, ``buffer-<32 hex>``.
        size: Its size in bytes.
        crc32: Its checksum, as the store wrote it.
    """

    name: str
    size: int
    crc32: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "crc32": self.crc32}

    @staticmethod
    def from_json(obj: Any) -> SavedBuffer:
        """Raises ValueError for anything but a buffer of ours."""
        if not isinstance(obj, dict):
            raise ValueError("buffer")
        name, size, crc32 = obj.get("name"), obj.get("size"), obj.get("crc32")
        if not isinstance(name, str) or not BUFFER_NAME.fullmatch(name):
            raise ValueError("buffer name")  # a path, say, names no buffer of the copy
        if not whole(size, 0) or not whole(crc32, 0, 1 << 32):
            raise ValueError("a saved buffer's size or checksum")
        return SavedBuffer(name, size, crc32)


class CopyState(Enum):
    """What ``LOCAL.json`` says of ``db/``: docs/checkpoint.md, "Local copy", has who writes
    each, what the next open does, and the transitions."""

    #: Nothing usable: absent, unreadable, another lineage's or partitioning's, not ours.
    NONE = "none"
    #: Being changed (a rebuild, a catch-up's replay, a saved buffer's load): no commit.
    CHANGING = "changing"
    #: At its commit plus writes not committed (or flushed by a kept store's later tasks).
    DIRTY = "dirty"
    #: Exactly its commit.
    CLEAN = "clean"
    #: Exactly its commit once the saved write buffer it names is loaded.
    CLEAN_WITH_BUFFER = "clean with buffer"


@dataclass
class LocalState:
    """The contents of ``LOCAL.json``: one of the states of :class:`CopyState` (:attr:`kind`),
    made by the constructors named after them.

    Attributes:
        lineage: The lineage whose commit ``db/`` holds.
        commit: That commit (None: ``db/`` matches no commit).
        clean: Whether ``db/`` (with ``buffer`` loaded, when it names one) is exactly
            ``commit``'s state.
        uploaded: SST name -> ``{"durable", "size", "crc32"}`` for the files of ``db/``
            already in the checkpoint (incremental snapshots upload only the others).
    """

    lineage: str = ""
    commit: CommitRef | None = None
    clean: bool = False
    uploaded: dict[str, Any] = field(default_factory=dict)
    #: The name of the ``db/`` directory it speaks of, as read (written: the copy's own).
    db: str = "db"
    #: The write buffer saved beside ``db/``, part of the commit's state (clean copies only).
    buffer: SavedBuffer | None = None

    @staticmethod
    def changing(lineage: str, uploaded: dict[str, Any] | None = None) -> LocalState:
        """``db/`` is being changed and matches no commit."""
        return LocalState(lineage, None, clean=False, uploaded=uploaded or {})

    @staticmethod
    def dirty(lineage: str, commit: CommitRef, uploaded: dict[str, Any]) -> LocalState:
        """``db/`` holds ``commit`` and writes not committed."""
        return LocalState(lineage, commit, clean=False, uploaded=uploaded)

    @staticmethod
    def clean_at(
        lineage: str,
        commit: CommitRef,
        uploaded: dict[str, Any],
        buffer: SavedBuffer | None = None,
    ) -> LocalState:
        """``db/`` (with ``buffer`` loaded, when there is one) is exactly ``commit``."""
        return LocalState(lineage, commit, clean=True, uploaded=uploaded, buffer=buffer)

    @property
    def kind(self) -> CopyState:
        if not self.lineage:
            return CopyState.NONE
        if self.commit is None:
            return CopyState.CHANGING
        if not self.clean:
            return CopyState.DIRTY
        return CopyState.CLEAN if self.buffer is None else CopyState.CLEAN_WITH_BUFFER

    @property
    def reusable(self) -> bool:
        """Clean at its commit (with its buffer, or without one)."""
        return self.kind in (CopyState.CLEAN, CopyState.CLEAN_WITH_BUFFER)

    def to_json(self) -> dict[str, Any]:
        return {
            "lineage": self.lineage,
            "version": self.commit.version if self.commit else None,
            "attempt": self.commit.attempt.hex() if self.commit else None,
            # A copy clean only with its saved buffer says "clean": false, so that a build that
            # does not know saved buffers (a downgrade) rebuilds it instead of trusting db/.
            "clean": self.clean and self.buffer is None,
            "clean_with_buffer": self.clean and self.buffer is not None,
            "uploaded": self.uploaded,
            "buffer": self.buffer.to_json() if self.buffer is not None else None,
        }

    @staticmethod
    def from_json(obj: Any) -> LocalState:
        """Anything unexpected yields a state that is not clean (the copy gets rebuilt)."""
        if not isinstance(obj, dict):
            return LocalState()
        try:
            commit = CommitRef(int(obj["version"]), bytes.fromhex(obj["attempt"]))
            uploaded = obj.get("uploaded") or {}
            if not isinstance(uploaded, dict) or not all(
                isinstance(v, dict) for v in uploaded.values()
            ):
                uploaded = {}
            db = obj.get("db", "db")
            if not isinstance(db, str) or not DB_NAME.fullmatch(db):
                return LocalState()  # a name not of ours (a path, say) names no copy
            saved = obj.get("buffer")
            buffer = SavedBuffer.from_json(saved) if saved is not None else None
            with_buffer = buffer is not None and obj.get("clean_with_buffer") is True
            return LocalState(
                lineage=str(obj["lineage"]),
                commit=commit,
                clean=(obj.get("clean") is True and buffer is None) or with_buffer,
                uploaded=uploaded,
                db=db,
                buffer=buffer,
            )
        except (KeyError, TypeError, ValueError):
            return LocalState()


#: The names of ``db/``: ``db`` (copies made before rebuilds named it) or ``db-<32 hex>``.
DB_NAME = re.compile(r"db(-[0-9a-f]{32})?")

#: The names of saved write buffers: ``buffer-<32 hex>``.
BUFFER_NAME = re.compile(r"buffer-[0-9a-f]{32}")

#: The file a task waiting for the lock touches: a request to hand a kept-open store over.
HANDOFF = "HANDOFF"
#: How often a task waiting for the lock rings the holder's bell again (``bell.py``): a keeper
#: busy with other work when it rang, or a task of the holder's that kept the store since.
RING_EVERY_S = 0.02
#: For how long a task waiting for the lock tries it every millisecond (then every 10).
FAST_TRIES_S = 0.1
#: A read-only open's private copy (it takes no lock), ``<mark><32 hex>``.
READER_MARK = f"{TMP_MARK}read-"
#: Younger private copies of readers are theirs still; older ones a crashed reader left.
READER_GRACE_S = 3600.0


class LocalCopy:
    """The lock, ``LOCAL.json`` and ``db/`` of one partition's local working copy.

    ``db`` is where this copy's RocksDB lives: ``db`` until :meth:`use_db` names the one
    ``LOCAL.json`` speaks of or :meth:`fresh_db` a new one; what :meth:`write_state` records.
    """

    def __init__(self, local_dir: str | os.PathLike[str], store: str, lineage: str, partition: int):
        self.dir = Path(local_dir) / store / f"q={lineage}" / f"p={partition}"
        self.db = self.dir / "db"
        self.state_file = self.dir / "LOCAL.json"
        self._lock: Any = None

    def lock(self, timeout_s: float) -> None:
        """Takes the copy's lock, waiting up to ``timeout_s``. While it waits, it asks a
        process that keeps the copy's store open between tasks to hand it over (``kept``)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.dir / "LOCK", "a+")
        start = time.monotonic()
        deadline = start + timeout_s
        rung = None
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock = handle
                # The request is answered (or was left by a waiter that gave up); waiting
                # tasks touch it again.
                with contextlib.suppress(OSError):
                    (self.dir / HANDOFF).unlink()
                return
            except BlockingIOError:
                # Again at every try: another waiter that got the lock first removed it.
                with contextlib.suppress(OSError):
                    (self.dir / HANDOFF).touch()
                now = time.monotonic()
                if rung is None or now - rung >= RING_EVERY_S:
                    bell.ring(self.dir)  # a holder's keeper wakes now, not at its next poll
                    rung = now
                if now >= deadline:
                    handle.close()
                    raise StoreLockedError(
                        f"local store directory {self.dir} is locked by another task or "
                        f"process (waited {timeout_s:g} s)"
                    ) from None
                # A kept store's handoff is over within tens of milliseconds: tried often at
                # first, then less, since a holder still running a task on the store takes long.
                time.sleep(0.001 if now - start < FAST_TRIES_S else 0.01)

    def remove_temporaries(self) -> None:
        """Removes what a crashed task left under a temporary name (a snapshot's checkpoint
        directory, a half-written state file, a reader's copy an hour old). Only with the lock
        held."""
        now = time.time()
        for path in self.dir.glob(f"{TMP_MARK}*"):
            if path.name.startswith(READER_MARK) and _age_s(path, now) < READER_GRACE_S:
                continue  # a reader's, which holds no lock
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def still_locked(self) -> bool:
        """Whether the lock this copy holds is still the directory's: a directory deleted
        under it (a wiped local disk) has another ``LOCK``, or none, that others can take."""
        if self._lock is None:
            return False
        try:
            return os.stat(self.dir / "LOCK").st_ino == os.fstat(self._lock.fileno()).st_ino
        except OSError:
            return False

    def transfer(self) -> LocalCopy:
        """A copy of this handle that owns the lock from now on (a kept store's); this one then
        owns none, so its :meth:`unlock` releases nothing."""
        other = copy.copy(self)
        self._lock = None
        return other

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def forget(self) -> None:
        """Marks ``db/`` as matching no commit, or at least removes the record that it does
        (never raises: it runs while another failure is being handled)."""
        try:
            self.write_state(LocalState())
        except OSError:
            with contextlib.suppress(OSError):
                self.state_file.unlink(missing_ok=True)

    def read_state(self) -> LocalState:
        try:
            return LocalState.from_json(json.loads(self.state_file.read_text()))
        except (OSError, ValueError):
            return LocalState()

    def use_db(self, state: LocalState) -> None:
        """Makes ``db`` the directory ``state`` (read from ``LOCAL.json``) speaks of."""
        self.db = self.dir / state.db

    def fresh_db(self) -> None:
        """Removes every ``db/`` of the copy and names a new one for a rebuild (see the
        module doc)."""
        with contextlib.suppress(FileNotFoundError):
            for path in self.dir.iterdir():
                if DB_NAME.fullmatch(path.name):
                    shutil.rmtree(path, ignore_errors=True)
        self.db = self.dir / f"db-{uuid.uuid4().hex}"

    def new_buffer(self) -> Path:
        """A new name for a saved write buffer in the copy's directory."""
        return self.dir / f"buffer-{uuid.uuid4().hex}"

    def remove_buffers(self) -> None:
        """Removes every saved write buffer: once ``LOCAL.json`` no longer names one (the copy
        is dirty, or clean without one), they are of no use. Only with the lock held."""
        with contextlib.suppress(FileNotFoundError):
            for path in self.dir.iterdir():
                if BUFFER_NAME.fullmatch(path.name):
                    path.unlink(missing_ok=True)

    def write_state(self, state: LocalState) -> None:
        tmp = self.state_file.with_name(f"{TMP_MARK}LOCAL.json")
        with open(tmp, "w") as handle:
            json.dump({**state.to_json(), "db": self.db.name}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_file)
        # Without this, a crash of the machine can bring back the previous LOCAL.json: one that
        # says clean at a commit db/ has since moved past.
        sync_dir(self.dir)


def _age_s(path: Path, now: float) -> float:
    try:
        return now - path.lstat().st_mtime
    except OSError:
        return 0.0


__all__ = ["HANDOFF", "READER_MARK", "CopyState", "LocalCopy", "LocalState", "SavedBuffer"]
