"""What a lineage records once and checks on every open: its settings and partitionings.

``_meta.json`` holds the settings that decide how stored bytes are read (history retention,
segment interval, partition count, the tuple encoding and the Arrow type of every column);
opening a lineage with other settings is an :class:`IncompatibleConfigError` naming both.
``_columns-<id>.json`` records each value layout a schema evolution added, and
``_partitioning-<id>.json`` each partition count a repartition published, from the version it
serves. Every one is written once by a conditional create and is hostile input when read. The
formats and rules: docs/checkpoint.md, "`_meta.json`" and "Repartitioning".
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from verstore._checks import whole
from verstore._core import TUPLE_ENCODING
from verstore.checkpoint.layout import (
    FORMAT_VERSION,
    REPARTITION_MARK,
    LineageFiles,
    PartitionFiles,
    read_record,
)
from verstore.exceptions import (
    CorruptionError,
    IncompatibleConfigError,
    IncompatibleFormatError,
    MissingVersionError,
)

#: Records past this many are not read (a hostile directory must not make opens endless).
MAX_PARTITIONINGS = 1000
RECORD_LIMIT = 64 << 10
_DIR_RE = re.compile(r"partitioning-([1-9][0-9]{0,3})-[0-9a-f]{16}")


@dataclass(frozen=True)
class StoreConfig:
    """The settings a partition's stores are opened with: how their bytes are kept and read.

    A lineage's first partitioning has those of ``_meta.json``; a rewrite under other settings
    (``verstore.spark.change_store_settings``) records new ones with its partitioning.
    """

    history_retention_ms: int
    segment_interval_ms: int | None = None
    latest_ttl_ms: int | None = None

    def describe(self) -> str:
        ttl = "" if self.latest_ttl_ms is None else f" latest_ttl_ms={self.latest_ttl_ms}"
        return (
            f"history_retention_ms={self.history_retention_ms} "
            f"segment_interval_ms={self.segment_interval_ms}{ttl}"
        )


@dataclass(frozen=True)
class Partitioning:
    """The partitions of a lineage from ``version`` on.

    Attributes:
        id: 0 for the count of ``_meta.json``, then 1, 2, ... per repartition.
        num_partitions: The partition count (``None``: the lineage recorded none).
        version: The first version this partitioning serves.
        dir: Its directory relative to the lineage's (``""`` for partitioning 0).
        config: The settings its stores are written and read with (None: not known yet, in
            a partitioning made before the lineage's settings were read).
    """

    id: int
    num_partitions: int | None
    version: int = 0
    dir: str = ""
    config: StoreConfig | None = None

    def files(self, lineage: LineageFiles, partition: int) -> PartitionFiles:
        """The directory of ``partition`` in this partitioning."""
        return lineage.partition(partition, self.dir)

    def partitions(self, lineage: LineageFiles) -> list[int]:
        """Its partitions that have a directory."""
        return lineage.partitions(self.dir)


def every_partition(
    files: LineageFiles, settings: StoreSettings | None
) -> Iterator[tuple[Partitioning, int, PartitionFiles]]:
    """Every partition directory of every partitioning a lineage recorded (only the first
    when its settings are unknown), oldest partitioning first."""
    found = settings.partitionings if settings is not None and settings.partitionings else ()
    for partitioning in found or (Partitioning(0, None),):
        for partition in partitioning.partitions(files):
            yield partitioning, partition, partitioning.files(files, partition)


def record_path(files: LineageFiles, partitioning_id: int) -> str:
    return posixpath.join(files.dir, f"_partitioning-{partitioning_id}.json")


def new_dir(partitioning_id: int) -> str:
    """A fresh directory name for partitioning ``partitioning_id``: a repartition that failed
    before its publish leaves its directory behind, and the next attempt must not write into it."""
    return f"partitioning-{partitioning_id}-{os.urandom(8).hex()}"


def read_partitionings(files: LineageFiles, first: Partitioning) -> list[Partitioning]:
    """``first`` and every partitioning recorded after it, oldest first.

    Raises:
        CorruptionError: A record is damaged, too large, or contradicts its predecessor.
    """
    out = [first]
    records = _numbered(files, record_path, RECORD_LIMIT, "partitioning record", MAX_PARTITIONINGS)
    for partitioning_id, name, obj in records:
        out.append(_decode(name, obj, partitioning_id, out[-1]))
    _check_no_gap(files, len(out))
    return out


def _numbered(
    files: LineageFiles,
    path_of: Callable[[LineageFiles, int], str],
    limit: int,
    what: str,
    most: int,
) -> Iterator[tuple[int, str, Any]]:
    """``(id, file name, JSON)`` of the records numbered 1, 2, ... until one is missing: a
    lineage's records written once each, one id after the other.

    Raises:
        CorruptionError: A record is too large or not JSON, or there are over ``most``.
    """
    for record_id in range(1, most + 1):
        path = path_of(files, record_id)
        try:
            obj = read_record(files.location, path, limit, f"a {what}")
        except FileNotFoundError:
            return
        yield record_id, files.location.describe(path), obj
    raise CorruptionError(f"{files.location.describe(files.dir)} holds over {most} {what}s")


_RECORD_RE = re.compile(r"_partitioning-([1-9][0-9]{0,3})\.json")


def _check_no_gap(files: LineageFiles, missing: int) -> None:
    """Records are read by id until one is missing: a later one beyond it means a record was
    lost, and the partitioning in force would silently be an older one."""
    for info in files.location.list(files.dir):
        match = _RECORD_RE.fullmatch(info.base_name)
        if match and int(match.group(1)) > missing:
            raise CorruptionError(
                f"{files.location.describe(files.dir)} holds {info.base_name} but not "
                f"_partitioning-{missing}.json: a repartition's record is missing"
            )


#: The fields of every partitioning record, and those a record of a change of settings adds.
_RECORD_FIELDS = {"format_version", "id", "num_partitions", "version", "dir"}
_CONFIG_FIELDS = {"history_retention_ms", "segment_interval_ms", "latest_ttl_ms"}


def _decode(name: str, obj: Any, partitioning_id: int, before: Partitioning) -> Partitioning:
    known = (_RECORD_FIELDS, _RECORD_FIELDS | _CONFIG_FIELDS)
    if not isinstance(obj, dict) or set(obj) not in known:
        raise CorruptionError(f"corrupt data in {name}: not a partitioning record")
    config = _decode_config(name, obj) if _CONFIG_FIELDS <= set(obj) else before.config
    count, version, where = obj["num_partitions"], obj["version"], obj["dir"]
    match = _DIR_RE.fullmatch(where) if isinstance(where, str) else None
    if not (
        obj["format_version"] == FORMAT_VERSION
        and obj["id"] == partitioning_id
        and whole(count, 1, 2**31)
        and whole(version, max(before.version, 1), 2**63 - 1)
        and match is not None
        and int(match.group(1)) == partitioning_id
    ):
        raise CorruptionError(
            f"corrupt data in {name}: not the record of partitioning {partitioning_id} starting "
            f"at or after version {before.version}: a field of the wrong type or range"
        )
    return Partitioning(partitioning_id, count, version, where, config)


def _decode_config(name: str, obj: dict[str, Any]) -> StoreConfig:
    """The settings a record of a change of settings holds (hostile input: checked)."""
    retention, interval = obj["history_retention_ms"], obj["segment_interval_ms"]
    ttl = obj["latest_ttl_ms"]
    if not (
        whole(retention, 0)
        and (interval is None or whole(interval, 1))
        and (ttl is None or whole(ttl, 1))
    ):
        raise CorruptionError(f"corrupt data in {name}: settings of the wrong type or range")
    return StoreConfig(retention, interval, ttl)


def publish(files: LineageFiles, partitioning: Partitioning, *, with_config: bool = False) -> None:
    """Writes ``partitioning``'s record: the step that makes it the lineage's. The record is a
    conditional create (``Location.create_new``): of two repartitions that publish the same id
    at the same moment, exactly one succeeds. ``with_config``: the record also holds the
    partitioning's settings (a change of settings; other records keep those before them, and
    stay readable by releases that predate changes of settings).

    Raises:
        FileExistsError: Another repartition published this id first.
    """
    body: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "id": partitioning.id,
        "num_partitions": partitioning.num_partitions,
        "version": partitioning.version,
        "dir": partitioning.dir,
    }
    if with_config:
        if partitioning.config is None:
            raise ValueError("a record of a change of settings needs the settings")
        body.update(
            history_retention_ms=partitioning.config.history_retention_ms,
            segment_interval_ms=partitioning.config.segment_interval_ms,
            latest_ttl_ms=partitioning.config.latest_ttl_ms,
        )
    files.location.create_new(record_path(files, partitioning.id), json.dumps(body).encode())


def mark(files: PartitionFiles) -> None:
    """Leaves a repartition's mark in a partition directory (see the module)."""
    files.location.create_new(
        posixpath.join(files.dir, REPARTITION_MARK + os.urandom(8).hex()), b""
    )


