"""Every default the docs state is the code's default.

The docs state defaults in three forms, each checked here against the code (read with
``inspect.signature``, dataclass fields, module constants, or by calling the code that applies
the default):

* signatures: fenced ``name(...) -> T`` blocks and inline ```name(a, *, b=None, c=1)``` spans
  (a parameter list that is a valid ``def`` with a ``*`` or a ``=None``; others are calls);
  every literal default in them is compared;
* the configuration table of docs/spark.md: one row per ``configure`` argument;
* prose ("``memoryLimitMb`` (default 512 MB)"): :data:`STATED`, one entry per statement with
  the pattern that finds it in its doc. A pattern that no longer matches fails too, so a doc
  rewritten without its default, or with another number, is caught like a code change.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import verstore
import verstore.checkpoint
import verstore.spark
from verstore.checkpoint.kept import Keeper
from verstore.spark import _conf, _query, _spill

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/spark.md", "docs/semantics.md", "docs/checkpoint.md")


def text(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def line_of(doc: str, pos: int) -> int:
    return text(doc).count("\n", 0, pos) + 1


def flat(doc: str) -> tuple[str, list[int]]:
    """``doc`` with each run of whitespace one space (prose wraps anywhere), and each flat
    character's offset in the doc."""
    body = text(doc)
    chars, offsets = [], []
    for m in re.finditer(r"\s+|\S", body):
        chars.append(" " if m.group(0).isspace() else m.group(0))
        offsets.append(m.start())
    return "".join(chars), offsets


def number(s: str) -> int:
    """``65 536`` / ``65,536`` / ``65_536`` as an int."""
    return int(re.sub(r"[\s,_\u202f\u00a0]", "", s))


# --- signatures ---------------------------------------------------------------------------------

#: Names in the docs' signatures that are not verstore's (other libraries' APIs).
FOREIGN = {"merge_asof"}


def resolve(name: str) -> Callable[..., Any] | None:
    """The verstore callable a doc's signature names (``configure``, ``VersionedStore.scan``,
    ``verstore.spark.inspect``, ``get``: a store method)."""
    parts = name.split(".")
    if parts[0] == "verstore":
        parts = parts[1:]
    for owner in (verstore.spark, verstore, verstore.VersionedStore, verstore.checkpoint):
        target: Any = owner
        for part in parts:
            target = getattr(target, part, None)
            if target is None:
                break
        if target is not None and callable(target):
            return target  # type: ignore[no-any-return]
    return None


def signatures(doc: str) -> list[tuple[int, str, ast.arguments]]:
    """(line, name, parameters) of each signature in ``doc``: fenced ``name(...) -> T`` lines
    and inline spans that parse as a parameter list."""
    found = []
    body = text(doc)
    fenced = re.finditer(r"^```py\n([A-Za-z_][\w.]*)\(([^`]*?)\)\s*->[^\n]*\n```", body, re.M)
    inline = re.finditer(r"`([A-Za-z_][\w.]*)\(([^`]*?)\)`", body, re.S)
    for m in [*fenced, *inline]:
        params = " ".join(m.group(2).split())
        if not m.group(0).startswith("```") and not re.search(r"=None\b|(^|, )\*(,|$)", params):
            continue  # a call with arguments (`progress_metrics(p, name, by_partition=True)`)
        try:
            tree = ast.parse(f"def f({params}): pass")
        except SyntaxError:
            continue  # a call (`VersionedStore("/data", ...)`), not a signature
        fn = tree.body[0]
        assert isinstance(fn, ast.FunctionDef)
        found.append((line_of(doc, m.start(1)), m.group(1), fn.args))
    return found


def literal_defaults(args: ast.arguments) -> dict[str, Any]:
    """The parameters given a literal default (``x=None``, ``how="left"``; not ``as_of=t``
    or ``x=...``)."""
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    out = {}
    for arg, node in pairs:
        try:
            value = ast.literal_eval(node)
        except ValueError:
            continue
        if value is not Ellipsis:
            out[arg.arg] = value
    return out


