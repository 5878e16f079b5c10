"""The checkpoint protocol checked exhaustively: every interleaving of its commit, snapshot,
reuse and cleanup steps, with crashes at every named step, up to a bound (the model:
``protocol_model.py``, the code's steps: ``protocol_programs.py``, the explorer:
``state_space.py``); and mutations of the protocol that the check must find. The argument the
model backs: docs/checkpoint.md, "Why no interleaving loses a version".

A bound is the micro-batches each executor runs attempts of (in order, on its own local copy;
executors that run one batch are its retries, speculative copies and zombies), standalone
cleanups, and how many faults a run meets (a crash at a named step, a failed upload, a
changelog whose answer is lost). Every attempt whose snapshot is due takes it and then cleans
up, as the code does: with ``snapshot_interval`` 1 and ``min_versions_to_retain`` 2, every
commit snapshots and every cleanup deletes what it can. ``make test`` runs the small bounds
(seconds each); ``VERSTORE_LONG_TESTS=1`` adds the long ones (under a minute each).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from protocol_model import Lemma, Protocol, World, local, swap
from protocol_programs import (
    OPEN,
    attempt_program,
    before_seed_51,
    current,
    hand_to_task_copy_left_clean,
)
from state_space import Result, explore
from verstore.checkpoint import faults

CRASHES = ": crashes"

_LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"


class Bound(NamedTuple):
    """Each executor's micro-batches, the faults a run may meet, standalone cleanups, and
    whether attempts clean up after their snapshots (as the code does) or leave it to those."""

    executors: tuple[tuple[int, ...], ...]
    faults: int = 0
    cleanups: int = 0
    attempt_cleans: bool = True


#: Small enough for make test (a few seconds each on one core; 28 600, 50 800, 51 700 and
#: 40 300 states), large enough for the races that once lost state: the protocol before the
#: seed-51 fix, and each mutation below, fails within them.
SMALL = {
    "a retry of batch 1 on a second executor": Bound(((0, 1, 2), (1,))),
    "seed 51: the first executor comes back after a gap": Bound(((0, 2, 3), (1,))),
    "two executors overlapping": Bound(((0, 1), (1, 2))),
    "a fault at any step": Bound(((0, 2), (1,)), faults=1),
}
#: ``VERSTORE_LONG_TESTS=1``: more attempts on both executors, faults with them, standalone
#: cleanups (50 000 to 300 000 states each). Three executors, or two standalone cleanups,
#: are beyond what this explorer covers in minutes (over 3 million states).
LONG = {
    "two executors running every batch, a fault at any step": Bound(((0, 1), (0, 1)), faults=1),
    "three versions on both executors": Bound(((0, 1, 2), (1, 2))),
    "seed 51 with the second executor going on": Bound(((0, 2, 3), (1, 2))),
    "a retry of the last batch, a fault at any step": Bound(((0, 1, 2), (2,)), faults=1),
    "a zombie of batch 0 while another executor runs three": Bound(((0,), (0, 1, 2))),
    "a standalone cleanup at any moment, a fault at any step": Bound(
        ((0, 1, 2, 3),), faults=1, cleanups=1
    ),
    "a standalone cleanup the only one, beside a retry": Bound(
        ((0, 1, 2), (2,)), cleanups=1, attempt_cleans=False
    ),
}
#: A run that grows past this explores another model than the one these bounds were sized for.
MAX_STATES = 5_000_000


def check(protocol: Protocol, crashed: set[str] | None = None) -> Result:
    """Explores ``protocol``; adds the named steps it crashed at to ``crashed``."""

    def successors(world: World) -> Iterator[tuple[str, World]]:
        for label, after in protocol.successors(world):
            if crashed is not None and label.endswith(CRASHES):
                crashed.add(label[: -len(CRASHES)].rsplit(", ", 1)[-1].rsplit(": ", 1)[-1])
            yield label, after

    result = explore(protocol.initial(), successors, protocol.invariant, max_states=MAX_STATES)
    print(result.report())  # pytest -s: the state counts of each bound
    return result


def bounded(bound: Bound, **options: object) -> Protocol:
    """The protocol as the code runs it, within ``bound``."""
    protocol = current(
        bound.executors, bound.cleanups, attempt_cleans=bound.attempt_cleans, faults=bound.faults
    )
    return dataclasses.replace(protocol, **options)


@pytest.mark.parametrize(
    "bound",
    [pytest.param(b, id=name) for name, b in SMALL.items()]
    + [
        pytest.param(
            b,
            id=name,
            marks=pytest.mark.skipif(not _LONG, reason="long bound: VERSTORE_LONG_TESTS=1"),
        )
        for name, b in LONG.items()
    ],
)
def test_no_interleaving_loses_a_version(bound: Bound) -> None:
    """In every state of every interleaving within the bound: every acknowledged version is
    the winning chain's or below it, and every retained version rebuilds from the checkpoint
    to exactly its batches; no open, commit or manifest holds a second state of a version;
    and a manifest whose claim exists names only files that exist. A bound with faults
    crashes an attempt at every named step of the code."""
    crashed: set[str] = set()
    result = check(bounded(bound), crashed)
    assert result.violation is None, result.report()
    assert result.complete, result.report()
    if bound.faults:
        assert crashed == {*faults.COMMIT_STEPS, "during_rebuild"}


def _found(result: Result, violation: str) -> None:
    assert result.violation is not None, f"the mutation went unnoticed: {result.report()}"
    assert result.violation.startswith(violation), result.report()


def test_the_protocol_before_the_seed_51_fix_loses_a_version() -> None:
    """The protocol before commit cc70065 (a snapshot wrote its manifest, then checked its
    files; a cleanup deleted what no manifest it had read named): executor A's snapshot reuses
    an upload of an older snapshot of its copy while B's cleanup, which listed the partition
    before that manifest existed, is about to delete the upload as unreferenced; A's next
    cleanup takes the new snapshot as its base and deletes the changelogs below it; then B's
    cleanup deletes the upload. Uploads of snapshots in flight are spared (``grace``), as
    ``orphan_grace_s`` spared them then: only a reused upload is exposed, as in seed 51."""
    bound = SMALL["seed 51: the first executor comes back after a gap"]
    old = dataclasses.replace(before_seed_51(bound.executors), grace=True)
    result = check(old)
    _found(result, "retained versions rebuild")
    reused = [label for label in result.trace if "finds uploads to reuse: [(1, 1)" in label]
    assert reused, result.report()
    assert result.trace[-1].endswith("deletes upload (1, 1)"), result.report()
    # The protocol since keeps every version at this bound (test_no_interleaving_loses_a_
    # version), and so with uploads in flight spared:
    result = check(bounded(bound, grace=True))
    assert result.violation is None and result.complete, result.report()


def test_retiring_after_listing_again_loses_a_version() -> None:
    """A cleanup's second listing must come after its retirement: swapped, a snapshot that
    reuses an upload can claim it between the two, read no retirement, and write its manifest
    while the cleanup deletes the upload; a later cleanup takes that manifest as its base."""
    protocol = bounded(SMALL["a retry of batch 1 on a second executor"], lemma=Lemma.OFF)
    mutated = dataclasses.replace(
        protocol,
        attempt=swap(protocol.attempt, "retire", "list again"),
        cleanup=swap(protocol.cleanup, "retire", "list again"),
    )
    _found(check(mutated), "retained versions rebuild")


def test_listing_uploads_before_reading_retirements_breaks_the_lemma() -> None:
    """A snapshot must read the retirements before it lists the uploads: swapped, a cleanup
    can delete an upload the snapshot names and then its retirement between the two reads,
    and the snapshot sees neither. Its manifest then names a deleted file (within this bound
    no version is lost: the lemma is what the argument of docs/checkpoint.md rests on)."""
    protocol = bounded(SMALL["seed 51: the first executor comes back after a gap"])
    mutated = dataclasses.replace(
        protocol, attempt=swap(protocol.attempt, "check retirements", "check uploads")
    )
    _found(check(mutated), "a manifest names a missing file")


def test_an_open_that_leaves_the_copy_clean_applies_a_batch_twice() -> None:
    """``LOCAL.json`` must say dirty before the task writes: an open that leaves it clean lets
    a crashed attempt's flushed writes into the next open of the same copy."""
    opens = {**OPEN, "mark dirty": (local("hand to task", hand_to_task_copy_left_clean),)}
    bound = Bound(((0, 1, 1),), faults=1)
    mutated = dataclasses.replace(bounded(bound), attempt=attempt_program(open_=opens))
    _found(check(mutated), "one state per version")
    assert check(bounded(bound)).violation is None


def test_a_manifest_written_after_its_claim_was_deleted_may_name_deleted_files() -> None:
    """Why the lemma holds for manifests whose claim exists, and not for every manifest: a
    snapshot that passed its check stalls before its manifest while other attempts commit on,
    and a cleanup that listed the partition before the manifest existed deletes the claim (its
    version no longer needed) and the uploads it names. The manifest names deleted files. It
    is no base of any retained version (the other invariants hold throughout: the same bound
    with the claimed lemma is a long bound), and the next cleanup deletes it."""
    bound = LONG["a zombie of batch 0 while another executor runs three"]
    result = check(bounded(bound, lemma=Lemma.STRICT))
    _found(result, "a manifest names a missing file: 1-1")
    assert any("creates manifest 1-1" in step for step in result.trace), result.report()
    assert any("deletes claim 1-1" in step for step in result.trace), result.report()
