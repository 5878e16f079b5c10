"""Fault injection in Spark tasks, for tests: internal, and inert unless a test sets its conf.

Why the product carries it: a test cannot reach into the Python workers that Spark starts for
its tasks (a hook installed in the test's process, as ``verstore.checkpoint.faults`` installs
one, is not in theirs), and a Spark conf, copied into every task's local properties, is the one
channel to them. With :data:`FAIL_AFTER_COMMIT` set to ``"true"``, a task raises right after
its commit on its first attempt, so that Spark retries a task whose state is already committed
(``tests/spark/test_exactly_once.py``, ``test_stateful.py``, ``test_tables.py``). Unset, it
costs a task one read of a local property.
"""

from __future__ import annotations

from verstore.spark._conf import PREFIX

#: The conf that makes a task's first attempt fail right after its commit.
FAIL_AFTER_COMMIT = PREFIX + "test.failAfterCommit"


def after_commit() -> None:
    """Raises in a task's first attempt when :data:`FAIL_AFTER_COMMIT` is set."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is not None and ctx.getLocalProperty(FAIL_AFTER_COMMIT) == "true":
        if ctx.attemptNumber() == 0:
            raise RuntimeError("verstore fault injection: failing after commit on attempt 0")


__all__ = ["FAIL_AFTER_COMMIT", "after_commit"]
