"""``PartitionStore``: one partition of a checkpointed store, opened at an exact version.

Open resolves the version against the partition's version graph (``chain.py``), then reuses the
local copy when it holds exactly that commit, catches it up by replaying changelogs when it
holds an ancestor, and rebuilds it from a snapshot plus changelogs otherwise. Commit writes one
changelog under a name no other attempt can use: that write is the commit point. Everything
after it (marking the local copy clean, a snapshot, cleanup) is an optimisation that a later
open does without, so its failures are logged and retried later, never raised.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pyarrow.fs import FileType

from verstore._core import CHANGELOG_HEADER_LEN, VersionedStore, read_changelog_header
from verstore.checkpoint import faults, layout
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.cleanup import cleanup
from verstore.checkpoint.layout import (
    MAX_VERSION,
    ROOT,
    CommitRef,
    LineageFiles,
    PartitionFiles,
)
from verstore.checkpoint.local import LocalCopy, LocalState
from verstore.checkpoint.manifest import (
    MANIFEST_LIMIT,
    Manifest,
    ManifestFile,
    file_crc32,
    is_durable_name,
    missing_files,
    read_manifest,
)
from verstore.checkpoint.meta import ColumnLayout, StoreSettings, check_or_create
from verstore.exceptions import (
    CorruptionError,
    FencedError,
    MissingVersionError,
    StoreClosedError,
)
from verstore.location import TMP_MARK, Location

log = logging.getLogger("verstore.checkpoint")

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)`` for long rebuilds and verifies."""


