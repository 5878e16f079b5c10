"""The streaming query a plan runs as, known from its Spark checkpoint before it starts.

A store's lineage is its query's id, which Spark keeps in the ``metadata`` file of the query's
checkpoint location. When a helper builds a query, that location tells which lineage the
query will open, so the settings each store recorded are checked then, on the driver, before
any micro-batch: a changed setting is one error, raised once where the query is built, and
not a task failing (and retried) at the first micro-batch that has data, or never when the
restart has no new data. The location is ``configure(checkpoint_location=...)``, else the
checkpoint root's parent when that is a Spark checkpoint (the root inside the query's
checkpoint, as the docs suggest); without either the tasks check, as always.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from verstore.checkpoint.layout import LineageFiles
from verstore.checkpoint.settings import StoreSettings, check
from verstore.exceptions import StorageError
from verstore.location import Location
from verstore.spark._conf import CHECKPOINT_LOCATION, CHECKPOINT_ROOT, session_storage_options

log = logging.getLogger("verstore.spark")

_BATCH_FILE = re.compile(r"(0|[1-9][0-9]{0,18})")
#: A Spark checkpoint's ``metadata`` is one line of JSON: anything larger is not one.
_METADATA_LIMIT = 1 << 16


def query_id(checkpoint: Location) -> str | None:
    """The id of the query whose Spark checkpoint is ``checkpoint``; None when it has none yet.

    Raises:
        ValueError: ``metadata`` is there but is not a Spark checkpoint's.
    """
    try:
        first = checkpoint.read_bytes(checkpoint.path("metadata"), _METADATA_LIMIT).split(b"\n")[0]
    except FileNotFoundError:
        return None
    try:
        found = json.loads(first)["id"]
    except (ValueError, KeyError, TypeError):
        found = None
    if not isinstance(found, str) or not found:
        where = checkpoint.describe(checkpoint.root)
        raise ValueError(f"{where} is not a Spark streaming checkpoint (no readable metadata)")
    return found


def query_position(checkpoint: Location) -> tuple[str, int]:
    """``(query id, version)`` of a Spark checkpoint: the version its next micro-batch opens,
    one past its last committed batch.

    Raises:
        ValueError: No query metadata, or no committed micro-batch.
    """
    where = checkpoint.describe(checkpoint.root)
    query = query_id(checkpoint)
    if query is None:
        raise ValueError(f"{where} is not a Spark streaming checkpoint (no readable metadata)")
    batches = [
        int(info.base_name)
        for info in checkpoint.list(checkpoint.path("commits"))
        if _BATCH_FILE.fullmatch(posixpath.basename(info.path))
    ]
    if not batches:
        raise ValueError(f"{where} has no committed micro-batch: there is no state to move")
    return query, max(batches) + 1


def check_before_start(spark: Any, wanted: Mapping[str, StoreSettings]) -> None:
    """Checks ``wanted`` (store name -> settings of the plan being built) against what each
    store of the query recorded, when the query's Spark checkpoint is known (see the module).

    Raises:
        IncompatibleConfigError: A store recorded other settings: naming the setting, both
            values and the command that changes it.
        CorruptionError: A settings file is damaged.
    """
    root = spark.conf.get(CHECKPOINT_ROOT, None)
    if not root:
        return
    explicit = spark.conf.get(CHECKPOINT_LOCATION, None) or None
    location = explicit or _parent(str(root))
    if location is None:
        return
    try:
        options = session_storage_options(spark)
        query = query_id(Location.resolve(location, options))
        stores = Location.resolve(str(root), options)
    except (OSError, StorageError, ValueError, RuntimeError) as e:
        if explicit:
            raise
        # The root's parent is not a checkpoint this process can read: the tasks check.
        log.debug("verstore.spark: no settings check before the start (%s): %s", location, e)
        return
    if query is None:
        return  # the query's first start: nothing recorded yet
    for name, settings in wanted.items():
        check(LineageFiles(stores, name, query), settings)


def _parent(root: str) -> str | None:
    """The directory holding ``root`` (a path or a URI), None at the top of a file system."""
    stripped = root.rstrip("/")
    parent = stripped.rsplit("/", 1)[0] if "/" in stripped else ""
    if not parent or parent.endswith(":/") or parent.endswith(":") or parent == stripped:
        return None
    return parent


__all__ = ["check_before_start", "query_id", "query_position"]
