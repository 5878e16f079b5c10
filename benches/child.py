"""Measurements in a child process: peak RSS is per process, so each measured phase runs alone."""

from __future__ import annotations

import json
import subprocess
import sys


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
