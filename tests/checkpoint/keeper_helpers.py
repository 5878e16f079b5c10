"""What tests do to a ``Keeper`` that a process never does to its own."""

from __future__ import annotations

from pathlib import Path

from verstore import VersionedStore
from verstore.checkpoint.kept import Keeper


def discard_all(keeper: Keeper) -> None:
    """Drops every store ``keeper`` holds as a process that dies would: each copy stays as
    ``LOCAL.json`` says, the locks go (a worker killed right after its tasks, in one process).
    Work of the keeper on a store ends first."""
    with keeper._mutex:
        entries, keeper._held = list(keeper._held.values()), {}
        for held in entries:
            keeper._wait_for(held)
    for held in entries:
        held.drop()


def kept_store(keeper: Keeper, directory: Path) -> VersionedStore:
    """The open store ``keeper`` holds for the local copy ``directory``, to look at (its
    sizes) while it stays the keeper's."""
    with keeper._mutex:
        return keeper._held[directory].store
