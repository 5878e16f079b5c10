"""Fault injection points of the checkpoint protocol, for tests.

Production code never installs a hook. Tests install one with :func:`set_hook` that raises (a
simulated crash: an exception that is not an ``Exception``, so nothing swallows it) or kills the
process at a named step. The steps, in protocol order:

``before_changelog``, ``after_changelog``, ``after_local_state``, ``during_snapshot_upload``,
``before_manifest``, ``after_manifest``, ``before_cleanup``, ``during_cleanup``,
``during_rebuild``.
"""

from __future__ import annotations

from collections.abc import Callable

STEPS = (
    "before_changelog",
    "after_changelog",
    "after_local_state",
    "during_snapshot_upload",
    "before_manifest",
    "after_manifest",
    "before_cleanup",
    "during_cleanup",
    "during_rebuild",
)

_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Installs ``hook`` (called with the step name at every step), or removes it."""
    global _hook
    _hook = hook


def step(name: str) -> None:
    if _hook is not None:
        _hook(name)


__all__ = ["STEPS", "set_hook", "step"]