@dataclass(frozen=True)
class ColumnLayout:
    """How typed columns become a store's key and value bytes (recorded by the Spark helpers).

    Attributes:
        encoding: The name and version of the encoding (``verstore._core.TUPLE_ENCODING``).
        key: ``(name, Arrow type)`` of each key column, in encoding order.
        value: ``(name, Arrow type)`` of each value column, in encoding order.
        arrow: The key and value Arrow schemas themselves (IPC, base64), so that a reader
            (``verstore.spark.read_store``, ``verstore scan``) decodes stored bytes back to the
            columns that wrote them. Not compared: ``key`` and ``value`` decide compatibility.
    """

    encoding: str
    key: tuple[tuple[str, str], ...]
    value: tuple[tuple[str, str], ...]
    arrow: tuple[str, str] | None = field(default=None, compare=False)

    @staticmethod
    def of(encoding: str, key: Any, value: Any) -> ColumnLayout:
        """From Arrow schemas (or sequences of fields) of the key and value columns."""

        import pyarrow as pa

        def cols(fields: Any) -> tuple[tuple[str, str], ...]:
            return tuple((str(f.name), describe_type(f.type)) for f in fields)

        def ipc(fields: Any) -> str:
            schema = fields if isinstance(fields, pa.Schema) else pa.schema(list(fields))
            return base64.b64encode(schema.serialize().to_pybytes()).decode()

        return ColumnLayout(encoding, cols(key), cols(value), (ipc(key), ipc(value)))

    def schemas(self) -> tuple[Any, Any]:
        """The key and value ``pyarrow.Schema``.

        Raises:
            CorruptionError: The layout has no (or no readable) Arrow schemas.
        """
        import pyarrow as pa

        if self.arrow is None:
            raise CorruptionError("the store's column layout records no Arrow schemas")
        try:
            key, value = (pa.ipc.read_schema(pa.py_buffer(base64.b64decode(s))) for s in self.arrow)
        except (ValueError, pa.ArrowException) as e:
            raise CorruptionError(
                f"the store's recorded Arrow schemas do not decode: {e}"
            ) from None
        if [f.name for f in key] != [n for n, _ in self.key] or [f.name for f in value] != [
            n for n, _ in self.value
        ]:
            raise CorruptionError("the store's recorded Arrow schemas contradict its columns")
        return key, value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "encoding": self.encoding,
            "key": [list(c) for c in self.key],
            "value": [list(c) for c in self.value],
        }
        if self.arrow is not None:
            out["arrow"] = {"key": self.arrow[0], "value": self.arrow[1]}
        return out

    @staticmethod
    def from_json(obj: Any) -> ColumnLayout | None:
        def cols(items: Any) -> tuple[tuple[str, str], ...] | None:
            if not isinstance(items, list):
                return None
            out = []
            for item in items:
                if not (
                    isinstance(item, list)
                    and len(item) == 2
                    and all(isinstance(x, str) for x in item)
                ):
                    return None
                out.append((item[0], item[1]))
            return tuple(out)

        if not isinstance(obj, dict) or not isinstance(obj.get("encoding"), str):
            return None
        key, value = cols(obj.get("key")), cols(obj.get("value"))
        if key is None or value is None:
            return None
        arrow = obj.get("arrow")
        if arrow is not None:
            if not (
                isinstance(arrow, dict)
                and isinstance(arrow.get("key"), str)
                and isinstance(arrow.get("value"), str)
            ):
                return None
            arrow = (arrow["key"], arrow["value"])
        return ColumnLayout(obj["encoding"], key, value, arrow)

    def describe(self) -> str:
        def cols(items: Sequence[tuple[str, str]]) -> str:
            return ", ".join(f"{n}: {t}" for n, t in items) or "(none)"

        return f"{self.encoding} key ({cols(self.key)}) value ({cols(self.value)})"


