"""The operator CLI: ``verstore inspect|get|scan|changes|verify URI`` (also ``python -m verstore``).

``URI`` is a checkpoint root (holding one directory per store) or one store's directory, as a
local path or a ``pyarrow.fs`` URI; ``--storage-option key=value`` configures the filesystem.
Exit status: 0 success; 1 a problem (a key not found, a damaged or hostile file, nothing found,
an error, each named on stderr or as a ``PROBLEM`` line); 2 an ambiguous store or lineage (name
one with ``--store`` / ``--lineage``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from verstore import keys, printing
from verstore.changes import changes_schema, partitions_of_changes, read_changes
from verstore.checkpoint import LineageFiles, StoreSettings, read_settings
from verstore.checkpoint.inspect import (
    find_lineages,
    find_stores,
    format1_error,
    summarize,
    verify_partition,
)
from verstore.checkpoint.settings import every_partition
from verstore.checkpoint.values import ValueCodec
from verstore.committed import NEWEST, output_schema, read_partition, reading, resolve
from verstore.exceptions import VerstoreError
from verstore.location import Location
from verstore.times import parse_time, shown


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--storage-option must be key=value, got {pair!r}")
        out[key] = value if any(w in key for w in _TEXT_OPTIONS) else _option_value(value)
    return out


# Options that are always text, even when they look like numbers (credentials, names).
_TEXT_OPTIONS = ("key", "token", "secret", "region", "endpoint", "scheme", "arn", "name")


def _option_value(text: str) -> Any:
    """``true``/``false``, integers and floats become typed values; anything else stays text."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class _Failed(Exception):
    """A selection the CLI cannot make: exit status ``code`` (2: ambiguous, 1: not found)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _lineage(root: Location, store: str, wanted: str | None) -> LineageFiles:
    found = find_lineages(root, store, wanted)
    if len(found) != 1:
        if not found and (old := format1_error(root, store)) is not None:
            raise old
        names = ", ".join(f.lineage for f in find_lineages(root, store)) or "none"
        if found:
            raise _Failed(f"store {store}: name one lineage with --lineage (found: {names})", 2)
        if wanted:
            raise _Failed(f"store {store} has no lineage {wanted!r} (found: {names})", 1)
        raise _Failed(f"store {store} holds no state (lineages: {names})", 1)
    return found[0]


def _one_store(loc: Location, args: argparse.Namespace) -> tuple[str, Location]:
    stores = list(find_stores(loc, args.store))
    if len(stores) != 1:
        names = ", ".join(s[0] for s in find_stores(loc)) or "none"
        if stores:
            raise _Failed(f"name one store with --store (found: {names})", 2)
        if args.store:
            raise _Failed(f"no store {args.store!r} at {args.uri} (found: {names})", 1)
        raise _Failed(f"no verstore checkpoint at {args.uri}", 1)
    return stores[0]


def _progress(label: str) -> Any:
    def report(phase: str, done: int, total: int) -> None:
        if sys.stderr.isatty() or done == total or done % 100 == 0:
            end = "\n" if done == total else "\r"
            print(f"{label}: {phase} {done}/{total}", end=end, file=sys.stderr, flush=True)

    return report


def cmd_inspect(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    found = False
    problems = 0
    for name, root in find_stores(loc, args.store):
        found = True
        print(f"store {name}")
        old = format1_error(root, name)
        if old is not None:
            print(f"  PROBLEM {old}")
            problems += 1
        for lineage in find_lineages(root, name, args.lineage):
            try:
                settings = read_settings(lineage)
            except VerstoreError as e:
                print(f"  lineage {lineage.lineage}: PROBLEM {e}")
                problems += 1
                continue
            if settings is None:
                print(f"  lineage {lineage.lineage}: no settings file")
                continue
            columns = f" columns={settings.columns.describe()}" if settings.columns else ""
            partitions = f" partitions={settings.num_partitions}" if settings.num_partitions else ""
            ttl = f" latest_ttl_ms={settings.latest_ttl_ms}" if settings.latest_ttl_ms else ""
            print(
                f"  lineage {lineage.lineage}: history_retention_ms="
                f"{settings.history_retention_ms} segment_interval_ms="
                f"{settings.segment_interval_ms}{ttl}{partitions}{columns}"
            )
            for partitioning, p, files in every_partition(lineage, settings):
                if partitioning.id and p == 0:
                    print(
                        f"    from version {partitioning.version}: {partitioning.num_partitions} "
                        f"partitions in {partitioning.dir}/"
                    )
                s = summarize(files)
                if s.problem:
                    print(f"    p={p}: PROBLEM {s.problem}")
                    problems += 1
                    continue
                off = f", {s.off_chain} off the winning chain" if s.off_chain else ""
                print(
                    f"    p={p}: versions {s.oldest}..{s.tip} ({s.commits} changelogs{off}, "
                    f"{s.changelog_bytes} bytes), snapshots {s.snapshots or 'none'}, "
                    f"SSTs {s.sst_bytes} bytes"
                )
    if not found:
        print(f"no verstore checkpoint at {args.uri}", file=sys.stderr)
        return 1
    return 1 if problems else 0


@dataclass(frozen=True)
class _Key:
    """The key (or key prefix) a command was given: its stored bytes, its column values when
    the store has a column layout, and whether it was given as raw bytes."""

    raw: bytes
    values: list[Any] | None
    given_raw: bool

    @staticmethod
    def of(texts: list[str], hex_bytes: bool, settings: StoreSettings, whole: bool) -> _Key:
        """From the command line: hex with ``--hex``, the text's bytes in a store of bytes
        keys, else one value per key column (``whole``: every column; else the first ones)."""
        if hex_bytes:
            try:
                return _Key(bytes.fromhex("".join(texts)), None, True)
            except ValueError:
                raise ValueError(
                    f"KEY must be hex digits with --hex, got {' '.join(texts)!r}"
                ) from None
        if settings.columns is None:  # a store of bytes keys: the text's own bytes
            if len(texts) != 1:
                raise ValueError(
                    f"the store's keys are bytes (no column layout): give one KEY, got {texts!r}"
                )
            return _Key(os.fsencode(texts[0]), None, True)
        key_schema = settings.columns.schemas()[0]
        values = keys.parse(texts, key_schema)
        if whole and len(values) < len(key_schema):
            names = ", ".join(f"{f.name}: {f.type}" for f in key_schema)
            raise ValueError(
                f"KEY: the store's keys are ({names}): give all {len(key_schema)} values "
                f"(scan --prefix takes the first ones), got {len(values)}"
            )
        return _Key(keys.encode(values, key_schema), values, False)

    def columns(self, settings: StoreSettings, decode: bool = False) -> dict[str, Any]:
        """The key as the record printed shows it (``decode``: raw bytes of a found key, in a
        store of typed keys, as their columns)."""
        if settings.columns is None:
            return {"key": self.raw}
        key_schema = settings.columns.schemas()[0]
        if self.values is not None:
            return dict(zip(key_schema.names, self.values, strict=False))
        if decode:
            from verstore._core import decode_rows

            try:
                found: dict[str, Any] = decode_rows(_binary([self.raw]), key_schema).to_pylist()[0]
                return found
            except (VerstoreError, ValueError):  # not a whole key of the layout
                pass
        return {"key": self.raw}

    def describe(self, settings: StoreSettings) -> str:
        shown = self.columns(settings)
        return ", ".join(f"{n}={v!r}" for n, v in shown.items())


def _key_partitions(
    key: _Key, settings: StoreSettings, files: LineageFiles, version: int, given: int | None
) -> tuple[list[int], bool]:
    """The partitions to read ``key`` from, and whether its partition was found from the key:
    the one given, the one the helpers route it to, else every partition of the version's
    partitioning (a store of bytes keys, or key types without a known hash)."""
    if given is not None:
        return [given], False
    partitioning = settings.partitioning_at(version)
    count = partitioning.num_partitions
    if key.values is not None and count is not None and settings.columns is not None:
        found = keys.partition(key.values, settings.columns.schemas()[0], count)
        if found is not None:
            return [found], True
    return partitioning.partitions(files), False


def cmd_get(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    name, root = _one_store(loc, args)
    lineage = _lineage(root, name, args.lineage)
    ref, settings = resolve(root, name, lineage.lineage)
    version = NEWEST if args.version is None else args.version
    as_of = None if args.as_of is None else parse_time(args.as_of, "--as-of")
    key = _Key.of(args.key, args.hex, settings, whole=True)
    partitions, routed = _key_partitions(key, settings, lineage, version, args.partition)
    if not routed and args.partition is None and len(partitions) > 1:
        print(f"{name}: reading every partition for the key", file=sys.stderr)
    for p in partitions:
        with reading(ref, settings, p, version, _progress(f"{name} p={p}")) as store:
            found = store.get(key.raw, as_of=as_of)
        if found is not None:
            _print_record(found, key, p, settings, args)
            return 0
    where = f"partition {partitions[0]}" if len(partitions) == 1 else "any partition"
    if routed:
        where += " (the key's, as the helpers route it)"
    when = "" if as_of is None else f" as of {shown(as_of)}"
    if args.json:
        printing.json_line(
            {"found": False, "key": printing.json_value(key.columns(settings))}, sys.stdout
        )
    print(
        f"no version of key {key.describe(settings)}{when} in {where} of store {name!r}"
        f"{_raw_key_hint(key, settings)}",
        file=sys.stderr,
    )
    return 1


def _raw_key_hint(key: _Key, settings: StoreSettings) -> str:
    """For raw bytes given to a store of typed keys: how its keys are stored."""
    if not key.given_raw or settings.columns is None:
        return ""
    key_schema = settings.columns.schemas()[0]
    columns = ", ".join(f"{f.name}: {f.type}" for f in key_schema)
    hint = (
        f": its keys are the tuple encoding of ({columns}); give the key's values instead of "
        "raw bytes"
    )
    if len(key_schema) != 1:
        return hint
    try:  # the bytes as the text of the one key column's value, encoded
        text = key.raw.decode()
        encoded = keys.encode(keys.parse([text], key_schema), key_schema).hex()
    except (UnicodeDecodeError, ValueError):
        return hint
    return hint + f" (KEY {text!r} is --hex {encoded})"


def _print_record(
    found: Any, key: _Key, partition: int, settings: StoreSettings, args: argparse.Namespace
) -> None:
    """A record as ``name  value`` lines, or one JSON object with ``--json``."""
    if settings.columns is not None:
        decoded = ValueCodec(settings).decode(_binary([found.value])).to_pylist()[0]
        value: dict[str, Any] = decoded
    elif args.hex:
        value = {"value": found.value.hex()}
    else:
        value = {"value": found.value.decode(errors="backslashreplace")}
    if args.json:
        printing.json_line(
            {
                "found": True,
                "partition": partition,
                "key": printing.json_value(key.columns(settings, decode=True)),
                "value": printing.json_value(value),
                **printing.json_row({"valid_from": found.timestamp, "valid_to": found.valid_to}),
            },
            sys.stdout,
        )
        return
    printing.record(
        {
            "partition": partition,
            **key.columns(settings, decode=True),
            **value,
            "valid_from": found.timestamp,
            "valid_to": found.valid_to,
        },
        sys.stdout,
    )


def _binary(values: list[bytes]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.binary())


def cmd_scan(args: argparse.Namespace) -> int:
    """A store's state (each key as of a time, or every version) as a table or Parquet."""
    loc = Location.resolve(args.uri, _options(args.storage_option))
    name, root = _one_store(loc, args)
    lineage = _lineage(root, name, args.lineage)
    ref, settings = resolve(root, name, lineage.lineage)
    if args.history and args.as_of is not None:
        raise ValueError("--as-of reads one version per key; with --history use --from/--to")
    version = NEWEST if args.version is None else args.version
    prefix = None if args.prefix is None else _Key.of(args.prefix, args.hex, settings, whole=False)
    if prefix is not None:
        partitions, _ = _key_partitions(prefix, settings, lineage, version, args.partition)
    else:
        partitions = settings.partitioning_at(version).partitions(lineage)
        partitions = partitions if args.partition is None else [args.partition]
    as_of, from_time, to_time = (
        None if text is None else parse_time(text, flag)
        for flag, text in (
            ("--as-of", args.as_of),
            ("--from", args.from_time),
            ("--to", args.to_time),
        )
    )
    batches = (
        batch
        for p in partitions
        for batch in read_partition(
            ref,
            settings,
            p,
            version=version,
            history=args.history,
            prefix=None if prefix is None else prefix.raw,
            as_of=as_of,
            from_time=from_time,
            to_time=to_time,
        )
    )
    return _emit(batches, output_schema(settings.columns), args)


