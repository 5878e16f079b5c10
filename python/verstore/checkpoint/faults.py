"""Fault injection points of the checkpoint protocol, for tests.

Production code never installs a hook. Tests install one with :func:`set_hook` that raises (a
simulated crash: an exception that is not an ``Exception``, so nothing swallows it) or kills the
process at a named step. The steps, in protocol order:

``before_changelog``, ``after_changelog``, ``after_local_state``, ``during_snapshot_upload``,
``before_manifest``, ``after_manifest``, ``before_cleanup``, ``during_cleanup``,
``during_rebuild``, and, apart from commits, ``during_handoff`` (a kept store's write buffer
saved, ``LOCAL.json`` not yet naming it) and a repartition's steps (:data:`REPARTITION_STEPS`).
"""

from __future__ import annotations

from collections.abc import Callable

#: The steps of a commit, its snapshot and cleanup, in order.
COMMIT_STEPS = (
    "before_changelog",
    "after_changelog",
    "after_local_state",
    "during_snapshot_upload",
    "before_manifest",
    "after_manifest",
    "before_cleanup",
    "during_cleanup",
)
#: The steps of a repartition (docs/checkpoint.md, "Repartitioning"), in order.
REPARTITION_STEPS = (
    "repartition_marked",
    "repartition_writing",
    "repartition_before_publish",
    "repartition_published",
)
STEPS = (*COMMIT_STEPS, "during_rebuild", "during_handoff", *REPARTITION_STEPS)

_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Installs ``hook`` (called with the step name at every step), or removes it."""
    global _hook
    _hook = hook


def step(name: str) -> None:
    if _hook is not None:
        _hook(name)


__all__ = ["COMMIT_STEPS", "REPARTITION_STEPS", "STEPS", "set_hook", "step"]
