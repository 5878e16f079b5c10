"""Hostile and malformed checkpoint files (docs/checkpoint.md, "Snapshot manifest" and "Durable
layout").

Anyone who can write to a checkpoint bucket controls its files, and a checksum is not
authentication: every forged manifest here carries a *valid* checksum, computed as
``uploads.py`` computes it. For each hostile input, three readers must refuse it with a
``CorruptionError`` (or, for the CLI, exit status 1 and a message) that names the file:

* a rebuild (``PartitionStore.open`` in a fresh local directory, as a task on a new executor);
* ``verstore get`` (the newest version, read-only, in a temporary directory);
* ``verstore verify --deep``.

And nothing is written outside the test's directories: every test runs in
``tmp_path/sentinel/work/``, and the files of ``tmp_path`` outside the checkpoint and local
directories, the names beside ``tmp_path`` and an absolute target path outside it are compared
before and after (the CLI's temporary directories go to ``tmp_path/systmp`` and must be gone).
Version numbers up to 2**63 - 1 must cost nothing: a stray commit at version 10**18 is refused
at once.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import verstore
from verstore.checkpoint import CheckpointOptions, PartitionStore, cleanup, settings
from verstore.cli import main
from verstore.exceptions import FencedError

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    RETENTION_MS,
    SEGMENT_MS,
    Reference,
    Target,
    commit_batches,
    forge_manifest,
    manifest_body,
    reads,
)

pytest_plugins = ["checkpoint_helpers"]

OPTIONS = CheckpointOptions(
    snapshot_interval=3, min_versions_to_retain=2, orphan_grace_s=0, lock_timeout_s=5
)
#: An absolute path outside ``tmp_path`` that a forged name points at.
ABSOLUTE_TARGET = f"/tmp/verstore-hostile-{uuid.uuid4().hex}"
A = "0000019a3f5c1d2e8b7e4f10a2c3d4e5"
B = "0000019a3f5a0b1c77d2e3f4a5b6c7d8"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Reference]:
    """Versions 1..4 (snapshot 3), then a cleanup retaining 2: changelogs 3 and 4 and snapshot
    3 are left, so snapshot 3 is the only base of every version."""
    work = tmp_path_factory.mktemp("hostile-template")
    target = Target("local", str(work / "checkpoint"), None, work)
    ref = Reference()
    commit_batches(target, ref, random.Random(80), 0, 4, target.new_local_dir(), options=OPTIONS)
    cleanup(target.files(), OPTIONS)
    graph = target.graph()
    assert sorted(r.version for r in graph.commits) == [3, 4]
    assert sorted(r.version for r in graph.snapshots) == [3]
    return work / "checkpoint", ref


@dataclass
class Case:
    """One test's copy of the template, and the directories that must stay untouched."""

    tmp_path: Path
    sentinel: Path
    work: Path
    systmp: Path
    target: Target
    ref: Reference

    @property
    def root(self) -> str:
        return self.target.uri

    def outside(self) -> dict[str, Any]:
        """Everything that no reader may change: the files under ``tmp_path`` other than the
        checkpoint, the local directories and the CLI's temporary directory; the names beside
        ``tmp_path``; whether the absolute target exists."""
        files = {}
        for path in self.tmp_path.rglob("*"):
            rel = path.relative_to(self.tmp_path).as_posix()
            if rel.startswith(("sentinel/work/checkpoint", "sentinel/work/local-", "systmp/")):
                continue
            files[rel] = path.read_bytes() if path.is_file() else None
        return {
            "files": files,
            "beside": sorted(os.listdir(self.tmp_path.parent)),
            "absolute": os.path.lexists(ABSOLUTE_TARGET),
        }

    def checkpoint(self) -> dict[str, bytes | None]:
        root = Path(self.root)
        return {
            p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*")
        }

    def open(self, version: int, **kwargs: Any) -> PartitionStore:
        return PartitionStore.open(
            self.root,
            "orders",
            0,
            version,
            self.target.new_local_dir(),
            history_retention_ms=RETENTION_MS,
            segment_interval_ms=SEGMENT_MS,
            options=OPTIONS,
            **kwargs,
        )


