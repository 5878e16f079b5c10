"""Stores kept open between a worker's tasks, and handed over to other processes.

A :class:`Keeper` lets a committed store stay open in the process that committed it, with its
local copy's lock held, so that the partition's next task in that process finds it open and
the commit writes its changelog and nothing else on the task's path. Its thread does the rest
(a snapshot when one is due, settling idle stores, flushing their memtables ahead of a handoff,
handing stores over to a process that asks, closing idle ones and giving memory back under
pressure). Nothing held here is needed for durability: the commit's changelog is. The rules,
the handoff and the states of a kept store: docs/checkpoint.md, "Stores kept open".
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from verstore._checks import check_whole
from verstore._core import MemoryUsage, StoreClosedError, VersionedStore, memory_usage
from verstore.checkpoint import faults
from verstore.checkpoint.bell import Doorbells
from verstore.checkpoint.layout import CommitRef
from verstore.checkpoint.local import HANDOFF, LocalCopy, LocalState, SavedBuffer
from verstore.checkpoint.session import CommitStats

log = logging.getLogger("verstore.checkpoint")


class DeferredWork(Protocol):
    """What a commit left to do once its store is idle (``maintenance.AfterCommit``): a value
    that holds what the work needs of the commit, run by whoever holds the store then."""

    def run(
        self, store: VersionedStore, local: LocalCopy, uploaded: dict[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """Runs the work on ``store``, whose local copy is ``local`` (its lock held by the
        caller). Given the copy's upload map, returns it afterwards and whether the copy on
        disk is now clean at the commit."""
        ...


class KeptState(Enum):
    """Where a kept store is in its life (docs/checkpoint.md, "Stores kept open", has the
    table of what ``LOCAL.json`` says in each)."""

    #: Open; its commit's deferred work (:attr:`KeptStore.work`) has not run yet.
    DUE = "due"
    #: Open; ``db/`` may hold flushed writes past its commit, so ``LOCAL.json`` says dirty.
    UNSETTLED = "unsettled"
    #: Open; flushed, ``LOCAL.json`` clean at its commit.
    SETTLED = "settled"
    #: A task's session has it again: no longer the keeper's to end.
    TAKEN = "taken"
    #: Closed, in order or dropped.
    ENDED = "ended"


class Chore(Enum):
    """What the keeper does to a store it holds while no task uses it (``Keeper._maintain``)."""

    #: Runs its commit's deferred work (a snapshot when one is due).
    WORK = "work"
    #: Runs its deferred work, then settles it (flushed, ``LOCAL.json`` clean at its commit).
    SETTLE = "settle"
    #: Gives its memory back: flushed and its caches released; its deferred work and
    #: ``LOCAL.json`` are left to the keeper's owner (a keeper without a thread of its own).
    RELEASE = "release"
    #: Runs its deferred work, settles it and gives its memory back.
    SETTLE_AND_RELEASE = "settle and release"
    #: Writes its write buffer into RocksDB, and nothing else: its caches and memtables stay
    #: for its next task. What the store in use needs when the write buffers' pool is full.
    WRITE_BUFFER = "write buffer"
    #: Flushes RocksDB's memtables, and nothing else: its write buffer and caches stay for its
    #: next task, ``LOCAL.json`` as it is. So that a handoff finds little to flush on the path
    #: of the task waiting for the store (``KeptStore.flush_memtables``).
    FLUSH_MEMTABLES = "flush memtables"


@dataclass(eq=False)
class KeptStore:
    """A committed partition store, open, its local copy locked by this process.

    Attributes:
        local: The local copy; its lock is held.
        store: The open store, holding exactly ``commit``'s state.
        copy_of: What the copy is of (``PartitionStore``'s lineage and partitioning).
        commit: The commit the store holds.
        uploaded: The copy's upload map (``uploads``), updated by a snapshot.
        memory_limit_mb: The cap on its own memory the store was opened with (None: none).
        stats: The commit's statistics, to which the deferred work adds (a snapshot's bytes).
        work: What the commit left for later; set only while the state is ``DUE``.
        state: Where the store is in its life (read only: its methods move it).
    """

    local: LocalCopy
    store: VersionedStore
    copy_of: str
    commit: CommitRef
    uploaded: dict[str, Any]
    memory_limit_mb: int | None
    stats: CommitStats
    work: DeferredWork | None = None
    _state: KeptState = field(init=False)
    idle_since: float = field(default_factory=time.monotonic)
    #: Set, under its keeper's lock, while the keeper works on the store outside that lock:
    #: the store is the keeper's thread's until it clears it (``Keeper``, on ownership).
    working: bool = False

    def __post_init__(self) -> None:
        self._state = KeptState.DUE if self.work is not None else KeptState.UNSETTLED

    @property
    def state(self) -> KeptState:
        return self._state

    @property
    def live(self) -> bool:
        """Open and the keeper's: neither taken by a task nor ended."""
        return self._state in (KeptState.DUE, KeptState.UNSETTLED, KeptState.SETTLED)

    def run_work(self) -> None:
        """``DUE``: runs the commit's deferred work, which leaves the store ``SETTLED`` when it
        marked the copy clean, else ``UNSETTLED``. ``after_commit`` logs its own failures; a
        flush that fails raises (the store is then dropped)."""
        if self._state is not KeptState.DUE:
            return
        work, self.work = self.work, None
        self._state = KeptState.UNSETTLED
        assert work is not None
        self.uploaded, clean = work.run(self.store, self.local, self.uploaded)
        if clean:
            self._state = KeptState.SETTLED

    def settle(self) -> None:
        """``DUE`` or ``UNSETTLED`` to ``SETTLED``: makes the local copy on disk what the store
        holds (flush, then ``LOCAL.json`` clean at ``commit``). Deferred work not run yet is
        dropped: a snapshot is due again at the next commit."""
        if self._state is KeptState.DUE:
            self.work, self._state = None, KeptState.UNSETTLED
        if self._state is not KeptState.UNSETTLED:
            return
        self.store.flush()
        self.local.write_state(LocalState.clean_at(self.copy_of, self.commit, self.uploaded))
        self._state = KeptState.SETTLED

    def flush_memtables(self) -> None:
        """``UNSETTLED``: flushes RocksDB's memtables, leaving the write buffer and the caches
        as they are, so that a handoff (:meth:`end`) has little left to flush on the path of
        the task waiting for the store. The state and ``LOCAL.json`` (dirty) stay: ``db/`` is
        the commit only with the buffer, which is in no file. A ``SETTLED`` store's memtables
        are empty already; a ``DUE`` one's work comes first."""
        if self._state is KeptState.UNSETTLED:
            self.store.flush(write_buffer=False)

    def take(self) -> bool:
        """Hands a live store to a task's session, running any deferred work first (a snapshot
        and cleanup must not wait for a task that finds none left). Returns whether
        ``LOCAL.json`` says the copy is clean at ``commit``. A failure drops the store.

        Raises:
            RuntimeError: The store is not live (taken or ended already: a caller's bug).
        """
        if not self.live:
            raise RuntimeError(f"the kept store of {self.local.dir} is {self._state.value}")
        try:
            self.run_work()
        except BaseException:
            self.drop()
            raise
        clean = self._state is KeptState.SETTLED
        self._state = KeptState.TAKEN
        return clean

    def end(self) -> None:
        """The orderly ending of a live store, keeping the lock, with the copy clean at
        ``commit``: a ``SETTLED`` store closes; any other is handed over (closed keeping its
        write buffer in a file that ``LOCAL.json`` names; deferred work not run is dropped).
        A store that fails to close leaves the copy marked for a rebuild."""
        if not self.live:
            return
        settled = self._state is KeptState.SETTLED
        self.work, self._state = None, KeptState.ENDED
        try:
            if settled:
                self.store.close()
            else:
                self._hand_over()
        except BaseException:
            self.local.forget()
            raise

    def close(self) -> None:
        """:meth:`end`, then releases the lock whatever happens."""
        try:
            self.end()
        finally:
            self.local.unlock()

    def drop(self, gone: bool = False) -> None:
        """The ending of a failure: closes a live store without settling it (the copy stays as
        ``LOCAL.json`` says) and releases the lock; logs a failure and marks the copy for a
        rebuild (when its directory is ``gone``, quietly and without a mark: RocksDB's close
        then fails to write what it flushes, nothing needs it, and whatever is now in the
        directory is not this copy)."""
        if not self.live:
            return
        self.work, self._state = None, KeptState.ENDED
        try:
            self.store.close()
        except Exception as e:
            level = logging.DEBUG if gone else logging.WARNING
            log.log(level, "closing the kept store of %s failed: %s", self.local.dir, e)
            if not gone:  # else LOCAL.json there is another copy's
                self.local.forget()
        finally:
            self.local.unlock()

    def _hand_over(self) -> None:
        """Closes the store leaving its write buffer saved beside ``db/``, and marks the copy
        clean at ``commit`` with it. A flush would write the buffer of several micro-batches
        into RocksDB and then into a new level-0 file, on the path of the task waiting for
        the store; the next process loads the file instead (docs/checkpoint.md)."""
        path = self.local.new_buffer()
        size, crc32 = self.store.close_keeping_buffer(path)
        faults.step("during_handoff")
        saved = SavedBuffer(path.name, size, crc32)
        self.local.write_state(
            LocalState.clean_at(self.copy_of, self.commit, self.uploaded, buffer=saved)
        )


