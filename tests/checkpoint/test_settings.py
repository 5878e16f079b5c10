"""What a lineage records once and checks on every open (docs/checkpoint.md, "Query lineages",
"``_meta.json``"): the store's configuration, partition count and columns, the tuple encoding,
the arguments and ``CheckpointOptions`` checked before anything is touched, a new query's own
lineage on a populated root, and the formats refused.

Tests with ``target`` run against a local directory and an S3-compatible server; the long
lineage test runs on a local directory only.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import verstore
import verstore.spark
from verstore.checkpoint import ROOT, CheckpointOptions, ColumnLayout, PartitionStore

pytest.register_assert_rewrite("checkpoint_helpers")
from checkpoint_helpers import (  # noqa: E402 (imported once marked for rewriting)
    RETENTION_MS,
    STORE,
    Reference,
    Target,
    commit_batches,
    reads,
)

pytest_plugins = ["checkpoint_helpers"]


# --- configuration and arguments ----------------------------------------------------------------


def test_reopening_with_another_configuration_is_refused(
    built: tuple[Target, Reference, Path],
) -> None:
    target, _, _ = built
    with pytest.raises(verstore.IncompatibleConfigError, match="history_retention_ms=40"):
        target.open(7, history_retention_ms=RETENTION_MS + 1)
    with pytest.raises(verstore.IncompatibleConfigError, match="segment_interval_ms=10"):
        target.open(7, segment_interval_ms=None)
    # The template recorded no partition count: a caller that knows one cannot trust it.
    with pytest.raises(verstore.IncompatibleConfigError, match="num_partitions=None"):
        target.open(7, read_only=True, num_partitions=3)


def test_a_latest_ttl_is_recorded_in_a_format_3_settings_file_and_changes_only_by_a_rewrite(
    target: Target,
) -> None:
    """docs/checkpoint.md, ``_meta.json``: an open with another TTL is refused, naming the
    command that rewrites the store under it (a new store name would start empty), and only
    the settings file of a lineage with a TTL is format 3."""
    part = target.open(0, latest_ttl_ms=25)
    part.store.put(b"a", b"1", 10)
    part.store.put(b"b", b"2", 55)
    part.commit()
    meta = json.loads(target.read(target.lineage_files().meta))
    assert (meta["format_version"], meta["latest_ttl_ms"]) == (3, 25)
    before = target.tree()
    for other in (None, 24, 26):
        with pytest.raises(
            verstore.IncompatibleConfigError,
            match=rf"latest_ttl_ms=25, cannot open it with latest_ttl_ms={other}: to change it "
            r"and keep the store's history, stop the query, run verstore\.spark\."
            rf"change_store_settings\(spark, checkpoint_root, 'orders', "
            rf"{'remove_latest_ttl=True' if other is None else f'latest_ttl={other}'}, "
            r"checkpoint_location=\.\.\.\) and restart it with the new value; or restart it with "
            "latest_ttl_ms=25",
        ):
            target.open(1, latest_ttl_ms=other)
    assert target.tree() == before
    for read_only in (False, True):
        part = target.open(1, latest_ttl_ms=25, read_only=read_only)
        assert part.store.latest_ttl_ms == 25
        assert part.store.get(b"a") is None  # a@10 ended at 35, stream time is 55
        assert part.store.get(b"a", 20) == verstore.VersionedRecord(b"1", 10, 35)
        part.abort()
    # a lineage without a TTL writes format 2, as before
    target.open(0, lineage="q2").commit()
    plain = json.loads(target.read(target.lineage_files(lineage="q2").meta))
    assert plain["format_version"] == 2
    assert "latest_ttl_ms" not in plain


def test_partition_count_and_columns_are_checked_once_recorded(target: Target) -> None:
    price = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "double"),))
    target.open(0, num_partitions=4, columns=price).abort()
    target.open(0, num_partitions=4, columns=price).abort()
    target.open(0).abort()  # None: the caller does not know them, nothing is checked
    with pytest.raises(verstore.IncompatibleConfigError, match=r"num_partitions=4.*=5"):
        target.open(0, num_partitions=5)
    other = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "float"),))
    with pytest.raises(
        verstore.IncompatibleConfigError,
        match=r"price: double\).*this query encodes .*price: float",
    ):
        target.open(0, columns=other)


def test_another_version_of_the_tuple_encoding_is_refused(target: Target) -> None:
    price = ColumnLayout("verstore-tuple-1", (("symbol", "string"),), (("price", "double"),))
    target.open(0, columns=price).commit()
    meta_path = target.lineage_files().meta
    meta = json.loads(target.read(meta_path))
    meta["columns"]["encoding"] = "verstore-tuple-0"
    target.write(meta_path, json.dumps(meta).encode())
    before = target.tree()
    for read_only in (False, True):
        with pytest.raises(
            verstore.IncompatibleFormatError,
            match=r"_meta.json holds keys and values in the verstore-tuple-0 encoding; this "
            r"verstore reads verstore-tuple-1",
        ):
            target.open(1, read_only=read_only)
    assert target.tree() == before


def test_each_lineage_records_its_own_settings(target: Target) -> None:
    target.commit(0, [("put", b"a", b"1", 1)])
    part = target.open(0, lineage="q2", history_retention_ms=RETENTION_MS * 2)
    assert part.opened == ROOT
    part.abort()
    with pytest.raises(verstore.IncompatibleConfigError):
        target.open(1, history_retention_ms=RETENTION_MS * 2)


def test_bad_arguments_raise_value_errors(target: Target) -> None:
    with pytest.raises(ValueError, match="version must be >= 0"):
        target.open(-1)
    with pytest.raises(ValueError, match=r"version must be >= 0 and < 2\*\*63 - 1"):
        target.open(2**63 - 1)
    with pytest.raises(ValueError, match="version must be an int"):
        target.open(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition must be an int >= 0"):
        target.open(0, partition=-1)
    for name in ("a/b", "..", ".hidden", "", "x" * 201):
        with pytest.raises(ValueError, match=r"store_name must be .*1-200"):
            target.open(0, store=name)
        with pytest.raises(ValueError, match=r"lineage must be .*1-200"):
            target.open(0, lineage=name)
    with pytest.raises(TypeError, match=r"use PartitionStore\.open"):
        PartitionStore()
    assert target.tree() == {}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("snapshot_interval", 0, "snapshot_interval must be an int >= 1"),
        ("snapshot_interval", True, "snapshot_interval must be an int >= 1"),
        ("min_versions_to_retain", 0, "min_versions_to_retain must be an int >= 2"),
        ("min_versions_to_retain", 1, "must be >= 2, got 1: a retry of the last micro-batch"),
        ("lock_timeout_s", -1, "lock_timeout_s must be a number >= 0"),
        ("orphan_grace_s", -0.5, "orphan_grace_s must be a number >= 0"),
        ("replay_chunk_records", 0, "replay_chunk_records must be an int >= 1"),
    ],
)
def test_checkpoint_options_are_validated(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CheckpointOptions(**{field: value})  # type: ignore[arg-type]


# --- lineages and formats -------------------------------------------------------------------------


def _lineage_tree(target: Target, lineage: str) -> dict[str, int]:
    prefix = f"{STORE}/q={lineage}/"
    return {k: v for k, v in target.tree().items() if k.startswith(prefix)}


def test_a_new_query_on_a_populated_root_starts_its_own_lineage(tmp_path: Path) -> None:
    """Lineage 1 commits 1..150 with cleanup; lineage 2 (a new query, same root, store name and
    local directory) opens 0 and gets the empty state, commits 1..20 with cleanup; then lineage
    1 goes on. Neither touches the other's files and both stay exact."""
    target = Target("local", str(tmp_path / "checkpoint"), None, tmp_path)
    options = CheckpointOptions(snapshot_interval=5, min_versions_to_retain=4, orphan_grace_s=0)
    local = target.new_local_dir()
    refs = {"q1": Reference(), "q2": Reference()}
    rng = random.Random(71)

    def run(lineage: str, start: int, stop: int) -> None:
        commit_batches(
            target,
            refs[lineage],
            rng,
            start,
            stop,
            local,
            ops_per_batch=4,
            options=options,
            lineage=lineage,
        )

    def exact(lineage: str, newest: int) -> None:
        for version in range(newest - 3, newest + 1):
            part = target.open(version, lineage=lineage, read_only=True, options=options)
            try:
                assert reads(part.store) == refs[lineage].reads_at(version), (lineage, version)
            finally:
                part.abort()

    run("q1", 0, 150)
    q1_files = _lineage_tree(target, "q1")
    assert any(name.endswith(".snapshot") for name in q1_files)
    assert not any(name.startswith(f"{STORE}/q=q1/p=0/1-") for name in q1_files)  # cleaned
    part = target.open(0, lineage="q2", options=options, local_dir=local)
    assert part.opened == ROOT
    assert part.store.observed_stream_time == -1
    part.abort()
    run("q2", 0, 20)
    assert _lineage_tree(target, "q1") == q1_files
    q2_files = _lineage_tree(target, "q2")
    assert not any(name.startswith(f"{STORE}/q=q2/p=0/1-") for name in q2_files)  # cleaned
    exact("q1", 150)
    exact("q2", 20)
    run("q1", 150, 160)
    assert _lineage_tree(target, "q2") == q2_files
    exact("q1", 160)
    exact("q2", 20)
    assert sorted(target.tree()) == sorted(
        [f"{STORE}/q=q1/_meta.json", f"{STORE}/q=q2/_meta.json"]
        + [k for k in target.tree() if "/p=" in k]
    )


def test_min_versions_to_retain_1_is_refused() -> None:
    message = "min_versions_to_retain must be >= 2, got 1"
    with pytest.raises(ValueError, match=message):
        CheckpointOptions(min_versions_to_retain=1)
    # configure refuses it on the driver, before it touches the session.
    with pytest.raises(ValueError, match=message):
        verstore.spark.configure(None, "/tmp/unused", min_versions_to_retain=1)


def test_a_format1_store_is_refused(target: Target) -> None:
    store_dir = target.location.path(STORE)
    format1 = {"format_version": 1, "history_retention_ms": 40, "segment_interval_ms": 10}
    target.write(f"{store_dir}/_meta.json", json.dumps(format1).encode())
    target.write(f"{store_dir}/p=0/1.changelog", b"VSCL")
    before = target.tree()
    for read_only in (False, True):
        with pytest.raises(
            verstore.IncompatibleFormatError,
            match=re.escape(target.describe(store_dir)) + " holds a store of checkpoint format 1",
        ):
            target.open(0, read_only=read_only)
    assert target.tree() == before
