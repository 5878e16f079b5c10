"""``PartitionStore``: one partition of a checkpointed store, opened at an exact version.

Open resolves the version against the partition's version graph (``chain``) and gets that
commit's state into the local copy: the store this process kept open, or the copy reused,
caught up or rebuilt (``restore``). Commit writes one changelog under a name no other attempt
can use: that write is the commit point. Everything after it (``maintenance``) is an
optimisation that a later open does without, so its failures are logged and made up for
later, never raised. The steps: docs/checkpoint.md, "Open" and "Commit".
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from verstore._core import VersionedStore
from verstore.checkpoint import faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.kept import Keeper, KeptStore
from verstore.checkpoint.layout import (
    MAX_VERSION,
    ROOT,
    CommitRef,
    LineageFiles,
    Listing,
    PartitionFiles,
)
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.local import READER_MARK, LocalCopy, LocalState, SavedBuffer
from verstore.checkpoint.maintenance import AfterCommit, after_commit, snapshot_due
from verstore.checkpoint.partitionings import Partitioning, StoreConfig
from verstore.checkpoint.restore import (
    check_not_behind_local,
    commits_to_catch_up,
    replay,
    restore_base,
)
from verstore.checkpoint.session import (
    CheckpointOptions,
    CommitStats,
    Deferred,
    OpenStats,
    Progress,
)
from verstore.checkpoint.settings import StoreSettings, check_or_create
from verstore.exceptions import (
    CorruptionError,
    FencedError,
    MissingVersionError,
    StoreClosedError,
)
from verstore.location import TMP_MARK, Location

log = logging.getLogger("verstore.checkpoint")


class PartitionStore:
    """One partition's store, opened at an exact version of a checkpoint.

    Use :meth:`open`, read and write :attr:`store`, then :meth:`commit` (durable version
    ``version + 1``) or :meth:`abort`. Either ends the session and releases the local directory.
    As a context manager, leaving the block without a commit aborts.
    """

    partition: int
    version: int
    lineage: str
    read_only: bool
    stats: OpenStats
    commit_stats: CommitStats | None
    _location: Location
    _options: CheckpointOptions
    _files: PartitionFiles
    #: What the local copy must hold to be reused: this lineage (and partitioning).
    _copy_of: str
    _local: LocalCopy
    _settings: StoreSettings
    #: The settings of the partitioning opened (its stores' retention, interval and TTL).
    _config: StoreConfig
    _graph: Graph
    _serving: CommitRef
    _attempt: bytes
    _store: VersionedStore | None
    _uploaded: dict[str, Any]
    _memory_limit_mb: int | None
    _pinned: Partitioning | None
    #: Where a commit leaves the store open for the next task (None: it closes it).
    _keeper: Keeper | None
    #: Whether the keeper counts this session as a task holding a store (``Keeper.take``),
    #: until it keeps the store or ends (``_end_keeper_task``).
    _keeper_task: bool

    def __init__(self) -> None:  # use open()
        raise TypeError("use PartitionStore.open(...)")

    @classmethod
    def open(
        cls,
        location: str | Location,
        store_name: str,
        partition: int,
        version: int,
        local_dir: str | os.PathLike[str],
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        latest_ttl_ms: int | None = None,
        lineage: str = "default",
        storage_options: Mapping[str, Any] | None = None,
        options: CheckpointOptions | None = None,
        progress: Progress | None = None,
        num_partitions: int | None = None,
        columns: ColumnLayout | None = None,
        read_only: bool = False,
        memory_limit_mb: int | None = None,
        partitioning: Partitioning | None = None,
        keeper: Keeper | None = None,
    ) -> PartitionStore:
        """Opens ``partition`` of ``store_name`` at exactly ``version``.

        Version ``v`` is the state after every commit of versions ``<= v`` on the lineage's
        winning chain; a version without a commit of its own (a micro-batch in which this
        partition ran no task) has the state of the version below it, and version 0 is empty.

        Args:
            location: The checkpoint root: a path, a ``pyarrow.fs`` URI or a :class:`Location`.
            store_name: The store's directory name under the root.
            partition: The partition number, >= 0.
            version: The version to open, >= 0; :meth:`commit` makes ``version + 1``.
            local_dir: Where the local working copy lives.
            history_retention_ms: The store's retention; recorded on first use, checked after.
            segment_interval_ms: The store's segment interval (None: Kafka's default rule).
            latest_ttl_ms: The time-to-live of keys' newest versions (docs/semantics.md
                §2.15), recorded on first use and checked after: a lineage keeps the TTL it
                was created with, or none. None: keys never expire.
            lineage: Whose state this is (in Spark, the query id): each lineage has its own
                directory and never reads or deletes another's.
            storage_options: Filesystem options when ``location`` is a URI.
            options: Snapshot, retention and locking settings.
            progress: Called as ``progress("replay", done, total)`` during a rebuild.
            num_partitions: The store's number of partitions, recorded on first use and checked
                after (keys would move between partitions and lose their history; a
                repartition, ``verstore.checkpoint.repartition``, moves them).
            columns: How keys and values are encoded, recorded and checked likewise.
            read_only: Open for reading only (an operator tool or a reader): nothing is
                recorded, the state is rebuilt in a private directory that is removed at
                :meth:`abort` (the working copy in ``local_dir`` is left as it is), and
                :meth:`commit` is refused.
            memory_limit_mb: A cap on the store's own memory (its write buffer and caches,
                see ``VersionedStore``) within the process's memory budget
                (``verstore.set_memory_limit``); None: no cap of its own.
            partitioning: Open the partition in this partitioning (a repartition's, which
                reads the one it replaces and writes one it has not published yet:
                ``verstore.checkpoint.repartition``). None: the lineage's partitioning that
                serves ``version``, as the settings say.
            keeper: Keep the store open after :meth:`commit`, for the next task of this
                partition in this process, and take it from there if the keeper holds it
                (``verstore.checkpoint.kept``). Ignored by a read-only open.

        Raises:
            ValueError: A bad version, partition, store name or lineage, or (for writing) a
                location whose storage offers no conditional create.
            FencedError: The lineage has committed versions beyond ``version + 1``: this is a
                stale attempt (a zombie), or the query's checkpoint was rolled back.
            MissingVersionError: ``version`` is older than what cleanup kept, or (read-only)
                the lineage does not exist.
            IncompatibleConfigError: The lineage was created with other settings.
            IncompatibleFormatError: The store holds state of an older checkpoint format.
            CorruptionError: A file needed to open the version is damaged, naming it.
            StoreLockedError: The local directory stayed locked for ``lock_timeout_s``.
        """
        _check_version(version)
        self = object.__new__(cls)
        started = time.monotonic()
        if not isinstance(location, Location):
            location = Location.resolve(location, storage_options)
        if not read_only:
            location.require_conditional_create()
        lineage_files = LineageFiles(location, store_name, lineage)
        self._files = lineage_files.partition(partition)  # until _locate finds its partitioning
        self._options = options or CheckpointOptions()
        self._settings = StoreSettings(
            history_retention_ms,
            segment_interval_ms,
            num_partitions,
            columns,
            latest_ttl_ms=latest_ttl_ms,
        )
        self._local = LocalCopy(local_dir, store_name, lineage, partition)
        self._start(location, partition, version, lineage, read_only, memory_limit_mb)
        self._pinned = partitioning
        self._keeper = None if read_only else keeper
        try:
            kept = self._take_or_lock()
        except BaseException:
            self._end_keeper_task()
            raise
        try:
            self._open_locked(lineage_files, progress, kept)
        except BaseException:
            try:
                self._end_untaken(kept)
            finally:
                self._release_quietly("the failed open")
            raise
        self.stats.seconds = time.monotonic() - started
        return self

    def _take_or_lock(self) -> KeptStore | None:
        """The store the keeper holds for the local copy, with its lock, if it holds one;
        else takes the lock (a reader none)."""
        kept = None
        if self._keeper is not None:
            self._keeper_task = True
            kept = self._keeper.take(self._local.dir)
        if kept is not None:
            self._local = kept.local  # its lock is held
        elif self.read_only:
            # A reader takes no lock: it would make a worker hand over the query's kept store.
            self._local.dir.mkdir(parents=True, exist_ok=True)
        else:
            self._local.lock(self._options.lock_timeout_s)
        return kept

    def _start(
        self,
        location: Location,
        partition: int,
        version: int,
        lineage: str,
        read_only: bool,
        memory_limit_mb: int | None,
    ) -> None:
        """The rest of the session's state, before the lock is taken."""
        self._location = location
        self.partition, self.version, self.lineage = partition, version, lineage
        self.read_only = read_only
        self._memory_limit_mb = memory_limit_mb
        self.stats = OpenStats()
        self.commit_stats = None
        self._store = None
        self._uploaded = {}
        self._attempt = layout.new_attempt()
        self._keeper_task = False

    def _open_locked(
        self, lineage_files: LineageFiles, progress: Progress | None, kept: KeptStore | None
    ) -> None:
        """The open, with the local directory locked: settings, the version graph, the state."""
        if self.read_only:
            # A reader never disturbs the working copy: it builds its state privately.
            self._local.db = self._local.dir / f"{READER_MARK}{uuid.uuid4().hex}"
        else:
            self._local.remove_temporaries()
        listing = self._locate(lineage_files, self._settings)
        self._graph = Graph(self._files, listing)
        self._check_not_fenced()
        self._serving = self._graph.serving(self.version)
        self.stats.commit = self._serving
        still_dirty = self._load(progress, kept)
        if not self.read_only and not still_dirty:
            # Uncommitted work may reach the local files from here on.
            self._local.write_state(LocalState.dirty(self._copy_of, self._serving, self._uploaded))
        if not self.read_only:
            self._local.remove_buffers()  # LOCAL.json names none now: a loaded one is in the store

    def _locate(self, lineage_files: LineageFiles, wanted: StoreSettings) -> Listing:
        """Checks the settings and finds the partition's directory in the partitioning that
        serves the version. What this process remembers of the settings may be stale (a
        repartition since): a repartition's mark in the directory, or a directory without a
        commit (a partition the remembered count may not have), has them read again."""
        for fresh in (False, True):
            self._settings = check_or_create(
                lineage_files, wanted, create=not self.read_only, fresh=fresh
            )
            partitioning = self._pinned or self._settings.partitioning_at(self.version)
            # Its stores are opened with its own settings: a version before a change of
            # settings is read with those it was written with.
            self._config = partitioning.config or self._settings.config
            self._check_partitioning(lineage_files, partitioning)
            self._files = partitioning.files(lineage_files, self.partition)
            # A local copy is of one partitioning's partition: another's p=<n> holds other keys.
            self._copy_of = (
                f"{self.lineage}/{partitioning.dir}" if partitioning.id else self.lineage
            )
            listing = self._files.listing()
            maybe_stale = listing.repartitioning or not listing.commits
            if fresh or self._pinned or not maybe_stale:
                break
        count = partitioning.num_partitions
        if count is not None and self.partition >= count:
            raise MissingVersionError(
                f"store {lineage_files.store_name!r} has {count} partitions from version "
                f"{partitioning.version} on: there is no partition {self.partition}"
            )
        return listing

    def _check_partitioning(self, lineage_files: LineageFiles, partitioning: Partitioning) -> None:
        """A write goes to the newest partitioning (or a repartition's own)."""
        newest = self._settings.partitioning
        if not self.read_only and partitioning.id < newest.id:
            raise FencedError(
                f"store {lineage_files.store_name!r} at "
                f"{lineage_files.location.describe(lineage_files.dir)} was repartitioned "
                f"at version {newest.version}, so version {self.version} cannot be written "
                "again: this attempt is stale (a zombie), or the query was rolled back to a "
                "checkpoint older than the repartition"
            )

    def _check_not_fenced(self) -> None:
        """A lineage with versions beyond ``version + 1`` fences this attempt off."""
        tip = self._graph.tip()
        if not self.read_only and tip.version > self.version + 1:
            raise FencedError(
                f"{self._files.describe()} has version {tip.version} committed, so version "
                f"{self.version} cannot be written again: this attempt is stale (a zombie), or "
                "the query was rolled back to an older checkpoint, which needs a new store"
            )

    # -- public ---------------------------------------------------------------------------------

    @property
    def store(self) -> VersionedStore:
        """The open store. Raises ``StoreClosedError`` after commit or abort."""
        if self._store is None:
            raise StoreClosedError("the partition store was committed or aborted")
        return self._store

    @property
    def opened(self) -> CommitRef:
        """The commit whose state was opened (version 0 and no attempt: the empty state)."""
        return self._serving

    @property
    def attempt(self) -> bytes:
        """This attempt's id: :meth:`commit` writes version ``version + 1`` under it."""
        return self._attempt

    @property
    def keeps_open(self) -> bool:
        """Whether :meth:`commit` leaves the store open in a keeper rather than closing it."""
        return self._keeper is not None

    @property
    def rebuilt(self) -> bool:
        """Whether the open rebuilt the local copy from the checkpoint."""
        return self.stats.rebuilt

    @property
    def settings(self) -> StoreSettings:
        """The lineage's recorded settings, with every column layout it recorded (a value
        schema evolution the open asked for included: ``verstore.checkpoint.values``)."""
        return self._settings

    def commit(self) -> int:
        """Makes the current state durable as version ``version + 1`` and ends the session.

        The changelog write is the commit: once it returned, the version is durable, and a
        failure of anything after it (the local copy's bookkeeping, a snapshot, cleanup) is
        logged and made up for later.

        Returns:
            The new version.

        Raises:
            StoreClosedError: The session already ended.
            VerstoreError: A read-only store.
        """
        store = self.store
        if self.read_only:
            raise FencedError("a read-only partition store cannot commit")
        new = CommitRef(self.version + 1, self._attempt)
        stats = self.commit_stats = CommitStats(version=new.version)
        # The changelog goes from the store's spool to a local file, then up in pieces: a
        # commit never holds its writes in memory.
        local = self._local.dir / f"{TMP_MARK}changelog-{uuid.uuid4().hex}"
        try:
            if self._keeper is None:
                store.flush()  # else the keeper flushes it after the task (_keep)
            header = store.take_changelog(local, new.version, new.attempt, self._serving.attempt)
            stats.records = header.record_count
            faults.step("before_changelog")
            self._location.write_new_from(self._files.changelog(new, self._serving), str(local))
            stats.changelog_bytes = local.stat().st_size
        except BaseException:
            self._release_quietly("the failed commit")
            raise
        finally:
            local.unlink(missing_ok=True)
        if self._keeper is not None:
            try:
                self._keep(store, new, stats)
            finally:
                self._end_keeper_task()  # when the store was not kept (keep ends the task)
            return new.version
        try:
            faults.step("after_changelog")
            self._serving = new
            self._uploaded = self._after_commit(store, new, self._uploaded, stats)
        finally:
            if not self._release_quietly(f"committed version {new.version}"):
                stats.deferred.append(Deferred.CLOSE)
        return new.version

    def _keep(self, store: VersionedStore, new: CommitRef, stats: CommitStats) -> None:
        """Hands the committed store, and the lock, to the keeper; what a commit does after
        its changelog runs there, off the task's path: when a snapshot is due, a flush and
        ``maintenance.after_commit``; else nothing until the keeper settles the store (flush,
        ``LOCAL.json`` clean) when it stays idle, is handed over or closed. A snapshot overdue
        by a whole interval (the keeper's were lost) is taken here, on the task's path."""
        try:
            faults.step("after_changelog")
        except BaseException:
            self._release_quietly(f"committed version {new.version}")
            raise
        held = KeptStore(
            self._local.transfer(),  # the lock goes with the store
            store,
            self._copy_of,
            new,
            self._uploaded,
            self._memory_limit_mb,
            stats,
            AfterCommit(
                self._location,
                self._files,
                self._copy_of,
                self._graph,
                self.stats.commit,
                new,
                self._options,
                stats,
            ),
        )
        opened, interval = self.stats.commit, self._options.snapshot_interval
        self._serving, self._store = new, None
        if snapshot_due(self._graph, opened, 2 * interval):
            # Snapshots deferred to the keeper were lost twice over (workers that die right
            # after their tasks): this one is taken here, so that rebuilds and cleanup progress.
            try:
                held.run_work()
            except Exception as e:
                log.warning("%s: the overdue snapshot failed: %s", self._files.describe(), e)
                stats.deferred.append(Deferred.SNAPSHOT)
                held.drop()
                return
            except BaseException:
                held.drop()
                raise
        assert self._keeper is not None
        self._keeper_task = False
        self._keeper.keep(held)

    def _after_commit(
        self, store: VersionedStore, new: CommitRef, uploaded: dict[str, Any], stats: CommitStats
    ) -> dict[str, Any]:
        """``maintenance.after_commit`` of commit ``new``, made on the commit this session
        opened; returns the copy's upload map afterwards."""
        return after_commit(
            store,
            self._location,
            self._files,
            self._local,
            self._copy_of,
            graph=self._graph,
            opened=self.stats.commit,
            new=new,
            uploaded=uploaded,
            options=self._options,
            stats=stats,
        )

    def abort(self) -> None:
        """Drops the uncommitted work and ends the session (the next open rebuilds).

        A store that fails to close is logged, not raised: the work is dropped either way, the
        local copy is marked for a rebuild and its lock is released.
        """
        self._release_quietly("the aborted session")

    def __enter__(self) -> PartitionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release_quietly("the session")

    # -- open ------------------------------------------------------------------------------------

    def _load(self, progress: Progress | None, kept: KeptStore | None) -> bool:
        """Puts the serving commit's state into the local copy: the kept store, if it holds
        the serving commit or an ancestor, else reuse, catch up or rebuild. Returns whether
        ``LOCAL.json`` already says the copy is dirty."""
        if kept is not None:
            above = self._kept_store_behind(kept)
            if above is not None:
                return self._adopt(kept, above, progress)
            kept.end()  # the copy on disk is now what it held
        state = self._local.read_state()
        check_not_behind_local(state, self._copy_of, self._graph, self._files, self._local.dir)
        above = None
        if not self.read_only:
            self._local.use_db(state)
            above = commits_to_catch_up(
                state, self._copy_of, self._local.db, self._graph, self._serving
            )
        if above is None:
            self._rebuild(progress)
            return False
        self._uploaded = state.uploaded
        if above or state.buffer is not None:
            # From the first replayed record on, db/ is no longer the commit LOCAL.json
            # names: a replay that fails half way must not leave it looking clean. Nor may a
            # loaded buffer, which any close of the store from here on writes into db/: the
            # copy named with it would apply it twice.
            self._local.write_state(LocalState.changing(self._copy_of, state.uploaded))
        self._store = self._open_clean_copy(state.buffer)
        if self._store is None:
            self._rebuild(progress)
            return False
        if above:
            self._replay(above, progress)
        else:
            self.stats.reused = True
        return False

    def _open_clean_copy(self, buffer: SavedBuffer | None) -> VersionedStore | None:
        """Opens the local copy that ``LOCAL.json`` says is clean, with the write buffer saved
        beside it when it names one; None when its files are damaged (RocksDB's, or a saved
        buffer that is missing or not what was saved). The copy is a cache of the checkpoint:
        damaged files (a failing disk, a file system that lost writes in a crash) are rebuilt,
        not a task failing at every retry on the same files. Damage found later, by a read,
        fails the task; its copy is dirty by then, so the retry rebuilds."""
        try:
            store = self._open_local()
        except CorruptionError as e:
            self._warn_damaged(e)
            return None
        if buffer is None:
            return store
        try:
            store.load_buffer(self._local.dir / buffer.name, buffer.size, buffer.crc32)
        except CorruptionError as e:
            store.close()
            self._warn_damaged(e)
            return None
        except BaseException:
            with contextlib.suppress(Exception):  # the error on its way is the one to report
                store.close()
            raise
        self.stats.saved_buffer_bytes = buffer.size
        return store

    def _warn_damaged(self, e: CorruptionError) -> None:
        log.warning(
            "%s: the local copy %s is damaged; rebuilding it from the checkpoint: %s",
            self._files.describe(),
            self._local.db,
            e,
        )

    def _end_untaken(self, kept: KeptStore | None) -> None:
        """Ends the kept store of an open that failed before it took or ended it (keeping the
        lock, which :meth:`_release` then releases); a failure to close is logged."""
        if kept is None:
            return
        try:
            kept.end()
        except Exception as e:
            log.warning(
                "%s: closing the store of the failed open failed; the local copy will be "
                "rebuilt: %s",
                self._files.describe(),
                e,
            )

    def _kept_store_behind(self, kept: KeptStore) -> list[CommitRef] | None:
        """The commits a kept store must replay to serve the version (none: it holds the
        serving commit), or None when it cannot serve it (another copy, memory cap, or a
        commit off the serving chain)."""
        if kept.copy_of != self._copy_of or kept.memory_limit_mb != self._memory_limit_mb:
            return None
        state = LocalState.clean_at(kept.copy_of, kept.commit, kept.uploaded)
        return commits_to_catch_up(state, self._copy_of, self._local.db, self._graph, self._serving)

    def _adopt(self, kept: KeptStore, above: list[CommitRef], progress: Progress | None) -> bool:
        """Takes the kept store into this session and catches it up by replaying ``above``.
        Returns whether ``LOCAL.json`` says the copy is dirty."""
        clean = kept.take()
        self._store, self._uploaded = kept.store, kept.uploaded
        self.stats.kept_open = True
        self.stats.previous_commit = kept.stats
        if not above:
            self.stats.reused = True
            return not clean
        self._local.write_state(LocalState.changing(self._copy_of, kept.uploaded))
        self._replay(above, progress)
        return True

    def _rebuild(self, progress: Progress | None) -> None:
        self.stats.rebuilt = self._serving != ROOT  # the empty state is a start, not a rebuild
        # Until this rebuild completes, db/ matches no commit.
        if self.read_only:
            shutil.rmtree(self._local.db, ignore_errors=True)
        else:
            self._local.write_state(LocalState.changing(self._copy_of))
            self._local.fresh_db()  # under a new name: see local.py
        self._uploaded, above = restore_base(
            self._location, self._files, self._graph, self._serving, self._local.db, self.stats
        )
        self._store = self._open_local()
        faults.step("during_rebuild")
        self._replay(above, progress)

    def _replay(self, refs: list[CommitRef], progress: Progress | None) -> None:
        replay(
            self.store,
            self._location,
            self._graph,
            refs,
            scratch=self._local.dir,
            chunk_records=self._options.replay_chunk_records,
            stats=self.stats,
            progress=progress,
        )

    def _open_local(self) -> VersionedStore:
        return VersionedStore(
            self._local.db,
            history_retention_ms=self._config.history_retention_ms,
            segment_interval_ms=self._config.segment_interval_ms,
            latest_ttl_ms=self._config.latest_ttl_ms,
            write_ahead_log=False,
            record_changes=not self.read_only,
            memory_limit_mb=self._memory_limit_mb,
        )

    # -- the end of a session --------------------------------------------------------------------

    def _release(self) -> None:
        """Closes the store and releases the lock, whatever fails: a lock left held makes the
        next task on this executor wait ``lock_timeout_s`` and fail.

        A store that fails to close may have left ``db/`` anywhere, so the local copy is marked
        dirty (rebuilt at the next open) before the lock goes.
        """
        store, self._store = self._store, None
        try:
            if store is not None:
                store.close()
        except BaseException:
            if not self.read_only:
                self._local.forget()
            raise
        finally:
            # The keeper hears that the task ended whatever the unlock does: a count left
            # above zero would stop its early flushes for the life of the process.
            try:
                if self.read_only:
                    shutil.rmtree(self._local.db, ignore_errors=True)
                self._local.unlock()
            finally:
                self._end_keeper_task()

    def _end_keeper_task(self) -> None:
        """Tells the keeper, once, that this session holds no store of it any more."""
        if self._keeper_task:
            self._keeper_task = False
            assert self._keeper is not None
            self._keeper.end_task()

    def _release_quietly(self, what: str) -> bool:
        """:meth:`_release`, logging a failure of ``Exception`` kind instead of raising it (an
        error already on its way, or a commit already durable, is what the caller reports);
        returns whether it closed cleanly."""
        try:
            self._release()
        except Exception as e:
            log.warning(
                "%s: closing the store of %s failed; the local copy will be rebuilt: %s",
                self._files.describe(),
                what,
                e,
            )
            return False
        return True


def _check_version(version: int) -> None:
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"version must be an int, got {version!r}")
    if not 0 <= version < MAX_VERSION:
        raise ValueError(f"version must be >= 0 and < 2**63 - 1, got {version}")


__all__ = ["CheckpointOptions", "CommitStats", "OpenStats", "PartitionStore", "Progress"]
