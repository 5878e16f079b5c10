"""Kills this process (``SIGKILL``) at the checkpoint fault step named by ``VERSTORE_KILL_AT``.

On ``PYTHONPATH`` of a test's subprocess only: every Python process it starts (the driver,
Spark's Python workers) runs this at startup, so the kill lands wherever the step runs.
"""

import os
import signal

_STEP = os.environ.get("VERSTORE_KILL_AT")
if _STEP:
    from verstore.checkpoint import faults

    def _kill(step: str) -> None:
        if step == _STEP:
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(_kill)
