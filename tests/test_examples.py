"""The README quickstart and `make run`'s example produce what they promise."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_quickstart_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_restaurant_example_prints_bills_and_tally() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "restaurant.py")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "bill: Anna ordered 2 x curry at t=1: 2 x $8 = $16" in out
    assert "bill: Bob ordered 1 x curry at t=5: 1 x $10 = $10" in out
    # The out-of-order order is charged the price valid at t=3, not the newer $10.
    assert "bill: Candace ordered 3 x curry at t=3: 3 x $8 = $24" in out
    assert "$30" not in out
    assert "vote: Anna for ice cream noodles at t=3: out of order (superseded at t=4)" in out
    assert out.strip().endswith("tally: berry sandwich=1, mint pizza=1")
