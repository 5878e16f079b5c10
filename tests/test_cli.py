"""The operator CLI (docs/checkpoint.md, "Operator CLI"): ``verstore inspect|get|verify URI``.

Most cases call ``verstore.cli.main`` in-process (fast, output captured by ``capsys``); the
``python -m verstore`` cases run the real entry point in a subprocess. Exit codes: 0 success, 1
a problem (missing key, damaged file, nothing found, error), 2 an ambiguous store.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from verstore.cli import main

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    NO_SNAPSHOTS,
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
    """Partition 0 at version 5 (BATCHES) and partition 1 at version 2, one store; built once
    per module and kind, shared by the tests (those that damage a file restore it)."""
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


# --- inspect ------------------------------------------------------------------------------------


def test_inspect_lists_stores_partitions_versions_and_snapshots(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", *checkpoint.cli_args())
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"store {STORE}: history_retention_ms={RETENTION_MS} segment_interval_ms={SEGMENT_MS} "
        "format_version=1"
    )
    assert re.fullmatch(
        r"  p=0: versions 1\.\.5 \(5 changelogs, \d+ bytes\), snapshots \[3\], SSTs [1-9]\d* bytes",
        lines[1],
    )
    assert re.fullmatch(
        r"  p=1: versions 1\.\.2 \(2 changelogs, \d+ bytes\), snapshots none, SSTs 0 bytes",
        lines[2],
    )
    assert len(lines) == 3


def test_inspect_accepts_a_store_directory(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, *options = checkpoint.cli_args()
    code, out, _ = run(capsys, "inspect", f"{uri}/{STORE}", *options)
    assert code == 0
    assert out.startswith(f"store {STORE}: ")
    assert "p=0: versions 1..5" in out


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


# --- get ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--version", "5", "a"], "value=five timestamp=50 valid_to=None"),
        (["--version", "2", "a"], "value=two timestamp=20 valid_to=None"),
        (["--version", "5", "--as-of", "25", "a"], "value=two timestamp=20 valid_to=30"),
        (["--version", "2", "b"], "value=bee timestamp=12 valid_to=None"),
        (["--version", "5", "--hex", "ffffff"], "value=0001 timestamp=26 valid_to=None"),
    ],
)
def test_get_reads_a_key_at_a_version(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (0, expected + "\n")


@pytest.mark.parametrize(
    "argv",
    [["--version", "5", "b"], ["--version", "1", "nothing"], ["--version", "0", "a"]],
)
def test_get_of_an_absent_key_prints_none_and_fails(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (1, "None\n")


def test_get_of_a_missing_version_names_it(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "get", *checkpoint.cli_args(), "--partition", "0", "--version", "9", "a"
    )
    assert (code, out) == (1, "")
    assert err.startswith("error: MissingVersionError: version 9 is missing")


def test_get_of_a_damaged_changelog_names_the_file(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint.path("4.changelog")
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
    argv = ["get", *target.cli_args(), "--partition", "0", "--version", "1", "a"]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"name one store with --store (found: {STORE}, other)\n"
    code, out, _ = run(capsys, *argv, "--store", "other")
    assert (code, out) == (0, "value=other timestamp=1 valid_to=None\n")


# --- verify -------------------------------------------------------------------------------------


def test_verify_accepts_a_healthy_checkpoint(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "verify", *checkpoint.cli_args(), "--deep")
    assert (code, out) == (0, "verified 2 partitions: OK\n")


def _problems(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("PROBLEM ")]


@pytest.mark.parametrize("damage", ["truncated", "bit flip"])
def test_verify_names_a_damaged_changelog(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    path = checkpoint.path("2.changelog")
    data = checkpoint.read(path)
    with replaced(checkpoint, path, data[:-2] if damage == "truncated" else flip_byte(data, 66)):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    [problem] = _problems(out)
    assert problem.startswith(f"PROBLEM corrupt data in {checkpoint.describe(path)}: ")
    assert out.endswith("verified 2 partitions: 1 problems\n")


def test_verify_names_a_damaged_manifest(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint.path("3.snapshot")
    with replaced(checkpoint, path, checkpoint.read(path)[:40]):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM corrupt data in {checkpoint.describe(path)}: snapshot manifest does not verify"
    ]


def test_verify_names_a_truncated_or_missing_snapshot_file(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = first_sst(checkpoint.manifest(3))
    path = checkpoint.path(entry["durable"])
    with replaced(checkpoint, path, checkpoint.read(path)[:-1]):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM {checkpoint.describe(path)}: size {entry['size'] - 1}, manifest says "
        f"{entry['size']} (snapshot 3)"
    ]
    with replaced(checkpoint, path, None):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [f"PROBLEM {checkpoint.describe(path)}: missing (snapshot 3)"]


def test_verify_deep_checksums_snapshot_files(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = first_sst(checkpoint.manifest(3))
    path = checkpoint.path(entry["durable"])
    with replaced(checkpoint, path, flip_byte(checkpoint.read(path), entry["size"] // 2)):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
        assert (code, _problems(out)) == (0, [])  # same size: only a deep verify reads the bytes
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args(), "--deep")
    assert code == 1
    assert _problems(out) == [f"PROBLEM {checkpoint.describe(path)}: checksum mismatch"]


def test_verify_reports_a_gap_in_the_versions(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    with replaced(checkpoint, checkpoint.path("4.changelog"), None):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM {checkpoint.describe(checkpoint.files().dir)}: versions [4] are missing"
    ]


def test_verify_reports_deleted_versions_that_no_snapshot_covers(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    with replaced(checkpoint, checkpoint.path("1.changelog", partition=1), None):
        code, out, _ = run(capsys, "verify", *checkpoint.cli_args())
    assert code == 1
    assert _problems(out) == [
        f"PROBLEM {checkpoint.describe(checkpoint.files(1).dir)}: versions before 2 were "
        "deleted and no snapshot covers them"
    ]


def test_verify_reports_a_broken_version_chain(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = Reference()
    rng = random.Random(41)
    commit_batches(target, ref, rng, 0, 2, target.new_local_dir(), options=NO_SNAPSHOTS)
    old_two = target.read(target.path("2.changelog"))
    commit_batches(target, ref, rng, 1, 3, target.new_local_dir(), options=NO_SNAPSHOTS)
    code, out, _ = run(capsys, "verify", *target.cli_args())
    assert (code, _problems(out)) == (0, [])
    target.write(target.path("2.changelog"), old_two)
    code, out, _ = run(capsys, "verify", *target.cli_args())
    assert code == 1
    [problem] = _problems(out)
    assert problem.startswith(
        f"PROBLEM {target.describe(target.path('3.changelog'))}: broken version chain"
    )


def test_verify_finds_nothing_in_an_empty_location(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "verify", *target.cli_args())
    assert (code, out) == (1, "")
    assert err == f"no verstore checkpoint at {target.uri}\n"


def test_a_malformed_storage_option_is_refused(target: Target) -> None:
    with pytest.raises(SystemExit, match="--storage-option must be key=value, got 'oops'"):
        main(["inspect", target.uri, "--storage-option", "oops"])


# --- python -m verstore -------------------------------------------------------------------------


def test_python_m_verstore_runs_each_command(checkpoint: Target) -> None:
    args = checkpoint.cli_args()
    inspect = run_module("inspect", *args)
    assert inspect.returncode == 0, inspect.stderr
    assert "p=0: versions 1..5" in inspect.stdout
    get = run_module("get", *args, "--partition", "0", "--version", "4", "a")
    assert get.returncode == 0, get.stderr
    assert get.stdout == "value=four timestamp=30 valid_to=None\n"
    path = checkpoint.path("5.changelog")
    with replaced(checkpoint, path, checkpoint.read(path)[:10]):
        verify = run_module("verify", *args)
    assert verify.returncode == 1
    assert f"PROBLEM corrupt data in {checkpoint.describe(path)}" in verify.stdout


def test_a_missing_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["get", "/nowhere", "KEY"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: --partition, --version" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_a_damaged_meta_file_is_named(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = checkpoint.files().meta
    with replaced(checkpoint, path, b"{damaged"):
        code, out, err = run(capsys, command, *checkpoint.cli_args())
    assert (code, out) == (1, "")
    assert err == (
        f"error: CorruptionError: corrupt data in {checkpoint.describe(path)}: not a JSON object\n"
    )


def test_spark_inspect_lists_changelogs_and_snapshots(tmp_path: Path) -> None:
    """verstore.spark.inspect: one row per changelog and snapshot, filterable."""
    from verstore.checkpoint import CheckpointOptions, PartitionStore
    from verstore.spark import inspect

    root = tmp_path / "root"
    options = CheckpointOptions(snapshot_interval=2)
    for version in range(3):
        part = PartitionStore.open(
            str(root),
            "s",
            0,
            version,
            tmp_path / "local",
            history_retention_ms=100,
            options=options,
        )
        part.store.put(b"k", str(version).encode(), version)
        part.commit()
    table = inspect(str(root), "s")
    rows = table.to_pylist()
    assert [(r["version"], r["kind"]) for r in rows] == [
        (1, "changelog"),
        (2, "changelog"),
        (3, "changelog"),
        (2, "snapshot"),
    ]
    assert all(r["records"] == 1 for r in rows if r["kind"] == "changelog")
    assert inspect(str(root), "s", version=2).num_rows == 2
    assert inspect(str(root), "s", partition=1).num_rows == 0
