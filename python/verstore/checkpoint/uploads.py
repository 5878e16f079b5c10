"""Upload reuse: the local copy's map of its SST files already in the checkpoint.

An incremental snapshot uploads only the SSTs the checkpoint does not have yet. ``LOCAL.json``
remembers, per SST of ``db/``, the durable file it was uploaded to (or downloaded from) with
its size and checksum; a snapshot references those instead of uploading them again, once it
has checked they are still there.
"""

from __future__ import annotations

from typing import Any

from verstore.checkpoint.layout import PartitionFiles
from verstore.checkpoint.manifest import is_durable_name
from verstore.location import Location


def upload_entry(durable: str, size: int, crc32: int) -> dict[str, Any]:
    """One SST's entry in the upload map: where it is in the checkpoint, its size and CRC."""
    return {"durable": durable, "size": size, "crc32": crc32}


def still_uploaded(
    location: Location, files: PartitionFiles, uploaded: dict[str, Any]
) -> dict[str, Any]:
    """The entries of the local copy's upload map whose files are still in the checkpoint.

    An upload is deleted once no kept manifest references it, and a local copy that caught
    up after a long absence may remember uploads of a snapshot cleanup has since removed:
    referencing those would make a snapshot that cannot be restored.
    """
    known = {
        name: entry
        for name, entry in uploaded.items()
        if is_durable_name(entry.get("durable"))
        and isinstance(entry.get("size"), int)
        and isinstance(entry.get("crc32"), int)
    }
    if not known:
        return {}
    paths = [files.durable(e["durable"]) for e in known.values()]
    infos = location.info(paths)
    return {
        name: entry
        for (name, entry), info in zip(known.items(), infos, strict=True)
        if info.size == entry["size"]
    }


__all__ = ["still_uploaded", "upload_entry"]
