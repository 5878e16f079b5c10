"""The operator CLI: ``verstore inspect|get|verify URI`` (also ``python -m verstore``).

``URI`` is a checkpoint root (holding one directory per store) or one store's directory, as a
local path or a ``pyarrow.fs`` URI; ``--storage-option key=value`` configures the filesystem.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from verstore._core import verify_changelog
from verstore.checkpoint import (
    CheckpointOptions,
    PartitionFiles,
    PartitionStore,
    decode_manifest,
    file_crc32,
)
from verstore.exceptions import CorruptionError, VerstoreError
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


def _read_meta(loc: Location, path: str) -> dict[str, Any]:
    try:
        meta = json.loads(loc.read_bytes(path))
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise CorruptionError(f"corrupt data in {loc.describe(path)}: not a JSON object")
    return meta


def _stores(loc: Location, only: str | None) -> Iterator[tuple[str, Location, dict[str, Any]]]:
    """``(name, root location, meta)`` for each store under ``loc`` (or ``loc`` itself)."""
    if loc.exists(loc.path("_meta.json")):
        parent = Location(loc.filesystem, posixpath.dirname(loc.root.rstrip("/")), loc.uri)
        name = posixpath.basename(loc.root.rstrip("/"))
        if only in (None, name):
            yield name, parent, _read_meta(loc, loc.path("_meta.json"))
        return
    for info in sorted(loc.list(loc.root), key=lambda i: i.base_name):
        meta_path = posixpath.join(info.path, "_meta.json")
        if (only in (None, info.base_name)) and loc.exists(meta_path):
            yield info.base_name, loc, _read_meta(loc, meta_path)


def _partitions(loc: Location, store: str) -> list[int]:
    parts = []
    for info in loc.list(loc.path(store)):
        if info.base_name.startswith("p=") and info.base_name[2:].isdigit():
            parts.append(int(info.base_name[2:]))
    return sorted(parts)


def _progress(label: str) -> Any:
    def report(phase: str, done: int, total: int) -> None:
        if sys.stderr.isatty() or done == total or done % 100 == 0:
            end = "\n" if done == total else "\r"
            print(f"{label}: {phase} {done}/{total}", end=end, file=sys.stderr, flush=True)

    return report


def cmd_inspect(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    found = False
    for name, root, meta in _stores(loc, args.store):
        found = True
        print(
            f"store {name}: history_retention_ms={meta.get('history_retention_ms')} "
            f"segment_interval_ms={meta.get('segment_interval_ms')} "
            f"format_version={meta.get('format_version')}"
            + (f" partitions={meta['num_partitions']}" if meta.get("num_partitions") else "")
        )
        for p in _partitions(root, name):
            files = PartitionFiles(root, name, p)
            changelogs, snapshots, _ = files.listing()
            sst_bytes = sum(i.size or 0 for i in root.list(files.sst_dir))
            log_bytes = sum(i.size or 0 for i in changelogs.values())
            versions = f"{min(changelogs)}..{max(changelogs)}" if changelogs else "0 (empty)"
            print(
                f"  p={p}: versions {versions} ({len(changelogs)} changelogs, "
                f"{log_bytes} bytes), snapshots {sorted(snapshots) or 'none'}, "
                f"SSTs {sst_bytes} bytes"
            )
    if not found:
        print(f"no verstore checkpoint at {args.uri}", file=sys.stderr)
        return 1
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    stores = list(_stores(loc, args.store))
    if len(stores) != 1:
        names = ", ".join(s[0] for s in stores) or "none"
        print(f"name one store with --store (found: {names})", file=sys.stderr)
        return 2
    name, root, meta = stores[0]
    key = bytes.fromhex(args.key) if args.hex else args.key.encode()
    with tempfile.TemporaryDirectory(prefix="verstore-get-") as tmp:
        part = PartitionStore.open(
            root,
            name,
            args.partition,
            args.version,
            tmp,
            history_retention_ms=meta["history_retention_ms"],
            segment_interval_ms=meta["segment_interval_ms"],
            options=CheckpointOptions(lock_timeout_s=0),
            progress=_progress(f"{name} p={args.partition}"),
        )
        try:
            record = part.store.get(key, as_of=args.as_of)
        finally:
            part.abort()
    if record is None:
        print("None")
        return 1
    value = record.value.hex() if args.hex else record.value.decode(errors="backslashreplace")
    print(f"value={value} timestamp={record.timestamp} valid_to={record.valid_to}")
    return 0


def verify_partition(
    root: Location, name: str, partition: int, *, deep: bool = False, progress: Any = None
) -> list[str]:
    """Checks every changelog (checksums), the version chain and every snapshot's files."""
    problems: list[str] = []
    files = PartitionFiles(root, name, partition)
    changelogs, snapshots, _ = files.listing()
    attempts: dict[int, tuple[bytes, bytes]] = {}
    ordered = sorted(changelogs)
    for done, v in enumerate(ordered, 1):
        path = files.changelog(v)
        try:
            found, attempt, parent, _ = verify_changelog(root.read_bytes(path), root.describe(path))
            if found != v:
                problems.append(f"{root.describe(path)}: header says version {found}")
            attempts[v] = (attempt, parent)
        except VerstoreError as e:
            problems.append(str(e))
        if progress:
            progress("changelogs", done, len(ordered))
    if ordered:
        missing = sorted(set(range(ordered[0], ordered[-1] + 1)) - set(ordered))
        if missing:
            problems.append(f"{root.describe(files.dir)}: versions {missing} are missing")
        if ordered[0] > 1 and not any(s <= ordered[0] for s in snapshots):
            problems.append(
                f"{root.describe(files.dir)}: versions before {ordered[0]} were deleted and no "
                "snapshot covers them"
            )
    for v in ordered:
        if v - 1 in attempts and v in attempts and attempts[v][1] != attempts[v - 1][0]:
            problems.append(
                f"{root.describe(files.changelog(v))}: broken version chain (parent attempt "
                f"{attempts[v][1].hex()}, version {v - 1} was written by "
                f"{attempts[v - 1][0].hex()})"
            )
    for v in sorted(snapshots):
        path = files.snapshot(v)
        try:
            manifest = decode_manifest(root.read_bytes(path), root.describe(path))
        except VerstoreError as e:
            problems.append(str(e))
            continue
        if v in attempts and manifest["attempt"] != attempts[v][0].hex():
            print(f"note: snapshot {v} is from a superseded attempt (ignored)", file=sys.stderr)
            continue
        for entry in manifest["files"]:
            durable = posixpath.join(files.dir, entry["durable"])
            info = root.filesystem.get_file_info(durable)
            if info.size is None:
                problems.append(f"{root.describe(durable)}: missing (snapshot {v})")
            elif info.size != entry["size"]:
                problems.append(
                    f"{root.describe(durable)}: size {info.size}, manifest says "
                    f"{entry['size']} (snapshot {v})"
                )
            elif deep:
                with tempfile.NamedTemporaryFile() as tmp:
                    root.download(durable, tmp.name)
                    if file_crc32(tmp.name) != entry["crc32"]:
                        problems.append(f"{root.describe(durable)}: checksum mismatch")
    return problems


