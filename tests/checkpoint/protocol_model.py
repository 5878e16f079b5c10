"""A model of the checkpoint protocol's commit, snapshot, reuse and cleanup steps, small enough
to explore every interleaving (``state_space.py``; the argument it backs: docs/checkpoint.md,
"Why no interleaving loses a version").

**What is modelled.** One partition's durable records (changelogs, snapshot claims and
manifests, cleanups' retirements, uploads) under the storage contract
(``verstore/checkpoint/__init__.py``): a claim, manifest or retirement is a conditional create;
a changelog or an upload is an unconditional put of a name no other writer uses, whole or not
at all; every operation is atomic and seen by every later one. Executors, each with a local
copy (``LOCAL.json``: commit, clean, upload map; ``db/``: its flushed SST files), run attempts of
micro-batches one after another (the copy's lock); standalone cleanups run beside them. An
attempt's program is the code's sequence of storage operations (``store.py``, ``restore.py``,
``maintenance.py``, ``uploads.py``), with the code's named steps (``faults.py``) where it has
them: at each of those a fault may crash the attempt (its process dies: the memtable is lost,
the lock goes, the copy stays as it is). The changelog's upload may also fail (nothing lands)
or land with its answer lost, and a snapshot's upload may fail.

Every storage operation is one step of the interleaving; local work runs with the operation
after it (no other executor sees a local copy). A read of records named by an earlier listing
runs with the operation after it too, and may meet a record deleted since: as the records read
one by one could each be read before or after its deletion, each such record reads as there or
gone (a superset of what the code can see; records are immutable and a name is never used
twice, so a record that is there reads as listed). Uploads are as old as anything can be
(``orphan_grace_s`` 0, the worst case: the grace only spares files; ``Protocol.grace`` models
it). States are contents: a state is the batches it holds, so a batch applied twice (a copy
reused although it held uncommitted writes) is a second state of that version. An actor keeps
of what it listed and read only what it still needs, cut to the records it asks about, and
forgets each variable once it is dead: states that differ in nothing the future depends on are
one state, which is what makes the bounds of ``test_protocol_model.py`` small enough to
explore whole.

**The invariants**, checked in every state:

* *retained versions rebuild*: the winning chain has a tip at or above every acknowledged
  version, and every version from ``tip - min_versions_to_retain + 1`` to the tip rebuilds
  from the checkpoint (newest usable snapshot on its chain, else the empty state, then the
  changelogs) to exactly its batches;
* *one state per version*: every open serves, every commit holds and every manifest names the
  state of exactly the batches below its version, so no two attempts commit different states of
  one version, and whichever sibling wins, a version reads the same;
* *a manifest whose claim exists names only files that exist* (the lemma of the argument: no
  file a manifest names is deleted while the manifest and its claim exist), for the current
  protocol. Not every manifest: a snapshot that passed its check can write its manifest after a
  cleanup deleted its claim (the version no longer needed) and, later, the uploads it names
  (:class:`Lemma`).

Not modelled: stores kept open between tasks (their deferred work is these same steps, run
later under the same lock), repartitions, storage errors on other operations, damaged files.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, TypeVar

K = TypeVar("K")
_T = TypeVar("_T", bound=tuple)  # type: ignore[type-arg]
R = TypeVar("R")

# --- durable records -------------------------------------------------------------------------

#: A commit's identity: (version, attempt id). Attempt ids grow with the time of the open.
Ref = tuple[int, int]
ROOT: Ref = (0, 0)
#: A state: the batches it holds, sorted (batch b is micro-batch b's writes; version v holds
#: batches 0 .. v - 1, each once).
Content = tuple[int, ...]
#: An upload's name: (the attempt that uploaded it, its local file number). Unique: an attempt
#: uploads a file once, and attempt ids are unique.
Durable = tuple[int, int]
#: The local number of a snapshot's non-SST files (RocksDB's MANIFEST, CURRENT, OPTIONS): they
#: are uploaded afresh by every snapshot, never reused.
META = 0


class Commit(NamedTuple):
    ref: Ref
    parent: Ref


class Entry(NamedTuple):
    """A file of a snapshot (a manifest's or claim's entry, or the copy's upload map)."""

    local: int
    durable: Durable
    content: Content


Files = frozenset[Entry]
#: A cleanup's retirement: its id (unique per cleanup) and the uploads it names.
Retirement = tuple[int, frozenset[Durable]]


class Listing(NamedTuple):
    """What one listing of the partition directory finds: its records (they never change, so
    what a later read finds is this, or nothing), and its uploads. An actor keeps the parts it
    still needs (``Vars``)."""

    commits: frozenset[Commit]
    manifests: frozenset[tuple[Ref, Files]]
    claims: frozenset[tuple[Ref, Files]]
    retirements: frozenset[Retirement]
    uploads: frozenset[tuple[Durable, Content]]


class Copy(NamedTuple):
    """An executor's local copy: ``LOCAL.json`` (commit, clean, upload map) and ``db/``."""

    commit: Ref | None = None
    clean: bool = False
    uploaded: Files = frozenset()
    db: frozenset[tuple[int, Content]] = frozenset()


#: A snapshot's record as a read finds it: ("manifest" or "claim", its commit).
Key = tuple[str, Ref]


class Vars(NamedTuple):
    """An actor's variables (an attempt's, or a cleanup's). Each holds only what the actor
    still needs of what it listed or read, and is cleared once dead, so that states that
    differ in nothing the future depends on are one state."""

    attempt: int = 0
    serving: Ref = ROOT
    new: Ref = ROOT
    due: bool = False
    path: str = ""  # the open's way to its state: reuse, catch up, rebuild
    #: The open's listing: the serving chain's commits and the manifests of its snapshots.
    listing: Listing | None = None
    candidates: tuple[Ref, ...] = ()  # a rebuild's snapshots, newest first
    above: tuple[Ref, ...] = ()  # commits to replay, oldest first
    uploaded: Files = frozenset()  # the session's upload map
    memtable: Content = ()
    # snapshot
    #: Listed retirements, each cut to the uploads the snapshot asks about.
    r_listed: frozenset[Retirement] = frozenset()
    #: The upload map's entries that were uploaded when the snapshot listed.
    u_listed: Files = frozenset()
    retiring: frozenset[Durable] = frozenset()
    reusable: Files = frozenset()
    entries: Files = frozenset()
    queue: tuple[object, ...] = ()
    fresh: tuple[Entry, ...] = ()
    missing: frozenset[Durable] = frozenset()
    # cleanup
    c_listing: Listing | None = None  # from its listing to its plan
    c_uploads: frozenset[tuple[Durable, Content]] = frozenset()  # likewise
    lowest: int = 0
    c_settled: frozenset[int] = frozenset()
    names: frozenset[Durable] = frozenset()  # the uploads listed, after the plan
    #: Listed retirements of others: (id, whether it names an upload the cleanup listed).
    c_retirements: frozenset[tuple[int, bool]] = frozenset()
    seen: frozenset[Ref] = frozenset()  # the snapshots and claims of the first listing
    kept: tuple[tuple[Key, Files], ...] = ()  # the kept manifests (else claims) to read
    reads: frozenset[tuple[Key, Files | None]] = frozenset()  # what the plan read of them
    candidates_up: frozenset[Durable] = frozenset()
    #: The second listing's manifests (else claims) of snapshots the first had not.
    new_records: tuple[tuple[Key, Files], ...] = ()
    unreadable: bool = False


class Actor(NamedTuple):
    """An executor running its attempts in order, or a standalone cleanup.

    ``jobs``: an executor's micro-batches (an attempt of batch b opens version b); a cleanup's
    runs (one entry each). ``executor``: the copy an executor works in; None for a cleanup.
    """

    jobs: tuple[int, ...]
    executor: int | None
    job: int = 0
    pc: int = 0
    v: Vars = Vars()

    @property
    def done(self) -> bool:
        return self.job >= len(self.jobs)


class World(NamedTuple):
    """A state: the checkpoint's records, the local copies and the actors."""

    commits: frozenset[Commit]
    claims: frozenset[tuple[Ref, Files]]
    manifests: frozenset[tuple[Ref, Files]]
    retirements: frozenset[Retirement]
    uploads: frozenset[tuple[Durable, Content]]
    copies: tuple[Copy, ...]
    actors: tuple[Actor, ...]
    #: The highest version a commit of which was acknowledged to its attempt.
    acked: int = 0
    next_attempt: int = 1
    faults: int = 0
    #: With ``Protocol.grace``: the attempts whose snapshot is over (its manifest written, or the
    #: attempt ended).
    settled: frozenset[int] = frozenset()
    #: A transition that saw a second state of a version says so here (one state per version).
    wrong: str | None = None


def _fast_replace(self: _T, **changes: object) -> _T:
    """``NamedTuple._replace`` without its generality: the explorer replaces fields of these
    tuples millions of times, and the generic one costs a third of a run."""
    values = list(self)
    index = type(self)._index  # type: ignore[attr-defined]
    for field, value in changes.items():
        values[index[field]] = value
    return tuple.__new__(type(self), values)


for _tuple in (Vars, Actor, World, Copy):
    _tuple._index = {f: i for i, f in enumerate(_tuple._fields)}  # type: ignore[attr-defined]
    _tuple._replace = _fast_replace  # type: ignore[assignment,method-assign]


def correct(version: int) -> Content:
    return tuple(range(version))


def lookup(records: frozenset[tuple[Ref, Files]], ref: Ref) -> Files | None:
    for found, files in records:
        if found == ref:
            return files
    return None


def state_of(files: Files | frozenset[tuple[int, Content]]) -> Content:
    return tuple(sorted(b for f in files for b in f[-1]))


# --- the version graph (chain.py's rule) --------------------------------------------------------


class Graph:
    """``chain.Graph`` over a listing's commits and manifests: reachability, the tip, the
    serving commit, what cleanup keeps."""

    def __init__(self, commits: frozenset[Commit], snapshots: frozenset[Ref]) -> None:
        self.parents = {c.ref: c.parent for c in commits}
        self.snapshots = snapshots

    def walk(self, ref: Ref) -> Iterator[Ref]:
        while True:
            yield ref
            parent = self.parents.get(ref)
            if parent is None:
                return
            ref = parent

    def reachable(self, ref: Ref) -> bool:
        return any(r == ROOT or r in self.snapshots for r in self.walk(ref))

    def tip(self) -> Ref | None:
        """None: the highest version's commits are all unreachable (a broken chain)."""
        if not self.parents:
            return ROOT
        top = max(ref[0] for ref in self.parents)
        reachable = [r for r in self.parents if r[0] == top and self.reachable(r)]
        return max(reachable) if reachable else None

    def serving(self, tip: Ref, version: int) -> Ref | None:
        for ref in self.walk(tip):
            if ref[0] <= version:
                return ref if self.reachable(ref) else None
        return None

    def needed(self, lowest: int, usable: Callable[[Ref], bool]) -> tuple[set[Ref], set[Ref]]:
        commits: set[Ref] = set()
        snapshots: set[Ref] = set()
        seen: set[Ref] = set()
        for start in sorted(self.parents):
            if start[0] < lowest:
                continue
            for ref in self.walk(start):
                if ref in seen:
                    break
                seen.add(ref)
                if ref in self.parents:
                    commits.add(ref)
                if ref[0] <= lowest and ref in self.snapshots and usable(ref):
                    snapshots.add(ref)
                    break
        return commits, snapshots


def listing_of(w: World) -> Listing:
    return Listing(w.commits, w.manifests, w.claims, w.retirements, w.uploads)


def graph_of(listing: Listing) -> Graph:
    return Graph(listing.commits, frozenset(ref for ref, _ in listing.manifests))


def snapshot_due(graph: Graph, opened: Ref, interval: int) -> bool:
    unsnapshotted = 1
    for ref in graph.walk(opened):
        if unsnapshotted >= interval or ref in graph.snapshots or ref == ROOT:
            break
        unsnapshotted += 1
    return unsnapshotted >= interval


class Lemma(enum.Enum):
    """Which manifests must name only files that exist (the lemma of the argument)."""

    #: Every manifest whose claim exists: a manifest written after a cleanup deleted its claim
    #: (its version no longer needed) may name files that cleanup deletes.
    CLAIMED = "claimed"
    #: Every manifest.
    STRICT = "strict"
    #: None (the protocol before seed 51 wrote manifests first and checked them after).
    OFF = "off"


# --- the invariants ----------------------------------------------------------------------------


def rebuild(
    commits: frozenset[Commit],
    manifests: frozenset[tuple[Ref, Files]],
    uploads: frozenset[tuple[Durable, Content]],
    serving: Ref,
) -> Content | None:
    """What a rebuild of ``serving`` from scratch holds (restore.py): the newest snapshot on its
    chain whose files all exist as named, else the empty state; then the changelogs above."""
    graph = Graph(commits, frozenset(ref for ref, _ in manifests))
    stored = dict(uploads)
    chain = list(graph.walk(serving))
    for ref in chain:
        files = lookup(manifests, ref)
        if files is not None and all(stored.get(f.durable) == f.content for f in files):
            base, state = ref, state_of(files)
            break
    else:
        if ROOT not in chain:
            return None
        base, state = ROOT, ()
    above = chain[: chain.index(base)]
    if not all(ref in graph.parents for ref in above):
        return None
    return tuple(sorted(state + tuple(ref[0] - 1 for ref in above)))


@lru_cache(maxsize=1 << 16)
def check_durable(
    commits: frozenset[Commit],
    manifests: frozenset[tuple[Ref, Files]],
    claims: frozenset[Ref],
    uploads: frozenset[tuple[Durable, Content]],
    acked: int,
    retain: int,
    lemma: Lemma,
) -> str | None:
    """The invariants on the checkpoint alone (see the module)."""
    stored = dict(uploads)
    for ref, files in manifests:
        if state_of(files) != correct(ref[0]):
            return f"one state per version: manifest {name(ref)} holds {state_of(files)}"
        if lemma is Lemma.OFF or (lemma is Lemma.CLAIMED and ref not in claims):
            continue
        missing = [f.durable for f in files if stored.get(f.durable) != f.content]
        if missing:
            return f"a manifest names a missing file: {name(ref)} names upload {missing[0]}"
    tip = Graph(commits, frozenset(r for r, _ in manifests)).tip()
    if tip is None:
        return "retained versions rebuild: the chain is broken (no reachable tip): wedged"
    if tip[0] < acked:
        return f"retained versions rebuild: acknowledged version {acked} is gone (tip {tip})"
    graph = Graph(commits, frozenset(r for r, _ in manifests))
    for version in range(max(0, tip[0] - retain + 1), tip[0] + 1):
        serving = graph.serving(tip, version)
        state = rebuild(commits, manifests, uploads, serving) if serving else None
        if state != correct(version):
            return f"retained versions rebuild: version {version} " + (
                "does not rebuild" if state is None else f"rebuilds to {state}"
            )
    return None


def name(ref: Ref) -> str:
    return f"{ref[0]}-{ref[1]}"


# --- programs and their interpreter --------------------------------------------------------------

Outcome = tuple[str, World, Actor]
Semantics = Callable[["Protocol", World, Actor], list[Outcome] | None]
Condition = Callable[[Vars], bool]


class Instr(NamedTuple):
    """One instruction of a program.

    ``kind``: ``op`` (a storage operation: one step of the interleaving), ``local`` (work on the
    actor or its copy, run with the operation after it), ``read`` (reads of records an earlier
    listing named, run with the operation after it: a record deleted since the listing reads as
    there or gone, so the reads may as well come last), ``step`` (a named step of
    ``faults.py``: a crash point) or ``jump`` (to ``target``). ``fn`` returns the outcomes (a
    label, the world, the actor with its next ``pc``), or None while the instruction waits (an
    attempt whose micro-batch the driver has not started). ``when``: an op, local or step runs
    only when it holds; a jump is taken only when it holds (always, without one).
    """

    kind: str
    name: str
    fn: Semantics | None = None
    when: Condition | None = None
    target: str = ""


def op(name: str, fn: Semantics, when: Condition | None = None) -> Instr:
    return Instr("op", name, fn, when)


def local(name: str, fn: Semantics, when: Condition | None = None) -> Instr:
    return Instr("local", name, fn, when)


def read(name: str, fn: Semantics, when: Condition | None = None) -> Instr:
    return Instr("read", name, fn, when)


def step(name: str, when: Condition | None = None) -> Instr:
    return Instr("step", name, None, when)


def jump(name: str, target: str, when: Condition | None = None) -> Instr:
    return Instr("jump", name, None, when, target)


def swap(program: tuple[Instr, ...], first: str, second: str) -> tuple[Instr, ...]:
    """``program`` with the instructions named ``first`` and ``second`` in each other's
    place (a mutation: two steps of the protocol swapped)."""
    names = [i.name for i in program]
    a, b = names.index(first), names.index(second)
    out = list(program)
    out[a], out[b] = out[b], out[a]
    return tuple(out)


@dataclass(frozen=True)
class Protocol:
    """The protocol's programs and the bound of one exploration.

    Attributes:
        attempt: An attempt's program (open, commit, snapshot, cleanup), ending at ``release``.
        cleanup: A standalone cleanup's program, ending at ``release``.
        executors: Each executor's micro-batches, in the order it runs them.
        cleanups: Standalone cleanups (each runs once, starting at any moment).
        snapshot_interval, min_versions_to_retain: ``CheckpointOptions``.
        faults: How many faults (crashes, failed or answerless uploads) one run may meet.
        lemma: Which manifests must name only files that exist (:class:`Lemma`).
        gone_is_error: A cleanup that finds a listed manifest gone when it reads it takes that
            as a storage error and deletes no upload (the protocol before seed 51); else it
            references nothing.
        grace: Snapshots and cleanups take less than ``orphan_grace_s`` together: a cleanup
            spares the uploads of every snapshot not over when it listed the partition. Without
            (the default), every upload is old enough to delete, as when an upload is slower
            than the grace or a clock is wrong.
    """

    attempt: tuple[Instr, ...]
    cleanup: tuple[Instr, ...]
    executors: tuple[tuple[int, ...], ...]
    cleanups: int = 0
    snapshot_interval: int = 1
    min_versions_to_retain: int = 2
    faults: int = 1
    lemma: Lemma = Lemma.CLAIMED
    grace: bool = False
    gone_is_error: bool = False

    def initial(self) -> World:
        actors = [Actor(jobs, e) for e, jobs in enumerate(self.executors)]
        actors += [Actor((-1 - c,), None) for c in range(self.cleanups)]
        empty: frozenset[tuple[Ref, Files]] = frozenset()
        return World(
            frozenset(),
            empty,
            empty,
            frozenset(),
            frozenset(),
            tuple(Copy() for _ in self.executors),
            tuple(actors),
        )

    def invariant(self, w: World) -> str | None:
        if w.wrong is not None:
            return w.wrong
        claims = frozenset(ref for ref, _ in w.claims)
        return check_durable(
            w.commits,
            w.manifests,
            claims,
            w.uploads,
            w.acked,
            self.min_versions_to_retain,
            self.lemma,
        )

    def successors(self, w: World) -> Iterator[tuple[str, World]]:
        for index, actor in enumerate(w.actors):
            if not actor.done:
                yield from self._advance(w, index, actor)

    def settle(self, w: World, actor: Actor) -> World:
        """``w`` with ``actor``'s snapshot over (``grace``)."""
        if not self.grace or not actor.v.attempt or actor.v.attempt in w.settled:
            return w
        return w._replace(settled=w.settled | {actor.v.attempt})

    def named_steps(self) -> list[str]:
        """The named steps of the attempt's program, in program order (each once)."""
        return list(dict.fromkeys(i.name for i in self.attempt if i.kind == "step"))

    def program(self, actor: Actor) -> tuple[Instr, ...]:
        return self.attempt if actor.executor is not None else self.cleanup

    def __post_init__(self) -> None:
        positions = {id(p): _positions(p) for p in (self.attempt, self.cleanup)}
        object.__setattr__(self, "_positions", positions)

    def index(self, actor: Actor, name: str) -> int:
        return self._positions[id(self.program(actor))][name]  # type: ignore[attr-defined]

    def _advance(self, w: World, index: int, actor: Actor) -> Iterator[tuple[str, World]]:
        """Runs ``actor`` from its ``pc`` up to and including its next storage operation,
        branching at named steps (a crash, while faults are left), at reads, and where the
        operation has several outcomes. Local work before a wait is a step of its own."""
        yield from self._run(w, index, actor, actor, ())

    def _run(
        self, w: World, index: int, actor: Actor, start: Actor, notes: tuple[str, ...]
    ) -> Iterator[tuple[str, World]]:
        program = self.program(actor)
        positions = self._positions[id(program)]  # type: ignore[attr-defined]
        pc = actor.pc
        while True:
            if pc >= len(program):  # the job ends: its lock goes, the next job starts
                w, actor = _next_job(self.settle(w, actor), actor)
                pc = 0
                if actor.done:
                    yield _label(start, notes, "ends"), _put(w, index, actor)
                    return
                continue
            instr = program[pc]
            if instr.kind == "jump":
                taken = instr.when is None or instr.when(actor.v)
                pc = positions[instr.target] if taken else pc + 1
                continue
            if instr.when is not None and not instr.when(actor.v):
                pc += 1
                continue
            if instr.kind == "step":
                if w.faults < self.faults:
                    crashed, dead = _next_job(self.settle(w, actor), actor)
                    crashed = crashed._replace(faults=w.faults + 1)
                    yield _label(actor, notes, f"{instr.name}: crashes"), _put(crashed, index, dead)
                notes = (*notes, f"[{instr.name}]")
                pc += 1
                continue
            assert instr.fn is not None
            outcomes = instr.fn(self, w, actor._replace(pc=pc + 1))
            if outcomes is None:
                actor = actor._replace(pc=pc)
                if notes or actor != start:
                    yield _label(actor, notes, "waits"), _put(w, index, actor)
                return
            if instr.kind == "op":
                for what, after, moved in outcomes:
                    yield _label(moved, notes, what), _put(after, index, moved)
                return
            if len(outcomes) == 1:  # local work, or a read with one outcome
                what, w, actor = outcomes[0]
                pc = actor.pc
                notes = (*notes, what) if what else notes
                continue
            for what, after, moved in outcomes:
                yield from self._run(after, index, moved, start, (*notes, what) if what else notes)
            return


def _next_job(w: World, actor: Actor) -> tuple[World, Actor]:
    """The actor's job over (done, or its process crashed): the next one starts afresh. An
    executor that has no job left has no copy either (nothing reads it again)."""
    actor = actor._replace(job=actor.job + 1, pc=0, v=Vars())
    if actor.done and actor.executor is not None:
        w = set_copy(w, actor, Copy())
    return w, actor


def _positions(program: tuple[Instr, ...]) -> dict[str, int]:
    """Each instruction's index by name (the first, for a name used twice: named steps)."""
    out: dict[str, int] = {}
    for i, instr in enumerate(program):
        out.setdefault(instr.name, i)
    return out


def who(actor: Actor) -> str:
    if actor.executor is None:
        return f"cleanup {-actor.jobs[0]}"
    name = chr(ord("A") + actor.executor)
    if actor.done:
        return name
    attempt = f" attempt {actor.v.attempt}" if actor.v.attempt else ""
    return f"{name} batch {actor.jobs[actor.job]}{attempt}"


def _label(actor: Actor, notes: tuple[str, ...], what: str) -> str:
    return f"{who(actor)}: " + "".join(f"{note}, " for note in notes) + what


def _put(w: World, index: int, actor: Actor) -> World:
    return w._replace(actors=(*w.actors[:index], actor, *w.actors[index + 1 :]))


def copy_of(w: World, a: Actor) -> Copy:
    assert a.executor is not None
    return w.copies[a.executor]


def set_copy(w: World, a: Actor, copy: Copy) -> World:
    assert a.executor is not None
    e = a.executor
    return w._replace(copies=(*w.copies[:e], copy, *w.copies[e + 1 :]))


def goto(p: Protocol, a: Actor, name: str) -> Actor:
    return a._replace(pc=p.index(a, name))


def read_each(
    listed: frozenset[tuple[K, R]] | tuple[tuple[K, R], ...], present: Container[K]
) -> Iterator[dict[K, R | None]]:
    """The outcomes of reading listed ``(name, record)`` pairs one by one after their listing:
    a record still there (its name ``present``) reads as listed; one deleted since reads as it
    was, or as gone (None), as its read came before or after its deletion."""
    gone = sorted((pair for pair in listed if pair[0] not in present), key=repr)
    there: dict[K, R | None] = {name: rec for name, rec in listed if name in present}
    for found in itertools.product((True, False), repeat=len(gone)):
        yield {**there, **{n: (r if f else None) for (n, r), f in zip(gone, found, strict=True)}}


def wrong(w: World, what: str) -> World:
    """``w`` marked as holding a second state of a version (the first one seen is kept)."""
    return w if w.wrong is not None else w._replace(wrong=f"one state per version: {what}")
