"""Checkpointed partition stores: versioned commits, changelogs and incremental snapshots.

A *partition store* is a :class:`~verstore.VersionedStore` whose durability comes from a
checkpoint location rather than from its local files, so that a task can open it on any
machine at an exact version. The protocol mirrors Spark's own RocksDB state store with
changelog checkpointing (``docs/checkpoint.md`` has the full protocol and layout):

* Version ``v`` is the state after ``v`` commits; version 0 is empty. :meth:`PartitionStore.open`
  opens exactly version ``v`` (never "latest": versions above ``v`` left by failed attempts are
  ignored and later overwritten). :meth:`PartitionStore.commit` makes ``v + 1`` durable.
* Each commit writes ``<v+1>.changelog`` atomically: the accepted writes, with the attempt that
  wrote it and the attempt that wrote ``v`` (the version chain).
* Every ``snapshot_interval`` commits, an incremental snapshot: a RocksDB checkpoint, upload of
  the immutable SST files not uploaded yet (under unique names), then the manifest, last.
* Rebuild: the newest snapshot at or below ``v`` whose attempt matches the chain, then replay of
  the later changelogs. The local copy is reused only when it is clean at exactly ``v`` and was
  written by the attempt the checkpoint records for ``v``.
* The local RocksDB runs with the write-ahead log off; it is flushed before a commit is
  recorded, and marked dirty while uncommitted work may be in it.
"""

from __future__ import annotations

import fcntl
import json
import os
import posixpath
import shutil
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from verstore._core import VersionedStore, read_changelog_header
from verstore.exceptions import (
    CorruptionError,
    IncompatibleConfigError,
    MissingVersionError,
    StoreLockedError,
    VerstoreError,
)
from verstore.location import TMP_MARK, Location

FORMAT_VERSION = 1
NO_ATTEMPT = bytes(16)
CHANGELOG_HEADER_LEN = 64

#: Called with a step name at each step of a commit. Tests install a hook that kills the
#: process there; production code never sets it.
fault_hook: Callable[[str], None] | None = None

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)`` for long rebuilds and verifies."""


def _fault(step: str) -> None:
    if fault_hook is not None:
        fault_hook(step)


@dataclass(frozen=True)
class CheckpointOptions:
    """How a partition store checkpoints.

    Attributes:
        snapshot_interval: Write an incremental snapshot every this many commits (>= 1).
        min_versions_to_retain: Cleanup keeps at least this many most recent versions
            rebuildable (>= 1).
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
        if self.snapshot_interval < 1:
            raise ValueError(f"snapshot_interval must be >= 1, got {self.snapshot_interval}")
        if self.min_versions_to_retain < 1:
            raise ValueError(
                f"min_versions_to_retain must be >= 1, got {self.min_versions_to_retain}"
            )
        if self.lock_timeout_s < 0:
            raise ValueError(f"lock_timeout_s must be >= 0, got {self.lock_timeout_s}")


# --- durable layout ------------------------------------------------------------------------------


class PartitionFiles:
    """Names of one partition's durable files under ``<root>/<store>/p=<n>/``."""

    def __init__(self, location: Location, store_name: str, partition: int) -> None:
        if not store_name or "/" in store_name or store_name.startswith("."):
            raise ValueError(f"store_name must be a plain directory name, got {store_name!r}")
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        self.location = location
        self.store_dir = location.path(store_name)
        self.dir = location.path(store_name, f"p={partition}")
        self.sst_dir = posixpath.join(self.dir, "SSTs")

    @property
    def meta(self) -> str:
        return posixpath.join(self.store_dir, "_meta.json")

    def changelog(self, version: int) -> str:
        return posixpath.join(self.dir, f"{version}.changelog")

    def snapshot(self, version: int) -> str:
        return posixpath.join(self.dir, f"{version}.snapshot")

    def listing(self) -> tuple[dict[int, Any], dict[int, Any], list[Any]]:
        """``(changelogs, snapshots, others)``: version -> FileInfo, and everything else."""
        changelogs: dict[int, Any] = {}
        snapshots: dict[int, Any] = {}
        others = []
        for info in self.location.list(self.dir):
            stem, _, suffix = info.base_name.partition(".")
            if stem.isdigit() and suffix == "changelog":
                changelogs[int(stem)] = info
            elif stem.isdigit() and suffix == "snapshot":
                snapshots[int(stem)] = info
            else:
                others.append(info)
        return changelogs, snapshots, others

    def attempt_of(self, version: int) -> bytes:
        """The attempt that wrote ``version`` (read from its changelog header)."""
        return self.attempts_of(version)[0]

    def attempts_of(self, version: int) -> tuple[bytes, bytes]:
        """``(attempt, parent attempt)`` of ``version``, from its changelog header."""
        if version == 0:
            return NO_ATTEMPT, NO_ATTEMPT
        path = self.changelog(version)
        name = self.location.describe(path)
        try:
            head = self.location.read_head(path, CHANGELOG_HEADER_LEN)
        except FileNotFoundError:
            raise MissingVersionError(
                f"version {version} is missing from {self.location.describe(self.dir)}: "
                f"no {posixpath.basename(path)}"
            ) from None
        found, attempt, parent, _count = read_changelog_header(head, name)
        if found != version:
            raise CorruptionError(f"corrupt data in {name}: header says version {found}")
        return attempt, parent


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    body = dict(manifest)
    body["checksum"] = zlib.crc32(_canonical(manifest))
    return json.dumps(body, indent=1, sort_keys=True).encode()


