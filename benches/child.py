"""Measurements in a child process: peak RSS is per process, so each measured phase runs alone."""

from __future__ import annotations

import json
import subprocess
import sys

#: Source of ``peak_rss_mb()`` for child scripts: ``VmHWM``, not ``ru_maxrss``, which keeps the
#: forking parent's peak across exec.
PEAK_RSS = """
def peak_rss_mb():
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
"""


def run_json(script: str, *args: object) -> dict[str, float]:
    """Runs ``script`` with ``args`` in a fresh interpreter; its last line of output is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
