"""Partition functions that say so when a Spark worker's Python cannot import verstore.

Spark runs a partition function in the executors' Python: ``spark.pyspark.python`` or
``PYSPARK_PYTHON`` when set, else ``python3`` from ``PATH``, which is often not the driver's
interpreter (a venv on the driver, the system Python on the workers). A function of verstore's
pickled by reference makes such a worker fail while it unpickles the task, with a
``ModuleNotFoundError`` deep in a JVM stack trace. :func:`portable` pickles the function
inside one that needs nothing of verstore to be unpickled: it imports verstore first, and
raises one error naming the interpreter the worker ran and how to point it at another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

PartitionFunction = Callable[[Iterator[Any]], Iterator[Any]]


def portable(fn: PartitionFunction) -> PartitionFunction:
    """``fn`` carried as bytes by a function that any worker's Python can unpickle."""
    from pyspark import cloudpickle

    import verstore

    payload: bytes = cloudpickle.dumps(fn)  # type: ignore[no-untyped-call]  # pyspark is untyped
    return _carrier(payload, verstore.__version__)


def _carrier(payload: bytes, version: str) -> PartitionFunction:
    # A function local to another is pickled by value (its code and these two cells), never
    # as a reference to this module: it names nothing of verstore until it runs.
    def verstore_partition(batches: Iterator[Any]) -> Iterator[Any]:
        try:
            import verstore._core  # noqa: F401
        except ImportError as e:
            import os
            import sys

            chosen = os.environ.get("PYSPARK_PYTHON")
            raise RuntimeError(
                f"verstore.spark: the Spark worker's Python {sys.executable} cannot import "
                f"verstore ({e}; PYSPARK_PYTHON is "
                f"{'not set' if chosen is None else repr(chosen)}). Install verstore {version} "
                "there, or run the workers with a Python that has it: set PYSPARK_PYTHON (or "
                "spark.pyspark.python) to it before the session starts (docs/spark.md, "
                "Shipping verstore to executors)"
            ) from None
        import pickle

        fn: PartitionFunction = pickle.loads(payload)
        return fn(batches)

    return verstore_partition


__all__ = ["portable"]
