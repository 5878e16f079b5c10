"""What a lineage records once and checks on every open: its settings (``_meta.json``).

``_meta.json`` holds the settings that decide how stored bytes are read (history retention,
segment interval, partition count, the tuple encoding and the Arrow type of every column);
opening a lineage with other settings is an :class:`IncompatibleConfigError` naming both. The
settings read include every column layout (``layouts.py``) and partitioning
(``partitionings.py``) the lineage recorded. Every file is written once by a conditional create
and is hostile input when read. The format and rules: docs/checkpoint.md, "`_meta.json`".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from verstore._checks import whole
from verstore.checkpoint.layout import (
    FORMAT_VERSION,
    LineageFiles,
    PartitionFiles,
    read_record,
)
from verstore.checkpoint.layouts import (
    ColumnLayout,
    check_encoding,
    evolution_path,
    evolution_problem,
    read_evolutions,
)
from verstore.checkpoint.partitionings import Partitioning, StoreConfig, read_partitionings
from verstore.exceptions import (
    CorruptionError,
    IncompatibleConfigError,
    IncompatibleFormatError,
    MissingVersionError,
)


@dataclass(frozen=True)
class StoreSettings:
    """What a lineage records and checks."""

    history_retention_ms: int
    segment_interval_ms: int | None
    num_partitions: int | None = None
    columns: ColumnLayout | None = None
    #: Every column layout the lineage recorded, by id (0: ``_meta.json``'s); ``columns`` is
    #: the newest. Empty when the caller gives the columns it wants (not compared).
    layouts: tuple[ColumnLayout, ...] = field(default=(), compare=False)
    #: Every partitioning the lineage recorded, oldest first (``Partitioning``);
    #: ``num_partitions`` is the newest's count. Empty in the settings a caller wants.
    partitionings: tuple[Partitioning, ...] = field(default=(), compare=False)
    #: The time-to-live of keys' newest versions (docs/semantics.md §2.15); None: none.
    latest_ttl_ms: int | None = None

    @property
    def config(self) -> StoreConfig:
        """The settings the newest partitioning's stores are opened with."""
        return StoreConfig(self.history_retention_ms, self.segment_interval_ms, self.latest_ttl_ms)

    def partitioning_at(self, version: int) -> Partitioning:
        """The partitioning that serves ``version``: the newest one that starts at or below it."""
        found = [p for p in self.partitionings if p.version <= version]
        return found[-1] if found else Partitioning(0, self.num_partitions, config=self.config)

    @property
    def partitioning(self) -> Partitioning:
        """The newest partitioning: where the query's next versions are written."""
        if self.partitionings:
            return self.partitionings[-1]
        return Partitioning(0, self.num_partitions, config=self.config)

    def to_json(self, files: LineageFiles) -> dict[str, Any]:
        body = {
            "format_version": FORMAT_VERSION,
            "store": files.store_name,
            "lineage": files.lineage,
            "history_retention_ms": self.history_retention_ms,
            "segment_interval_ms": self.segment_interval_ms,
            "num_partitions": self.num_partitions,
            "columns": self.columns.to_json() if self.columns else None,
        }
        if self.latest_ttl_ms is not None:
            # A lineage with a TTL is format 3: an older verstore refuses it rather than
            # rebuild its stores without the TTL (and serve the keys it ended).
            body["format_version"] = META_FORMAT_WITH_TTL
            body["latest_ttl_ms"] = self.latest_ttl_ms
        return body


#: The format of the ``_meta.json`` of a lineage with a latest TTL (every other file, and the
#: ``_meta.json`` of a lineage without one, is ``FORMAT_VERSION``).
META_FORMAT_WITH_TTL = 3

#: A settings file larger than this is not a settings file (a hostile one must not exhaust
#: memory).
META_LIMIT = 1 << 20

_verified: dict[tuple[str, str], StoreSettings] = {}
_verified_lock = threading.Lock()


