"""The operator CLI (docs/checkpoint.md, "Operator CLI"): ``verstore inspect|get|verify URI``, and
``verstore.spark.inspect``.

Most cases call ``verstore.cli.main`` in-process (fast, output captured by ``capsys``); the
``python -m verstore`` cases run the real entry point in a subprocess. Exit codes: 0 success, 1
a problem (missing key, damaged file, nothing found, error), 2 an ambiguous store or lineage.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from verstore.checkpoint import CheckpointOptions
from verstore.cli import main

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    LINEAGE,
    RETENTION_MS,
    SEGMENT_MS,
    STORE,
    Op,
    Reference,
    Target,
    commit_batches,
    first_sst,
    flip_byte,
    make_target,
    replaced,
    share,
)

pytest_plugins = ["checkpoint_helpers"]

#: Five versions of partition 0 (snapshot at 3): ``a`` rewritten, ``b`` deleted at 25.
BATCHES: list[list[Op]] = [
    [("put", b"a", b"one", 10), ("put", b"b", b"bee", 12)],
    [("put", b"a", b"two", 20)],
    [("delete", b"b", None, 25), ("put", b"\xff\xff\xff", b"\x00\x01", 26)],
    [("put", b"a", b"four", 30)],
    [("put", b"a", b"five", 50), ("put", b"a", b"too old", 5)],
]


@pytest.fixture(scope="module", params=["local", "s3"])
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Target, Reference, Path]:
    """Partition 0 at version 5 (BATCHES) and partition 1 at version 2, one store and lineage;
    built once per module and kind, shared by the tests (those that damage a file restore it)."""
    target = make_target(request, request.param, tmp_path_factory.mktemp("template"))
    local = target.new_local_dir()
    for version, ops in enumerate(BATCHES):
        target.commit(version, ops, local)
    commit_batches(target, Reference(), random.Random(40), 0, 2, local, partition=1)
    return target, Reference(), local


@pytest.fixture
def checkpoint(template: tuple[Target, Reference, Path], tmp_path: Path) -> Target:
    return share(template, tmp_path)[0]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verstore", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _problems(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("PROBLEM ")]


# --- inspect ------------------------------------------------------------------------------------


def test_inspect_lists_stores_lineages_partitions_versions_and_snapshots(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", *checkpoint.cli_args())
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == [
        f"store {STORE}",
        f"  lineage {LINEAGE}: history_retention_ms={RETENTION_MS} "
        f"segment_interval_ms={SEGMENT_MS}",
    ]
    assert re.fullmatch(
        r"    p=0: versions 0\.\.5 \(5 changelogs, \d+ bytes\), snapshots \[3\], "
        r"SSTs [1-9]\d* bytes",
        lines[2],
    )
    assert re.fullmatch(
        r"    p=1: versions 0\.\.2 \(2 changelogs, \d+ bytes\), snapshots none, SSTs 0 bytes",
        lines[3],
    )
    assert len(lines) == 4


def test_inspect_accepts_a_store_directory(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, *options = checkpoint.cli_args()
    code, out, _ = run(capsys, "inspect", f"{uri}/{STORE}", *options)
    assert code == 0
    assert out.startswith(f"store {STORE}\n")
    assert "p=0: versions 0..5" in out


def test_inspect_finds_nothing_in_an_empty_location(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "inspect", *target.cli_args())
    assert (code, out) == (1, "")
    assert err == f"no verstore checkpoint at {target.uri}\n"


def test_inspect_of_another_store_name_finds_nothing(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "inspect", *checkpoint.cli_args(), "--store", "other")
    assert code == 1
    assert "no verstore checkpoint" in err


def test_inspect_shows_lineages_and_commits_off_the_winning_chain(
    target: Target, capsys: pytest.CaptureFixture[str], ordered_attempts: None
) -> None:
    target.commit(0, [("put", b"a", b"1", 1)])
    target.commit(0, [("put", b"a", b"1", 1)])  # a retry: two commits of version 1
    target.commit(0, [("put", b"a", b"q2", 1)], lineage="q2")
    code, out, _ = run(capsys, "inspect", *target.cli_args())
    assert code == 0
    assert re.search(
        r"  lineage default: .*\n    p=0: versions 0\.\.1 \(2 changelogs, 1 off the winning chain",
        out,
    )
    assert re.search(r"  lineage q2: .*\n    p=0: versions 0\.\.1 \(1 changelogs, \d+ bytes", out)
    code, out, _ = run(capsys, "inspect", *target.cli_args(), "--lineage", "q2")
    assert code == 0
    assert "lineage default" not in out
    assert "lineage q2" in out


# --- get ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["a"], "value=five timestamp=50 valid_to=None"),  # the newest version by default
        (["--version", "5", "a"], "value=five timestamp=50 valid_to=None"),
        (["--version", "2", "a"], "value=two timestamp=20 valid_to=None"),
        (["--version", "5", "--as-of", "25", "a"], "value=two timestamp=20 valid_to=30"),
        (["--version", "2", "b"], "value=bee timestamp=12 valid_to=None"),
        (["--version", "5", "--hex", "ffffff"], "value=0001 timestamp=26 valid_to=None"),
        (["--version", "9", "a"], "value=five timestamp=50 valid_to=None"),  # above the newest
        (["--lineage", LINEAGE, "--version", "4", "a"], "value=four timestamp=30 valid_to=None"),
    ],
)
def test_get_reads_a_key_at_a_version(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (0, expected + "\n")


@pytest.mark.parametrize(
    "argv",
    [["--version", "5", "b"], ["--version", "1", "nothing"], ["--version", "0", "a"], ["zzz"]],
)
def test_get_of_an_absent_key_prints_none_and_fails(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (1, "None\n")


def test_get_of_a_partition_that_never_ran_finds_nothing(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "7", "a")
    assert (code, out) == (1, "None\n")


def test_get_of_a_version_older_than_cleanup_kept_names_it(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2, orphan_grace_s=0)
    commit_batches(
        target, Reference(), random.Random(42), 0, 4, target.new_local_dir(), options=options
    )
    argv = ["get", *target.cli_args(), "--partition", "0", "--version", "1", "a"]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert re.match(
        r"error: MissingVersionError: version 1 is missing .*oldest version kept \(2\)", err
    )


def test_get_of_a_damaged_changelog_names_the_file(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint.changelog(4)
    with replaced(checkpoint, path, flip_byte(checkpoint.read(path), 70)):
        code, out, err = run(
            capsys, "get", *checkpoint.cli_args(), "--partition", "0", "--version", "5", "a"
        )
    assert (code, out) == (1, "")
    assert err.startswith("error: CorruptionError: corrupt data in ")
    assert checkpoint.describe(path) in err


def test_get_needs_a_store_name_when_the_root_holds_several(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    target.commit(0, [("put", b"a", b"mine", 1)])
    target.commit(0, [("put", b"a", b"other", 1)], store="other")
    argv = ["get", *target.cli_args(), "--partition", "0", "a"]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"error: name one store with --store (found: {STORE}, other)\n"
    code, out, _ = run(capsys, *argv, "--store", "other")
    assert (code, out) == (0, "value=other timestamp=1 valid_to=None\n")


def test_get_needs_a_lineage_when_the_store_holds_several(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    target.commit(0, [("put", b"a", b"first query", 1)], lineage="q1")
    target.commit(0, [("put", b"a", b"second query", 1)], lineage="q2")
    argv = ["get", *target.cli_args(), "--partition", "0", "a"]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"error: store {STORE}: name one lineage with --lineage (found: q1, q2)\n"
    code, out, _ = run(capsys, *argv, "--lineage", "q2")
    assert (code, out) == (0, "value=second query timestamp=1 valid_to=None\n")
    code, out, err = run(capsys, *argv, "--lineage", "q3")
    assert (code, out) == (1, "")
    assert err == f"error: store {STORE} has no lineage 'q3' (found: q1, q2)\n"


# --- scan ---------------------------------------------------------------------------------------


def test_scan_prints_each_keys_latest_version(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "scan", *checkpoint.cli_args(), "--partition", "0")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["key", "value", "valid_from", "valid_to", "partition"]
    # a is "five" since 50; b was deleted at 25; the key ff ff ff holds 00 01 since 26
    assert len(lines) == 3
    assert "b'a'" in lines[1] and "b'five'" in lines[1] and " 50 " in lines[1]
    assert "b'\\xff\\xff\\xff'" in lines[2] and " 26 " in lines[2]


def test_scan_as_of_a_time_and_with_history_to_parquet(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    args = [*checkpoint.cli_args(), "--partition", "0"]
    code, _, err = run(capsys, "scan", *args, "--as-of", "21", "--parquet", str(tmp_path / "a.pq"))
    assert code == 0 and "wrote 2 rows" in err
    rows = pq.read_table(tmp_path / "a.pq").to_pylist()
    assert [(r["key"], r["value"], r["valid_from"], r["valid_to"]) for r in rows] == [
        (b"a", b"two", 20, 30),
        (b"b", b"bee", 12, 25),
    ]
    code, _, _ = run(capsys, "scan", *args, "--history", "--parquet", str(tmp_path / "h.pq"))
    history = pq.read_table(tmp_path / "h.pq").to_pylist()
    assert [(r["key"], r["value"]) for r in history] == [
        (b"a", b"one"), (b"a", b"two"), (b"a", b"four"), (b"a", b"five"), (b"b", b"bee"),
        (b"\xff\xff\xff", b"\x00\x01"),
    ]  # fmt: skip
    code, _, _ = run(capsys, "scan", *args, "--version", "1", "--parquet", str(tmp_path / "1.pq"))
    assert [(r["key"], r["value"]) for r in pq.read_table(tmp_path / "1.pq").to_pylist()] == [
        (b"a", b"one"),
        (b"b", b"bee"),
    ]


def test_scan_refuses_as_of_with_history(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "scan", *checkpoint.cli_args(), "--history", "--as-of", "3")
    assert code == 2 and "with --history use --from/--to" in err


# --- verify -------------------------------------------------------------------------------------


def test_verify_accepts_a_healthy_checkpoint(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "verify", *checkpoint.cli_args(), "--deep")
    assert (code, out) == (0, "verified 2 partitions: OK\n")


@pytest.mark.parametrize("damage", ["truncated", "bit flip"])
def test_verify_names_a_damaged_changelog(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    path = checkpoint.changelog(2)
    data = checkpoint.read(path)
    with replaced(checkpoint, path, data[:-2] if damage == "truncated" else flip_byte(data, 66)):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    [problem] = _problems(out)
    assert problem.startswith(f"PROBLEM corrupt data in {checkpoint.describe(path)}: ")
    assert out.endswith("verified 2 partitions: 1 problems\n")


def test_verify_names_a_changelog_under_another_commits_name(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint.changelog(3)
    with replaced(checkpoint, path, checkpoint.read(checkpoint.changelog(2))):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM {checkpoint.describe(path)}: its header names another commit than its file name"
    ]


def test_verify_names_a_damaged_manifest(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint.snapshot(3)
    with replaced(checkpoint, path, checkpoint.read(path)[:40]):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM corrupt data in {checkpoint.describe(path)}: snapshot manifest is not JSON"
    ]


def test_verify_names_a_truncated_or_missing_snapshot_file(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = first_sst(checkpoint.manifest(3))
    path = checkpoint.path(entry.durable)
    with replaced(checkpoint, path, checkpoint.read(path)[:-1]):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM {checkpoint.describe(path)}: size {entry.size - 1}, manifest says "
        f"{entry.size} (snapshot 3)"
    ]
    with replaced(checkpoint, path, None):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [f"PROBLEM {checkpoint.describe(path)}: missing (snapshot 3)"]


def test_verify_deep_checksums_snapshot_files(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = first_sst(checkpoint.manifest(3))
    path = checkpoint.path(entry.durable)
    with replaced(checkpoint, path, flip_byte(checkpoint.read(path), entry.size // 2)):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
        assert (code, _problems(out)) == (0, [])  # same size: only a deep verify reads the bytes
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args(), "--deep")
    assert code == 1
    assert _problems(out) == [f"PROBLEM {checkpoint.describe(path)}: checksum mismatch"]


@pytest.mark.parametrize(("partition", "version"), [(0, 4), (1, 1)])
def test_verify_reports_a_broken_version_chain(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], partition: int, version: int
) -> None:
    """A lost changelog under the newest version, with no snapshot above it."""
    newest = checkpoint.changelog(version + 1, partition)
    with replaced(checkpoint, checkpoint.changelog(version, partition), None):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    [problem] = _problems(out)
    assert problem.startswith(
        f"PROBLEM corrupt data in {checkpoint.describe(newest)}: broken version chain, "
        f"version {version + 1} needs version {version}"
    )


def test_verify_accepts_commits_off_the_winning_chain_and_names_foreign_files(
    target: Target, capsys: pytest.CaptureFixture[str], ordered_attempts: None
) -> None:
    local = target.new_local_dir()
    commit_batches(target, Reference(), random.Random(43), 0, 2, local)
    commit_batches(target, Reference(), random.Random(44), 1, 2, target.new_local_dir())
    code, out, _ = run(capsys, "verify", *target.cli_args(), "--deep")
    assert (code, out) == (0, "verified 1 partitions: OK\n")
    foreign = target.path("notes.txt")
    target.write(foreign, b"an operator's notes")
    code, out, _ = run(capsys, "verify", *target.cli_args())
    assert code == 1
    assert _problems(out) == [f"PROBLEM {target.describe(foreign)}: not a verstore file"]


def test_verify_finds_nothing_in_an_empty_location(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "verify", *target.cli_args())
    assert (code, out) == (1, "")
    assert err == f"no verstore checkpoint at {target.uri}\n"


def test_a_malformed_storage_option_is_refused(target: Target) -> None:
    with pytest.raises(SystemExit, match="--storage-option must be key=value, got 'oops'"):
        main(["inspect", target.uri, "--storage-option", "oops"])


@pytest.mark.parametrize("command", ["inspect", "verify", "get"])
def test_a_damaged_meta_file_is_named(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = checkpoint.lineage_files().meta
    extra = ["--partition", "0", "a"] if command == "get" else []
    with replaced(checkpoint, path, b"{damaged"):
        code, out, err = run(capsys, command, *checkpoint.cli_args(), *extra)
    assert code == 1
    message = f"corrupt data in {checkpoint.describe(path)}: not JSON"
    if command == "get":
        assert (out, err) == ("", f"error: CorruptionError: {message}\n")
    else:
        assert f"PROBLEM {message}" in out


@pytest.mark.parametrize("command", ["inspect", "verify", "get"])
def test_a_format1_store_is_named(
    target: Target, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    store_dir = target.location.path(STORE)
    format1 = {"format_version": 1, "history_retention_ms": 40, "segment_interval_ms": 10}
    target.write(f"{store_dir}/_meta.json", json.dumps(format1).encode())
    extra = ["--partition", "0", "a"] if command == "get" else []
    code, out, err = run(capsys, command, *target.cli_args(), *extra)
    assert code == 1
    message = f"{target.describe(store_dir)} holds a store of checkpoint format 1"
    assert message in out + err


# --- python -m verstore -------------------------------------------------------------------------


def test_python_m_verstore_runs_each_command(checkpoint: Target) -> None:
    args = checkpoint.cli_args()
    inspect = run_module("inspect", *args)
    assert inspect.returncode == 0, inspect.stderr
    assert "p=0: versions 0..5" in inspect.stdout
    get = run_module("get", *args, "--partition", "0", "--version", "4", "a")
    assert get.returncode == 0, get.stderr
    assert get.stdout == "value=four timestamp=30 valid_to=None\n"
    path = checkpoint.changelog(5)
    with replaced(checkpoint, path, checkpoint.read(path)[:10]):
        verify = run_module("verify", *args)
    assert verify.returncode == 1
    assert f"PROBLEM corrupt data in {checkpoint.describe(path)}" in verify.stdout
    missing = run_module("get", *args, "--store", "nope", "--partition", "0", "a")
    assert missing.returncode == 1
    assert missing.stderr == f"error: no store 'nope' at {args[0]} (found: {STORE})\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--version", "-1", "a"], "version must be >= 0"),
        (["--version", str(2**63), "a"], "version must be >= 0 and < 2**63 - 1"),
        (["--partition", "-1", "a"], "partition must be an int >= 0"),
        (["--hex", "zz"], "KEY must be hex digits with --hex, got 'zz'"),
        (["--lineage", "../x", "a"], "store orders has no lineage '../x'"),
    ],
)
def test_a_bad_argument_value_is_a_usage_error(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    args = ["get", *checkpoint.cli_args(), "--partition", "0", *argv]
    if argv[0] == "--partition":
        args = ["get", *checkpoint.cli_args(), *argv]
    code, out, err = run(capsys, *args)
    assert (code, out) == (1 if "lineage" in message else 2, "")
    assert err.startswith("error: ")
    assert message in err


def test_plain_files_beside_the_stores_are_not_stores(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    target.commit(0, [("put", b"a", b"1", 1)])
    target.write(target.location.path("README"), b"what this bucket holds")
    target.write(target.location.path("q=stray"), b"a file, not a lineage")
    code, out, _ = run(capsys, "inspect", *target.cli_args())
    assert code == 0
    assert out.splitlines()[0] == f"store {STORE}"
    code, out, _ = run(capsys, "get", *target.cli_args(), "--partition", "0", "a")
    assert (code, out) == (0, "value=1 timestamp=1 valid_to=None\n")
    code, out, _ = run(capsys, "verify", *target.cli_args())
    assert (code, out) == (0, "verified 1 partitions: OK\n")


def test_a_missing_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["get", "/nowhere", "KEY"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: --partition" in capsys.readouterr().err


# --- verstore.spark.inspect ---------------------------------------------------------------------


def test_spark_inspect_lists_changelogs_and_snapshots(
    target: Target, ordered_attempts: None
) -> None:
    """One row per changelog and snapshot, with lineage, parents and whether each commit is on
    the winning chain; filterable by lineage, partition and version."""
    from verstore.spark import inspect

    options = CheckpointOptions(snapshot_interval=2)
    local = target.new_local_dir()
    for version in range(3):
        target.commit(
            version, [("put", b"k", str(version).encode(), version)], local, options=options
        )
    loser = target.winning(3)
    target.commit(2, [("put", b"k", b"retry", 2)], options=options)  # wins over the first 3
    target.commit(0, [("put", b"k", b"q2", 0), ("put", b"j", b"q2", 0)], lineage="q2")
    table = inspect(target.uri, STORE, storage_options=target.storage_options)
    assert table.column_names == [
        "lineage",
        "partitioning",
        "partition",
        "version",
        "kind",
        "bytes",
        "records",
        "files",
        "attempt",
        "parent_version",
        "parent_attempt",
        "winning",
    ]
    rows = table.to_pylist()
    summary = [
        (r["lineage"], r["version"], r["kind"], r["parent_version"], r["winning"]) for r in rows
    ]
    assert summary == [
        (LINEAGE, 1, "changelog", 0, True),
        (LINEAGE, 2, "changelog", 1, True),
        (LINEAGE, 3, "changelog", 2, False),
        (LINEAGE, 3, "changelog", 2, True),
        (LINEAGE, 2, "snapshot", None, True),
        ("q2", 1, "changelog", 0, True),
    ]
    two = target.winning(2)
    assert rows[2]["attempt"] == loser.attempt.hex()
    assert rows[3]["attempt"] == target.winning(3).attempt.hex()
    assert rows[3]["parent_attempt"] == two.attempt.hex()
    assert rows[0]["parent_attempt"] == "00" * 16
    assert [r["records"] for r in rows] == [1, 1, 1, 1, None, 2]
    assert rows[4]["files"] == len(target.manifest(2).files)
    assert rows[4]["bytes"] == sum(f.size for f in target.manifest(2).files)
    assert all(r["bytes"] > 0 for r in rows)
    options_kw = {"storage_options": target.storage_options}
    assert inspect(target.uri, STORE, version=2, **options_kw).num_rows == 2
    assert inspect(target.uri, STORE, partition=1, **options_kw).num_rows == 0
    assert inspect(target.uri, STORE, lineage="q2", **options_kw).num_rows == 1
    assert inspect(target.uri, "nothing", **options_kw).num_rows == 0
