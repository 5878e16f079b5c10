"""Versioned state in Spark's own stateful operators.

Two integration modes besides partition mode (``_runtime``):

* **transformWithState** (``transformWithStateInPandas``, PySpark >= 4.0):
  :class:`VersionedStatefulProcessor` is a ``StatefulProcessor`` base class whose ``init()``
  opens the task's partition of each declared store at the micro-batch's version and whose
  ``close()`` commits it. Spark calls ``init()`` and ``close()`` exactly once per partition per
  batch attempt (empty partitions included), ``close()`` before its own state commit; it also
  calls both once on the driver to collect state schemas, where nothing is opened. Users keep
  timers, TTL and Spark's own state variables alongside the stores.
* **applyInPandasWithState** (the PySpark form of ``mapGroupsWithState``): it has no
  end-of-partition hook, so no external store can be committed. Instead a group keeps its
  versioned history *inside* its ``GroupState``: :class:`GroupHistory` is one key's history
  with the store's semantics and row format, serialized to bytes by :func:`save_history` and
  read back by :func:`load_history`; Spark provides the durability.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from verstore._core import GroupHistory, VersionedStore
from verstore.spark import _compat
from verstore.spark._conf import StorageCredentials, active_credentials
from verstore.spark._runtime import PartitionContext, StoreSpec, partition_stores

if TYPE_CHECKING:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
elif _compat.has(_compat.TRANSFORM_WITH_STATE):
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
else:  # PySpark 3.5: the class imports and subclasses; an instance names the version it needs
    StatefulProcessor = _compat.unavailable(
        "StatefulProcessor", _compat.TRANSFORM_WITH_STATE, "transformWithStateInPandas"
    )

#: The state schema for :func:`load_history` / :func:`save_history`: one binary field.
HISTORY_STATE_SCHEMA = "history BINARY"

# Sessions this Python worker opened and has not closed. Spark does not call close() when a
# task fails, and workers are reused: the next task's init() aborts what a failed one left
# open (a worker runs one task at a time), so its local directory locks are released.
_open_sessions: list[AbstractContextManager[PartitionContext]] = []

# The instance attribute that carries configure()'s secret storage options to the tasks.
_CREDENTIALS = "_verstore_credentials"


def _abort_leftovers() -> None:
    while _open_sessions:
        session = _open_sessions.pop()
        error = RuntimeError("verstore: aborting stores left open by a failed task")
        try:
            session.__exit__(RuntimeError, error, None)
        except Exception:  # the abort itself failed: the next open rebuilds anyway
            pass


class VersionedStatefulProcessor(StatefulProcessor):
    """A ``StatefulProcessor`` with verstore partition stores, for ``transformWithStateInPandas``.

    Declare the stores as a class attribute and use them through :meth:`store` in
    ``handleInputRows``; call ``super().init(handle)`` and ``super().close()`` when
    overriding ``init`` or ``close``::

        class Enrich(VersionedStatefulProcessor):
            stores = {"prices": StoreSpec(history_retention_ms=7 * 86_400_000)}

            def handleInputRows(self, key, rows, timerValues):
                prices = self.store("prices")
                ...

    The task of micro-batch ``b`` opens version ``b`` of each store in ``init()`` and commits
    version ``b + 1`` in ``close()``; a retried task opens ``b`` again. The partition is Spark's
    state partition (``TaskContext.partitionId()``), so a key always meets its stores' data.
    Exactly-once needs deterministic processing per partition, as for Spark's own state: within
    ``handleInputRows`` apply a key's updates in a defined order (sort by time and a
    tie-breaker) before its lookups. A store's observed stream time, and so which writes are
    too old (``NOT_PUT``), is per partition: it advances with every key processed before.
    :func:`verstore.spark.configure` must have been called (``init()`` raises otherwise).

    Attributes:
        stores: Store name -> :class:`StoreSpec` (class attribute).
        num_partitions: Recorded in each store and checked on every open when set (class
            attribute). ``None`` records nothing: Spark itself keeps a stateful operator's
            number of partitions fixed for the life of its checkpoint.
    """

    stores: ClassVar[Mapping[str, StoreSpec]] = {}
    num_partitions: ClassVar[int | None] = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Opens the task's stores (nothing on the driver); keeps ``handle`` as ``self.handle``."""
        from pyspark import TaskContext

        self.handle = handle
        self._session: AbstractContextManager[PartitionContext] | None = None
        self._context: PartitionContext | None = None
        if TaskContext.get() is None:
            return  # the driver's schema-collecting pass: no task, no partition
        _abort_leftovers()
        credentials: StorageCredentials | None = getattr(self, _CREDENTIALS, None)
        session = partition_stores(
            dict(self.stores), num_partitions=self.num_partitions, credentials=credentials
        )
        self._context = session.__enter__()
        self._session = session
        _open_sessions.append(session)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled on the driver (or the Spark Connect client) when the query is planned: the
        # processor carries configure()'s secret storage options to its tasks, as partition
        # functions do, never through a conf. Elsewhere it keeps what it carries.
        state = dict(self.__dict__)
        credentials = active_credentials()
        if credentials is not None:
            state[_CREDENTIALS] = credentials
        return state

    def close(self) -> None:
        """Commits the task's stores (version ``batch + 1``); nothing on the driver."""
        session = getattr(self, "_session", None)
        if session is None:
            return
        self._session = None
        self._context = None
        if session in _open_sessions:
            _open_sessions.remove(session)
        session.__exit__(None, None, None)

    @property
    def context(self) -> PartitionContext:
        """The open stores, the micro-batch id and the partition of this task.

        Raises:
            RuntimeError: No stores are open (on the driver, or outside init/close).
        """
        context: PartitionContext | None = getattr(self, "_context", None)
        if context is None:
            raise RuntimeError(
                "verstore: no stores are open; they exist between init() and close() of a task"
            )
        return context

    def store(self, name: str) -> VersionedStore:
        """The open store ``name`` of this task's partition."""
        return self.context.store(name)