@pytest.fixture
def case(template: tuple[Path, Reference], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Case:
    checkpoint, ref = template
    sentinel = tmp_path / "sentinel"
    work = sentinel / "work"
    shutil.copytree(checkpoint, work / "checkpoint")
    (sentinel / "secret.txt").write_text("not for the checkpoint to read")
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    monkeypatch.setattr(settings, "_verified", {})  # a new process: settings are read again
    return Case(
        tmp_path, sentinel, work, systmp, Target("local", str(work / "checkpoint"), None, work), ref
    )


def assert_refused(
    case: Case,
    named: str,
    *,
    version: int = 4,
    error: type[Exception] = verstore.CorruptionError,
    seconds: float = 30.0,
) -> None:
    """A rebuild, ``verstore get`` and ``verstore verify --deep`` each refuse, naming ``named``;
    no reader writes outside its directories or changes the checkpoint."""
    outside = case.outside()
    checkpoint = case.checkpoint()
    started = time.monotonic()
    with pytest.raises(error, match=re.escape(named)):
        case.open(version)
    with pytest.raises(error, match=re.escape(named)):
        case.open(version, read_only=True)
    get_out, get_err, get_code = _cli(["get", case.root, "--partition", "0", "a"])
    verify_out, _verify_err, verify_code = _cli(["verify", case.root, "--deep"])
    assert time.monotonic() - started < seconds
    assert (get_code, get_out) == (1, ""), get_err
    assert named in get_err
    assert get_err.startswith(f"error: {error.__name__}: ")
    assert verify_code == 1
    assert any(line.startswith("PROBLEM ") and named in line for line in verify_out.splitlines()), (
        verify_out
    )
    assert case.outside() == outside
    assert case.checkpoint() == checkpoint
    assert list(case.systmp.iterdir()) == []
    for local in case.work.glob("local-*"):  # the working copy only, and never clean
        partition = local / "orders" / "q=default" / "p=0"
        left = {p.relative_to(partition).as_posix() for p in local.rglob("*") if not p.is_dir()}
        assert all(p in ("LOCK", "LOCAL.json") or re.match(r"db-[0-9a-f]{32}/", p) for p in left), (
            left
        )
        if (partition / "LOCAL.json").exists():
            assert json.loads((partition / "LOCAL.json").read_text())["clean"] is False


def _cli(argv: list[str]) -> tuple[str, str, int]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return out.getvalue(), err.getvalue(), code


def _manifest_path(case: Case) -> str:
    return case.target.snapshot(3)


# --- forged manifests (valid checksums) ---------------------------------------------------------


Body = dict[str, Any]


def _entry(**change: Any) -> Callable[[Case, Body], Body]:
    """Changes the first file entry: a value, or a function of the case; ``...`` removes it."""

    def edit(case: Case, body: Body) -> Body:
        first = dict(body["files"][0])
        for key, value in change.items():
            if value is ...:
                del first[key]
            else:
                first[key] = value(case) if callable(value) else value
        return {**body, "files": [first, *body["files"][1:]]}

    return edit


def _top(**change: Any) -> Callable[[Case, Body], Body]:
    def edit(case: Case, body: Body) -> Body:
        out = dict(body)
        for key, value in change.items():
            if value is ...:
                del out[key]
            else:
                out[key] = value
        return out

    return edit


def _duplicate(case: Case, body: Body) -> Body:
    first = body["files"][0]
    return {**body, "files": [*body["files"], {**first, "durable": f"SSTs/{'e' * 32}-x.sst"}]}


FORGED: dict[str, Callable[[Case, Body], Body]] = {
    "name absolute outside tmp": _entry(name=ABSOLUTE_TARGET),
    "name absolute inside the sentinel": _entry(name=lambda case: str(case.sentinel / "pwned")),
    "name climbing to the sentinel": _entry(name="../" * 6 + "pwned"),
    "name climbing above tmp": _entry(name="../" * 9 + "pwned"),
    "name with a slash": _entry(name="sub/000012.sst"),
    "name dot dot": _entry(name=".."),
    "name dot": _entry(name="."),
    "name empty": _entry(name=""),
    "name with a NUL": _entry(name="000012.sst\x00"),
    "name with backslashes": _entry(name="..\\..\\pwned"),
    "name hidden": _entry(name=".bashrc"),
    "name too long": _entry(name="a" * 300),
    "name not a string": _entry(name=12),
    "durable climbing out": _entry(durable="../../x"),
    "durable absolute": _entry(durable="/etc/passwd"),
    "durable climbing out of SSTs": _entry(durable="SSTs/../../x"),
    "durable to a secret beside the checkpoint": _entry(durable="../" * 5 + "secret.txt"),
    "durable in another partition": _entry(durable=f"../p=1/SSTs/{'a' * 32}-000012.sst"),
    "durable without its unique prefix": _entry(durable="SSTs/000012.sst"),
    "durable with a URI": _entry(durable="s3://other-bucket/x.sst"),
    "durable not a string": _entry(durable=None),
    "entry without crc32": _entry(crc32=...),
    "entry without name": _entry(name=...),
    "entry with an extra field": _entry(mode=0o4755),
    "size a string": _entry(size="12"),
    "size a float": _entry(size=12.0),
    "size a bool": _entry(size=True),
    "size negative": _entry(size=-1),
    "size huge": _entry(size=2**60),
    "size beyond i64": _entry(size=10**30),
    "crc32 out of range": _entry(crc32=2**32),
    "crc32 negative": _entry(crc32=-1),
    "crc32 null": _entry(crc32=None),
    "duplicate names": _duplicate,
    "without files": _top(files=...),
    "without version": _top(version=...),
    "without attempt": _top(attempt=...),
    "with an extra field": _top(owner="mallory"),
    "files an object": _top(files={"000012.sst": 1}),
    "files a string": _top(files="SSTs"),
    "files entries not objects": _top(files=[["000012.sst", 1]]),
    "version of another commit": _top(version=4),
    "version a string": _top(version="3"),
    "version huge": _top(version=10**18),
    "attempt of another commit": _top(attempt="f" * 32),
    "attempt not hex": _top(attempt="not hex"),
    "format version a string": _top(format_version="2"),
    "format version unknown": _top(format_version=3),
}


@pytest.mark.parametrize("forgery", FORGED)
def test_a_forged_manifest_with_a_valid_checksum_is_refused_naming_it(
    case: Case, forgery: str
) -> None:
    path = _manifest_path(case)
    body = FORGED[forgery](case, manifest_body(case.target.manifest(3)))
    case.target.write(path, forge_manifest(body))
    assert_refused(case, path)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xff\xfe\x00\x01",
        b"[]",
        b'"manifest"',
        b"3",
        b"null",
        b"[" * 100_000,
        b'{"a": ' * 100_000,
        b'{"checksum": 0}',
    ],
    ids=[
        "empty",
        "open brace",
        "binary",
        "list",
        "string",
        "number",
        "null",
        "deep list",
        "deep object",
        "checksum only",
    ],
)
def test_a_manifest_that_is_not_a_manifest_object_is_refused_naming_it(
    case: Case, raw: bytes
) -> None:
    path = _manifest_path(case)
    case.target.write(path, raw)
    assert_refused(case, path)