@dataclass(frozen=True)
class CheckpointOptions:
    """How a partition store checkpoints.

    Attributes:
        snapshot_interval: Take an incremental snapshot once this many commits of the chain
            have no snapshot (>= 1).
        min_versions_to_retain: Cleanup keeps the newest this many versions rebuildable
            (>= 2: a retry of the last micro-batch reopens the version before it).
        lock_timeout_s: How long :meth:`PartitionStore.open` waits for the local directory lock
            before raising ``StoreLockedError``.
        orphan_grace_s: Cleanup deletes unreferenced uploads (leftovers of failed attempts) only
            when they are older than this, so an upload still in flight is never removed.
        replay_chunk_records: Records applied per atomic write during replay.
    """

    snapshot_interval: int = 10
    min_versions_to_retain: int = 100
    lock_timeout_s: float = 60.0
    orphan_grace_s: float = 3600.0
    replay_chunk_records: int = 65_536

    def __post_init__(self) -> None:
        def whole(name: str, low: int) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

        whole("snapshot_interval", 1)
        whole("replay_chunk_records", 1)
        if isinstance(self.min_versions_to_retain, int) and self.min_versions_to_retain == 1:
            raise ValueError(
                "min_versions_to_retain must be >= 2, got 1: a retry of the last micro-batch "
                "reopens the version before it"
            )
        whole("min_versions_to_retain", 2)
        for name in ("lock_timeout_s", "orphan_grace_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


@dataclass
class OpenStats:
    """How an open got its state, for metrics.

    Attributes:
        commit: The commit whose state was opened (version 0: the empty state).
        reused: The local copy held exactly that commit.
        rebuilt: The local copy was rebuilt from the checkpoint.
        snapshot: The snapshot a rebuild started from (None: from the empty state).
        replayed: Changelogs replayed (a rebuild, or catching up a local copy).
        replayed_bytes: Their total size.
        downloaded_bytes: Snapshot bytes downloaded.
        seconds: Time the open took.
    """

    commit: CommitRef = ROOT
    reused: bool = False
    rebuilt: bool = False
    snapshot: CommitRef | None = None
    replayed: int = 0
    replayed_bytes: int = 0
    downloaded_bytes: int = 0
    seconds: float = 0.0


@dataclass
class CommitStats:
    """What a commit wrote, for metrics."""

    version: int = 0
    records: int = 0
    changelog_bytes: int = 0
    snapshot: bool = False
    snapshot_uploaded_bytes: int = 0
    deleted_files: int = 0
    deferred: list[str] = field(default_factory=list)


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
    _local: LocalCopy
    _settings: StoreSettings
    _graph: Graph
    _serving: CommitRef
    _attempt: bytes
    _store: VersionedStore | None
    _uploaded: dict[str, Any]
    _memory_limit_mb: int | None

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
        lineage: str = "default",
        storage_options: Mapping[str, Any] | None = None,
        options: CheckpointOptions | None = None,
        progress: Progress | None = None,
        num_partitions: int | None = None,
        columns: ColumnLayout | None = None,
        read_only: bool = False,
        memory_limit_mb: int | None = None,
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
            lineage: Whose state this is (in Spark, the query id): each lineage has its own
                directory and never reads or deletes another's.
            storage_options: Filesystem options when ``location`` is a URI.
            options: Snapshot, retention and locking settings.
            progress: Called as ``progress("replay", done, total)`` during a rebuild.
            num_partitions: The store's number of partitions, recorded on first use and checked
                after (keys would move between partitions and lose their history).
            columns: How keys and values are encoded, recorded and checked likewise.
            read_only: Open for reading only (an operator tool or a reader): nothing is
                recorded, the state is rebuilt in a private directory that is removed at
                :meth:`abort` (the working copy in ``local_dir`` is left as it is), and
                :meth:`commit` is refused.
            memory_limit_mb: The store's own memory (RocksDB's memtables and its cache of
                latest values, see ``VersionedStore``); None for the store's defaults.

        Raises:
            ValueError: A bad version, partition, store name or lineage.
            FencedError: The lineage has committed versions beyond ``version + 1``: this is a
                stale attempt (a zombie), or the query's checkpoint was rolled back.
            MissingVersionError: ``version`` is older than what cleanup kept, or (read-only)
                the lineage does not exist.
            IncompatibleConfigError: The lineage was created with other settings.
            IncompatibleFormatError: The store holds state of an older checkpoint format.
            CorruptionError: A file needed to open the version is damaged, naming it.
            StoreLockedError: The local directory stayed locked for ``lock_timeout_s``.
        """
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"version must be an int, got {version!r}")
        if not 0 <= version < MAX_VERSION:
            raise ValueError(f"version must be >= 0 and < 2**63 - 1, got {version}")
        self = object.__new__(cls)
        started = time.monotonic()
        self._location = (
            location
            if isinstance(location, Location)
            else Location.resolve(location, storage_options)
        )
        lineage_files = LineageFiles(self._location, store_name, lineage)
        self._files = lineage_files.partition(partition)
        self._options = options or CheckpointOptions()
        self._settings = StoreSettings(
            history_retention_ms, segment_interval_ms, num_partitions, columns
        )
        self._local = LocalCopy(local_dir, store_name, lineage, partition)
        self.partition, self.version, self.lineage = partition, version, lineage
        self.read_only = read_only
        self._memory_limit_mb = memory_limit_mb
        self.stats = OpenStats()
        self.commit_stats = None
        self._store = None
        self._uploaded = {}
        self._attempt = layout.new_attempt()
        self._local.lock(self._options.lock_timeout_s)
        try:
            self._local.remove_temporaries()
            if read_only:
                # A reader never disturbs the working copy: it builds its state privately.
                self._local.db = self._local.dir / f"{TMP_MARK}read-only-db"
            check_or_create(lineage_files, self._settings, create=not read_only)
            self._graph = Graph(self._files, self._files.listing())
            tip = self._graph.tip()
            if not read_only and tip.version > version + 1:
                raise FencedError(
                    f"{self._files.describe()} has version {tip.version} committed, so version "
                    f"{version} cannot be written again: this attempt is stale (a zombie), or "
                    "the query was rolled back to an older checkpoint, which needs a new store"
                )
            self._serving = self._graph.serving(version)
            self.stats.commit = self._serving
            self._load(progress)
            if not read_only:
                # Uncommitted work may reach the local files from here on.
                self._local.write_state(
                    LocalState(lineage, self._serving, clean=False, uploaded=self._uploaded)
                )
        except BaseException:
            self._release_quietly("the failed open")
            raise
        self.stats.seconds = time.monotonic() - started
        return self

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
    def rebuilt(self) -> bool:
        """Whether the open rebuilt the local copy from the checkpoint."""
        return self.stats.rebuilt

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
            store.flush()
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
        try:
            faults.step("after_changelog")
            self._after_commit(new, stats)
        finally:
            if not self._release_quietly(f"committed version {new.version}"):
                stats.deferred.append("closing the store")
        return new.version

    def abort(self) -> None:
        """Drops the uncommitted work and ends the session (the next open rebuilds).

        A store that fails to close is logged, not raised: the work is dropped either way, the
        local copy is marked for a rebuild and its lock is released.
        """
        self._release_quietly("the aborted session")

    close = abort

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

    def _load(self, progress: Progress | None) -> None:
        """Puts the serving commit's state into the local copy: reuse, catch up or rebuild."""
        state = self._local.read_state()
        graph, serving = self._graph, self._serving
        self._check_not_behind_local(state)
        usable = (
            not self.read_only
            and state.clean
            and state.lineage == self.lineage
            and state.commit is not None
            and self._local.db.is_dir()
        )
        if usable and state.commit == serving:
            self._uploaded = state.uploaded
            self._store = self._open_local()
            self.stats.reused = True
            return
        chain = list(graph.walk(serving))
        if usable and state.commit in chain:
            above = chain[: chain.index(state.commit)]
            if all(ref in graph.commits for ref in above):
                self._uploaded = state.uploaded
                # From the first replayed record on, db/ is no longer the commit LOCAL.json
                # names: a replay that fails half way must not leave it looking clean.
                self._local.write_state(
                    LocalState(self.lineage, None, clean=False, uploaded=state.uploaded)
                )
                self._store = self._open_local()
                self._replay(list(reversed(above)), progress)
                return
        self._rebuild(progress)

    def _check_not_behind_local(self, state: LocalState) -> None:
        """A clean local copy of a commit the checkpoint no longer has, with nothing newer in
        the checkpoint, means durable files were lost: say so instead of serving older state."""
        held = state.commit
        if (
            state.clean
            and state.lineage == self.lineage
            and held is not None
            and held != ROOT
            and held not in self._graph.commits
            and self._graph.tip().version < held.version
        ):
            raise MissingVersionError(
                f"{self._files.describe()} does not have version {held.version} (attempt "
                f"{held.attempt.hex()}), which the local copy {self._local.dir} holds: the "
                "checkpoint lost committed files. Restore them, or delete the local copy and "
                "the store's checkpoint directory to start the store over"
            )

    def _rebuild(self, progress: Progress | None) -> None:
        graph, serving = self._graph, self._serving
        self.stats.rebuilt = serving != ROOT  # the empty state is a start, not a rebuild
        # Until this rebuild completes, db/ matches no commit.
        if not self.read_only:
            self._local.write_state(LocalState(self.lineage, None, clean=False))
        shutil.rmtree(self._local.db, ignore_errors=True)
        chain = list(graph.walk(serving))
        failures: list[CorruptionError] = []
        base = None
        for candidate in graph.snapshots_on(serving):
            try:
                self._uploaded = self._download(candidate)
                base = candidate
                break
            except CorruptionError as e:
                log.warning("snapshot unusable, trying an older one: %s", e)
                failures.append(e)
                shutil.rmtree(self._local.db, ignore_errors=True)
        if base is None:
            if not graph.ends_at_root(serving):
                if failures:
                    raise failures[0]
                raise MissingVersionError(f"no snapshot of {self._files.describe()} is usable")
            self._uploaded = {}
            above = chain[: chain.index(ROOT)]
        else:
            self.stats.snapshot = base
            above = chain[: chain.index(base)]
        self._store = self._open_local()
        faults.step("during_rebuild")
        self._replay(list(reversed(above)), progress)

    def _replay(self, refs: list[CommitRef], progress: Progress | None) -> None:
        """Applies the changelogs of ``refs`` (oldest first), checking each against its name."""
        store = self.store
        loc = self._location
        local = self._local.dir / f"{TMP_MARK}replay-{uuid.uuid4().hex}"
        for done, ref in enumerate(refs, 1):
            commit = self._graph.commits[ref]
            name = loc.describe(commit.path)
            try:
                # Downloaded whole, replayed in chunks: memory holds one chunk, not the file.
                loc.download(commit.path, str(local))
                with open(local, "rb") as head:
                    header = read_changelog_header(head.read(CHANGELOG_HEADER_LEN), name)
                if (header.version, header.attempt, header.parent_attempt) != (
                    ref.version,
                    ref.attempt,
                    commit.parent.attempt,
                ):
                    raise CorruptionError(
                        f"corrupt data in {name}: its header names another commit than its "
                        "file name"
                    )
                chunk = self._options.replay_chunk_records
                store.apply_changelog(local, name=name, chunk_records=chunk)
                self.stats.replayed_bytes += local.stat().st_size
            finally:
                local.unlink(missing_ok=True)
            self.stats.replayed += 1
            if progress is not None:
                progress("replay", done, len(refs))

    def _download(self, ref: CommitRef) -> dict[str, Any]:
        loc, files = self._location, self._files
        path = self._graph.snapshots[ref].path
        try:
            manifest = read_manifest(loc, path, ref)
        except FileNotFoundError:
            # Listed, then removed: a snapshot found to name a lost file (see _check_snapshot).
            raise CorruptionError(
                f"corrupt data in {loc.describe(path)}: snapshot manifest is gone"
            ) from None
        db = self._local.db
        db.mkdir(parents=True)
        uploaded = {}
        for entry in manifest.files:
            durable = files.durable(entry.durable)
            target = db / entry.name
            where = loc.describe(durable)
            try:
                # Never more than the manifest's size: a file that grew is not read to its end.
                size, crc = loc.fetch(durable, str(target), entry.size)
            except FileNotFoundError:
                raise CorruptionError(
                    f"corrupt data in {where}: file of snapshot {ref.version} is missing"
                ) from None
            except OSError:
                if loc.filesystem.get_file_info(durable).type == FileType.File:
                    raise  # a storage error
                raise CorruptionError(
                    f"corrupt data in {where}: file of snapshot {ref.version} is not a file"
                ) from None
            if size != entry.size or crc != entry.crc32:
                raise CorruptionError(
                    f"corrupt data in {where}: size or checksum differs from snapshot "
                    f"{ref.version}'s manifest"
                )
            self.stats.downloaded_bytes += size
            if entry.is_sst:
                uploaded[entry.name] = {
                    "durable": entry.durable,
                    "size": entry.size,
                    "crc32": entry.crc32,
                }
        return uploaded

    def _open_local(self) -> VersionedStore:
        return VersionedStore(
            self._local.db,
            history_retention_ms=self._settings.history_retention_ms,
            segment_interval_ms=self._settings.segment_interval_ms,
            write_ahead_log=False,
            record_changes=not self.read_only,
            memory_limit_mb=self._memory_limit_mb,
        )

    # -- after the commit point ------------------------------------------------------------------

    def _after_commit(self, new: CommitRef, stats: CommitStats) -> None:
        def deferred(what: str, error: Exception) -> None:
            stats.deferred.append(what)
            log.warning(
                "%s: version %d is committed; %s failed and is retried later: %s",
                self._files.describe(),
                new.version,
                what,
                error,
            )

        self._serving = new
        try:
            self._local.write_state(LocalState(self.lineage, new, True, self._uploaded))
        except Exception as e:
            deferred("marking the local copy clean", e)
            return
        faults.step("after_local_state")
        if not self._snapshot_due():
            return
        try:
            stats.snapshot_uploaded_bytes = self._snapshot(new)
            stats.snapshot = True
            self._local.write_state(LocalState(self.lineage, new, True, self._uploaded))
        except Exception as e:
            deferred("the snapshot", e)
            return
        try:
            faults.step("before_cleanup")
            stats.deleted_files = len(cleanup(self._files, self._options))
        except Exception as e:
            deferred("cleanup", e)

    def _snapshot_due(self) -> bool:
        """Whether the new commit and its ancestors down to the newest snapshot (or the empty
        state) number ``snapshot_interval``. Counting the chain, not versions, keeps the cadence
        when versions are sparse, and makes a failed snapshot due again at the next commit."""
        unsnapshotted = 1  # the new commit
        for ref in self._graph.walk(self.stats.commit):
            if unsnapshotted >= self._options.snapshot_interval:
                break
            if ref in self._graph.snapshots or ref == ROOT:
                break
            unsnapshotted += 1
        return unsnapshotted >= self._options.snapshot_interval

    def _snapshot(self, new: CommitRef) -> int:
        """Uploads the files of a RocksDB checkpoint not uploaded yet, then the manifest."""
        loc, files = self._location, self._files
        tmp = self._local.dir / f"{TMP_MARK}checkpoint-{uuid.uuid4().hex}"
        self.store.create_checkpoint(tmp)
        uploaded_bytes = 0
        try:
            entries = []
            uploaded = {}
            reusable = self._still_uploaded()
            for path in sorted(tmp.iterdir()):
                size = path.stat().st_size
                known = reusable.get(path.name)
                if path.suffix == ".sst" and known and known.get("size") == size:
                    durable, crc = known["durable"], known["crc32"]
                else:
                    durable = f"{layout.SST_DIR}/{uuid.uuid4().hex}-{path.name}"
                    crc = file_crc32(path)
                    loc.upload(str(path), files.durable(durable))
                    uploaded_bytes += size
                    faults.step("during_snapshot_upload")
                entries.append(ManifestFile(path.name, durable, size, crc))
                if path.suffix == ".sst":
                    uploaded[path.name] = {"durable": durable, "size": size, "crc32": crc}
            manifest = Manifest(new, tuple(entries))
            faults.step("before_manifest")
            loc.write_new(files.snapshot(new), manifest.encode())
            faults.step("after_manifest")
            self._check_snapshot(manifest)
            self._uploaded = uploaded
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return uploaded_bytes

    def _check_snapshot(self, manifest: Manifest) -> None:
        """Checks, after the manifest is written, that every file it names is still there.

        A reused upload was checked once before the snapshot began; an attempt whose cleanup
        listed no manifest naming it may have deleted it since. A manifest naming a lost file is
        no snapshot: it is removed, and the snapshot fails (it is due again at the next commit).
        """
        missing = missing_files(self._location, self._files, manifest)
        if not missing:
            return
        path = self._files.snapshot(manifest.ref)
        self._location.delete(path)
        raise OSError(
            f"{self._location.describe(path)} names a file that is gone "
            f"({self._location.describe(missing[0])}: deleted since the snapshot reused "
            "it, as a concurrent attempt's cleanup may); "
            "the snapshot is removed"
        )

    def _still_uploaded(self) -> dict[str, Any]:
        """The entries of the local copy's upload map whose files are still in the checkpoint.

        An upload is deleted once no kept manifest references it, and a local copy that caught
        up after a long absence may remember uploads of a snapshot cleanup has since removed:
        referencing those would make a snapshot that cannot be restored.
        """
        known = {
            name: entry
            for name, entry in self._uploaded.items()
            if is_durable_name(entry.get("durable"))
            and isinstance(entry.get("size"), int)
            and isinstance(entry.get("crc32"), int)
        }
        if not known:
            return {}
        paths = [self._files.durable(e["durable"]) for e in known.values()]
        infos = self._location.filesystem.get_file_info(paths)
        return {
            name: entry
            for (name, entry), info in zip(known.items(), infos, strict=True)
            if info.size == entry["size"]
        }

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
            if self.read_only:
                shutil.rmtree(self._local.db, ignore_errors=True)
            self._local.unlock()

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


__all__ = ["MANIFEST_LIMIT", "CheckpointOptions", "CommitStats", "OpenStats", "PartitionStore"]
