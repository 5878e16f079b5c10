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


def shown(key: bytes, value: str, timestamp: int, valid_to: int | None, partition: int = 0) -> str:
    """What ``get`` prints for a record of a store of bytes keys."""
    from verstore.times import iso

    end = "- (the newest version)" if valid_to is None else f"{iso(valid_to)} ({valid_to})"
    return (
        f"partition   {partition}\nkey         {key!r}\nvalue       {value}\n"
        f"valid_from  {iso(timestamp)} ({timestamp})\nvalid_to    {end}\n"
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
        (["a"], shown(b"a", "five", 50, None)),  # the newest version by default
        (["--version", "5", "a"], shown(b"a", "five", 50, None)),
        (["--version", "2", "a"], shown(b"a", "two", 20, None)),
        (["--version", "5", "--as-of", "25", "a"], shown(b"a", "two", 20, 30)),
        (
            ["--version", "5", "--as-of", "1970-01-01T00:00:00.025Z", "a"],
            shown(b"a", "two", 20, 30),
        ),
        (["--version", "2", "b"], shown(b"b", "bee", 12, None)),
        (["--version", "5", "--hex", "ffffff"], shown(b"\xff\xff\xff", "0001", 26, None)),
        (["--version", "9", "a"], shown(b"a", "five", 50, None)),  # above the newest
        (["--lineage", LINEAGE, "--version", "4", "a"], shown(b"a", "four", 30, None)),
    ],
)
def test_get_reads_a_key_at_a_version(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, _ = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (0, expected)


def test_get_without_a_partition_reads_every_one_of_a_store_of_bytes_keys(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "get", *checkpoint.cli_args(), "--version", "2", "b")
    assert (code, out) == (0, shown(b"b", "bee", 12, None))
    assert "reading every partition for the key" in err


def test_get_json_is_one_object_for_scripts(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["get", *checkpoint.cli_args(), "--partition", "0", "--json", "--as-of", "25", "a"]
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert json.loads(out) == {
        "found": True, "partition": 0, "key": {"key": "61"}, "value": {"value": "two"},
        "valid_from": 20, "valid_from_iso": "1970-01-01T00:00:00.020Z",
        "valid_to": 30, "valid_to_iso": "1970-01-01T00:00:00.030Z",
    }  # fmt: skip
    code, out, _ = run(capsys, *args[:-1], "nothing")
    assert (code, json.loads(out)) == (1, {"found": False, "key": {"key": "6e6f7468696e67"}})


@pytest.mark.parametrize(
    "argv",
    [["--version", "5", "b"], ["--version", "1", "nothing"], ["--version", "0", "a"], ["zzz"]],
)
def test_get_of_an_absent_key_says_so_and_fails(
    checkpoint: Target, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, "get", *checkpoint.cli_args(), "--partition", "0", *argv)
    assert (code, out) == (1, "")
    message = err.splitlines()[-1]  # after the rebuild's progress
    assert message.startswith("no version of key key=b'")
    assert message.endswith(f"in partition 0 of store {STORE!r}")


def test_get_of_a_partition_that_never_ran_finds_nothing(
    checkpoint: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "get", *checkpoint.cli_args(), "--partition", "7", "a")
    assert (code, out) == (1, "")
    assert err == f"no version of key key=b'a' in partition 7 of store {STORE!r}\n"


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
    assert (code, out) == (0, shown(b"a", "other", 1, None))


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
    assert (code, out) == (0, shown(b"a", "second query", 1, None))
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
    assert lines[1].split() == ["b'a'", "b'five'", "1970-01-01T00:00:00.050Z", "(50)", "-", "0"]
    assert lines[2].split()[0] == "b'\\xff\\xff\\xff'" and " (26) " in lines[2]


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


# --- keys given as their column values ----------------------------------------------------------

#: 2026-03-01T10:00:00Z.
T0 = 1_772_359_200_000
TYPED = "calibrations"
#: Calibrations keyed by (sensor, channel): (sensor, channel, offset, note, time).
CALIBRATIONS = [
    ("d03", 1, 0.5, "installed", T0),
    ("d03", 1, 0.75, None, T0 + 60_000),
    ("d03", 1, 1.0, "swapped", T0 + 120_000),
    ("d03", 2, 2.0, "ch2", T0 + 30_000),
    ("d03", 0, 0.0, "ch0", T0),
    ("d04", 1, 4.0, "", T0),
]
#: Spark's ``pmod(hash(sensor, channel), 4)``, where the helpers put each key on 4 partitions
#: (tests/spark/test_cli_keys.py checks ``verstore.keys`` against Spark's ``hash()``).
SPARK_PARTITION = {("d03", 1): 2, ("d03", 2): 2, ("d04", 1): 3, ("d03", 0): 1}


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Target:
    """A store of typed keys and values, as the Spark helpers write one: the tuple encoding of
    (sensor: string, channel: int32) -> (offset: double, note: string), each key in its
    partition of 4, one micro-batch."""
    import pyarrow as pa
    from verstore._core import TUPLE_ENCODING, encode_rows
    from verstore.checkpoint import ColumnLayout

    key_schema = pa.schema([("sensor", pa.string()), ("channel", pa.int32())])
    value_schema = pa.schema([("offset", pa.float64()), ("note", pa.string())])
    layout = ColumnLayout.of(TUPLE_ENCODING, key_schema, value_schema)
    scratch = tmp_path_factory.mktemp("typed")
    target = Target("local", str(scratch / "checkpoint"), None, scratch)
    rows = pa.Table.from_pylist(
        [
            {"sensor": s, "channel": c, "offset": o, "note": n, "t": t}
            for s, c, o, n, t in CALIBRATIONS
        ]
    )
    encoded_keys = encode_rows(rows.select(["sensor", "channel"]).cast(key_schema).to_batches()[0])
    values = encode_rows(rows.select(["offset", "note"]).cast(value_schema).to_batches()[0])
    for p in range(4):
        part = target.open(
            0, store=TYPED, partition=p, num_partitions=4, columns=layout,
            history_retention_ms=86_400_000, segment_interval_ms=3_600_000,
        )  # fmt: skip
        for i, (s, c, *_, t) in enumerate(CALIBRATIONS):
            if SPARK_PARTITION[(s, c)] == p:
                part.store.put(encoded_keys[i].as_py(), values[i].as_py(), t)
        part.commit()
    return target


def test_get_finds_a_key_by_its_values_in_its_partition_as_of_an_iso_time(
    typed: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = (
        "partition   2\nsensor      d03\nchannel     1\noffset      0.75\nnote        -\n"
        "valid_from  2026-03-01T10:01:00.000Z (1772359260000)\n"
        "valid_to    2026-03-01T10:02:00.000Z (1772359320000)\n"
    )
    for as_of in ("2026-03-01T10:01:30Z", "2026-03-01T11:01:30+01:00", str(T0 + 90_000)):
        code, out, err = run(capsys, "get", typed.uri, "--as-of", as_of, "d03", "1")
        assert (code, out) == (0, expected), err
    code, out, _ = run(capsys, "get", typed.uri, "d04", "1")  # the newest version
    assert out.splitlines()[-1] == "valid_to    - (the newest version)"
    assert out.splitlines()[:5] == [
        "partition   3", "sensor      d04", "channel     1", "offset      4.0", "note        ",
    ]  # fmt: skip


def test_get_json_of_a_typed_key(typed: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "get", typed.uri, "--json", "--as-of", "2026-03-01T10:00Z", "d03", "1"
    )
    assert (code, json.loads(out)) == (0, {
        "found": True, "partition": 2, "key": {"sensor": "d03", "channel": 1},
        "value": {"offset": 0.5, "note": "installed"},
        "valid_from": T0, "valid_from_iso": "2026-03-01T10:00:00.000Z",
        "valid_to": T0 + 60_000, "valid_to_iso": "2026-03-01T10:01:00.000Z",
    })  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--as-of", "2026-03-01T09:00:00Z", "d03", "1"],
            "no version of key sensor='d03', channel=1 as of 2026-03-01T09:00:00.000Z "
            "(1772355600000) in partition 2 (the key's, as the helpers route it) of store "
            "'calibrations'",
        ),
        (
            ["--partition", "0", "d03", "1"],
            "no version of key sensor='d03', channel=1 in partition 0 of store 'calibrations'",
        ),
        (
            ["--partition", "2", "--hex", b"d03".hex()],
            "no version of key key=b'd03' in partition 2 of store 'calibrations': its keys are "
            "the tuple encoding of (sensor: string, channel: int32); give the key's values "
            "instead of raw bytes",
        ),
    ],
)
def test_get_of_a_typed_key_not_found_says_where_it_looked(
    typed: Target, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "get", typed.uri, *argv)
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == message


