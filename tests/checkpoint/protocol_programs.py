"""The programs of ``protocol_model.py``: what an attempt and a cleanup do, one storage operation
at a time, in the code's order, with the code's named steps.

* :data:`ATTEMPT`, :data:`CLEANER`: the protocol as it is (``PartitionStore.open`` and
  ``commit`` without a keeper, ``restore.py``, ``maintenance.after_commit``,
  ``take_snapshot`` and ``cleanup``).
* :data:`ATTEMPT_BEFORE_SEED_51`, :data:`CLEANER_BEFORE_SEED_51`: the protocol before commit
  cc70065 (git log: "Snapshots and cleanup through one order"): a snapshot wrote its manifest,
  then checked its files and removed the manifest if one was gone; a cleanup deleted the
  uploads no manifest it had read named, without a retirement or a second listing.

Each function below is one instruction's semantics: given the world and the actor (its ``pc``
already past the instruction), it returns the outcomes.
"""

from __future__ import annotations

from protocol_model import (
    META,
    ROOT,
    Actor,
    Commit,
    Copy,
    Durable,
    Entry,
    Files,
    Graph,
    Instr,
    Key,
    Lemma,
    Listing,
    Outcome,
    Protocol,
    Ref,
    Retirement,
    Vars,
    World,
    copy_of,
    correct,
    goto,
    graph_of,
    jump,
    listing_of,
    local,
    lookup,
    name,
    op,
    read,
    read_each,
    set_copy,
    snapshot_due,
    state_of,
    step,
    wrong,
)


def _one(what: str, w: World, a: Actor) -> list[Outcome]:
    return [(what, w, a)]


def _set(a: Actor, **changes: object) -> Actor:
    return a._replace(v=a.v._replace(**changes))


def _distinct(outcomes: list[Outcome]) -> list[Outcome]:
    """Outcomes that differ (reads whose results nothing used give the same world)."""
    seen: dict[tuple[World, Actor], Outcome] = {}
    for outcome in outcomes:
        seen.setdefault((outcome[1], outcome[2]), outcome)
    return list(seen.values())


# --- open (store.py, restore.py) ---------------------------------------------------------------


def open_(p: Protocol, w: World, a: Actor) -> list[Outcome] | None:
    """Lists the partition; the fence, the serving commit, and how the copy gets its state."""
    batch = a.jobs[a.job]
    if batch > w.acked:
        return None  # the driver starts micro-batch b once version b is committed
    w = w._replace(next_attempt=w.next_attempt + 1)
    a = _set(a, attempt=w.next_attempt - 1)
    listing = listing_of(w)
    graph = graph_of(listing)
    tip = graph.tip()
    if tip is None:
        return _one("open fails: the chain is broken", w, goto(p, a, "release"))
    if tip[0] > batch + 1:
        return _one(f"open is fenced (tip {name(tip)})", w, goto(p, a, "release"))
    serving = graph.serving(tip, batch)
    if serving is None:
        return _one(f"open fails: version {batch} is gone", w, goto(p, a, "release"))
    copy = copy_of(w, a)
    held = copy.commit
    if copy.clean and held not in (None, ROOT) and held not in graph.parents and tip[0] < held[0]:
        return _one("open fails: the checkpoint is behind the copy", w, goto(p, a, "release"))
    above = _catch_up(copy, graph, serving)
    due = snapshot_due(graph, serving, p.snapshot_interval)
    chain = set(graph.walk(serving))
    on_chain = frozenset(c for c in listing.commits if c.ref in chain)
    a = _set(a, serving=serving, due=due, uploaded=copy.uploaded)
    if above is None:
        snapshots = tuple(r for r in graph.walk(serving) if r in graph.snapshots)
        manifests = frozenset(m for m in listing.manifests if m[0] in snapshots)
        kept = Listing(on_chain, manifests, frozenset(), frozenset(), frozenset())
        a = _set(a, path="rebuild", candidates=snapshots, uploaded=frozenset(), listing=kept)
    elif above:
        kept = Listing(on_chain, frozenset(), frozenset(), frozenset(), frozenset())
        a = _set(a, path="catch up", above=tuple(above), listing=kept)
    else:
        a = _set(a, path="reuse")
    return _one(f"lists, opens {name(serving)} ({a.v.path})", w, a)