def read_settings(files: LineageFiles) -> StoreSettings | None:
    """The lineage's recorded settings, or ``None`` when it has no ``_meta.json`` yet.

    Raises:
        CorruptionError: The file is not a valid settings object.
        IncompatibleFormatError: Another layout version wrote it, or its keys and values are in
            another version of the tuple encoding.
    """
    name = files.location.describe(files.meta)
    try:
        meta = read_record(files.location, files.meta, META_LIMIT, "a settings file")
    except FileNotFoundError:
        return None
    if not isinstance(meta, dict):
        raise CorruptionError(f"corrupt data in {name}: not a JSON object")
    if not whole(meta.get("format_version"), 0):
        raise CorruptionError(f"corrupt data in {name}: no format_version")
    if meta["format_version"] not in (FORMAT_VERSION, META_FORMAT_WITH_TTL):
        raise IncompatibleFormatError(
            f"{name} was written by checkpoint format {meta['format_version']}; this "
            f"verstore reads formats {FORMAT_VERSION} and {META_FORMAT_WITH_TTL}"
        )
    ttl = meta.get("latest_ttl_ms")
    with_ttl = meta["format_version"] == META_FORMAT_WITH_TTL
    if (ttl is not None or with_ttl) and not (with_ttl and whole(ttl, 1, 2**63)):
        raise CorruptionError(f"corrupt data in {name}: latest_ttl_ms and format_version disagree")
    interval, partitions = meta.get("segment_interval_ms"), meta.get("num_partitions")
    if not (
        whole(meta.get("history_retention_ms"), 0)
        and (interval is None or whole(interval, 1))
        and (partitions is None or whole(partitions, 1, 2**31))
    ):
        raise CorruptionError(f"corrupt data in {name}: settings of the wrong type or range")
    columns = None
    if meta.get("columns") is not None:
        columns = ColumnLayout.from_json(meta["columns"])
        if columns is None:
            raise CorruptionError(f"corrupt data in {name}: malformed 'columns'")
        check_encoding(name, columns.encoding)
    layouts = (columns, *read_evolutions(files, columns, META_LIMIT)) if columns is not None else ()
    created = StoreConfig(meta["history_retention_ms"], meta["segment_interval_ms"], ttl)
    partitionings = read_partitionings(files, Partitioning(0, partitions, config=created))
    # The settings in force are the newest partitioning's: a change of settings records them.
    newest = partitionings[-1].config or created
    return StoreSettings(
        newest.history_retention_ms,
        newest.segment_interval_ms,
        partitionings[-1].num_partitions,
        layouts[-1] if layouts else None,
        layouts,
        tuple(partitionings),
        newest.latest_ttl_ms,
    )


def check_or_create(
    files: LineageFiles, wanted: StoreSettings, *, create: bool, fresh: bool = False
) -> StoreSettings:
    """Records ``wanted`` for a new lineage, or checks it against what the lineage recorded,
    recording a value schema evolution when ``wanted`` asks for one (see the module).

    Args:
        files: The lineage.
        wanted: The settings of the caller.
        create: Whether a missing lineage may be created, or an evolution recorded (False for
            read-only opens).
        fresh: Read the files again even when this process verified ``wanted`` before (a
            repartition may have recorded a new partitioning since).

    Returns:
        The lineage's settings, with every layout it recorded.

    Raises:
        IncompatibleConfigError: The lineage was created with other settings, or its values
            cannot evolve into the wanted ones.
        IncompatibleFormatError: The store holds state of an older checkpoint format.
        MissingVersionError: The lineage does not exist and ``create`` is False.
        CorruptionError: The settings file is damaged.
    """
    key = (files.location.describe(files.meta), json.dumps(wanted.to_json(files), sort_keys=True))
    with _verified_lock:
        if key in _verified and not fresh:
            return _verified[key]
    stored = read_settings(files)
    if stored is None:
        stored = _create(files, wanted, create=create)
    _compare(files, stored, wanted)
    if wanted.columns is not None and stored.columns != wanted.columns:
        stored = _evolve(files, stored, wanted.columns, create=create)
    with _verified_lock:
        _verified[key] = stored
    return stored


def check(files: LineageFiles, wanted: StoreSettings) -> StoreSettings | None:
    """The checks of :func:`check_or_create`, recording nothing: the lineage's settings, or None
    when it has none yet (a query that has not opened the store).

    Raises:
        IncompatibleConfigError: As :func:`check_or_create`.
        CorruptionError: The settings file is damaged.
    """
    stored = read_settings(files)
    if stored is None:
        return None
    _compare(files, stored, wanted)
    if wanted.columns is not None and stored.columns != wanted.columns:
        _evolve(files, stored, wanted.columns, create=False)
    return stored


def _create(files: LineageFiles, wanted: StoreSettings, *, create: bool) -> StoreSettings:
    loc = files.location
    if loc.exists(files.format1_meta):
        raise IncompatibleFormatError(
            f"{loc.describe(files.store_dir)} holds a store of checkpoint format 1, which "
            f"this verstore does not read: give this query another store name or root, "
            "or delete that directory to start the store over"
        )
    if not create:
        raise MissingVersionError(
            f"{loc.describe(files.dir)} holds no state of lineage {files.lineage!r}"
        )
    try:
        loc.create_new(files.meta, json.dumps(wanted.to_json(files), indent=1).encode())
    except FileExistsError:
        pass  # another task of the lineage created it first: the caller compares settings
    return read_settings(files) or wanted


