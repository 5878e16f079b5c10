"""Checkpointed partition stores: fenced commits, query lineages, changelogs and snapshots.

A *partition store* is a :class:`~verstore.VersionedStore` whose durability comes from a
checkpoint location (local disk or object storage), so that a task can open it on any machine at
an exact version and a failed, retried, speculative or zombie attempt can never lose or corrupt
committed state. ``docs/checkpoint.md`` is the protocol; the modules are its concepts:

* ``layout``: where a store's lineages, partitions, commits and snapshots live, and their names;
* ``meta``: a lineage's recorded settings, checked on every open;
* ``chain``: the version graph of a partition and the rule that picks the winning chain;
* ``manifest``: snapshot manifests, verified as hostile input;
* ``local``: the local working copy, its lock and its state file;
* ``options``: :class:`CheckpointOptions`, snapshot cadence, retention and locking;
* ``stats``: what an open and a commit did, for metrics;
* ``reuse``: a local copy reused as it is, or caught up;
* ``replay``: changelogs applied to a local copy, each checked against its name;
* ``rebuild``: a local copy made again from the newest usable snapshot;
* ``download``: a snapshot's files fetched and verified;
* ``uploads``: upload reuse, the SSTs of the local copy already in the checkpoint;
* ``snapshot``: incremental snapshots and when one is due;
* ``post_commit``: what a commit does once it is durable (snapshot, cleanup), best effort;
* ``keeper``: stores kept open between a worker's tasks, handed over to other processes;
* ``store``: :class:`PartitionStore`, open / commit / abort;
* ``cleanup``: what no retained version needs;
* ``survey``: an operator's view of a store's lineages and partitions;
* ``faults``: fault injection points for tests.
"""

from verstore.checkpoint.layout import ROOT, CommitRef, LineageFiles, PartitionFiles, lineages
from verstore.checkpoint.lineage import ColumnLayout, StoreSettings, read_settings
from verstore.checkpoint.maintenance import cleanup
from verstore.checkpoint.session import CheckpointOptions, CommitStats, OpenStats
from verstore.checkpoint.store import PartitionStore
from verstore.checkpoint.uploads import Manifest, decode_manifest, file_crc32
from verstore.location import Location

__all__ = [
    "ROOT",
    "CheckpointOptions",
    "ColumnLayout",
    "CommitRef",
    "CommitStats",
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