def cmd_verify(args: argparse.Namespace) -> int:
    loc = Location.resolve(args.uri, _options(args.storage_option))
    problems: list[str] = []
    checked = 0
    for name, root, _meta in _stores(loc, args.store):
        for p in _partitions(root, name):
            checked += 1
            problems += verify_partition(
                root, name, p, deep=args.deep, progress=_progress(f"{name} p={p}")
            )
    for problem in problems:
        print(f"PROBLEM {problem}")
    if not checked:
        print(f"no verstore checkpoint at {args.uri}", file=sys.stderr)
        return 1
    print(f"verified {checked} partitions: {'OK' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="verstore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("uri", help="checkpoint root or store directory (path or URI)")
        p.add_argument("--store", help="store name (when the root holds several)")
        p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE")

    p = sub.add_parser("inspect", help="stores, partitions, versions, snapshots, sizes")
    common(p)
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("get", help="read a key from a durable version")
    common(p)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--as-of", type=int, default=None)
    p.add_argument("--hex", action="store_true", help="KEY and the printed value are hex")
    p.add_argument("key")
    p.set_defaults(fn=cmd_get)
    p = sub.add_parser("verify", help="checksums and the version chain")
    common(p)
    p.add_argument("--deep", action="store_true", help="also checksum every SST file")
    p.set_defaults(fn=cmd_verify)
    args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except VerstoreError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
