"""The handoff's doorbell: a named pipe in a local copy's directory (``HANDOFF.bell``) that a
task waiting for the copy's lock writes a byte to, so that the process keeping the copy's store
open (``kept.py``) hands it over at once rather than at its keeper's next poll.

The bell only wakes: the request itself is the ``HANDOFF`` file (``local.py``), which the keeper
checks as before, so a bell that is missing, is not a pipe, or is not listened to leaves the
keeper polling, never a request unanswered. Anything found at the bell's path is hostile until
checked: it is opened without following links, without blocking, and written only when it is a
pipe.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path

#: The bell's name in a local copy's directory.
BELL = "HANDOFF.bell"


def ring(directory: Path) -> None:
    """Wakes the keeper that listens on ``directory``'s bell; nothing when none does."""
    try:
        fd = os.open(directory / BELL, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except OSError:
        return  # no bell (ENOENT), nobody listening (ENXIO), a link (ELOOP)
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"\0")
    except OSError:
        pass  # full (EAGAIN): rings are waiting to be read already
    finally:
        os.close(fd)


class Doorbells:
    """What a keeper's thread waits on: the bells of the copies whose stores it holds, and its
    own (:meth:`wake`, for the keeper's other threads). Only the waiting thread opens and
    closes the copies' bells (:meth:`listen`, :meth:`close`), so none is closed under a wait."""

    def __init__(self) -> None:
        self._own: tuple[int, int] | None = None
        with contextlib.suppress(OSError):  # out of descriptors: wakes wait for the poll
            self._own = os.pipe()
            for fd in self._own:
                os.set_blocking(fd, False)
        self._copies: dict[Path, int | None] = {}
        #: Guards the own pipe's write end against a wake after :meth:`close`, which would
        #: write into whatever file took the descriptor's number since.
        self._own_lock = threading.Lock()
        self._closed = False
        _LIVE.add(self)

    def wake(self) -> None:
        """Ends the current or next :meth:`wait` early (from any thread)."""
        with self._own_lock:
            if self._closed or self._own is None:
                return
            with contextlib.suppress(OSError):  # full: a wake is pending already
                os.write(self._own[1], b"\0")

    def listen(self, directories: Iterable[Path]) -> None:
        """Listens on the bells of exactly ``directories`` (created where missing). A bell
        that is no longer the one at its path (its directory deleted and made again) is
        opened anew, and one that could not be opened is tried again."""
        wanted = set(directories)
        for directory in list(self._copies):
            fd = self._copies[directory]
            if directory not in wanted or fd is None or not _is_at(fd, directory / BELL):
                _close(self._copies.pop(directory))
        for directory in wanted - self._copies.keys():
            self._copies[directory] = _open_bell(directory)

    def wait(self, timeout_s: float) -> None:
        """Waits until a bell rings or ``timeout_s`` passes, and takes the rings in."""
        fds = [fd for fd in self._copies.values() if fd is not None]
        if self._own is not None:
            fds.append(self._own[0])
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(max(0, round(timeout_s * 1000))):
            _drain(fd)

    def close(self) -> None:
        """Stops listening and closes every descriptor (the waiting thread, as it ends)."""
        self.listen(())
        with self._own_lock:
            self._closed = True
            for fd in self._own or ():
                _close(fd)

    def _forget(self) -> None:
        """In a forked child: the descriptors are the parent's keeper's, whose thread the child
        does not have; closed, so that no wake of the child's writes into a file that took one
        of their numbers, nor reaches the parent."""
        self._own_lock = threading.Lock()  # held by another thread at the fork, maybe
        self._closed = True
        for fd in [*(self._own or ()), *self._copies.values()]:
            _close(fd)
        self._copies = {}


#: Every Doorbells of the process, to forget in a forked child.
_LIVE: weakref.WeakSet[Doorbells] = weakref.WeakSet()


def _forget_all() -> None:
    for bells in list(_LIVE):
        bells._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)


def _open_bell(directory: Path) -> int | None:
    """The read end of ``directory``'s bell (made if missing), or None where none can be."""
    path = directory / BELL
    with contextlib.suppress(OSError):  # there already; or it cannot be: the open says
        os.mkfifo(path, 0o600)
    try:
        # Read and write: a pipe whose last writer closed would otherwise read as ended, and
        # wake every wait at once until another writer came.
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except OSError:
        return None
    found = os.fstat(fd)
    # Only a pipe of this user that no one else may open: anyone else could ring it without
    # end (every ring a round of the keeper's) or read the rings away.
    if not (
        stat.S_ISFIFO(found.st_mode)
        and found.st_uid == os.geteuid()
        and stat.S_IMODE(found.st_mode) & 0o077 == 0
    ):
        os.close(fd)
        return None
    return fd


def _is_at(fd: int, path: Path) -> bool:
    """Whether the open bell ``fd`` is still the file at ``path``."""
    try:
        here, there = os.fstat(fd), path.lstat()
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):  # empty (EAGAIN): all taken in
        while os.read(fd, 4096):
            pass


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


__all__ = ["BELL", "Doorbells", "ring"]
