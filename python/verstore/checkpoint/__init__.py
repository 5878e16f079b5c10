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
* ``store``: :class:`PartitionStore`, open / commit / abort;
* ``cleanup``: what no retained version needs;
* ``faults``: fault injection points for tests.
"""

from verstore.checkpoint.cleanup import cleanup
from verstore.checkpoint.layout import ROOT, CommitRef, LineageFiles, PartitionFiles, lineages
from verstore.checkpoint.manifest import Manifest, decode_manifest, file_crc32
from verstore.checkpoint.meta import ColumnLayout, StoreSettings, read_settings
from verstore.checkpoint.store import CheckpointOptions, CommitStats, OpenStats, PartitionStore
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