def describe_type(t: Any) -> str:
    """An Arrow type as the stored bytes depend on it: what changes how bytes are read back is
    kept (names, units, decimal scale), what does not is dropped (time zones, which Spark takes
    from the session; 32- vs 64-bit offsets; nullability)."""
    import pyarrow.types as pt

    if pt.is_timestamp(t):
        return f"timestamp[{t.unit}]"
    if pt.is_large_string(t):
        return "string"
    if pt.is_large_binary(t):
        return "binary"
    if pt.is_list(t) or pt.is_large_list(t):
        return f"list<{describe_type(t.value_type)}>"
    if pt.is_map(t):
        return f"map<{describe_type(t.key_type)}, {describe_type(t.item_type)}>"
    if pt.is_struct(t):
        fields = ", ".join(f"{f.name}: {describe_type(f.type)}" for f in t)
        return f"struct<{fields}>"
    return str(t)


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
        _check_encoding(name, columns.encoding)
    layouts = (columns, *read_evolutions(files, columns)) if columns is not None else ()
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


#: At most this many evolutions are read (a hostile directory must not make opens endless).
MAX_LAYOUTS = 1000
#: The prefix byte of a value written under an evolved layout (docs above).
EVOLVED_MARK = 0xFE


def evolution_path(files: LineageFiles, layout_id: int) -> str:
    return posixpath.join(files.dir, f"_columns-{layout_id}.json")


