"""Checkpointed partition stores: fenced commits, query lineages, changelogs and snapshots.

A *partition store* is a :class:`~verstore.VersionedStore` whose durability comes from a
checkpoint location (local disk or object storage), so that a task can open it on any machine at
an exact version and a failed, retried, speculative or zombie attempt can never lose or corrupt
committed state. ``docs/checkpoint.md`` is the protocol and owns its rules; each module below
is one of its concepts and links the section it implements.

**The storage contract.** Everything the protocol needs of storage, and all it trusts:

* **Create once.** Every durable name is written once: nothing replaces, appends to, or
  renames over a durable file. A record that two writers may both create (settings, a
  partitioning record, a claim, a manifest, a retirement) is a conditional create
  (``Location.create_new``): of two writers of one name exactly one succeeds. A changelog or a
  snapshot's file (``Location.write_new_from``, ``upload``) goes under a name no other writer
  uses (it holds the attempt's id, or a random one): a conditional create on a local disk, an
  unconditional put on object storage, which the unique name makes safe. Storage that cannot
  create conditionally is refused for writing.
* **Whole or nothing.** A file is visible whole or not at all, and a failed create leaves
  nothing under its name (``.tmp-`` names and incomplete multipart uploads are not durable
  names).
* **Seen once returned.** A create or delete that has returned is seen by every read and
  listing that starts after it. No clock decides whether a version survives: a file's age
  only decides when space is freed (``orphan_grace_s``).

This is the contract's one statement; how each storage meets it: ``location.py`` and
docs/checkpoint.md, "Durable layout"; why no interleaving of snapshots and cleanups then loses
a version: docs/checkpoint.md, "Cleanup", and the model check in
``tests/checkpoint/test_protocol_model.py``.

Records, bottom first:

* ``faults``: the protocol's named steps, where tests inject crashes;
* ``layout``: the durable tree, its names, one listing of a partition, bounded record reads;
* ``session``: :class:`CheckpointOptions`, and what an open and a commit report back;
* ``partitionings``: a lineage's partitionings, the one it started with and each one a
  repartition published;
* ``layouts``: column layouts and their evolutions;
* ``settings``: a lineage's settings (``_meta.json``), with its layouts and partitionings,
  checked on every open;
* ``values``: stored values read across the value layouts of a lineage;
* ``chain``: a partition's version graph and the rule that picks the winning chain;
* ``uploads``: uploaded files and the records that name them (manifests, claims,
  retirements, the local copy's upload map);
* ``local``: the local working copy, its lock and ``LOCAL.json``.

Steps and the store:

* ``restore``: a local copy reused, caught up, or rebuilt from a snapshot and changelogs;
* ``maintenance``: after the commit point, best effort: snapshots and cleanup;
* ``kept``: stores kept open between a worker's tasks, and handed over to other processes;
* ``inspect``: an operator's look at a checkpoint: stores, lineages, partitions, verification;
* ``store``: :class:`PartitionStore`, open at a version, commit, abort;
* ``repartition``: the steps that move a stopped query's state to another partition count.
"""

from verstore.checkpoint.layout import ROOT, CommitRef, LineageFiles, PartitionFiles, lineages
from verstore.checkpoint.layouts import ColumnLayout
from verstore.checkpoint.maintenance import cleanup
from verstore.checkpoint.session import CheckpointOptions, CommitStats, Deferred, OpenStats
from verstore.checkpoint.settings import StoreSettings, read_settings
from verstore.checkpoint.store import PartitionStore
from verstore.checkpoint.uploads import Manifest, decode_manifest, file_crc32
from verstore.location import Location

__all__ = [
    "ROOT",
    "CheckpointOptions",
    "ColumnLayout",
    "CommitRef",
    "CommitStats",
    "Deferred",
    "LineageFiles",
    "Location",
    "Manifest",
    "OpenStats",
    "PartitionFiles",
    "PartitionStore",
    "StoreSettings",
    "cleanup",
    "decode_manifest",
    "file_crc32",
    "lineages",
    "read_settings",
]