def _evolve(
    files: LineageFiles, stored: StoreSettings, wanted: ColumnLayout, *, create: bool
) -> StoreSettings:
    """``stored`` with ``wanted`` recorded as its newest layout.

    Raises:
        IncompatibleConfigError: A value of some recorded layout cannot be read as ``wanted``.
    """
    for layout in stored.layouts:
        problem = evolution_problem(layout, wanted)
        if problem is not None:
            raise IncompatibleConfigError(
                f"store {files.store_name!r} at {files.location.describe(files.dir)} holds "
                f"keys and values encoded as {layout.describe()}; this query encodes "
                f"{wanted.describe()}: {problem}"
            )
    if not create:
        return stored
    layout_id = len(stored.layouts)
    body = {"format_version": FORMAT_VERSION, "id": layout_id, "columns": wanted.to_json()}
    try:
        files.location.create_new(evolution_path(files, layout_id), json.dumps(body).encode())
    except FileExistsError:
        pass  # another query recorded layout ``layout_id`` first: the same one, or an error
    evolved = read_settings(files)
    if evolved is None or evolved.columns != wanted:
        raise IncompatibleConfigError(
            f"store {files.store_name!r}: another query recorded a different layout "
            f"{layout_id} at the same time"
        )
    return evolved


#: What an error about a changed setting adds, by setting: the command that makes the change
#: and keeps the history (a new store name would start empty: its history would be gone).
_REWRITE = (
    ": to change it and keep the store's history, stop the query, run "
    "verstore.spark.change_store_settings(spark, checkpoint_root, {store!r}, {change}, "
    "checkpoint_location=...) and restart it with the new value; or restart it with "
    "{setting}={have!r} (docs/spark.md, Changing a running query)"
)
_CHANGE_HINTS = {
    "num_partitions": ": stop the query and run verstore.spark.repartition_store to move its "
    "state to the new count (docs/spark.md, Changing a running query)",
    "history_retention_ms": _REWRITE,
    "segment_interval_ms": _REWRITE,
    "latest_ttl_ms": _REWRITE,
}
#: The argument of ``change_store_settings`` that changes a setting.
_ARGUMENTS = {
    "history_retention_ms": "history_retention",
    "segment_interval_ms": "segment_interval",
    "latest_ttl_ms": "latest_ttl",
}


def _compare(files: LineageFiles, stored: StoreSettings, wanted: StoreSettings) -> None:
    where = files.location.describe(files.dir)
    pairs: list[tuple[str, Any, Any]] = [
        ("history_retention_ms", stored.history_retention_ms, wanted.history_retention_ms),
        ("segment_interval_ms", stored.segment_interval_ms, wanted.segment_interval_ms),
        ("latest_ttl_ms", stored.latest_ttl_ms, wanted.latest_ttl_ms),
    ]
    if wanted.num_partitions is not None:
        pairs.append(("num_partitions", stored.num_partitions, wanted.num_partitions))
    for setting, have, want in pairs:
        if have != want:
            change = f"{_ARGUMENTS.get(setting, setting)}={want!r}"
            if setting == "latest_ttl_ms" and want is None:
                change = "remove_latest_ttl=True"
            hint = _CHANGE_HINTS.get(setting, "").format(
                store=files.store_name, change=change, setting=setting, have=have
            )
            raise IncompatibleConfigError(
                f"store {files.store_name!r} at {where} has {setting}={have!r}, "
                f"cannot open it with {setting}={want!r}{hint}"
            )
    if wanted.columns is not None and stored.columns is None:
        raise IncompatibleConfigError(
            f"store {files.store_name!r} at {where} holds keys and values encoded as no "
            f"recorded columns; this query encodes {wanted.columns.describe()}: use another "
            "store name for the new layout"
        )


def every_partition(
    files: LineageFiles, settings: StoreSettings | None
) -> Iterator[tuple[Partitioning, int, PartitionFiles]]:
    """Every partition directory of every partitioning a lineage recorded (only the first
    when its settings are unknown), oldest partitioning first."""
    found = settings.partitionings if settings is not None and settings.partitionings else ()
    for partitioning in found or (Partitioning(0, None),):
        for partition in partitioning.partitions(files):
            yield partitioning, partition, partitioning.files(files, partition)


__all__ = [
    "META_FORMAT_WITH_TTL",
    "StoreSettings",
    "check",
    "check_or_create",
    "every_partition",
    "read_settings",
]