def _catch_up(copy: Copy, graph: Graph, serving: Ref) -> list[Ref] | None:
    """``restore.commits_to_catch_up``."""
    if not copy.clean or copy.commit is None:
        return None
    if copy.commit == serving:
        return []
    chain = list(graph.walk(serving))
    if copy.commit not in chain:
        return None
    above = chain[: chain.index(copy.commit)]
    if not all(ref in graph.parents for ref in above):
        return None
    return list(reversed(above))


def download_base(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """A rebuild: ``LOCAL.json`` dirty, a fresh ``db/``, then the newest snapshot on the chain
    whose manifest and files are there (``restore_base``), else the empty state."""
    w = set_copy(w, a, Copy())
    assert a.v.listing is not None
    chain = list(graph_of(a.v.listing).walk(a.v.serving))
    listed = frozenset(m for m in a.v.listing.manifests if m[0] in a.v.candidates)
    outcomes = []
    for found in read_each(listed, {ref for ref, _ in w.manifests}):
        for ref in a.v.candidates:
            files = found.get(ref)
            if files is not None and all((f.durable, f.content) in w.uploads for f in files):
                base, state = ref, files
                break
        else:
            if ROOT not in chain:
                outcomes += _one("rebuild fails: no usable snapshot", w, goto(p, a, "release"))
                continue
            base, state = ROOT, frozenset()
        db = frozenset((f.local, f.content) for f in state if f.local != META)
        copy = Copy(db=db)
        above = tuple(reversed(chain[: chain.index(base)]))
        uploaded = frozenset(f for f in state if f.local != META)
        what = f"downloads snapshot {name(base)}" if base != ROOT else "starts from the empty state"
        a_ = _set(a, above=above, uploaded=uploaded, candidates=())
        outcomes += _one(what, set_copy(w, a, copy), a_)
    return _distinct(outcomes)


def replay(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Reads the changelogs above the copy's state into the memtable. A catch-up marks
    ``LOCAL.json`` dirty first; a changelog gone since the listing fails the open."""
    if a.v.path == "catch up":
        w = set_copy(w, a, copy_of(w, a)._replace(commit=None, clean=False))
    assert a.v.listing is not None
    listed = frozenset((c.ref, c) for c in a.v.listing.commits if c.ref in a.v.above)
    outcomes = []
    for found in read_each(listed, {c.ref for c in w.commits}):
        if any(found[ref] is None for ref in a.v.above):
            outcomes += _one("replay fails: a changelog is gone", w, goto(p, a, "release"))
        else:
            batches = tuple(ref[0] - 1 for ref in a.v.above)
            replayed = ", ".join(name(ref) for ref in a.v.above)
            outcomes += _one(f"replays {replayed}", w, _set(a, memtable=batches))
    return _distinct(outcomes)


def hand_to_task(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """``LOCAL.json`` dirty at the serving commit (uncommitted work may reach ``db/`` from
    here on), then the task writes its micro-batch."""
    w = _check_opened(w, a)
    copy = copy_of(w, a)
    w = set_copy(w, a, copy._replace(commit=a.v.serving, clean=False, uploaded=a.v.uploaded))
    return _one("", w, _task(a))


def hand_to_task_copy_left_clean(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """A mutation: the open leaves ``LOCAL.json`` as it found it."""
    return _one("", _check_opened(w, a), _task(a))


def _task(a: Actor) -> Actor:
    """The task writes its micro-batch; what only the open needed is forgotten."""
    memtable = (*a.v.memtable, a.jobs[a.job])
    return _set(a, memtable=memtable, listing=None, candidates=(), above=(), path="")


def _check_opened(w: World, a: Actor) -> World:
    state = tuple(sorted(state_of(copy_of(w, a).db) + a.v.memtable))
    if state != correct(a.v.serving[0]):
        return wrong(w, f"attempt {a.v.attempt} opened {name(a.v.serving)} holding {state}")
    return w


# --- commit (store.py, maintenance.after_commit) ------------------------------------------------


def flush(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """The memtable into a new SST of ``db/`` (the WAL is off); what the commit will hold."""
    copy = copy_of(w, a)
    db = copy.db
    if a.v.memtable:
        number = max((n for n, _ in db), default=0) + 1
        db = db | {(number, tuple(sorted(a.v.memtable)))}
    new = (a.jobs[a.job] + 1, a.v.attempt)
    if state_of(db) != correct(new[0]):
        w = wrong(w, f"attempt {a.v.attempt} commits {name(new)} holding {state_of(db)}")
    return _one("", set_copy(w, a, copy._replace(db=db)), _set(a, memtable=(), new=new))


def upload_changelog(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """The commit point: the changelog, an unconditional put of a name only this attempt
    writes. It may fail (nothing lands) or land with its answer lost (not acknowledged)."""
    new = a.v.new
    landed = w._replace(commits=w.commits | {Commit(new, a.v.serving)})
    what = f"changelog {name(new)} on {name(a.v.serving)}"
    outcomes = _one(f"uploads {what}: committed", landed._replace(acked=max(w.acked, new[0])), a)
    if w.faults < p.faults:
        release = goto(p, a, "release")
        outcomes += _one(f"upload of {what} fails", w._replace(faults=w.faults + 1), release)
        lost = landed._replace(faults=w.faults + 1)
        outcomes += _one(f"uploads {what}, its answer is lost", lost, release)
    return outcomes


def mark_clean(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    copy = copy_of(w, a)._replace(commit=a.v.new, clean=True, uploaded=a.v.uploaded)
    return _one("", set_copy(w, a, copy), a)


# --- snapshot (maintenance.take_snapshot) --------------------------------------------------------


def _cut(retirements: frozenset[Retirement], asked: frozenset[Durable]) -> frozenset[Retirement]:
    """The retirements that name any of ``asked``, each cut to those."""
    return frozenset((rid, files & asked) for rid, files in retirements if files & asked)


def list_retirements(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Lists the partition (its retirements) before reading them and asking which of the
    upload map's files are still uploaded."""
    asked = frozenset(e.durable for e in a.v.uploaded)
    there = frozenset(e for e in a.v.uploaded if (e.durable, e.content) in w.uploads)
    a = _set(a, r_listed=_cut(w.retirements, asked), u_listed=there)
    return _one("lists the partition", w, a)


def read_retirements(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Reads the listed retirements: what cleanups are deleting (of what the snapshot asks
    about)."""
    outcomes = []
    for found in read_each(a.v.r_listed, {rid for rid, _ in w.retirements}):
        retiring = frozenset(d for files in found.values() if files is not None for d in files)
        a_ = _set(a, retiring=retiring, r_listed=frozenset())
        outcomes += _one(f"reads retirements: {sorted(retiring)}", w, a_)
    return _distinct(outcomes)


def still_uploaded(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """The upload map's files still in the checkpoint at their size (``location.info``), and
    not retired: a file deleted since the snapshot's listing reads as there or gone."""
    listed = frozenset((e, e) for e in a.v.u_listed)
    now = {e for e in a.v.u_listed if (e.durable, e.content) in w.uploads}
    outcomes = []
    for found in read_each(listed, now):
        there = frozenset(e for e, f in found.items() if f is not None)
        reusable = frozenset(e for e in there if e.durable not in a.v.retiring)
        what = f"finds uploads to reuse: {sorted(e.durable for e in reusable)}"
        a_ = _set(a, reusable=reusable, u_listed=frozenset(), retiring=frozenset())
        outcomes += _one(what, w, a_)
    return _distinct(outcomes)


def plan(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """A RocksDB checkpoint of ``db/``: its SSTs reused where the map has them, the others and
    the metadata files under new unique names."""
    known = {e.local: e for e in a.v.reusable}
    entries, fresh = [], []
    for number, content in sorted(copy_of(w, a).db):
        reuse = known.get(number)
        if reuse is not None and reuse.content == content:
            entries.append(reuse)
        else:
            fresh.append(Entry(number, (a.v.attempt, number), content))
    fresh.append(Entry(META, (a.v.attempt, META), ()))
    files = frozenset(entries + fresh)
    a = _set(
        a,
        entries=files,
        queue=tuple(fresh),
        fresh=tuple(fresh),
        reusable=frozenset(),
        uploaded=frozenset(),
    )
    return _one("", w, a)


def create_claim(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    claim = (a.v.new, a.v.entries)
    return _one(f"creates claim {name(a.v.new)}", w._replace(claims=w.claims | {claim}), a)


def upload_one(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """An unconditional put of the next fresh file (its name is unique), or its failure."""
    entry, rest = a.v.queue[0], a.v.queue[1:]
    uploads = frozenset(u for u in w.uploads if u[0] != entry.durable)
    uploaded = w._replace(uploads=uploads | {(entry.durable, entry.content)})
    outcomes = _one(f"uploads {entry.durable}", uploaded, _set(a, queue=rest))
    if w.faults < p.faults:
        failed = w._replace(faults=w.faults + 1)
        outcomes += _one(f"upload of {entry.durable} fails", failed, goto(p, a, "withdraw"))
    return outcomes


def check_listing(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """``_check_claim``: lists the partition; a claim gone fails the snapshot."""
    if lookup(w.claims, a.v.new) is None:
        return _one("lists: the claim is gone", w, goto(p, a, "withdraw"))
    asked = frozenset(e.durable for e in a.v.entries)
    a = _set(a, r_listed=_cut(w.retirements, asked))
    return _one("lists the partition, the claim is there", w, a)


def check_uploads(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Lists the uploads (their names and sizes): which of the snapshot's are missing."""
    missing = frozenset(e.durable for e in a.v.entries if (e.durable, e.content) not in w.uploads)
    return _one("lists uploads", w, _set(a, missing=missing))


def verdict(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """A file retired, or missing from the upload listing or of another size there, fails
    the snapshot."""
    retired = sorted(e.durable for e in a.v.entries if e.durable in a.v.retiring)
    missing = sorted(a.v.missing)
    if retired or missing:
        what = f"retired {retired[0]}" if retired else f"missing {missing[0]}"
        return _one(f"the snapshot fails: {what}", w, goto(p, a, "withdraw"))
    return _one("", w, _set(a, missing=frozenset(), retiring=frozenset(), r_listed=frozenset()))


def create_manifest(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    manifest = (a.v.new, a.v.entries)
    if state_of(a.v.entries) != correct(a.v.new[0]):
        w = wrong(w, f"snapshot {name(a.v.new)} holds {state_of(a.v.entries)}")
    w = p.settle(w._replace(manifests=w.manifests | {manifest}), a)
    return _one(f"creates manifest {name(a.v.new)}", w, _set(a, fresh=(), queue=()))


def mark_clean_with_map(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    ssts = frozenset(e for e in a.v.entries if e.local != META)
    copy = copy_of(w, a)._replace(commit=a.v.new, clean=True, uploaded=ssts)
    return _one("", set_copy(w, a, copy), _set(a, entries=frozenset(), new=ROOT))


def start_withdraw(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    return _one("", w, _set(a, queue=a.v.fresh))


def delete_fresh(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    entry, rest = a.v.queue[0], a.v.queue[1:]
    uploads = frozenset(u for u in w.uploads if u[0] != entry.durable)
    return _one(f"withdraws {entry.durable}", w._replace(uploads=uploads), _set(a, queue=rest))


def withdraw_claim(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    claims = frozenset(c for c in w.claims if c[0] != a.v.new)
    return _one(f"withdraws claim {name(a.v.new)}", w._replace(claims=claims), a)


def release(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Closes the store (its memtable, if any, flushed into ``db/``) and releases the lock."""
    if a.executor is not None and a.v.memtable:
        copy = copy_of(w, a)
        number = max((n for n, _ in copy.db), default=0) + 1
        db = copy.db | {(number, tuple(sorted(a.v.memtable)))}
        w = set_copy(w, a, copy._replace(db=db))
    return _one("", w, _set(a, memtable=()))


# --- cleanup (maintenance.cleanup) ----------------------------------------------------------------


def c_list(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Lists the partition; the tip decides what is retained (nothing to do below 1)."""
    listing = listing_of(w)
    tip = graph_of(listing).tip()
    if tip is None:
        return _one("cleanup lists: the chain is broken, it fails", w, goto(p, a, "release"))
    lowest = tip[0] - p.min_versions_to_retain + 1
    if lowest <= 0:
        return _one(f"cleanup lists: tip {name(tip)}, nothing to delete", w, goto(p, a, "release"))
    a = _set(a, c_listing=listing._replace(uploads=frozenset()), lowest=lowest, c_settled=w.settled)
    return _one(f"cleanup lists: tip {name(tip)}", w, a)


def c_list_uploads(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    return _one("cleanup lists uploads", w, _set(a, c_uploads=w.uploads))


def _record(listing: Listing, ref: Ref) -> tuple[Key, Files] | None:
    """Snapshot ``ref``'s manifest in ``listing``, else its claim (the same body)."""
    files = lookup(listing.manifests, ref)
    if files is not None:
        return ("manifest", ref), files
    files = lookup(listing.claims, ref)
    return None if files is None else (("claim", ref), files)


def _present(w: World) -> set[Key]:
    return {("manifest", r) for r, _ in w.manifests} | {("claim", r) for r, _ in w.claims}


def c_plan(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Reads the manifests ``Graph.needed`` asks about (which are usable bases); then what goes:
    changelogs below ``lowest`` that no kept chain needs, and snapshots (manifest, then claim)."""
    listing, uploads = a.v.c_listing, dict(a.v.c_uploads)
    assert listing is not None
    graph, lowest = graph_of(listing), a.v.lowest
    snapshots = {ref for ref, _ in listing.manifests}
    claims = {ref for ref, _ in listing.claims}
    names = frozenset(uploads)
    others = frozenset((rid, bool(files & names)) for rid, files in listing.retirements)
    outcomes = []
    for found in read_each(listing.manifests, {ref for ref, _ in w.manifests}):
        read: dict[Key, Files | None] = {}

        def usable(
            ref: Ref,
            found: dict[Ref, Files | None] = found,
            read: dict[Key, Files | None] = read,
        ) -> bool:
            files = read[("manifest", ref)] = found[ref]
            return files is not None and all(uploads.get(f.durable) == f.content for f in files)

        keep_commits, keep_snapshots = graph.needed(lowest, usable)
        deletes: list[tuple[str, object]] = [
            ("changelog", c)
            for c in sorted(listing.commits)
            if c.ref[0] < lowest and c.ref not in keep_commits
        ]
        kept: list[tuple[Key, Files]] = []
        for ref in sorted(snapshots | claims):
            needed = ref in keep_snapshots or (ref not in snapshots and ref in keep_commits)
            if ref[0] >= lowest or needed:
                record = _record(listing, ref)
                assert record is not None
                kept.append(record)
                continue
            # the manifest first: a claim outlives its manifest
            deletes += [
                (kind, ref)
                for kind, of in (("manifest", snapshots), ("claim", claims))
                if ref in of
            ]
        cache = frozenset((key, read[key]) for key, _ in kept if key in read)
        v = Vars(
            attempt=a.v.attempt,
            queue=tuple(deletes),
            names=names,
            c_retirements=others,
            c_settled=a.v.c_settled,
            seen=frozenset(snapshots | claims),
            kept=tuple(kept),
            reads=cache,
            unreadable=p.gone_is_error and any(files is None for files in read.values()),
        )
        outcomes += _one(f"cleanup reads manifests: {len(deletes)} to delete", w, a._replace(v=v))
    return _distinct(outcomes)


def c_delete(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    (kind, what), rest = a.v.queue[0], a.v.queue[1:]  # type: ignore[misc]
    a = _set(a, queue=rest)
    if kind == "changelog":
        assert isinstance(what, Commit)
        return _one(
            f"deletes changelog {name(what.ref)}", w._replace(commits=w.commits - {what}), a
        )
    ref = what
    if kind == "manifest":
        gone = frozenset(m for m in w.manifests if m[0] != ref)
        return _one(f"deletes manifest {name(ref)}", w._replace(manifests=gone), a)  # type: ignore[arg-type]
    gone = frozenset(c for c in w.claims if c[0] != ref)
    return _one(f"deletes claim {name(ref)}", w._replace(claims=gone), a)  # type: ignore[arg-type]


def _named(
    records: tuple[tuple[Key, Files], ...], w: World, cache: frozenset[tuple[Key, Files | None]]
) -> list[tuple[frozenset[Durable], bool]]:
    """``_Manifests.named``: the uploads ``records`` name, each read once (``cache`` holds
    what was read before), in every outcome of the reads; with whether any read found its
    record gone."""
    done = dict(cache)
    listed = frozenset((key, files) for key, files in records if key not in done)
    outcomes = []
    for found in read_each(listed, _present(w)):
        reads = {**done, **found}
        named = frozenset(f.durable for key, _ in records if (files := reads[key]) for f in files)
        outcomes.append((named, any(files is None for files in reads.values())))
    return outcomes


def c_read_kept(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Reads the kept manifests and claims: the uploads none of them names are candidates."""
    outcomes = []
    old = frozenset(d for d in a.v.names if not p.grace or d[0] in a.v.c_settled)
    for named, gone in _named(a.v.kept, w, a.v.reads):
        candidates = old - named
        v = a.v._replace(
            reads=frozenset(),
            kept=(),
            names=frozenset(),
            c_settled=frozenset(),
            candidates_up=candidates,
            unreadable=a.v.unreadable or (p.gone_is_error and gone),
        )
        what = f"cleanup reads kept claims: candidates {sorted(candidates)}"
        outcomes += _one(what, w, a._replace(v=v))
    return _distinct(outcomes)


def _rid(a: Actor) -> int:
    """This cleanup's retirement (``_retiring-<random>.json``): unique per cleanup run."""
    return a.v.attempt if a.executor is not None else 1000 - a.jobs[a.job]


def c_retire(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    retirement = (_rid(a), a.v.candidates_up)
    what = f"creates retirement {retirement[0]} of {sorted(a.v.candidates_up)}"
    return _one(what, w._replace(retirements=w.retirements | {retirement}), a)


def c_list_again(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Lists the partition again: the manifests and claims of snapshots the first listing
    had not."""
    again = listing_of(w)
    refs = sorted({ref for ref, _ in again.manifests | again.claims} - a.v.seen)
    new = tuple(r for ref in refs if (r := _record(again, ref)) is not None)
    return _one("cleanup lists the partition again", w, _set(a, new_records=new))


def c_read_new(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """Reads the manifests and claims the second listing has and the first had not: the
    uploads they name are spared."""
    outcomes = []
    for spared, _ in _named(a.v.new_records, w, frozenset()):
        doomed = tuple(sorted(a.v.candidates_up - spared))
        v = a.v._replace(queue=doomed, new_records=(), seen=frozenset(), candidates_up=frozenset())
        outcomes += _one(f"cleanup reads new claims: deletes {list(doomed)}", w, a._replace(v=v))
    return _distinct(outcomes)


def c_delete_upload(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    durable, rest = a.v.queue[0], a.v.queue[1:]
    uploads = frozenset(u for u in w.uploads if u[0] != durable)
    return _one(f"deletes upload {durable}", w._replace(uploads=uploads), _set(a, queue=rest))


def c_unretire(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    rid = _rid(a)
    left = frozenset(r for r in w.retirements if r[0] != rid)
    return _one(f"deletes its retirement {rid}", w._replace(retirements=left), a)


def c_read_retirements(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """``_forget_finished``: a listed retirement none of whose files the first upload listing
    had is finished (or its cleanup died after its deletions)."""
    outcomes = []
    for found in read_each(a.v.c_retirements, {rid for rid, _ in w.retirements}):
        done = tuple(sorted(rid for rid, names in found.items() if not names))
        what = f"cleanup reads retirements: {list(done)} finished"
        outcomes += _one(what, w, a._replace(v=Vars(attempt=a.v.attempt, queue=done)))
    return _distinct(outcomes)


def c_delete_retirement(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    rid, rest = a.v.queue[0], a.v.queue[1:]
    left = frozenset(r for r in w.retirements if r[0] != rid)
    return _one(
        f"deletes finished retirement {rid}", w._replace(retirements=left), _set(a, queue=rest)
    )


def _nothing(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    return _one("", w, a)


def _empty(v: Vars) -> bool:
    return not v.queue


# --- the protocol before seed 51 (cc70065^) -------------------------------------------------------


def info_uploaded(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """``still_uploaded`` as one request (no listing before it)."""
    reusable = frozenset(e for e in a.v.uploaded if (e.durable, e.content) in w.uploads)
    return _one(
        f"finds uploads to reuse: {sorted(e.durable for e in reusable)}",
        w,
        _set(a, reusable=reusable),
    )


def check_files(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """After its manifest: every file it names still there? (``_check_snapshot``)."""
    missing = sorted(e.durable for e in a.v.entries if (e.durable, e.content) not in w.uploads)
    if not missing:
        return _one("checks its files: all there", w, a)
    return _one(f"checks its files: {missing[0]} is gone", w, goto(p, a, "remove manifest"))


def remove_manifest(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    left = frozenset(m for m in w.manifests if m[0] != a.v.new)
    return _one(f"removes manifest {name(a.v.new)}", w._replace(manifests=left), a)


def stop_if_unreadable(p: Protocol, w: World, a: Actor) -> list[Outcome]:
    """A manifest listed and gone when read was an ``OSError``: deletes of uploads stop."""
    if a.v.unreadable:
        return _one("", w, goto(p, a, "release"))
    queue = tuple(sorted(a.v.candidates_up))
    return _one("", w, _set(a, queue=queue, candidates_up=frozenset(), unreadable=False))


# --- the programs -------------------------------------------------------------------------------

Block = tuple[Instr, ...]


def _rebuilding(v: Vars) -> bool:
    return v.path == "rebuild"


#: An attempt's open, commit and snapshot, and a cleanup, as named blocks in protocol order. A
#: mutation reorders blocks (``reorder``); jumps name instructions, so loops stay whole.
OPEN: dict[str, Block] = {
    "list and decide": (op("open", open_),),
    "download a snapshot": (
        op("download snapshot", download_base, when=_rebuilding),
        step("during_rebuild", when=_rebuilding),
    ),
    "replay": (read("replay", replay, when=lambda v: bool(v.above)),),
    "mark dirty": (local("hand to task", hand_to_task),),
}

COMMIT: dict[str, Block] = {
    "changelog": (
        local("flush", flush),
        step("before_changelog"),
        op("upload changelog", upload_changelog),
        step("after_changelog"),
    ),
    "mark clean": (
        local("mark clean", mark_clean),
        step("after_local_state"),
        jump("snapshot due?", "release", when=lambda v: not v.due),
    ),
}

SNAPSHOT: dict[str, Block] = {
    "read retirements": (
        op("list for reuse", list_retirements),
        read("read retirements", read_retirements),
    ),
    "still uploaded": (read("still uploaded", still_uploaded), local("plan", plan)),
    "claim": (op("create claim", create_claim),),
    "uploads": (
        jump("uploads left?", "uploads done", when=_empty),
        op("upload", upload_one),
        step("during_snapshot_upload"),
        jump("next upload", "uploads left?"),
        local("uploads done", _nothing),
    ),
    "check claim": (step("before_manifest"), op("check listing", check_listing)),
    "check retirements": (read("check retirements", read_retirements),),
    "check uploads": (op("check uploads", check_uploads),),
    "verdict": (local("verdict", verdict),),
    "manifest": (op("create manifest", create_manifest), step("after_manifest")),
    "mark clean with map": (local("mark clean with map", mark_clean_with_map),),
}

WITHDRAW: Block = (
    local("withdraw", start_withdraw),
    jump("withdrawals left?", "withdraw claim", when=_empty),
    op("delete fresh upload", delete_fresh),
    jump("next withdrawal", "withdrawals left?"),
    op("withdraw claim", withdraw_claim),
    jump("withdrawn", "release"),
)

CLEANUP: dict[str, Block] = {
    "list": (op("cleanup list", c_list), op("cleanup list uploads", c_list_uploads)),
    "plan": (read("cleanup read manifests", c_plan),),
    "delete old": (
        jump("deletes left?", "deleted", when=_empty),
        step("during_cleanup"),
        op("delete", c_delete),
        jump("next delete", "deletes left?"),
        local("deleted", _nothing),
    ),
    "read kept": (
        read("read kept", c_read_kept),
        jump("candidates?", "read retirements of others", when=lambda v: not v.candidates_up),
    ),
    "retire": (op("retire", c_retire), step("during_cleanup")),
    "spare new claims": (op("list again", c_list_again), read("read new claims", c_read_new)),
    "delete uploads": (
        jump("upload deletes left?", "uploads deleted", when=_empty),
        step("during_cleanup"),
        op("delete upload", c_delete_upload),
        jump("next upload delete", "upload deletes left?"),
        local("uploads deleted", _nothing),
    ),
    "unretire": (step("during_cleanup"), op("unretire", c_unretire)),
    "forget finished": (
        read("read retirements of others", c_read_retirements),
        jump("finished left?", "release", when=_empty),
        step("during_cleanup"),
        op("delete finished retirement", c_delete_retirement),
        jump("next finished", "finished left?"),
    ),
}

SNAPSHOT_BEFORE_SEED_51: dict[str, Block] = {
    "still uploaded": (op("still uploaded", info_uploaded), local("plan", plan)),
    "uploads": SNAPSHOT["uploads"],
    "manifest": (
        step("before_manifest"),
        op("create manifest", create_manifest),
        step("after_manifest"),
    ),
    "check files": (
        op("check files", check_files),
        jump("files there", "mark clean with map"),
        op("remove manifest", remove_manifest),
        jump("removed", "release"),
    ),
    "mark clean with map": SNAPSHOT["mark clean with map"],
}

CLEANUP_BEFORE_SEED_51: dict[str, Block] = {
    "list": CLEANUP["list"],
    "plan": CLEANUP["plan"],
    "delete old": CLEANUP["delete old"],
    "read kept": (
        read("read kept", c_read_kept),
        local("stop if unreadable", stop_if_unreadable),
    ),
    "delete uploads": CLEANUP["delete uploads"],
}

RELEASE: Block = (local("release", release),)


def reorder(blocks: dict[str, Block], moved: str, *, before: str) -> dict[str, Block]:
    """``blocks`` with block ``moved`` taken out and put right before block ``before``."""
    order = [n for n in blocks if n != moved]
    order.insert(order.index(before), moved)
    return {n: blocks[n] for n in order}


def attempt_program(
    open_: dict[str, Block] = OPEN,
    commit: dict[str, Block] = COMMIT,
    snapshot: dict[str, Block] = SNAPSHOT,
    cleanup: dict[str, Block] | None = CLEANUP,
    withdraw: Block = WITHDRAW,
) -> tuple[Instr, ...]:
    """An attempt: open, commit, then (when due) snapshot and cleanup, then release. A
    snapshot that fails withdraws what it can and ends the attempt (no cleanup)."""
    body = [*open_.values(), *commit.values(), *snapshot.values()]
    if cleanup is not None:
        body += [(step("before_cleanup"),), *cleanup.values()]
    end = (jump("cleaned", "release"),)
    return tuple(i for block in [*body, end, withdraw, RELEASE] for i in block)


def cleaner_program(cleanup: dict[str, Block] = CLEANUP) -> tuple[Instr, ...]:
    return tuple(i for block in [*cleanup.values(), RELEASE] for i in block)


def current(
    executors: tuple[tuple[int, ...], ...],
    cleanups: int = 0,
    *,
    attempt_cleans: bool = True,
    **bound: int,
) -> Protocol:
    """The protocol as the code runs it, bounded by ``executors``' micro-batches, standalone
    ``cleanups`` and ``bound`` (``snapshot_interval``, ``min_versions_to_retain``, ``faults``).
    Without ``attempt_cleans``, attempts leave cleanup to the standalone ones (which may start
    at any moment, so this bounds the number of cleanups rather than their moments)."""
    attempt = attempt_program(cleanup=CLEANUP if attempt_cleans else None)
    return Protocol(attempt, cleaner_program(), executors, cleanups, **bound)


def before_seed_51(
    executors: tuple[tuple[int, ...], ...], cleanups: int = 0, **bound: int
) -> Protocol:
    """The protocol before commit cc70065, bounded likewise (manifests were written before
    their check, so a manifest may name a missing file: only the end invariants apply)."""
    withdraw = (jump("withdraw", "release"),)  # a failed upload raised; nothing was withdrawn
    attempt = attempt_program(
        snapshot=SNAPSHOT_BEFORE_SEED_51, cleanup=CLEANUP_BEFORE_SEED_51, withdraw=withdraw
    )
    cleaner = cleaner_program(CLEANUP_BEFORE_SEED_51)
    return Protocol(
        attempt,
        cleaner,
        executors,
        cleanups,
        lemma=Lemma.OFF,
        gone_is_error=True,
        **bound,  # type: ignore[arg-type]
    )