class Keeper:
    """The stores a process keeps open between tasks.

    One lock, the keeper's, guards which stores it holds, which of them it is working on and
    how many tasks hold a store; a store belongs to exactly one owner at a time: the keeper
    while it holds it idle, the keeper's work while ``working`` is set (the work runs outside
    the lock; whoever wants the store waits for it to end), and a task once :meth:`take`
    returned it.

    Args:
        idle_s: Close a store left unused this long.
        settle_s: Settle a store left unused this long (flush it, ``LOCAL.json`` clean), so
            that a process that dies after it leaves a copy that is reused, not rebuilt.
        max_stores: Keep at most this many open; beyond, the least recently used close.
        poll_s: How often the thread looks for handoff requests and idle stores.
        flush_s: Flush the memtables (not the write buffer) of a store left unused this long
            while no task of the process holds a store, so that a handoff finds them flushed
            (``_flush_idle_memtables`` says why then).
        flush_min_bytes: Flush them only when they hold at least this many bytes.
        background: Whether a thread of the keeper hands stores over and closes idle ones
            (without one, the owner calls :meth:`tick`).
        maintain: Whether that thread also runs the work commits deferred and flushes idle
            stores' memtables (without, the owner calls :meth:`run_maintenance`: a
            deterministic simulation does).
    """

    def __init__(
        self,
        *,
        idle_s: float = 30.0,
        settle_s: float = 10.0,
        max_stores: int = 8,
        poll_s: float = 0.02,
        flush_s: float = 0.25,
        flush_min_bytes: int = 1 << 20,
        background: bool = True,
        maintain: bool = True,
    ) -> None:
        check_whole(max_stores, "max_stores", 1)
        self.idle_s, self.settle_s, self.max_stores = idle_s, settle_s, max_stores
        self.poll_s = poll_s
        self.flush_s, self.flush_min_bytes = flush_s, flush_min_bytes
        self._held: dict[Path, KeptStore] = {}
        #: Tasks that asked for a store (:meth:`take`) and hold one still: not kept back
        #: (:meth:`keep`) nor ended otherwise (:meth:`end_task`).
        self._tasks = 0
        self._mutex = threading.Lock()
        #: Notified whenever work on a store ends (``KeptStore.working`` cleared).
        self._work_ended = threading.Condition(self._mutex)
        #: What the thread waits on between rounds (made with the thread).
        self._bells: Doorbells | None = None
        #: Threads dropping stores whose directories were deleted (``_drop_gone``).
        self._drops: list[threading.Thread] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._background = background
        self._maintain_in_thread = background and maintain
        self._pid = os.getpid()

    # -- tasks --------------------------------------------------------------------------------

    def take(self, directory: Path) -> KeptStore | None:
        """The store held for the local copy ``directory``, now the caller's (its deferred
        work done first), or None. Either way the caller's task now counts as holding a store
        (one it opens itself when none is held) until it keeps it (:meth:`keep`) or ends
        (:meth:`end_task`)."""
        with self._mutex:
            self._tasks += 1
            held = self._held.pop(directory, None)
            self._wait_for(held)
        if held is None or not held.live:  # None, or dropped by its failed work
            return None
        if not held.local.still_locked():
            self._drop_gone(held)  # its directory was deleted under it
            return None
        return held

    def keep(self, held: KeptStore) -> None:
        """Holds a committed store until a task takes it, another process asks for it, it is
        idle for ``idle_s`` or more than ``max_stores`` are held. The task that took it (or
        opened it) holds no store any more."""
        held.idle_since = time.monotonic()
        with self._mutex:
            self._tasks -= 1
            previous = self._held.pop(held.local.dir, None)
            self._held[held.local.dir] = held
            self._wait_for(previous)
        if previous is not None:  # a caller's bug: two stores of one copy cannot both be open
            previous.drop()
        if self._background:
            self._start_thread()
            self._ring()
        else:
            self._evict()

    def end_task(self) -> None:
        """A task that asked for a store (:meth:`take`) ended without keeping it (aborted,
        failed, or its store closed): it holds no store any more."""
        with self._mutex:
            self._tasks -= 1

    def held(self) -> list[Path]:
        """The local copies whose stores are held (for tests and metrics)."""
        with self._mutex:
            return list(self._held)

    def working(self) -> bool:
        """Whether deferred commit work is waiting or running (benchmarks time it apart)."""
        with self._mutex:
            return any(h.state is KeptState.DUE or h.working for h in self._held.values())

    # -- the keeper's work --------------------------------------------------------------------

    def tick(self) -> None:
        """One round: hands over stores other processes ask for, closes idle and surplus ones,
        gives memory back under pressure, and (with a thread) runs the deferred work of
        commits and flushes an idle store's memtables."""
        now = time.monotonic()
        with self._mutex:
            entries = list(self._held.values())
        for held in entries:
            asked = (held.local.dir / HANDOFF).exists()
            if not held.local.still_locked():
                self._release(held, "its directory was deleted")
            elif asked or now - held.idle_since >= self.idle_s:
                self._release(held, "handed over" if asked else "idle")
            elif self._maintain_in_thread and (
                held.state is KeptState.DUE
                or (held.state is KeptState.UNSETTLED and now - held.idle_since >= self.settle_s)
            ):
                self._maintain(held, Chore.WORK if held.state is KeptState.DUE else Chore.SETTLE)
        self._evict()
        self._relieve_memory()
        if self._maintain_in_thread:
            self._flush_idle_memtables(now)

    def run_maintenance(self, *, settle: bool = False) -> None:
        """Runs every held store's deferred commit work now, in the calling thread; with
        ``settle``, settles them too (as the thread does with stores idle for ``settle_s``)."""
        with self._mutex:
            entries = list(self._held.values())
        for held in entries:
            self._maintain(held, Chore.SETTLE if settle else Chore.WORK, raising=True)

    def close_all(self) -> None:
        """Closes every held store (at exit; a test's end)."""
        with self._mutex:
            entries = list(self._held.values())
        for held in entries:
            self._release(held, "closing")
        with self._mutex:
            drops, self._drops = self._drops, []
        for dropping in drops:
            dropping.join()

    def stop(self) -> None:
        """Stops the thread and closes every held store. Not in a forked child, whose exit
        runs the ``atexit`` of the parent's keeper: the stores are the parent's (closing them
        there would write into their directories and release the parent's locks)."""
        if os.getpid() != self._pid:
            return
        self._stop.set()
        self._ring()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.close_all()

    def _drop_gone(self, held: KeptStore) -> None:
        """Drops a store whose directory was deleted under it, in a thread of its own. Nothing
        needs what it holds, but RocksDB's close flushes its memtables into the missing
        directory, fails, and then pauses its flush thread a second: measured on the path of a
        task's open and of the handoffs asked of the keeper's round meanwhile. (Other stores'
        flushes in the process still wait for that thread.) ``close_all`` waits for these
        threads: a close still running at the interpreter's exit met RocksDB's own teardown.
        Started under the keeper's lock, so that a ``close_all`` meanwhile finds it started."""
        dropping = threading.Thread(
            target=held.drop, kwargs={"gone": True}, name="verstore-drop", daemon=True
        )
        with self._mutex:
            try:
                dropping.start()  # the thread takes no keeper's lock
                self._drops = [t for t in self._drops if t.is_alive()] + [dropping]
                started = True
            except RuntimeError:  # no thread to spare
                started = False
        if not started:
            held.drop(gone=True)  # here, as before

    def _maintain(
        self,
        held: KeptStore,
        chore: Chore,
        *,
        raising: bool = False,
        only_if: Callable[[KeptStore], bool] | None = None,
    ) -> bool:
        """Does ``chore`` to ``held`` unless a task took it, or ``only_if`` (asked once the
        store is the keeper's work's: no task's call can hold it then) says no. Returns whether
        the chore ran. A failure drops the store; it is logged, or raised when ``raising`` (the
        keeper's owner called)."""
        if not self._claim(held):
            return False  # a task took it, or the other work dropped it
        try:
            if only_if is not None and not _asks(only_if, held):
                return False
            try:
                _do(chore, held)
                return True
            except BaseException as e:
                # The commit is durable; what the failed work left is unknown, as after a
                # crash: the store goes, and the copy is rebuilt or caught up from LOCAL.json.
                with self._mutex:
                    if self._held.get(held.local.dir) is held:
                        del self._held[held.local.dir]
                held.drop()
                if raising:
                    raise
                log.warning("%s: deferred commit work failed: %s", held.local.dir, e)
                return False
        finally:
            self._unclaim(held)

    def _weigh(self, held: KeptStore, what: str) -> int | None:
        """``held``'s byte count ``what`` read as the keeper's work (as ``only_if``): a task's
        call in progress on the store would hold the keeper's thread until it returned. None
        when a task took it (it is not idle then)."""
        if not self._claim(held):
            return None
        try:
            return _bytes_held(held, what)
        finally:
            self._unclaim(held)

    def _claim(self, held: KeptStore) -> bool:
        """Makes ``held`` this keeper's work (a task's ``take`` waits for it) unless a task took
        it meanwhile; then ``_unclaim`` must follow."""
        with self._mutex:
            self._wait_for(held)  # other work of this keeper on it (its owner's, its thread's)
            if self._held.get(held.local.dir) is not held:
                return False
            held.working = True
            return True

    def _unclaim(self, held: KeptStore) -> None:
        with self._mutex:
            held.working = False
            self._work_ended.notify_all()

    def _wait_for(self, held: KeptStore | None) -> None:
        """Waits, with the keeper's lock held, until no work of the keeper has ``held``."""
        while held is not None and held.working:
            self._work_ended.wait()

    def _release(self, held: KeptStore, why: str) -> None:
        """Closes a held store (settled first), or drops it when its directory was deleted
        under it: a copy rebuilt in the same place is another holder's, and a handoff would
        write its buffer and ``LOCAL.json`` there."""
        with self._mutex:
            if self._held.get(held.local.dir) is not held:
                return
            del self._held[held.local.dir]
            self._wait_for(held)
        if not held.local.still_locked():
            self._drop_gone(held)
            return
        try:
            held.close()
        except Exception as e:
            log.warning("%s: closing the kept store (%s) failed: %s", held.local.dir, why, e)

    def _relieve_memory(self) -> None:
        """While the process's memory budget is under pressure (``memory_usage``): gives back
        what idle stores hold, least recently used first, the cheapest way that answers it.

        Write buffers past their share cost the idle stores no more than their buffers'
        writes, and only for what the idle stores hold past the share (see
        ``_write_idle_buffers``). Caches or RocksDB past theirs: the idle stores flush, so that
        their memtables go too, and give back their caches (settled first when this keeper runs
        their deferred work); then they are closed while closing one lowers what the budget's
        holders use. The stores in use by tasks give back their own as they write; pressure
        they cause costs no idle store more than one close."""
        usage = memory_usage()
        if not usage.under_pressure:
            return
        with self._mutex:
            idle = sorted(self._held.values(), key=lambda h: h.idle_since)
        if usage.write_buffers_over:
            self._write_idle_buffers(idle, usage.write_buffer_share_bytes)
            usage = memory_usage()
        if not _beyond_buffers(usage):
            return
        chore = Chore.SETTLE_AND_RELEASE if self._maintain_in_thread else Chore.RELEASE
        for held in idle:
            self._maintain(held, chore)
            if not _beyond_buffers(memory_usage()):
                return
        for held in idle:
            before = _held_bytes()
            self._release(held, "memory pressure")
            if not _beyond_buffers(memory_usage()) or _held_bytes() >= before:
                return

    def _write_idle_buffers(self, idle: list[KeptStore], share: int) -> None:
        """Has idle stores write their buffers into RocksDB, least recently used first, while
        together they hold more than ``share``, and does nothing else to them.

        A store in use writes its own buffer once a call leaves the pool past its share, so
        the pool passes it during a running task's call and comes back by itself: writing the
        idle stores' buffers then would only move their writes out of the buffers their next
        tasks read them from (measured: a fifth slower tasks, BENCHMARKS.md). What is past the
        share in idle stores alone (a budget lowered under them) is theirs to give back."""
        weighed = [(held, self._weigh(held, "write_buffer_bytes")) for held in idle]
        held_bytes = [(held, n) for held, n in weighed if n is not None]
        excess = sum(n for _, n in held_bytes) - share
        for held, n in held_bytes:
            if excess <= 0:
                return
            if n:
                self._maintain(held, Chore.WRITE_BUFFER)
                excess -= n

    def _flush_idle_memtables(self, now: float) -> None:
        """While no task of this process holds a store: flushes the memtables of one store
        unused for ``flush_s`` that holds ``flush_min_bytes`` or more in them, the longest
        unused first, so that a handoff of it later flushes little on the waiting task's path.

        Why only then: a task of this process that takes the store while its memtables flush
        waits for the flush (``take``), and every flush makes one more level-0 file (each
        overlaps the whole key range, so more of them mean more compaction), where a store
        taken back soon would have put more writes into one. A running task of this process
        is a sign that its stores come back soon, and the flush would take a core from it; a
        worker given tasks back to back (one stage's) starts the next well within ``flush_s``,
        so a store unused that long waits for a later micro-batch, whose task for it another
        process may be given. Below a MiB (an empty memtable counts 2 KiB) a handoff's flush
        costs its waiter a few milliseconds: not worth the file. One store a round, so that a
        handoff asked meanwhile (checked first, every round) waits for one flush at most."""
        with self._mutex:
            if self._tasks > 0:
                return
            idle = sorted(
                (
                    h
                    for h in self._held.values()
                    if h.state is KeptState.UNSETTLED
                    and not h.working
                    and now - h.idle_since >= self.flush_s
                ),
                key=lambda h: h.idle_since,
            )
        for held in idle:
            # Weighed once the store is the keeper's work's: read before, a task that took it
            # meanwhile would hold the keeper's thread until that task's call returned.
            if self._maintain(held, Chore.FLUSH_MEMTABLES, only_if=self._memtables_worth_a_flush):
                return

    def _memtables_worth_a_flush(self, held: KeptStore) -> bool:
        return _bytes_held(held, "memtable_bytes") >= self.flush_min_bytes

    def _evict(self) -> None:
        with self._mutex:
            surplus = sorted(self._held.values(), key=lambda h: h.idle_since)
            surplus = surplus[: max(0, len(surplus) - self.max_stores)]
        for held in surplus:
            self._release(held, "over max_stores")

    def _start_thread(self) -> None:
        with self._mutex:  # two tasks' keep at once start one thread
            if self._thread is not None:
                return
            self._bells = bells = Doorbells()
            self._thread = threading.Thread(
                target=self._run, args=(bells,), name="verstore-keeper", daemon=True
            )
            self._thread.start()

    def _ring(self) -> None:
        if self._bells is not None:
            self._bells.wake()

    def _run(self, bells: Doorbells) -> None:
        try:
            while not self._stop.is_set():
                # A waiting task rings its copy's bell: the handoff starts now, not at the
                # next poll (up to poll_s later, on that task's path).
                with self._mutex:
                    directories = list(self._held)
                bells.listen(directories)
                bells.wait(self.poll_s)
                try:
                    self.tick()
                except Exception as e:  # the thread must outlive any one store's trouble
                    log.warning("verstore keeper: %s", e)
        finally:
            bells.close()

    # -- the process's keeper -----------------------------------------------------------------

    @classmethod
    def for_process(cls, *, idle_s: float = 30.0, max_stores: int = 8) -> Keeper:
        """The keeper of this process (a new one in a forked child: locks and threads are not
        the parent's to use). Its stores are closed when the interpreter exits normally."""
        global _PROCESS_KEEPER
        with _PROCESS_MUTEX:
            keeper = _PROCESS_KEEPER
            if keeper is None or keeper._pid != os.getpid():
                keeper = _PROCESS_KEEPER = cls(idle_s=idle_s, max_stores=max_stores)
                atexit.register(keeper.stop)
            keeper.idle_s, keeper.max_stores = idle_s, max_stores
            return keeper


