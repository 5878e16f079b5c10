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
from typing import Any

from verstore.changes import changes_schema, partitions_of_changes, read_changes
from verstore.checkpoint import LineageFiles, read_settings
from verstore.checkpoint.inspect import (
    find_lineages,
    find_stores,
    format1_error,
    summarize,
    verify_partition,
)
from verstore.checkpoint.lineage import every_partition
from verstore.committed import NEWEST, output_schema, read_partition, reading, resolve
from verstore.exceptions import VerstoreError
from verstore.location import Location


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


def cmd_get(args: argparse.Namespace) -> int:
    if args.hex:
        try:
            key = bytes.fromhex(args.key)
        except ValueError:
            raise ValueError(f"KEY must be hex digits with --hex, got {args.key!r}") from None
    else:
        key = os.fsencode(args.key)
    loc = Location.resolve(args.uri, _options(args.storage_option))
    name, root = _one_store(loc, args)
    ref, settings = resolve(root, name, _lineage(root, name, args.lineage).lineage)
    version = NEWEST if args.version is None else args.version
    progress = _progress(f"{name} p={args.partition}")
    with reading(ref, settings, args.partition, version, progress) as store:
        record = store.get(key, as_of=args.as_of)
    if record is None:
        print("None")
        return 1
    value = record.value.hex() if args.hex else record.value.decode(errors="backslashreplace")
    print(f"value={value} timestamp={record.timestamp} valid_to={record.valid_to}")
    return 0


def cmd_scan(args: argparse.Namespace) -> int:
    """A store's state (each key as of a time, or every version) as a table or Parquet."""
    loc = Location.resolve(args.uri, _options(args.storage_option))
    name, root = _one_store(loc, args)
    lineage = _lineage(root, name, args.lineage)
    ref, settings = resolve(root, name, lineage.lineage)
    if args.history and args.as_of is not None:
        raise ValueError("--as-of reads one version per key; with --history use --from/--to")
    prefix = bytes.fromhex(args.prefix) if args.prefix is not None else None
    version = NEWEST if args.version is None else args.version
    partitions = settings.partitioning_at(version).partitions(lineage)
    if args.partition is not None:
        partitions = [args.partition]
    batches = (
        batch
        for p in partitions
        for batch in read_partition(
            ref,
            settings,
            p,
            version=version,
            as_of=args.as_of,
            history=args.history,
            from_time=args.from_time,
            to_time=args.to_time,
            prefix=prefix,
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
    """Rows to ``--parquet FILE``, or the first ``--limit`` as a table on stdout."""
    import pyarrow as pa

    if args.parquet:
        import pyarrow.parquet as pq

        rows = 0
        with pq.ParquetWriter(args.parquet, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        print(f"wrote {rows} rows to {args.parquet}", file=sys.stderr)
        return 0
    shown = 0
    table_batches = []
    for batch in batches:
        take = batch.slice(0, max(0, args.limit - shown))
        table_batches.append(take)
        shown += take.num_rows
        if shown >= args.limit:
            break
    table = pa.Table.from_batches(table_batches, schema=schema)
    print(table.to_pandas().to_string(index=False) if table.num_rows else "(no rows)")
    if shown >= args.limit:
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


def _rows_out(p: argparse.ArgumentParser) -> None:
    """The arguments of a command that lists rows: which partitions, how many, where."""
    p.add_argument("--partition", type=int, default=None, help="default: every partition")
    p.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    p.add_argument("--parquet", default=None, metavar="FILE", help="write every row to FILE")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verstore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _command(sub, "inspect", cmd_inspect, "stores, partitions, versions, snapshots, sizes")
    p = _command(sub, "get", cmd_get, "read a key from a durable version")
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    p.add_argument("--as-of", type=int, default=None)
    p.add_argument("--hex", action="store_true", help="KEY and the printed value are hex")
    p.add_argument("key")
    p = _command(sub, "scan", cmd_scan, "a store's state as a table or Parquet: keys as of a time")
    _rows_out(p)
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    p.add_argument("--as-of", type=int, default=None, help="each key's version valid then (ms)")
    p.add_argument("--history", action="store_true", help="every version, not one per key")
    p.add_argument("--from", dest="from_time", type=int, default=None, help="with --history")
    p.add_argument("--to", dest="to_time", type=int, default=None, help="with --history")
    p.add_argument("--prefix", default=None, help="only keys starting with these hex bytes")
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