def test_an_oversized_manifest_is_refused_unread(case: Case) -> None:
    """A valid manifest padded past the limit (64 MiB): refused by size, never parsed."""
    path = _manifest_path(case)
    with open(path, "ab") as handle:
        handle.write(b" " * ((64 << 20) + 1))
    assert_refused(case, path, seconds=60)
    assert isinstance(cleanup(case.target.files(), OPTIONS), list)  # unusable, not an error


@pytest.mark.parametrize("lie", ["size", "crc32", "missing file", "a directory"])
def test_a_manifest_that_lies_about_a_file_is_refused_naming_the_file(case: Case, lie: str) -> None:
    """Well-formed entries that do not match what is stored: the stored file is named."""
    path = _manifest_path(case)
    body = manifest_body(case.target.manifest(3))
    first = body["files"][0]
    durable = case.target.path(first["durable"])
    if lie == "size":
        first["size"] += 1
    elif lie == "crc32":
        first["crc32"] ^= 1
    else:
        first["durable"] = f"SSTs/{'0' * 32}-{first['name']}"
        durable = case.target.path(first["durable"])
        if lie == "a directory":
            os.makedirs(durable)
            Path(durable, "inside").write_bytes(b"x" * first["size"])
    case.target.write(path, forge_manifest(body))
    assert_refused(case, durable)


