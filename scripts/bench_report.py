"""Writes the results section of BENCHMARKS.md and its plots from the benchmark JSON.

Inputs: the pytest-benchmark JSON of ``make bench`` (store, scaling and Spark suites) and the
criterion results of ``benches/core.rs`` (``$CARGO_TARGET_DIR/criterion``). Output: the text
between ``<!-- results:start -->`` and ``<!-- results:end -->`` in BENCHMARKS.md (tables of
medians and ratios, the targets of issue 9 with their measured ratio) and PNG plots.

Run by ``make bench``; by hand:
``python scripts/bench_report.py --pytest .benchmarks/results.json --criterion
~/.cache/verstore/target/criterion --out BENCHMARKS.md --plots docs/benchmarks``.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START = "<!-- results:start -->"
END = "<!-- results:end -->"


@dataclass(frozen=True)
class Result:
    group: str
    name: str
    median_s: float
    rows: int | None
    extra: dict[str, Any]

    @property
    def rate(self) -> float | None:
        """Rows per second: the run's own figure when it has one (Spark), else rows / median."""
        if "rows_per_s" in self.extra:
            return float(self.extra["rows_per_s"])
        return self.rows / self.median_s if self.rows else None

    @property
    def label(self) -> str:
        return re.sub(r"^test_", "", self.name)


def load_pytest(path: Path) -> tuple[list[Result], dict[str, Any]]:
    data = json.loads(path.read_text())
    results = [
        Result(
            group=b["group"] or "",
            name=b["name"],
            median_s=b["stats"]["median"],
            rows=b["extra_info"].get("rows"),
            extra=b["extra_info"],
        )
        for b in data["benchmarks"]
    ]
    return results, data.get("machine_info", {})


def load_criterion(root: Path) -> list[Result]:
    results = []
    for estimates in sorted(root.glob("*/*/new/estimates.json")):
        bench_dir = estimates.parent.parent
        info = json.loads((estimates.parent / "benchmark.json").read_text())
        median_ns = json.loads(estimates.read_text())["median"]["point_estimate"]
        throughput = info.get("throughput") or {}
        rows = throughput.get("Elements")
        results.append(
            Result(
                group=info.get("group_id", bench_dir.parent.name),
                name=info.get("function_id") or bench_dir.name,
                median_s=median_ns / 1e9,
                rows=rows,
                extra={},
            )
        )
    return results


def rate_text(rate: float | None) -> str:
    if rate is None:
        return "-"
    if rate >= 1e6:
        return f"{rate / 1e6:.2f} M/s"
    return f"{rate / 1e3:.0f} k/s"


def find(results: list[Result], group: str, pattern: str) -> Result | None:
    for r in results:
        if r.group == group and re.search(pattern, r.name):
            return r
    return None


def ratio(a: Result | None, b: Result | None) -> float | None:
    if a is None or b is None or a.rate is None or b.rate is None or b.rate == 0:
        return None
    return a.rate / b.rate