def load_history(
    state: Any,
    *,
    history_retention_ms: int,
    segment_interval_ms: int | None = None,
    latest_ttl_ms: int | None = None,
) -> GroupHistory:
    """The group's history from its ``GroupState`` (:data:`HISTORY_STATE_SCHEMA`), or a new one.

    Args:
        state: The ``GroupState`` of ``applyInPandasWithState``.
        history_retention_ms: The history retention (and grace period); use the same value for
            the life of the query.
        segment_interval_ms: Segment interval; None applies Kafka's default rule.
        latest_ttl_ms: The time-to-live of the group's newest version, in event time
            (docs/semantics.md §2.15); None: none. A history may gain one or lower it, never
            raise or lose it. The group's state is Spark's to end: pair it with
            ``GroupState.setTimeoutTimestamp`` to drop the group itself.

    Returns:
        The history; an empty one when the state does not exist.

    Raises:
        CorruptionError: The stored bytes are not a history.
        IncompatibleConfigError: The stored history has another retention or interval, or a
            higher TTL, or one when none is given.
    """
    if state.exists:
        (data,) = state.get
        if data is not None:
            return GroupHistory.from_bytes(
                bytes(data),
                history_retention_ms=history_retention_ms,
                segment_interval_ms=segment_interval_ms,
                latest_ttl_ms=latest_ttl_ms,
            )
    return GroupHistory(
        history_retention_ms=history_retention_ms,
        segment_interval_ms=segment_interval_ms,
        latest_ttl_ms=latest_ttl_ms,
    )


def save_history(state: Any, history: GroupHistory) -> None:
    """Stores ``history`` in the group's ``GroupState`` (:data:`HISTORY_STATE_SCHEMA`)."""
    state.update((history.to_bytes(),))


__all__ = [
    "HISTORY_STATE_SCHEMA",
    "GroupHistory",
    "VersionedStatefulProcessor",
    "load_history",
    "save_history",
]