def test_a_hostile_newest_snapshot_falls_back_to_the_next_older_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Snapshots 3 and 6; manifest 6 is forged (a name climbing out, valid checksum). A rebuild
    of 7 logs it, falls back to snapshot 3, replays 4..7 and is exact; nothing is written
    outside; verify names manifest 6."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    work = tmp_path / "sentinel" / "work"
    target = Target("local", str(work / "checkpoint"), None, work)
    ref = Reference()
    keep = CheckpointOptions(snapshot_interval=3, min_versions_to_retain=3, orphan_grace_s=0)
    commit_batches(target, ref, random.Random(81), 0, 7, target.new_local_dir(), options=keep)
    graph = target.graph()
    assert sorted(r.version for r in graph.snapshots) == [3, 6]
    assert min(r.version for r in graph.commits) == 3
    path = target.snapshot(6)
    body = manifest_body(target.manifest(6))
    body["files"][0]["name"] = "../" * 6 + "pwned"
    target.write(path, forge_manifest(body))
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        part = target.open(7, options=keep)
    try:
        assert part.stats.snapshot == target.winning(3)
        assert part.stats.replayed == 4
        assert reads(part.store) == ref.reads_at(7)
    finally:
        part.abort()
    assert f"snapshot unusable, trying an older one: corrupt data in {path}" in caplog.text
    assert not list(tmp_path.rglob("pwned"))
    out, _, code = _cli(["verify", target.uri, "--deep"])
    assert code == 1
    assert [line for line in out.splitlines() if line.startswith("PROBLEM")] == [
        f"PROBLEM corrupt data in {path}: snapshot manifest file 0 has an unsafe name "
        f"'{'../' * 6}pwned'"
    ]


def test_cleanup_never_deletes_what_a_forged_manifest_names(case: Case) -> None:
    """Cleanup deletes only what the listing of the partition found: a forged manifest that
    names files elsewhere makes it delete nothing elsewhere."""
    path = _manifest_path(case)
    body = manifest_body(case.target.manifest(3))
    body["files"].append(
        {"name": "x.sst", "durable": "../" * 5 + "secret.txt", "size": 1, "crc32": 0}
    )
    case.target.write(path, forge_manifest(body))
    outside = case.outside()
    before = case.checkpoint()
    deleted = cleanup(case.target.files(), OPTIONS)
    assert case.outside() == outside
    partition = case.target.files().dir
    assert all(p.startswith(partition + "/SSTs/") for p in deleted)
    assert set(case.checkpoint()) <= set(before)


HOSTILE_RETIREMENTS = {
    "not JSON": b"{oops",
    "not an object": b"[]",
    "another field": json.dumps({"format_version": 2, "files": [], "also": 1}).encode(),
    "a path outside SSTs": json.dumps({"format_version": 2, "files": ["../../x.sst"]}).encode(),
    "another format": json.dumps({"format_version": 9, "files": []}).encode(),
}