def group_table(results: list[Result], group: str, baselines: dict[str, str]) -> list[str]:
    """One row per contender: median, rows/s, and its ratio to each baseline of the group."""
    rows = [r for r in results if r.group == group]
    if not rows:
        return []
    bases = {name: find(results, group, pattern) for name, pattern in baselines.items()}
    bases = {k: v for k, v in bases.items() if v is not None}
    header = "| benchmark | median | rows/s | " + " | ".join(f"x {k}" for k in bases) + " |"
    lines = [header, "|" + "---|" * (3 + len(bases))]
    for r in sorted(rows, key=lambda r: -(r.rate or 0)):
        ratios = [ratio(r, b) for b in bases.values()]
        cells = ["-" if x is None else f"{x:.2f}" for x in ratios]
        lines.append(
            f"| `{r.label}` | {r.median_s * 1e3:.1f} ms | {rate_text(r.rate)} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


#: The Spark group's pipelines in the table's and the plot's order, with the plot's labels.
SPARK_PIPELINES = {
    "passthrough": "Spark pass-through (no state)",
    "asof_join": "verstore asof_join",
    "pandas_state": "applyInPandasWithState",
    "flink_heap": "Flink temporal join, heap state",
    "flink_rocksdb": "Flink temporal join, RocksDB state",
}

PY_BASELINES = {
    "ceiling (rocksdict)": r"rocksdict_ceiling(\[wal_off\])?$",
    # put_single only: raw RocksDB with its write-ahead log on, the ceiling of verstore's wal_on.
    "ceiling, WAL on": r"rocksdict_ceiling\[wal_on\]",
    "SQLite": r"sqlite",
    "dict+bisect": r"dict_bisect|\[dict\]",
    "naive/rocksdict": r"naive",
}


@dataclass(frozen=True)
class Target:
    text: str
    measured: tuple[str, str]
    baseline: tuple[str, str] | None
    goal: float
    absolute: bool = False  # goal is rows/s, not a ratio
    lower_is_better: bool = False


def spark_pipeline(spark: list[Result], scale: str, pipeline: str) -> Result | None:
    """A pipeline's run of the Spark group at a scale (``10k_keys``...)."""
    return next(
        (r for r in spark if f"[{scale}-" in r.name and r.extra.get("pipeline") == pipeline), None
    )


def targets(py: list[Result], rust: list[Result]) -> list[str]:
    def get(source: list[Result], spec: tuple[str, str]) -> Result | None:
        return find(source, *spec)

    spark = [r for r in py if r.group == "spark_asof_join"]
    items: list[tuple[str, Result | None, Result | None, float, str]] = []
    rust_put = get(rust, ("put_batch", r"^store$"))
    rust_raw_put = get(rust, ("put_batch", r"raw"))
    items += [
        (
            "batch put ≥ 0.6 x raw WriteBatch (Rust, criterion)",
            rust_put,
            rust_raw_put,
            0.6,
            "ratio",
        ),
        (
            "batch put ≥ 0.6 x raw WriteBatch (Python)",
            get(py, ("put_batch", r"verstore\[wal_off\]")),
            get(py, ("put_batch", r"rocksdict")),
            0.6,
            "ratio",
        ),
        (
            "batch as-of get ≥ 0.8 x raw MultiGet (Rust, newest version)",
            get(rust, ("get_batch", r"as_of_newest")),
            get(rust, ("get_batch", r"raw")),
            0.8,
            "ratio",
        ),
        (
            "batch as-of get ≥ 0.8 x raw MultiGet (Rust, into history)",
            get(rust, ("get_batch", r"as_of_history")),
            get(rust, ("get_batch", r"raw")),
            0.8,
            "ratio",
        ),
        (
            "batch as-of get ≥ 0.8 x raw MultiGet (Python, random times)",
            get(py, ("get_as_of_batch", r"verstore\[store\]")),
            get(py, ("get_as_of_batch", r"rocksdict")),
            0.8,
            "ratio",
        ),
        (
            "single put ≥ 2 x SQLite (WAL on)",
            get(py, ("put_single", r"verstore\[wal_on\]")),
            get(py, ("put_single", r"sqlite")),
            2.0,
            "ratio",
        ),
        (
            "single as-of get ≥ 2 x SQLite",
            get(py, ("get_as_of_single", r"verstore\[store\]")),
            get(py, ("get_as_of_single", r"sqlite")),
            2.0,
            "ratio",
        ),
        (
            "persistent put ≥ 200k/s, WAL off (single calls)",
            get(py, ("put_single", r"verstore\[wal_off\]")),
            None,
            200_000,
            "rate",
        ),
        (
            "persistent put ≥ 200k/s, WAL off (batches)",
            get(py, ("put_batch", r"verstore\[wal_off\]")),
            None,
            200_000,
            "rate",
        ),
        (
            "in-memory store ≥ 1M rows/s in batches (put)",
            get(py, ("put_batch", r"in_memory(\[no_ttl\])?$")),
            None,
            1_000_000,
            "rate",
        ),
        (
            "in-memory store ≥ 1M rows/s in batches (as-of get)",
            get(py, ("get_as_of_batch", r"verstore\[memory\]")),
            None,
            1_000_000,
            "rate",
        ),
    ]
    for label, a, b in (
        ("as-of get cost 1 → 1,000 versions/key < 2x (batches)", r"1000v", r"\[1v"),
        ("as-of get cost 10 → 1,000 versions/key < 2x (batches)", r"1000v", r"\[10v"),
    ):
        items.append(
            (label, get(py, ("as_of_versions", b)), get(py, ("as_of_versions", a)), 0.5, "inverse")
        )
    items.append(
        (
            "as-of get cost 1 → 1,000 versions/key < 2x (single calls)",
            get(py, ("as_of_versions_single", r"\[1v")),
            get(py, ("as_of_versions_single", r"1000v")),
            0.5,
            "inverse",
        )
    )
    items.append(
        (
            "as-of get cost 1 → 50 live segments < 2x",
            get(py, ("as_of_segments", r"\[1\]")),
            get(py, ("as_of_segments", r"\[50\]")),
            0.5,
            "inverse",
        )
    )
    items.append(
        (
            "hot key: cost per version 5k → 100k versions < 2x (linear)",
            get(py, ("hot_key", r"\[5000\]")),
            get(py, ("hot_key", r"\[100000\]")),
            0.5,
            "inverse",
        )
    )
    for scale in ("10k_keys", "100k_keys"):
        asof = next(
            (r for r in spark if scale in r.name and r.extra.get("pipeline") == "asof_join"), None
        )
        floor = next(
            (r for r in spark if scale in r.name and r.extra.get("pipeline") == "passthrough"),
            None,
        )
        base = next(
            (r for r in spark if scale in r.name and r.extra.get("pipeline") == "pandas_state"),
            None,
        )
        if base is not None:
            items.append(
                (f"Spark {scale}: asof_join ≥ 10 x applyInPandasWithState", asof, base, 10, "ratio")
            )
        items.append(
            (f"Spark {scale}: asof_join ≥ 0.95 x pass-through", asof, floor, 0.95, "ratio")
        )
    # Issue 44: the peer, Flink SQL's temporal join, at 100 000 keys.
    for pipeline, what, goal in (
        ("flink_heap", "heap state", 2.5),
        ("flink_rocksdb", "RocksDB state", 4.0),
    ):
        asof = spark_pipeline(spark, "100k_keys", "asof_join")
        peer = spark_pipeline(spark, "100k_keys", pipeline)
        items.append(
            (f"Spark 100k_keys: asof_join ≥ {goal} x Flink, {what}", asof, peer, goal, "ratio")
        )

    lines = ["| target | measured | baseline | ratio | met |", "|---|---|---|---|---|"]
    for label, a, b, goal, kind in items:
        if a is None or (kind != "rate" and b is None):
            lines.append(f"| {label} | not run | | | |")
            continue
        if kind == "rate":
            value = a.rate or 0
            lines.append(
                f"| {label} | {rate_text(a.rate)} | | | {'yes' if value >= goal else 'no'} |"
            )
            continue
        r = ratio(a, b) or 0
        if kind == "inverse":
            # a = cheap case, b = expensive case: the cost per row grows by rate(a) / rate(b)
            growth = (a.rate or 0) / b.rate if b is not None and b.rate else float("inf")
            lines.append(
                f"| {label} | {rate_text(b.rate)} | {rate_text(a.rate)} | "
                f"cost x {growth:.2f} | {'yes' if growth < 2 else 'no'} |"
            )
            continue
        lines.append(
            f"| {label} | {rate_text(a.rate)} | {rate_text(b.rate if b else None)} | "
            f"{r:.2f} | {'yes' if r >= goal else 'no'} |"
        )
    return lines


def large_state_table(py: list[Result]) -> list[str]:
    """Issue 33's large-state runs: rates, ratios to raw of the same run, memory and disk."""
    runs = sorted(
        (r.extra for r in py if r.group == "large_state" and "put_rows_per_s" in r.extra),
        key=lambda e: (e["keys"], e["kind"]),
    )
    if not runs:
        return []
    lines = [
        "| keys (versions) | store | budget | put rows/s | x raw | x raw_rmw | CPU a put "
        "| as-of read rows/s | x raw | reopened, random times | x raw | CPU a reopened read "
        "| peak RSS over baseline | after close | disk bytes/version | x raw |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in runs:
        verstore = e["kind"] == "verstore"
        budget = f"{e['budget_mb']} MB" if verstore else "-"

        def x(name: str, e: dict[str, Any] = e) -> str:
            return f"{e[name]:.2f}" if name in e else "-"

        def cpu(name: str, e: dict[str, Any] = e) -> str:
            return f"{e[name]:.2f} µs" if e.get(name) is not None else "-"

        read = rate_text(e["read_rows_per_s"]) if e.get("read_rows_per_s") else "-"
        cold = e.get("reopened_read_rows_per_s")
        reopened = rate_text(cold) if cold else "-"
        lines.append(
            f"| {e['keys']:,} ({4 * e['keys']:,}) | {e['kind']} | {budget} | "
            f"{rate_text(e['put_rows_per_s'])} | {x('put_x_raw')} | {x('put_x_raw_rmw')} | "
            f"{cpu('put_cpu_us')} | {read} | {x('read_x_raw')} | {reopened} | "
            f"{x('reopened_read_x_raw')} | {cpu('reopened_read_cpu_us')} | "
            f"{e['peak_mb']:.0f} MB | "
            f"{e['after_close_mb']:.0f} MB | {e['disk_bytes_per_version']:.1f} | "
            f"{x('disk_x_raw')} |"
        )
    return lines


def large_state_plot(py: list[Result], out: Path, plt: Any) -> str | None:
    """Cost per put and per as-of read against state size, verstore and raw."""
    runs = [r.extra for r in py if r.group == "large_state" and "put_rows_per_s" in r.extra]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, color in (("verstore", "tab:blue"), ("raw", "tab:gray"), ("raw_rmw", "tab:orange")):
        mine = sorted((e for e in runs if e["kind"] == kind), key=lambda e: e["keys"])
        keys = [e["keys"] for e in mine]
        for field, style, what in (
            ("put_rows_per_s", "-o", "put"),
            ("read_rows_per_s", "--s", "as-of read"),
            ("reopened_read_rows_per_s", ":^", "as-of read, reopened"),
        ):
            if not all(e.get(field) for e in mine):
                continue
            ax.plot(
                keys, [1e6 / e[field] for e in mine], style, color=color, label=f"{kind} {what}"
            )
    ax.set_xscale("log")
    ax.set_xlabel("keys (4 versions each)")
    ax.set_ylabel("µs per row")
    ax.set_title("cost against state size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "large_state.png", dpi=100)
    plt.close(fig)
    return "large_state.png"


def plots(py: list[Result], rust: list[Result], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []

    groups = ["put_single", "put_batch", "get_as_of_single", "get_as_of_batch"]
    fig, axes = plt.subplots(1, len(groups), figsize=(16, 4.5))
    for ax, group in zip(axes, groups, strict=True):
        rows = sorted((r for r in py if r.group == group and r.rate), key=lambda r: -(r.rate or 0))
        ax.barh(
            [r.label.replace(group.split("_")[0] + "_", "") for r in rows],
            [(r.rate or 0) / 1e3 for r in rows],
            color=["tab:blue" if "verstore" in r.name else "tab:gray" for r in rows],
        )
        ax.set_title(group)
        ax.set_xlabel("k rows/s")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=100)
    plt.close(fig)
    made.append("throughput.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    for group, label in (("as_of_versions", "batches"), ("as_of_versions_single", "single calls")):
        pts = sorted(
            (r.extra["versions_per_key"], 1e6 / r.rate)
            for r in py
            if r.group == group and r.rate and "versions_per_key" in r.extra
        )
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("versions per key")
    ax.set_ylabel("µs per as-of read")
    ax.set_title("as-of read cost against history depth")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "as_of_versions.png", dpi=100)
    plt.close(fig)
    made.append("as_of_versions.png")

    spark = [r for r in py if r.group == "spark_asof_join" and r.rate]
    if spark:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        pipelines = [p for p in SPARK_PIPELINES if any(r.extra.get("pipeline") == p for r in spark)]
        scales = sorted({int(r.extra.get("keys", 0)) for r in spark})
        width = 0.8 / len(pipelines)
        for i, pipeline in enumerate(pipelines):
            values = []
            for keys in scales:
                hit = next(
                    (
                        r
                        for r in spark
                        if r.extra.get("pipeline") == pipeline and r.extra.get("keys") == keys
                    ),
                    None,
                )
                values.append((hit.rate or 0) / 1e3 if hit else 0)
            ax.bar(
                [x + i * width for x in range(len(scales))],
                values,
                width,
                label=SPARK_PIPELINES[pipeline],
            )
        ax.set_xticks(
            [x + width * (len(pipelines) - 1) / 2 for x in range(len(scales))],
            [f"{k:,} keys" for k in scales],
        )
        ax.set_ylabel("k stream rows/s")
        ax.set_title("As-of join on 2 cores: Spark local[2], Flink parallelism 2")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "spark.png", dpi=100)
        plt.close(fig)
        made.append("spark.png")

    large = large_state_plot(py, out, plt)
    if large:
        made.append(large)

    if rust:
        fig, ax = plt.subplots(figsize=(7, 4))
        rows = [r for r in rust if r.rate and r.group in ("put_batch", "get_batch")]
        ax.barh(
            [f"{r.group}/{r.name}" for r in rows],
            [(r.rate or 0) / 1e3 for r in rows],
            color=["tab:gray" if "raw" in r.name else "tab:blue" for r in rows],
        )
        ax.set_xlabel("k rows/s")
        ax.set_title("core vs raw rocksdb crate (criterion)")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(out / "core.png", dpi=100)
        plt.close(fig)
        made.append("core.png")
    return made


def render(
    py: list[Result], rust: list[Result], machine: dict[str, Any], plot_dir: Path, made: list[str]
) -> str:
    loads = [r.extra["loadavg"] for r in py if "loadavg" in r.extra]
    cpu = machine.get("cpu", {})
    lines = [
        START,
        "",
        f"Machine: {cpu.get('brand_raw', platform.processor())}, "
        f"{cpu.get('count', '?')} cores, Python {machine.get('python_version', '?')}, "
        f"{machine.get('system', '')} {machine.get('release', '')}."
        + (
            f" 1-minute load average during the Python suites: {min(loads):.1f} to "
            f"{max(loads):.1f} (other work on the machine inflates every figure alike)."
            if loads
            else ""
        ),
        "",
        "### Targets (issue 9)",
        "",
        *targets(py, rust),
        "",
    ]
    for group, title in (
        ("put_single", "Put, one call per row"),
        ("put_batch", "Put, batches of 10 000"),
        ("put_batch_reopened", "Put, batches of 10 000 on a reopened store"),
        ("get_as_of_single", "As-of get, one call per read"),
        ("get_as_of_batch", "As-of get, batches of 10 000"),
    ):
        table = group_table(py, group, PY_BASELINES)
        if table:
            lines += [f"### {title}", "", *table, ""]
    for group, title in (
        ("as_of_versions", "As-of get against versions per key (batches)"),
        ("as_of_versions_single", "As-of get against versions per key (single calls)"),
        ("as_of_segments", "As-of get against live segments (batches)"),
        ("hot_key", "One hot key, single puts, one segment"),
    ):
        rows = [r for r in py if r.group == group]
        if rows:
            lines += [
                f"### {title}",
                "",
                "| benchmark | median | rows/s | µs per row |",
                "|---|---|---|---|",
            ]
            for r in rows:
                per = f"{1e6 / r.rate:.2f}" if r.rate else "-"
                lines.append(
                    f"| `{r.label}` | {r.median_s * 1e3:.1f} ms | {rate_text(r.rate)} | {per} |"
                )
            lines.append("")
    large = large_state_table(py)
    if large:
        lines += [
            "### Large state (issues 33, 43): verstore and raw RocksDB in the same run",
            "",
            *large,
            "",
        ]
    spark = [r for r in py if r.group == "spark_asof_join"]
    if spark:
        lines += [
            "### Spark as-of join, and Flink's temporal join on the same rows",
            "",
            "| scale | pipeline | stream rows/s | seconds timed | asof_join / this |",
            "|---|---|---|---|---|",
        ]
        order = {name: i for i, name in enumerate(SPARK_PIPELINES)}
        for r in sorted(
            spark,
            key=lambda r: (
                r.extra.get("keys", 0),
                order.get(r.extra.get("pipeline", ""), len(order)),
            ),
        ):
            scale = (
                f"{r.extra.get('keys', 0):,} keys, {r.extra.get('rows_per_batch', 0):,} rows/batch"
            )
            seconds = r.extra.get("batch_seconds", 0)
            asof = next(
                (
                    a
                    for a in spark
                    if a.extra.get("pipeline") == "asof_join"
                    and a.extra.get("keys") == r.extra.get("keys")
                ),
                None,
            )
            x = ratio(asof, r)
            lines.append(
                f"| {scale} | {r.extra.get('pipeline')} | {rate_text(r.rate)} | {seconds:.2f} | "
                + ("-" if x is None else f"{x:.2f}")
                + " |"
            )
        lines.append("")
    if rust:
        lines += ["### Core vs raw `rocksdb` crate (criterion)", ""]
        for group in sorted({r.group for r in rust}):
            raw = find(rust, group, r"raw")
            lines += [
                f"`{group}`:",
                "",
                "| benchmark | median | rows/s | x raw |",
                "|---|---|---|---|",
            ]
            for r in (r for r in rust if r.group == group):
                x = ratio(r, raw)
                lines.append(
                    f"| `{r.name}` | {r.median_s * 1e3:.2f} ms | {rate_text(r.rate)} | "
                    + ("-" if x is None else f"{x:.2f}")
                    + " |"
                )
            lines.append("")
    lines += [f"![{name}]({plot_dir.as_posix()}/{name})" for name in made]
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pytest", type=Path, required=True)
    parser.add_argument("--criterion", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--plots", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args()
    py, machine = load_pytest(args.pytest)
    rust = load_criterion(args.criterion) if args.criterion and args.criterion.exists() else []
    made = plots(py, rust, args.plots)
    plot_dir = (
        args.plots.relative_to(args.out.parent)
        if args.plots.is_relative_to(args.out.parent)
        else args.plots
    )
    section = render(py, rust, machine, plot_dir, made)
    text = args.out.read_text() if args.out.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    args.out.write_text(head + section + tail)
    print(f"wrote {args.out} and {len(made)} plots in {args.plots}")


if __name__ == "__main__":
    main()
