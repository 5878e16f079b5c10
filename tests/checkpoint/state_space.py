"""A small explicit-state explorer: every state a transition system reaches, breadth first.

A system is an initial state, a function giving each state's successors (each with a label
that names the step taken) and an invariant (None, or what is wrong with a state). States must
be hashable values; the explorer keeps a 64-bit fingerprint of each state it has seen (Python's
``hash``, as TLC keeps fingerprints), with the fingerprint of the state it was first reached
from and the label of that step, so that a counterexample comes back as the labels of a
shortest path to it. Two distinct states with one fingerprint would hide one of them: with a
million states the chance is about 1e-7 (the birthday bound over 2**64).

The state space must be finite (the system bounds its own actors, faults and versions);
``max_states`` stops a run that grew beyond what it was meant to explore, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

S = TypeVar("S", bound=Hashable)

Successors = Callable[[S], Iterable[tuple[str, S]]]
Invariant = Callable[[S], str | None]


@dataclass
class Result:
    """What a run explored, and the first violation it met (None: none in the whole space).

    Attributes:
        states: Distinct states reached (the initial one included).
        transitions: Steps taken, including those into states already seen.
        depth: The longest shortest path from the initial state (BFS levels).
        seconds: Wall time of the run.
        violation: What the invariant said of the first bad state.
        trace: The labels of a shortest path to that state.
        complete: False when ``max_states`` cut the run short.
    """

    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    violation: str | None = None
    trace: list[str] = field(default_factory=list)
    complete: bool = True

    def report(self) -> str:
        """The counterexample as numbered steps, or the size of a clean run."""
        size = (
            f"{self.states} states, {self.transitions} transitions, depth {self.depth}, "
            f"{self.seconds:.1f} s"
        )
        if self.violation is None:
            return size + ("" if self.complete else " (cut short: max_states)")
        steps = "\n".join(f"{i:3d}. {label}" for i, label in enumerate(self.trace, 1))
        return f"{self.violation}\nafter {len(self.trace)} steps ({size}):\n{steps}"


def explore(
    initial: S,
    successors: Successors[S],
    invariant: Invariant[S],
    *,
    max_states: int | None = None,
) -> Result:
    """Explores every state reachable from ``initial``, breadth first, checking ``invariant``
    on each; stops at the first violation (whose trace is then a shortest one)."""
    started = time.monotonic()
    result = Result()
    labels: dict[str, int] = {}
    label_names: list[str] = []
    # fingerprint -> (fingerprint of the predecessor, index of the step's label)
    parents: dict[int, tuple[int, int]] = {hash(initial): (0, -1)}
    result.violation = invariant(initial)
    frontier = [initial] if result.violation is None else []
    while frontier:
        level: list[S] = []
        for state in frontier:
            here = hash(state)
            for label, successor in successors(state):
                result.transitions += 1
                print_ = hash(successor)
                if print_ in parents:
                    continue
                index = labels.setdefault(label, len(label_names))
                if index == len(label_names):
                    label_names.append(label)
                parents[print_] = (here, index)
                problem = invariant(successor)
                if problem is not None:
                    result.violation = problem
                    result.trace = _path(parents, label_names, print_)
                    return _finish(result, parents, started)
                level.append(successor)
                if max_states is not None and len(parents) >= max_states:
                    result.complete = False
                    return _finish(result, parents, started)
        if level:
            result.depth += 1
        frontier = level
    return _finish(result, parents, started)


def _path(parents: dict[int, tuple[int, int]], names: list[str], end: int) -> list[str]:
    path = []
    while True:
        parent, index = parents[end]
        if index < 0:
            return path[::-1]
        path.append(names[index])
        end = parent


def _finish(result: Result, parents: dict[int, tuple[int, int]], started: float) -> Result:
    result.states = len(parents)
    result.seconds = time.monotonic() - started
    return result
