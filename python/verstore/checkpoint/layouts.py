"""Column layouts: how typed columns become a store's key and value bytes (recorded by the
Spark helpers), and the evolutions of a lineage's value columns (``_columns-<id>.json``, each
written once by a conditional create and hostile input when read): which type changes a reader
applies, which changes no layout may make. The format and rules: docs/checkpoint.md,
"`_meta.json`".
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verstore._core import TUPLE_ENCODING
from verstore.checkpoint.layout import (
    LineageFiles,
    read_numbered,
)
from verstore.exceptions import (
    CorruptionError,
    IncompatibleFormatError,
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


#: At most this many evolutions are read (a hostile directory must not make opens endless).
MAX_LAYOUTS = 1000
#: The prefix byte of a value written under an evolved layout (docs above).
EVOLVED_MARK = 0xFE


def evolution_path(files: LineageFiles, layout_id: int) -> str:
    return posixpath.join(files.dir, f"_columns-{layout_id}.json")


def read_evolutions(files: LineageFiles, base: ColumnLayout, limit: int) -> list[ColumnLayout]:
    """The layouts recorded after ``base``, by id (1, 2, ... until one is missing).

    Raises:
        CorruptionError: An evolution file is damaged, larger than ``limit``, names another id,
            or changes what no evolution may change (the encoding, the key columns).
    """
    records = read_numbered(files, evolution_path, limit, "column layout", MAX_LAYOUTS)
    return [_evolution(name, obj, layout_id, base) for layout_id, name, obj in records]


def _evolution(name: str, obj: Any, layout_id: int, base: ColumnLayout) -> ColumnLayout:
    layout = ColumnLayout.from_json(obj.get("columns")) if isinstance(obj, dict) else None
    if layout is None or obj.get("id") != layout_id or layout.arrow is None:
        raise CorruptionError(f"corrupt data in {name}: not the column layout {layout_id}")
    if (layout.encoding, layout.key) != (base.encoding, base.key):
        raise CorruptionError(f"corrupt data in {name}: it changes the encoding or the keys")
    return layout


def check_encoding(name: str, encoding: str) -> None:
    """Keys and values in another version of the tuple encoding would be misread: refused.
    (An encoding of the caller's own is the caller's to check, by name.)"""
    family = TUPLE_ENCODING.rsplit("-", 1)[0] + "-"
    if encoding.startswith(family) and encoding != TUPLE_ENCODING:
        raise IncompatibleFormatError(
            f"{name} holds keys and values in the {encoding} encoding; this verstore reads "
            f"{TUPLE_ENCODING}: give this query another store name, or delete the store"
        )


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


__all__ = [
    "EVOLVED_MARK",
    "WIDENINGS",
    "ColumnLayout",
    "check_encoding",
    "describe_type",
    "evolution_path",
    "evolution_problem",
    "read_evolutions",
]