def decode_manifest(data: bytes, name: str) -> dict[str, Any]:
    """Parses and verifies a snapshot manifest; ``CorruptionError`` naming ``name`` otherwise."""
    try:
        body = json.loads(data)
        checksum = body.pop("checksum")
        ok = isinstance(body, dict) and zlib.crc32(_canonical(body)) == checksum
    except (ValueError, KeyError, AttributeError, TypeError):
        ok = False
    if not ok:
        raise CorruptionError(f"corrupt data in {name}: snapshot manifest does not verify")
    if body.get("format_version") != FORMAT_VERSION:
        raise CorruptionError(
            f"corrupt data in {name}: unknown manifest format {body.get('format_version')!r}"
        )
    return dict(body)


def file_crc32(path: str | os.PathLike[str]) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


# --- local directory -----------------------------------------------------------------------------


class LocalCopy:
    """``<local_dir>/<store>/p=<n>/``: an exclusive ``LOCK``, ``LOCAL.json`` and ``db/``."""

    def __init__(self, local_dir: str | os.PathLike[str], store_name: str, partition: int) -> None:
        self.dir = Path(local_dir) / store_name / f"p={partition}"
        self.db = self.dir / "db"
        self.state_file = self.dir / "LOCAL.json"
        self._lock: Any = None

    def lock(self, timeout_s: float) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.dir / "LOCK", "a+")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock = handle
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.close()
                    raise StoreLockedError(
                        f"local store directory {self.dir} is locked by another task or "
                        f"process (waited {timeout_s:g} s)"
                    ) from None
                time.sleep(0.05)

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def read_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text())
            return state if isinstance(state, dict) else {}
        except (OSError, ValueError):
            return {}

    def write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_file.with_name(f"{TMP_MARK}LOCAL.json")
        with open(tmp, "w") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_file)


# --- the partition store -------------------------------------------------------------------------