def cmd_changes(args: argparse.Namespace) -> int:
    """What each micro-batch wrote (the change feed), as a table or Parquet."""
    loc = Location.resolve(args.uri, _options(args.storage_option))
    name, root = _one_store(loc, args)
    lineage = _lineage(root, name, args.lineage)
    ref, settings = resolve(root, name, lineage.lineage)
    if (
        args.from_batch is not None
        and args.to_batch is not None
        and args.from_batch > args.to_batch
    ):
        raise ValueError(f"--from-batch {args.from_batch} is after --to-batch {args.to_batch}")
    partitions = [
        (partitioning, p)
        for partitioning, p in partitions_of_changes(ref, settings, args.from_batch, args.to_batch)
        if args.partition is None or p == args.partition
    ]
    batches = (
        batch
        for partitioning, p in partitions
        for batch in read_changes(
            ref,
            settings,
            p,
            from_batch=args.from_batch,
            to_batch=args.to_batch,
            partitioning=partitioning,
        )
    )
    return _emit(batches, changes_schema(settings.columns), args)


def _emit(batches: Iterator[Any], schema: Any, args: argparse.Namespace) -> int:
    """Rows to ``--parquet FILE``, or the first ``--limit`` as a table (``--json``: one JSON
    object a line) on stdout."""
    if args.parquet:
        import pyarrow.parquet as pq

        rows = 0
        with pq.ParquetWriter(args.parquet, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        print(f"wrote {rows} rows to {args.parquet}", file=sys.stderr)
        return 0
    shown_rows: list[dict[str, Any]] = []
    for batch in batches:
        shown_rows += batch.slice(0, max(0, args.limit - len(shown_rows))).to_pylist()
        if len(shown_rows) >= args.limit:
            break
    if args.json:
        for row in shown_rows:
            printing.json_line(printing.json_row(row), sys.stdout)
    else:
        printing.table(shown_rows, schema.names, sys.stdout)
    if len(shown_rows) >= args.limit:
        print(f"(first {args.limit} rows; --limit N or --parquet FILE for more)", file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    problems: list[str] = []
    checked = 0
    stores = 0
    for name, root in find_stores(loc, args.store):
        stores += 1
        old = format1_error(root, name)
        if old is not None:
            problems.append(str(old))
        for lineage in find_lineages(root, name, args.lineage):
            settings = None
            try:
                settings = read_settings(lineage)
            except VerstoreError as e:
                problems.append(str(e))
            for _, p, files in every_partition(lineage, settings):
                checked += 1
                problems += verify_partition(
                    files,
                    deep=args.deep,
                    progress=_progress(f"{name} {lineage.lineage} p={p}"),
                )
    for problem in problems:
        print(f"PROBLEM {problem}")
    if not stores:
        print(f"no verstore checkpoint at {args.uri}", file=sys.stderr)
        return 1
    print(f"verified {checked} partitions: {'OK' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


def _command(sub: Any, name: str, fn: Any, help: str) -> argparse.ArgumentParser:
    """A subcommand with the arguments every command takes."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help)
    p.add_argument("uri", help="checkpoint root or store directory (path or URI)")
    p.add_argument("--store", help="store name (when the root holds several)")
    p.add_argument("--lineage", help="lineage: the query id (when a store holds several)")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(fn=fn)
    return p


def _rows_out(p: argparse.ArgumentParser, partition: str = "default: every partition") -> None:
    """The arguments of a command that lists rows: which partitions, how many, where."""
    p.add_argument("--partition", type=int, default=None, help=partition)
    p.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    p.add_argument("--parquet", default=None, metavar="FILE", help="write every row to FILE")
    p.add_argument("--json", action="store_true", help="one JSON object a row, for scripts")


_TIME = "T"
_TIME_HELP = "epoch ms or ISO 8601 (2026-03-01T10:00:00Z; no zone: UTC)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verstore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _command(sub, "inspect", cmd_inspect, "stores, partitions, versions, snapshots, sizes")
    p = _command(sub, "get", cmd_get, "read a key from a durable version")
    p.add_argument(
        "--partition", type=int, default=None, help="default: the key's, as the helpers route it"
    )
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    p.add_argument("--as-of", default=None, metavar=_TIME, help=_TIME_HELP)
    p.add_argument("--hex", action="store_true", help="KEY is the stored bytes in hex")
    p.add_argument("--json", action="store_true", help="print one JSON object, for scripts")
    p.add_argument(
        "key", nargs="+", help="the key's column values (a store of bytes keys: its text)"
    )
    p = _command(sub, "scan", cmd_scan, "a store's state as a table or Parquet: keys as of a time")
    _rows_out(p, "default: every partition (a --prefix of every key column: the key's)")
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    p.add_argument("--as-of", default=None, metavar=_TIME, help="each key's version valid then")
    p.add_argument("--history", action="store_true", help="every version, not one per key")
    p.add_argument("--from", dest="from_time", default=None, metavar=_TIME, help="with --history")
    p.add_argument("--to", dest="to_time", default=None, metavar=_TIME, help="with --history")
    p.add_argument(
        "--prefix", nargs="+", default=None, metavar="VALUE",
        help="only keys whose first columns have these values",
    )  # fmt: skip
    p.add_argument("--hex", action="store_true", help="--prefix is stored bytes in hex")
    p = _command(sub, "changes", cmd_changes, "what each micro-batch wrote: the change feed")
    _rows_out(p)
    p.add_argument("--from-batch", type=int, default=None, help="default: the oldest kept")
    p.add_argument("--to-batch", type=int, default=None, help="inclusive; default: the newest")
    p = _command(sub, "verify", cmd_verify, "checksums and the version chain")
    p.add_argument("--deep", action="store_true", help="also checksum every SST file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except _Failed as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except (VerstoreError, OSError) as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a bad argument value: a partition, version or hex key
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
