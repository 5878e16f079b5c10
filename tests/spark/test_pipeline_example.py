"""`make run`'s job, examples/spark_asof_pipeline.py: it runs end to end on local Spark and its
oracle check passes; and the oracle itself catches a wrong answer (a check that cannot fail
proves nothing)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "spark_asof_pipeline.py"

BATCH_LINE = re.compile(
    r"^batch (\d+): in ([\d,]+) rows \(([\d,]+) orders \+ ([\d,]+) price updates\), "
    r"out ([\d,]+) rows, [\d.]+ s, checkpoint [\d.]+ MB\n"
    r"  store: ([\d,]+) rows put, ([\d,]+) too late, ([\d,]+) keys, [\d,]+ history rows, "
    r"\d+ segments, [\d.]+ MB on disk; changelogs \d+ kB, snapshots [\d.]+ MB; "
    r"partitions reused (\d+) \(still open (\d+)\) / caught up (\d+) / rebuilt (\d+) "
    r"\(\d+ ms\)$",
    flags=re.M,
)


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_asof_pipeline", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


def test_pipeline_runs_and_matches_oracle(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--symbols=30",
            "--batches=4",
            "--rows-per-batch=300",
            "--restart-after=2",
            "--partitions=3",
            "--seed=11",
            f"--workdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{result.stderr[-5000:]}"
    assert out.rstrip().endswith("MATCHES ORACLE")
    assert "MISMATCH" not in out

    lines = {int(m[1]): m for m in BATCH_LINE.finditer(out)}
    assert sorted(lines) == [0, 1, 2, 3], out
    for m in lines.values():
        total, orders, prices, output = (int(m[i].replace(",", "")) for i in (2, 3, 4, 5))
        assert orders == 300 and output == 300  # a left join: one output row per order
        assert total == orders + prices and prices > 0
        put, late = int(m[6].replace(",", "")), int(m[7].replace(",", ""))
        assert 0 < put + late <= prices  # every price update is put or too late (or a tie)
        assert int(m[8].replace(",", "")) > 0  # keys with a latest price
    opened = {b: (int(m[9]), int(m[11]), int(m[12])) for b, m in lines.items()}
    # New stores; reused local copies; a restart on a wiped local disk: all rebuilt; reused.
    assert opened == {0: (0, 0, 0), 1: (3, 0, 0), 2: (0, 0, 3), 3: (3, 0, 0)}
    # Of those reused, the ones still open in their Python worker (by default workers keep
    # them); a wiped disk takes them along.
    assert int(lines[2][10]) == 0 and all(int(m[10]) <= int(m[9]) for m in lines.values())
    assert "restarting from the checkpoint" in out
    assert re.search(r"^throughput: 1,200 output rows in [\d.]+ s .*: [\d,]+ rows/s$", out, re.M)


def test_oracle_detects_a_latest_price_join() -> None:
    """The oracle rejects what a join against the current price (no history) would output."""
    ex = load_example()
    args = ex.parse_args(["--symbols=5", "--batches=3", "--rows-per-batch=200", "--seed=3"])
    batches = ex.generate(args)
    seen = pa.concat_tables([b.prices for b in batches])
    expected = ex.oracle(batches[2].orders, seen)

    # Output in the example's schema, built from the oracle itself: compare() accepts it.
    def as_output(frame: Any) -> pa.Table:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        valid_from = pc.cast(table["valid_from"], pa.timestamp("ms", tz="UTC"))
        valid_to = pc.cast(table["valid_to"], pa.timestamp("ms", tz="UTC"))
        return pa.table(
            {
                "order_id": table["order_id"],
                "symbol": table["symbol"],
                "order_ts": table["order_ts"],
                "quantity": table["quantity"],
                "price": table["price"],
                "table_valid_from": valid_from,
                "table_valid_to": valid_to,
            }
        )

    assert ex.compare(2, as_output(expected), expected) == []

    # Late orders charged the symbol's newest price instead of the price valid at their time.
    latest = seen.to_pandas().sort_values("price_ts").groupby("symbol")["price"].last()
    wrong = expected.copy()
    wrong["price"] = wrong["symbol"].map(latest)
    assert ex.latest_price_differs(expected, seen) > 0
    problems = ex.compare(2, as_output(wrong), expected)
    assert problems and "rows differ in price" in problems[0]

    # A missing order is caught too.
    assert "different orders" in ex.compare(2, as_output(expected.iloc[1:]), expected)[0]