def test_get_finds_the_tuple_encoding_in_hex_and_prints_its_columns(
    typed: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    from verstore._core import encode_rows

    key = pa.RecordBatch.from_pylist(
        [{"sensor": "d04", "channel": 1}],
        schema=pa.schema([("sensor", pa.string()), ("channel", pa.int32())]),
    )
    code, out, _ = run(
        capsys, "get", typed.uri, "--partition", "3", "--hex", encode_rows(key)[0].as_py().hex()
    )
    assert code == 0 and out.splitlines()[1:4] == [
        "sensor      d04", "channel     1", "offset      4.0",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["d03"],
            "KEY: the store's keys are (sensor: string, channel: int32): give all 2 values "
            "(scan --prefix takes the first ones), got 1",
        ),
        (["d03", "one"], "KEY: 'one' is not a value of key column 'channel' (int32)"),
        (
            ["d03", "1", "x"],
            "KEY: the store's keys are (sensor: string, channel: int32): give 1 to 2 values, got 3",
        ),
        (["d03", "3000000000"], "KEY: 3000000000 is not a value of key column 'channel'"),
        (
            ["--as-of", "yesterday", "d03", "1"],
            "--as-of must be epoch milliseconds or an ISO 8601 time such as "
            "2026-03-01T10:00:00Z, got 'yesterday'",
        ),
    ],
)
def test_get_names_a_key_value_it_cannot_take(
    typed: Target, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "get", typed.uri, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}")