@pytest.mark.parametrize("hostile", HOSTILE_RETIREMENTS)
def test_a_hostile_retirement_is_refused_naming_it_and_deletes_nothing(
    case: Case, hostile: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A forged ``_retiring-*.json``: ``verify`` names it; a snapshot, which must read every
    retirement before its manifest, fails naming it (its commit stands); cleanup leaves it and
    deletes nothing it names; every version still opens."""
    path = case.target.path(f"_retiring-{A}.json")
    case.target.write(path, HOSTILE_RETIREMENTS[hostile])
    outside = case.outside()
    verify_out, _, verify_code = _cli(["verify", case.root])
    assert verify_code == 1
    assert any(line.startswith("PROBLEM ") and path in line for line in verify_out.splitlines())
    local = case.target.new_local_dir()
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        for version in (4, 5):
            part = PartitionStore.open(
                case.root, "orders", 0, version, local, history_retention_ms=RETENTION_MS,
                segment_interval_ms=SEGMENT_MS, options=OPTIONS,
            )  # fmt: skip
            part.commit()
    assert part.commit_stats is not None and part.commit_stats.deferred == ["the snapshot"]
    assert path in caplog.text
    assert case.target.graph().snapshots.keys() == {case.target.winning(3)}
    cleanup(case.target.files(), OPTIONS)
    assert case.target.exists(path) and case.outside() == outside
    for version in (3, 4, 5, 6):
        case.open(version, read_only=True).abort()


# --- odd names in the partition directory -------------------------------------------------------


def _changelog_four(case: Case) -> bytes:
    return case.target.read(case.target.changelog(4))


ODD_NAMES = {
    "superscript digit": "².changelog",
    "format-1 changelog": "1.changelog",
    "format-1 snapshot": "3.snapshot",
    "version beyond u64": f"99999999999999999999-{A}-4-{B}.changelog",
    "version 2**63": f"9223372036854775808-{A}-4-{B}.changelog",
    "version 2**63 - 1 with a leading zero": f"09223372036854775807-{A}-4-{B}.changelog",
    "parent equal to version": f"5-{A}-5-{B}.changelog",
    "parent above version": f"5-{A}-9-{B}.changelog",
    "leading zero": f"05-{A}-4-{B}.changelog",
    "uppercase attempt": f"5-{A.upper()}-4-{B}.changelog",
    "no attempt": f"5-{'0' * 32}-4-{B}.changelog",
    "parent 0 with an attempt": f"5-{A}-0-{B}.changelog",
    "no parent attempt": f"5-{A}-4.changelog",
    "short attempt": f"5-{A[:30]}-4-{B}.changelog",
    "signed version": f"+5-{A}-4-{B}.changelog",
    "snapshot of version 0": f"0-{A}.snapshot",
    "snapshot beyond i64": f"9223372036854775808-{A}.snapshot",
    "claim of version 0": f"0-{A}.claim",
    "claim with an uppercase attempt": f"3-{A.upper()}.claim",
    "empty stem": ".changelog",
}


@pytest.mark.parametrize("odd", ODD_NAMES)
def test_an_odd_name_in_the_partition_directory_is_refused_naming_it(case: Case, odd: str) -> None:
    path = case.target.path(ODD_NAMES[odd])
    case.target.write(path, _changelog_four(case))
    assert_refused(case, path)


@pytest.mark.parametrize("kind", ["changelog", "snapshot"])
def test_a_directory_named_like_a_commit_is_refused_naming_it(case: Case, kind: str) -> None:
    four = case.target.winning(4)
    name = (
        f"5-{A}-4-{four.attempt.hex()}.changelog"
        if kind == "changelog"
        else f"4-{four.attempt.hex()}.snapshot"
    )
    path = case.target.path(name)
    data = _changelog_four(case)
    os.makedirs(path)
    Path(path, "inside").write_bytes(data)
    assert_refused(case, path)


def test_a_stray_commit_at_version_10_to_the_18_without_its_parent(case: Case) -> None:
    """One stray file far above the tip, whose parent does not exist: the partition's newest
    version cannot be rebuilt, which is an error naming it, never a silent fall back to 4; and
    the version numbers cost nothing."""
    path = case.target.path(f"{10**18}-{A}-{10**18 - 1}-{B}.changelog")
    case.target.write(path, _changelog_four(case))
    assert_refused(case, path, version=10**18 - 1, seconds=10)


def test_a_stray_commit_at_version_10_to_the_18_on_the_real_chain(case: Case) -> None:
    """A file named as a commit built on the real version 4, holding 4's bytes: it is the tip,
    older attempts are fenced, and opening it replays it and finds its header lies."""
    four = case.target.winning(4)
    path = case.target.path(f"{10**18}-{A}-4-{four.attempt.hex()}.changelog")
    case.target.write(path, _changelog_four(case))
    started = time.monotonic()
    with pytest.raises(FencedError, match="has version 1000000000000000000 committed"):
        case.open(4)
    assert time.monotonic() - started < 10
    assert_refused(case, path, version=10**18, seconds=10)
    part = case.open(4, read_only=True)  # below the stray commit, version 4 is intact
    try:
        assert reads(part.store) == case.ref.reads_at(4)
    finally:
        part.abort()


# --- _meta.json -----------------------------------------------------------------------------------


def _settings(**change: Any) -> bytes:
    body: dict[str, Any] = {
        "format_version": 2,
        "store": "orders",
        "lineage": "default",
        "history_retention_ms": RETENTION_MS,
        "segment_interval_ms": SEGMENT_MS,
        "num_partitions": None,
        "columns": None,
    }
    for key, value in change.items():
        if value is ...:
            del body[key]
        else:
            body[key] = value
    return json.dumps(body).encode()


HOSTILE_META = {
    "not JSON": b"{not json",
    "empty": b"",
    "binary": b"\xff\xfe\x00",
    "a list": b"[]",
    "a string": b'"x"',
    "a number": b"3",
    "null": b"null",
    "deeply nested": b"[" * 100_000,
    "format version a string": _settings(format_version="2"),
    "format version missing": _settings(format_version=...),
    "retention a string": _settings(history_retention_ms="40"),
    "retention a bool": _settings(history_retention_ms=True),
    "retention a float": _settings(history_retention_ms=40.0),
    "retention negative": _settings(history_retention_ms=-1),
    "retention beyond i64": _settings(history_retention_ms=2**70),
    "retention missing": _settings(history_retention_ms=...),
    "segment interval a string": _settings(segment_interval_ms="10"),
    "segment interval zero": _settings(segment_interval_ms=0),
    "segment interval beyond i64": _settings(segment_interval_ms=2**64),
    "partitions a string": _settings(num_partitions="8"),
    "partitions zero": _settings(num_partitions=0),
    "partitions negative": _settings(num_partitions=-1),
    "columns a number": _settings(columns=3),
    "columns a list": _settings(columns=[]),
    "columns without encoding": _settings(columns={"key": [], "value": []}),
    "columns encoding a number": _settings(columns={"encoding": 1, "key": [], "value": []}),
    "columns key not a list": _settings(columns={"encoding": "e", "key": "ab", "value": []}),
    "columns pair too short": _settings(columns={"encoding": "e", "key": [["a"]], "value": []}),
    "columns type a number": _settings(columns={"encoding": "e", "key": [["a", 1]], "value": []}),
    "columns without value": _settings(columns={"encoding": "e", "key": []}),
    "a latest TTL in format 2": _settings(latest_ttl_ms=25),
    "format 3 without a latest TTL": _settings(format_version=3),
    "latest TTL zero": _settings(format_version=3, latest_ttl_ms=0),
    "latest TTL a string": _settings(format_version=3, latest_ttl_ms="25"),
    "latest TTL a bool": _settings(format_version=3, latest_ttl_ms=True),
    "latest TTL beyond i64": _settings(format_version=3, latest_ttl_ms=2**63),
}


@pytest.mark.parametrize("hostile", HOSTILE_META)
def test_a_hostile_settings_file_is_refused_naming_it(case: Case, hostile: str) -> None:
    path = case.target.lineage_files().meta
    case.target.write(path, HOSTILE_META[hostile])
    assert_refused(case, path)


def test_an_oversized_settings_file_is_refused_unread(case: Case) -> None:
    path = case.target.lineage_files().meta
    case.target.write(path, _settings() + b" " * ((1 << 20) + 1))
    assert_refused(case, path)


def test_settings_of_a_newer_format_are_an_incompatible_format(case: Case) -> None:
    path = case.target.lineage_files().meta
    case.target.write(path, _settings(format_version=4))
    outside = case.outside()
    for read_only in (False, True):
        with pytest.raises(
            verstore.IncompatibleFormatError,
            match=re.escape(path) + " was written by checkpoint format 4",
        ):
            case.open(4, read_only=read_only)
    _, err, code = _cli(["get", case.root, "--partition", "0", "a"])
    assert code == 1
    assert err.startswith(f"error: IncompatibleFormatError: {path}")
    assert case.outside() == outside


# --- huge version numbers -----------------------------------------------------------------------


def test_opening_huge_versions_costs_nothing(case: Case) -> None:
    started = time.monotonic()
    for version in (10**18, 2**63 - 2):
        for read_only in (False, True):
            part = case.open(version, read_only=read_only)
            try:
                assert part.opened == case.target.winning(4)
                assert reads(part.store) == case.ref.reads_at(4)
            finally:
                part.abort()
    out, _, code = _cli(["get", case.root, "--partition", "0", "--version", str(2**63 - 2), "a"])
    assert code in (0, 1)
    assert out
    with pytest.raises(ValueError, match=r"version must be >= 0 and < 2\*\*63 - 1"):
        case.open(2**63 - 1)
    assert time.monotonic() - started < 30


# --- on object storage --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forgery", ["name climbing above tmp", "durable climbing out of SSTs", "duplicate names"]
)
def test_a_forged_manifest_is_refused_on_every_kind_of_location(
    target: Target, forgery: str
) -> None:
    """The same checks on S3 (moto_server) and local disk, naming the file by its URI."""
    ref = Reference()
    commit_batches(target, ref, random.Random(82), 0, 4, target.new_local_dir(), options=OPTIONS)
    cleanup(target.files(), OPTIONS)
    path = target.snapshot(3)
    body = FORGED[forgery](None, manifest_body(target.manifest(3)))  # type: ignore[arg-type]
    target.write(path, forge_manifest(body))
    named = target.describe(path)
    for read_only in (False, True):
        with pytest.raises(verstore.CorruptionError, match=re.escape(named)):
            target.open(4, read_only=read_only, options=OPTIONS)
    out, err, code = _cli(["get", *target.cli_args(), "--partition", "0", "a"])
    assert (code, out) == (1, "")
    assert named in err
    out, _, code = _cli(["verify", *target.cli_args(), "--deep"])
    assert code == 1
    assert f"PROBLEM corrupt data in {named}: " in out
    assert not list(target.scratch.rglob("pwned"))