def read_evolutions(files: LineageFiles, base: ColumnLayout) -> list[ColumnLayout]:
    """The layouts recorded after ``base``, by id (1, 2, ... until one is missing).

    Raises:
        CorruptionError: An evolution file is damaged, too large, names another id, or changes
            what no evolution may change (the encoding, the key columns).
    """
    records = _numbered(files, evolution_path, META_LIMIT, "column layout", MAX_LAYOUTS)
    return [_evolution(name, obj, layout_id, base) for layout_id, name, obj in records]


def _evolution(name: str, obj: Any, layout_id: int, base: ColumnLayout) -> ColumnLayout:
    layout = ColumnLayout.from_json(obj.get("columns")) if isinstance(obj, dict) else None
    if layout is None or obj.get("id") != layout_id or layout.arrow is None:
        raise CorruptionError(f"corrupt data in {name}: not the column layout {layout_id}")
    if (layout.encoding, layout.key) != (base.encoding, base.key):
        raise CorruptionError(f"corrupt data in {name}: it changes the encoding or the keys")
    return layout


def _check_encoding(name: str, encoding: str) -> None:
    """Keys and values in another version of the tuple encoding would be misread: refused.
    (An encoding of the caller's own is the caller's to check, by name.)"""
    family = TUPLE_ENCODING.rsplit("-", 1)[0] + "-"
    if encoding.startswith(family) and encoding != TUPLE_ENCODING:
        raise IncompatibleFormatError(
            f"{name} holds keys and values in the {encoding} encoding; this verstore reads "
            f"{TUPLE_ENCODING}: give this query another store name, or delete the store"
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


def evolution_problem(old: ColumnLayout, new: ColumnLayout) -> str | None:
    """Why values stored as ``old`` cannot be read as ``new``; ``None`` when they can."""
    if old.encoding != new.encoding or old.key != new.key:
        return "the encoding and the key columns cannot change: use another store name"
    before = dict(old.value)
    for name, kind in new.value:
        if name in before and before[name] != kind and (before[name], kind) not in WIDENINGS:
            return (
                f"value column {name!r} changes from {before[name]} to {kind}, which is not a "
                "widening (int8 < int16 < int32 < int64, float < double): use another store name"
            )
    return None


_INTS = ["int8", "int16", "int32", "int64"]
#: The type changes a reader applies to stored values (``pyarrow`` casts that never lose).
WIDENINGS = {(a, b) for i, a in enumerate(_INTS) for b in _INTS[i + 1 :]} | {("float", "double")}


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


__all__ = [
    "EVOLVED_MARK",
    "ColumnLayout",
    "Partitioning",
    "StoreConfig",
    "StoreSettings",
    "check",
    "check_or_create",
    "every_partition",
    "evolution_problem",
    "mark",
    "new_dir",
    "publish",
    "read_partitionings",
    "read_settings",
]