def test_scan_prefix_takes_the_first_key_values(
    typed: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "scan", typed.uri, "--prefix", "d03", "--as-of", "2026-03-01T10:01Z")
    assert code == 0
    assert out.splitlines() == [
        "sensor  channel  offset  note  valid_from                                valid_to"
        "                                  partition",
        "d03     0        0.0     ch0   2026-03-01T10:00:00.000Z (1772359200000)  -"
        "                                         1",
        "d03     1        0.75    -     2026-03-01T10:01:00.000Z (1772359260000)  "
        "2026-03-01T10:02:00.000Z (1772359320000)  2",
        "d03     2        2.0     ch2   2026-03-01T10:00:30.000Z (1772359230000)  -"
        "                                         2",
    ]
    # a whole key reads its own partition only
    code, out, _ = run(
        capsys, "scan", typed.uri, "--history", "--prefix", "d03", "1", "--json",
        "--from", "2026-03-01T10:00:30Z", "--to", "2026-03-01T10:02:00Z",
    )  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [
        (r["offset"], r["valid_from_iso"], r["valid_to_iso"], r["partition"]) for r in rows
    ] == [
        (0.5, "2026-03-01T10:00:00.000Z", "2026-03-01T10:01:00.000Z", 2),
        (0.75, "2026-03-01T10:01:00.000Z", "2026-03-01T10:02:00.000Z", 2),
        (1.0, "2026-03-01T10:02:00.000Z", None, 2),
    ]
    assert rows[0] == {
        "sensor": "d03", "channel": 1, "offset": 0.5, "note": "installed",
        "valid_from": T0, "valid_from_iso": "2026-03-01T10:00:00.000Z",
        "valid_to": T0 + 60_000, "valid_to_iso": "2026-03-01T10:01:00.000Z", "partition": 2,
    }  # fmt: skip


def test_scan_prints_times_as_iso_and_ms_never_in_float_notation(
    typed: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """Some versions have a valid_to, others none (null): pandas once printed 1.772359e+12."""
    code, out, _ = run(capsys, "scan", typed.uri, "--history")
    assert code == 0
    assert "e+" not in out and "nan" not in out.lower()
    assert "2026-03-01T10:01:00.000Z (1772359260000)" in out
    assert len(out.splitlines()) == 1 + len(CALIBRATIONS)


def test_changes_json_is_one_object_a_write(
    typed: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "changes", typed.uri, "--json", "--partition", "2")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["sensor"], r["channel"], r["offset"], r["valid_from_iso"]) for r in rows] == [
        ("d03", c, o, iso)
        for c, o, iso in [
            (1, 0.5, "2026-03-01T10:00:00.000Z"),
            (1, 0.75, "2026-03-01T10:01:00.000Z"),
            (1, 1.0, "2026-03-01T10:02:00.000Z"),
            (2, 2.0, "2026-03-01T10:00:30.000Z"),
        ]
    ]
    assert {r["batch_id"] for r in rows} == {0} and {r["change_type"] for r in rows} == {"put"}


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
    assert get.stdout == shown(b"a", "four", 30, None)
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
    assert (code, out) == (0, shown(b"a", "1", 1, None))
    code, out, _ = run(capsys, "verify", *target.cli_args())
    assert (code, out) == (0, "verified 1 partitions: OK\n")


def test_a_missing_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["get", "/nowhere"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: key" in capsys.readouterr().err


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