class PartitionStore:
    """One partition's store, opened at an exact version of a checkpoint.

    Use :meth:`open`, mutate :attr:`store`, then :meth:`commit` (durable version ``v + 1``) or
    :meth:`abort`. Either ends the session and releases the local directory; open the next
    version to continue (cheap: the clean local copy is reused). As a context manager, leaving
    the block without a commit aborts.
    """

    # Set by open(); declared for type checkers.
    partition: int
    version: int
    rebuilt: bool
    _location: Location
    _options: CheckpointOptions
    _files: PartitionFiles
    _local: LocalCopy
    _config: dict[str, Any]
    _num_partitions: int | None
    _store: VersionedStore | None
    _attempt: bytes
    _uploaded: dict[str, Any]

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
        storage_options: Mapping[str, Any] | None = None,
        options: CheckpointOptions | None = None,
        progress: Progress | None = None,
        num_partitions: int | None = None,
    ) -> PartitionStore:
        """Opens ``partition`` of ``store_name`` at exactly ``version``.

        Args:
            location: The checkpoint root: a path, a ``pyarrow.fs`` URI or a :class:`Location`.
            store_name: The store's directory name under the root.
            partition: The partition number, >= 0.
            version: The version to open (0 = empty); must exist in the checkpoint.
            local_dir: Where the local working copy lives.
            history_retention_ms: The store's retention; recorded on first use, checked after.
            segment_interval_ms: The store's segment interval (None: Kafka's default rule).
            storage_options: Filesystem options when ``location`` is a URI.
            options: Snapshot, retention and locking settings.
            progress: Called as ``progress("replay", done, total)`` during a rebuild.
            num_partitions: The number of partitions of the store, recorded on first use; a
                later open with another number is refused (keys would move between
                partitions and their history would be lost).

        Raises:
            ValueError: A negative version or partition, or a bad store name.
            MissingVersionError: ``version`` is not in the checkpoint.
            IncompatibleConfigError: The checkpoint was created with another configuration.
            CorruptionError: A changelog, manifest or SST needed for the rebuild is damaged.
            StoreLockedError: The local directory stayed locked for ``lock_timeout_s``.
        """
        if version < 0:
            raise ValueError(f"version must be >= 0, got {version}")
        self = object.__new__(cls)
        self._location = (
            location
            if isinstance(location, Location)
            else Location.resolve(location, storage_options)
        )
        self._options = options or CheckpointOptions()
        self._files = PartitionFiles(self._location, store_name, partition)
        self._local = LocalCopy(local_dir, store_name, partition)
        self._config = {
            "history_retention_ms": history_retention_ms,
            "segment_interval_ms": segment_interval_ms,
        }
        self._num_partitions = num_partitions
        self.partition = partition
        self.version = version
        self.rebuilt = False
        self._store = None
        self._local.lock(self._options.lock_timeout_s)
        try:
            self._check_meta(version)
            self._attempt, parent = self._files.attempts_of(version)
            state = self._local.read_state()
            if (
                state.get("clean")
                and state.get("version") == version
                and state.get("attempt") == self._attempt.hex()
                and self._local.db.is_dir()
                and self._parent_still_on_chain(version, parent)
            ):
                self._uploaded = state.get("uploaded", {})
                self._store = self._open_local()
            else:
                self._rebuild(version, progress)
            # Uncommitted work may reach the local files from here on.
            self._write_local_state(clean=False)
        except BaseException:
            self._release()
            raise
        return self

    # -- public ---------------------------------------------------------------------------------

    @property
    def store(self) -> VersionedStore:
        """The open store. Raises ``StoreClosedError`` after commit or abort."""
        if self._store is None:
            from verstore.exceptions import StoreClosedError

            raise StoreClosedError("the partition store was committed or aborted")
        return self._store

    def commit(self) -> int:
        """Makes the current state durable as version ``version + 1`` and ends the session.

        Returns:
            The new version.
        """
        store = self.store
        new_version = self.version + 1
        attempt = uuid.uuid4().bytes
        try:
            store.flush()
            data = store.take_changelog(new_version, attempt, self._attempt)
            _fault("before_changelog")
            self._location.write_atomic(self._files.changelog(new_version), data)
            _fault("after_changelog")
            if new_version % self._options.snapshot_interval == 0:
                self._snapshot(new_version, attempt)
            self.version, self._attempt = new_version, attempt
            self._write_local_state(clean=True)
            _fault("after_local_state")
            if new_version % self._options.snapshot_interval == 0:
                cleanup(self._files, self._options)
        finally:
            self._release()
        return new_version

    def abort(self) -> None:
        """Drops the uncommitted work and ends the session (the next open rebuilds)."""
        self._release()

    close = abort

    def __enter__(self) -> PartitionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release()

    # -- internals -----------------------------------------------------------------------------

    def _release(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._local.unlock()

    def _parent_still_on_chain(self, version: int, parent: bytes) -> bool:
        """Whether ``version``'s parent is still the attempt recorded for ``version - 1``. A
        version whose parent was rewritten by a retry is off the chain: rebuilding it reports
        the break instead of serving the superseded state. Below a cleanup base the changelog
        of ``version - 1`` is gone and there is nothing left to contradict."""
        if version == 0:
            return True
        try:
            return parent == self._files.attempt_of(version - 1)
        except MissingVersionError:
            return True

    def _open_local(self) -> VersionedStore:
        return VersionedStore(
            self._local.db,
            history_retention_ms=self._config["history_retention_ms"],
            segment_interval_ms=self._config["segment_interval_ms"],
            write_ahead_log=False,
            record_changes=True,
        )

    def _write_local_state(self, *, clean: bool) -> None:
        self._local.write_state(
            {
                "version": self.version,
                "attempt": self._attempt.hex(),
                "clean": clean,
                "uploaded": self._uploaded,
            }
        )

    def _check_meta(self, version: int) -> None:
        loc = self._location
        wanted = {
            "format_version": FORMAT_VERSION,
            "history_retention_ms": self._config["history_retention_ms"],
            "segment_interval_ms": self._config["segment_interval_ms"],
        }
        if self._num_partitions is not None:
            wanted["num_partitions"] = self._num_partitions
        try:
            meta = json.loads(loc.read_bytes(self._files.meta))
        except FileNotFoundError:
            if version != 0:
                raise MissingVersionError(
                    f"version {version} is missing: {loc.describe(self._files.store_dir)} "
                    "holds no verstore checkpoint"
                ) from None
            loc.write_atomic(self._files.meta, json.dumps(wanted, indent=1).encode())
            return
        except ValueError:
            raise CorruptionError(
                f"corrupt data in {loc.describe(self._files.meta)}: not JSON"
            ) from None
        for key, value in wanted.items():
            if key == "num_partitions" and meta.get(key) is None:
                continue  # recorded by a later version of the meta file only
            if meta.get(key) != value:
                raise IncompatibleConfigError(
                    f"checkpoint {loc.describe(self._files.store_dir)} was created with "
                    f"{key}={meta.get(key)!r}, cannot open it with {key}={value!r}"
                )

    def _rebuild(self, version: int, progress: Progress | None) -> None:
        self.rebuilt = True
        files = self._files
        changelogs, snapshots, _ = files.listing()
        # Until this rebuild completes, db/ matches no version: a failed rebuild must not leave
        # LOCAL.json saying the copy is clean at the version it held before.
        self._local.write_state({"clean": False})
        shutil.rmtree(self._local.db, ignore_errors=True)
        base, base_attempt, uploaded = 0, NO_ATTEMPT, {}
        for candidate in sorted((v for v in snapshots if v <= version), reverse=True):
            name = self._location.describe(files.snapshot(candidate))
            manifest = decode_manifest(self._location.read_bytes(files.snapshot(candidate)), name)
            if manifest["attempt"] != files.attempt_of(candidate).hex():
                continue  # written by an attempt whose changelog was superseded
            uploaded = self._download(manifest)
            base, base_attempt = candidate, bytes.fromhex(manifest["attempt"])
            break
        self._uploaded = uploaded
        store = self._store = self._open_local()
        parent = base_attempt
        total = version - base
        for v in range(base + 1, version + 1):
            path = files.changelog(v)
            name = self._location.describe(path)
            if v not in changelogs and not self._location.exists(path):
                raise MissingVersionError(
                    f"version {v} is missing from {self._location.describe(files.dir)} "
                    f"(needed to rebuild version {version}): no {posixpath.basename(path)}"
                )
            data = self._location.read_bytes(path)
            found, attempt, claimed_parent, _count = read_changelog_header(data, name)
            if found != v:
                raise CorruptionError(f"corrupt data in {name}: header says version {found}")
            if claimed_parent != parent:
                raise CorruptionError(
                    f"corrupt data in {name}: broken version chain, its parent attempt is "
                    f"{claimed_parent.hex()} but version {v - 1} was written by {parent.hex()}"
                )
            store.apply_changelog(data, name=name, chunk_records=self._options.replay_chunk_records)
            parent = attempt
            if progress is not None:
                progress("replay", v - base, total)
        self._attempt = parent

    def _download(self, manifest: dict[str, Any]) -> dict[str, Any]:
        db = self._local.db
        db.mkdir(parents=True)
        uploaded = {}
        for entry in manifest["files"]:
            durable = posixpath.join(self._files.dir, entry["durable"])
            target = db / entry["name"]
            name = self._location.describe(durable)
            try:
                self._location.download(durable, str(target))
            except FileNotFoundError:
                raise CorruptionError(
                    f"corrupt data in {name}: file referenced by snapshot "
                    f"{manifest['version']} is missing"
                ) from None
            size = target.stat().st_size
            if size != entry["size"] or file_crc32(target) != entry["crc32"]:
                raise CorruptionError(
                    f"corrupt data in {name}: size or checksum differs from snapshot "
                    f"{manifest['version']}'s manifest"
                )
            if entry["name"].endswith(".sst"):
                uploaded[entry["name"]] = {"durable": entry["durable"], "size": size}
        return uploaded

    def _snapshot(self, version: int, attempt: bytes) -> None:
        tmp = self._local.dir / f"{TMP_MARK}checkpoint-{uuid.uuid4().hex}"
        self.store.create_checkpoint(tmp)
        try:
            entries = []
            uploaded = {}
            for path in sorted(tmp.iterdir()):
                size = path.stat().st_size
                known = self._uploaded.get(path.name)
                if path.suffix == ".sst" and known and known["size"] == size:
                    durable = known["durable"]
                    crc = known.get("crc32")
                    if crc is None:
                        crc = file_crc32(path)
                else:
                    durable = f"SSTs/{uuid.uuid4().hex}-{path.name}"
                    crc = file_crc32(path)
                    self._location.upload(str(path), posixpath.join(self._files.dir, durable))
                    _fault("during_snapshot_upload")
                entries.append({"name": path.name, "durable": durable, "size": size, "crc32": crc})
                if path.suffix == ".sst":
                    uploaded[path.name] = {"durable": durable, "size": size, "crc32": crc}
            manifest = {
                "format_version": FORMAT_VERSION,
                "version": version,
                "attempt": attempt.hex(),
                "files": entries,
            }
            _fault("before_manifest")
            self._location.write_atomic(self._files.snapshot(version), encode_manifest(manifest))
            _fault("after_manifest")
            self._uploaded = uploaded
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# --- cleanup -------------------------------------------------------------------------------------


def cleanup(files: PartitionFiles, options: CheckpointOptions) -> list[str]:
    """Deletes what no retained version needs; returns the deleted paths.

    The newest ``min_versions_to_retain`` versions stay rebuildable: the newest snapshot at or
    below the oldest retained version is kept (the base), with every changelog from the base on
    and every later snapshot. Older changelogs and snapshots go, and so do SST files no kept
    manifest references, once older than ``orphan_grace_s`` (an upload of an attempt still in
    flight is younger). Without any usable base nothing is deleted but old temporary files.
    """
    loc = files.location
    changelogs, snapshots, others = files.listing()
    deleted: list[str] = []
    now = time.time()

    def old_enough(info: Any) -> bool:
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return now - mtime >= options.orphan_grace_s

    for info in others:
        if info.base_name.startswith(TMP_MARK) and old_enough(info):
            loc.delete(info.path)
            deleted.append(info.path)
    if not changelogs:
        return deleted
    newest = max(changelogs)
    oldest_retained = max(0, newest - options.min_versions_to_retain + 1)
    manifests: dict[int, dict[str, Any]] = {}
    for v in sorted(snapshots, reverse=True):
        try:
            path = snapshots[v].path
            manifests[v] = decode_manifest(loc.read_bytes(path), loc.describe(path))
        except (FileNotFoundError, CorruptionError):
            return deleted  # a damaged or vanished manifest: delete nothing it might need
    # The base must be usable: written by the attempt the chain records for its version.
    base = None
    for v in sorted((v for v in manifests if v <= oldest_retained), reverse=True):
        try:
            if manifests[v]["attempt"] == files.attempt_of(v).hex():
                base = v
                break
        except (MissingVersionError, CorruptionError):
            continue
    if base is None:
        return deleted
    for v in [v for v in changelogs if v < base]:
        loc.delete(changelogs[v].path)
        deleted.append(changelogs[v].path)
    for v in [v for v in snapshots if v < base]:
        loc.delete(snapshots[v].path)
        deleted.append(snapshots[v].path)
    referenced = {
        entry["durable"] for v, m in manifests.items() if v >= base for entry in m["files"]
    }
    for info in loc.list(files.sst_dir):
        if f"SSTs/{info.base_name}" not in referenced and old_enough(info):
            loc.delete(info.path)
            deleted.append(info.path)
    return deleted


__all__ = [
    "CheckpointOptions",
    "Location",
    "PartitionFiles",
    "PartitionStore",
    "VerstoreError",
    "cleanup",
]