def test_signature_defaults_in_the_docs_are_the_codes() -> None:
    checked = 0
    problems = []
    for doc in DOCS:
        for line, name, args in signatures(doc):
            stated = literal_defaults(args)
            if not stated or name in FOREIGN:
                continue
            fn = resolve(name)
            if fn is None:
                problems.append(f"{doc}:{line}: {name}: no such verstore callable")
                continue
            params = inspect.signature(fn).parameters
            for param, value in stated.items():
                where = f"{doc}:{line}: {name}({param}={value!r})"
                if param not in params:
                    problems.append(f"{where}: the code has no parameter {param!r}")
                elif params[param].default != value or type(params[param].default) is not type(
                    value
                ):
                    problems.append(f"{where}: the code's default is {params[param].default!r}")
                checked += 1
    assert not problems, "\n".join(problems)
    # The parser found the signatures (asof_join, configure, read_store, VersionedStore...).
    assert checked >= 50, checked


# --- the configuration table of docs/spark.md ----------------------------------------------------


class FakeContext:
    """A task context with only the local properties a streaming task always has."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props

    def getLocalProperty(self, name: str) -> str | None:
        return self.props.get(name)

    def partitionId(self) -> int:
        return 0


class FakeConf:
    def get(self, key: str, default: Any = None) -> Any:
        return default


class FakeSession:
    conf = FakeConf()


@pytest.fixture
def task_defaults(monkeypatch: pytest.MonkeyPatch) -> Callable[[], _conf.TaskConf]:
    """The settings a task reads when ``configure`` was given only a checkpoint root."""
    import pyspark

    def current() -> _conf.TaskConf:
        context = FakeContext(
            {
                _conf.CHECKPOINT_ROOT: "/root",
                "streaming.sql.batchId": "0",
                "sql.streaming.queryId": "q",
            }
        )
        monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: context))
        return _conf.TaskConf.current()

    return current


def config_table() -> list[tuple[int, str, str, str]]:
    """(line, conf, configure argument, default) of each row of the configuration table."""
    body = text("docs/spark.md")
    header = "| conf | `configure` argument | default | meaning |"
    start = body.index(header)
    rows = []
    for offset, row in enumerate(body[start:].split("\n")[2:]):
        if not row.startswith("|"):
            break
        conf, argument, default = (cell.strip() for cell in row.strip("|").split("|")[:3])
        argument = argument.split()[0].strip("`") if argument.startswith("`") else argument
        rows.append(
            (line_of("docs/spark.md", start) + 2 + offset, conf.strip("`"), argument, default)
        )
    return rows


def test_configuration_table_defaults_are_the_codes(
    task_defaults: Callable[[], _conf.TaskConf], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {f.name: f.default for f in dataclasses.fields(verstore.checkpoint.CheckpointOptions)}
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    task = task_defaults()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/fast/a,/fast/b")
    task_with_local_dirs = task_defaults()
    # What each row's default column says, as the code applies it. Every row must be here.
    code = {
        "checkpoint_root": ("none: required", inspect.Parameter.empty),
        "storage_options": ("`{}`", _conf.session_storage_options(FakeSession())),
        "set by `configure`": ("none", _conf.plan_credentials(FakeSession())),
        "storage_options_provider": ("none", None),
        "local_dir": (
            "first entry of `SPARK_LOCAL_DIRS` + `/verstore`, else the temp dir + `/verstore`",
            (task_with_local_dirs.local_dir, task.local_dir),
        ),
        "snapshot_interval": (f"`{task.snapshot_interval}`", options["snapshot_interval"]),
        "min_versions_to_retain": (
            f"`{task.min_versions_to_retain}`",
            options["min_versions_to_retain"],
        ),
        "lock_timeout_s": (f"`{task.lock_timeout_s:g}`", options["lock_timeout_s"]),
        "memory_limit_mb": (f"`{task.memory_limit_bytes >> 20}`", _conf.DEFAULT_MEMORY_LIMIT_MB),
        "progress_metrics": (
            f"`{str(_conf.progress_metrics_enabled(FakeSession())).lower()}`",
            True,
        ),
        "kept_stores_per_worker": (f"`{task.kept_stores}`", _conf.DEFAULT_KEPT_STORES),
        "checkpoint_location": (
            "the root's parent, when it is a Spark checkpoint",
            _query._parent("s3://bucket/chk/pricing/verstore"),
        ),
    }
    configure = inspect.signature(verstore.spark.configure).parameters
    rows = config_table()
    assert {argument for _, _, argument, _ in rows} == set(code), "a row without a check here"
    for line, conf, argument, default in rows:
        where = f"docs/spark.md:{line}: {conf}"
        expected, value = code[argument]
        assert default == expected, f"{where}: the doc says {default}, the code {expected}"
        # The conf name is the one the code reads, and configure's own default means "unset".
        assert conf in vars(_conf).values(), f"{where}: the code has no conf {conf}"
        if argument in configure:
            assert configure[argument].default in (None, inspect.Parameter.empty), where
        if argument == "checkpoint_root":
            assert configure[argument].default is value, where
        elif argument == "checkpoint_location":
            assert value == "s3://bucket/chk/pricing", where
        elif argument == "local_dir":
            assert value == ("/fast/a/verstore", str(Path(tempfile.gettempdir(), "verstore")))
        elif argument in options:
            # The task's fallback (TaskConf.current) and CheckpointOptions agree.
            assert getattr(task, argument) == value, where
        elif argument == "memory_limit_mb":
            assert task.memory_limit_bytes == value << 20, where
        elif argument == "kept_stores_per_worker":
            assert task.kept_stores == value, where
        elif argument == "progress_metrics":
            assert _conf.progress_metrics_enabled(FakeSession()) is value, where
        elif argument == "storage_options":
            assert value == {}, where
        else:
            assert value is None, where


# --- prose ---------------------------------------------------------------------------------------


def helper_default(name: str, param: str) -> Any:
    return inspect.signature(getattr(verstore.spark, name)).parameters[param].default


def segment_interval_for_days(days: int) -> float:
    return verstore.default_segment_interval_ms(days * 86_400_000) / 3_600_000


def makefile_default(variable: str) -> str:
    m = re.search(rf"^export {variable} \?= (.+)$", text("Makefile"), re.M)
    assert m, variable
    return m.group(1).replace("$(HOME)", "~")


def example_master() -> str:
    source = text("examples/spark_asof_pipeline.py")
    m = re.search(r'\.master\("([^"]+)"\)', source)
    assert m
    return m.group(1)


#: (doc, pattern, read, expected): each match of ``pattern`` in ``doc`` (its whitespace runs made
#: one space) states a default; ``read`` of its groups must equal ``expected``, the code's.
def _local_constant(name: str) -> Any:
    """A constant of ``verstore.checkpoint.local`` (how a task waits for a copy's lock)."""
    from verstore.checkpoint import local

    return getattr(local, name)


def _keeper_default(name: str) -> Any:
    """``Keeper``'s default for ``name``; ``Keeper.for_process`` (the keeper of Spark's workers)
    has the same, where it takes it."""
    default = inspect.signature(Keeper).parameters[name].default
    process = inspect.signature(Keeper.for_process).parameters.get(name)
    assert process is None or process.default == default, name
    return default


STATED: list[tuple[str, str, Callable[..., Any], Any]] = [
    # README.md
    (
        "README.md",
        r"\(default `(~/\.cache/verstore/target)`\)",
        str,
        makefile_default("CARGO_TARGET_DIR"),
    ),
    ("README.md", r"embedded Spark \(`(local\[\d+\])`\)", str, example_master()),
    (
        "README.md",
        r"\(`segment_interval_ms`, Kafka's (default rule) when omitted\)",
        lambda _: (
            inspect.signature(verstore.VersionedStore).parameters["segment_interval_ms"].default
        ),
        None,
    ),
    # docs/spark.md
    ("docs/spark.md", r"`memoryLimitMb` \(default (\d+) MB\)", int, _conf.DEFAULT_MEMORY_LIMIT_MB),
    (
        "docs/spark.md",
        r"an int in ms or a `timedelta`\)\. Default `\"(\d+ days)\"`",
        str,
        helper_default("asof_join", "history_retention"),
    ),
    *[
        (
            "docs/spark.md",
            r"Default `\"(\d+ days)\"`",
            str,
            helper_default(name, "history_retention"),
        )
        for name in ("latest_by_timestamp", "versioned_table_join")
    ],
    (
        "docs/spark.md",
        r"`num_partitions`: partitions of the store; default (`spark\.sql\.shuffle\.partitions`)",
        lambda _: helper_default("asof_join", "num_partitions"),
        None,
    ),
    (
        "docs/spark.md",
        r"`emit=\"(\w+)\"` \(default\)",
        str,
        helper_default("latest_by_timestamp", "emit"),
    ),
    (
        "docs/spark.md",
        r"`lookup=\"(\w+)\"` \(the default\)",
        str,
        helper_default("versioned_table_join", "lookup"),
    ),
    (
        "docs/spark.md",
        r"default segment interval: derived from\s+the retention, e\.g\. (\d+) h for (\d+) days",
        lambda hours, days: (int(hours), segment_interval_for_days(int(days))),
        (7, 7.0),
    ),
    ("docs/spark.md", r"merges at most (\d+) spilled\s+runs at once", int, _spill.MERGE_FAN_IN),
    ("docs/spark.md", r"past (\d+) spilled runs of the sort", int, _spill.MERGE_FAN_IN),
    (
        "docs/spark.md",
        r"`as_of` \((default: the newest)\)",
        lambda _: helper_default("read_store", "as_of"),
        None,
    ),
    (
        "docs/spark.md",
        r"`version` \((default each partition's newest)\)",
        lambda _: helper_default("read_store", "version"),
        None,
    ),
    # docs/semantics.md
    (
        "docs/semantics.md",
        r"`R = 0`.*?\(default `I = ([\d ]+)`\)",
        number,
        verstore.default_segment_interval_ms(0),
    ),
    (
        "docs/semantics.md",
        r"Order: (newest first) by default, oldest first with `ascending=True`",
        lambda _: (
            inspect.signature(verstore.VersionedStore.versions).parameters["ascending"].default
        ),
        False,
    ),
    (
        "docs/semantics.md",
        r"Persistent stores use RocksDB's (write-ahead log) by default",
        lambda _: inspect.signature(verstore.VersionedStore).parameters["write_ahead_log"].default,
        True,
    ),
    # docs/checkpoint.md
    (
        "docs/checkpoint.md",
        r"`replay_chunk_records`, default\s+(\d[\d ,]*\d)",
        number,
        verstore.checkpoint.CheckpointOptions.replay_chunk_records,
    ),
    (
        "docs/checkpoint.md",
        r"`min_versions_to_retain` >= 2, default (\d+)",
        int,
        verstore.checkpoint.CheckpointOptions.min_versions_to_retain,
    ),
    (
        "docs/checkpoint.md",
        r"`orphan_grace_s` \(default (\d+) h",
        lambda h: int(h) * 3600,
        verstore.checkpoint.CheckpointOptions.orphan_grace_s,
    ),
    # The keeper (docs/checkpoint.md, "Stores kept open"; docs/spark.md): Keeper's defaults,
    # and the process keeper's, which Spark's workers use.
    (
        "docs/checkpoint.md",
        r"when it has been idle for (\d+) s",
        float,
        _keeper_default("settle_s"),
    ),
    (
        "docs/spark.md",
        r"once the store has been idle for (\d+) s",
        float,
        _keeper_default("settle_s"),
    ),
    (
        "docs/checkpoint.md",
        r"at the thread's next poll \(every (\d+) ms\)",
        lambda ms: int(ms) / 1000,
        _keeper_default("poll_s"),
    ),
    (
        "docs/checkpoint.md",
        r"rings the copy's bell, `HANDOFF.bell`, every (\d+) ms",
        lambda ms: int(ms) / 1000,
        _local_constant("RING_EVERY_S"),
    ),
    (
        "docs/checkpoint.md",
        r"every millisecond for\s+the first ([\d.]+) s",
        float,
        _local_constant("FAST_TRIES_S"),
    ),
    (
        "docs/checkpoint.md",
        r"A keeper also closes a store idle for (\d+) s",
        float,
        _keeper_default("idle_s"),
    ),
    (
        "docs/checkpoint.md",
        r"`flush_s` \((\d+\.\d+) s\)|idle for (\d+\.\d+) s while no task|well within (\d+\.\d+) s",
        float,
        _keeper_default("flush_s"),
    ),
    (
        "docs/spark.md",
        r"idle for (\d+\.\d+) s while no task",
        float,
        _keeper_default("flush_s"),
    ),
    (
        "docs/checkpoint.md",
        r"`flush_min_bytes` \((\d+) MiB\)",
        lambda mib: int(mib) << 20,
        _keeper_default("flush_min_bytes"),
    ),
]


@pytest.mark.parametrize(
    ("doc", "pattern", "read", "expected"),
    STATED,
    ids=[f"{doc}:{pattern[:40]}" for doc, pattern, _, _ in STATED],
)
def test_stated_default_is_the_codes(
    doc: str, pattern: str, read: Callable[..., Any], expected: Any
) -> None:
    body, offsets = flat(doc)
    matches = list(re.finditer(pattern, body, re.S))
    assert matches, f"{doc} no longer says {pattern!r}: update the doc or this test"
    for m in matches:
        groups = [g for g in m.groups() if g is not None] or [m.group(0)]
        value = read(*groups)
        where = f"{doc}:{line_of(doc, offsets[m.start()])}"
        assert value == expected, f"{where}: {m.group(0)!r} -> {value!r}"


# --- the segment interval rule of docs/semantics.md §1.5 ------------------------------------------


def test_default_segment_interval_rule_and_check_values() -> None:
    body = text("docs/semantics.md")
    rule = re.findall(r"^\s*\| `R ≤ ([\d ]+)` \| `max\(R / (\d+), ([\d ]+)\)` \|$", body, re.M)
    last = re.search(r"^\s*\| otherwise \| `max\(R / (\d+), ([\d ]+)\)` \|$", body, re.M)
    assert len(rule) == 3 and last, "the rule table of §1.5 moved: update this test"
    bounds = [(number(r), int(d), number(m)) for r, d, m in rule]
    bounds.append((2**62, int(last.group(1)), number(last.group(2))))

    def documented(retention: int) -> int:
        for upper, divisor, floor in bounds:
            if retention <= upper:
                return max(retention // divisor, floor)
        raise AssertionError(retention)

    samples = {0, 1, 7_777, 86_400_000, 604_800_000, 10**12}
    for upper, _, _ in bounds[:-1]:
        samples |= {upper - 1, upper, upper + 1}
    for retention in sorted(samples):
        assert verstore.default_segment_interval_ms(retention) == documented(retention), retention

    check = re.search(r"Kafka's own check values.*?:\s*(.*?)\.\n", body, re.S)
    assert check, "the check values of §1.5 moved: update this test"
    pairs = re.findall(r"(\d[\d ]*)→(\d[\d ]*)", check.group(1))
    assert len(pairs) >= 10
    for retention, interval in pairs:
        assert verstore.default_segment_interval_ms(number(retention)) == number(interval)


def test_default_memory_budget_split(task_defaults: Callable[[], _conf.TaskConf]) -> None:
    """docs/spark.md: the default ``memoryLimitMb`` is half Arrow data, half the worker's budget
    for stores."""
    body = text("docs/spark.md")
    split = re.search(
        r"`memoryLimitMb` \(default (\d+) MB\) bounds a Python worker's\s+verstore memory: "
        r"half for Arrow data, .*?; half the worker's memory budget for\s+stores",
        body,
        re.S,
    )
    held = re.search(r"A task holds at\s+most half of `memoryLimitMb` \(default (\d+) MB\)", body)
    assert split and held, "docs/spark.md no longer states the memory split: update this test"
    task = task_defaults()
    limit = int(split.group(1)) << 20
    assert int(held.group(1)) << 20 == limit == task.memory_limit_bytes
    assert task.arrow_budget_bytes == limit // 2
    assert task.store_budget_mb == limit // 2 >> 20