_PROCESS_KEEPER: Keeper | None = None
_PROCESS_MUTEX = threading.Lock()


__all__ = ["Chore", "DeferredWork", "Keeper", "KeptState", "KeptStore"]


def _do(chore: Chore, held: KeptStore) -> None:
    """The steps of ``chore`` on ``held`` (``Keeper._maintain`` holds it meanwhile)."""
    if chore is Chore.WRITE_BUFFER:
        held.store.release_memory(caches=False)
        return
    if chore is Chore.FLUSH_MEMTABLES:
        held.flush_memtables()
        return
    if chore is not Chore.RELEASE:
        held.run_work()
    if chore in (Chore.SETTLE, Chore.SETTLE_AND_RELEASE):
        held.settle()
    if chore is Chore.RELEASE:
        held.store.flush()  # LOCAL.json left alone: the owner settles
    if chore in (Chore.RELEASE, Chore.SETTLE_AND_RELEASE):
        held.store.release_memory()


def _asks(only_if: Callable[[KeptStore], bool], held: KeptStore) -> bool:
    """``only_if(held)``; False when it fails: a question about a store is not its work, and
    a failed one leaves the store as it was."""
    try:
        return only_if(held)
    except Exception as e:
        log.warning("%s: %s", held.local.dir, e)
        return False


def _beyond_buffers(usage: MemoryUsage) -> bool:
    """Whether the caches or RocksDB are past their shares: pressure that flushes, releases and
    closes answer. The write buffers' alone are the running stores' own to answer, and
    ``Keeper._write_idle_buffers``'."""
    return usage.caches_over or usage.rocksdb_over


def _bytes_held(held: KeptStore, what: str) -> int:
    """``held.store``'s byte count ``what`` (``write_buffer_bytes``, ``memtable_bytes``); 0 once
    the store was closed (released since the round began: its memory is given back)."""
    try:
        return int(getattr(held.store, what))
    except StoreClosedError:
        return 0


def _held_bytes() -> int:
    """What the memory budget's holders use now, all together."""
    usage = memory_usage()
    return usage.write_buffer_bytes + usage.cache_bytes + usage.rocksdb_bytes
