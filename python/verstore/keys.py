"""A store's keys as people give them: typed values, encoded and routed as the helpers do.

The Spark helpers store a key as the tuple encoding (``verstore._core.encode_rows``) of its key
columns, with the Arrow types the lineage's column layout records, and keep it in partition
``pmod(murmur3(key columns), num_partitions)``: Spark's ``HashPartitioning``, Murmur3 x86 32 with
seed 42 over the typed values, a null leaving the hash as it is. :func:`parse` turns text (a
command line's ``d03``, ``42``, ``2026-03-01T10:00:00Z``) into values of those types,
:func:`encode` into stored bytes, and :func:`partition` finds the key's partition without
Spark. Spark's own variant of Murmur3 hashes the last 1-3 bytes of a string one byte at a
time, unlike the reference algorithm (and the ``mmh3`` package), so it is written out here and
checked against Spark's ``hash()`` (``tests/spark/test_cli_keys.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from verstore.times import parse_datetime

SEED = 42
_C1, _C2, _MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def parse(texts: Sequence[str], key_schema: Any) -> list[Any]:
    """The values of the first ``len(texts)`` key columns, from text.

    Raises:
        ValueError: More values than key columns, or a text that is not a value of its
            column's type, naming the column.
    """
    fields = list(key_schema)
    if not 0 < len(texts) <= len(fields):
        names = ", ".join(f"{f.name}: {f.type}" for f in fields)
        raise ValueError(
            f"KEY: the store's keys are ({names}): give 1 to {len(fields)} values, got {len(texts)}"
        )
    return [_value(text, f) for text, f in zip(texts, fields, strict=False)]


def _value(text: str, f: Any) -> Any:
    import pyarrow.types as pt

    t = f.type
    try:
        if pt.is_string(t) or pt.is_large_string(t):
            return text
        if pt.is_binary(t) or pt.is_large_binary(t):
            return bytes.fromhex(text)
        if pt.is_boolean(t):
            return {"true": True, "false": False}[text.lower()]
        if pt.is_integer(t):
            return int(text)
        if pt.is_floating(t):
            return float(text)
        if pt.is_decimal(t):
            return Decimal(text)
        if pt.is_timestamp(t):
            when = parse_datetime(text, "KEY")
            # A column without a zone (Spark's TIMESTAMP_NTZ) holds the wall clock of UTC.
            return when if t.tz is not None else when.astimezone(UTC).replace(tzinfo=None)
        if pt.is_date(t):
            return date.fromisoformat(text)
    except (ValueError, KeyError, InvalidOperation):
        raise ValueError(f"KEY: {text!r} is not a value of key column {f.name!r} ({t})") from None
    raise ValueError(f"KEY: key column {f.name!r} has type {t}, which KEY cannot give")


def encode(values: Sequence[Any], key_schema: Any) -> bytes:
    """The stored bytes of a key (or, for fewer values than key columns, of a key prefix)."""
    import pyarrow as pa

    from verstore._core import encode_rows

    fields = list(key_schema)[: len(values)]
    arrays = []
    for v, f in zip(values, fields, strict=True):
        try:
            arrays.append(pa.array([v], f.type))
        except (pa.ArrowException, OverflowError, TypeError) as e:  # out of range, too precise
            raise ValueError(f"KEY: {v!r} is not a value of key column {f.name!r} ({e})") from None
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    encoded: bytes = encode_rows(batch)[0].as_py()
    return encoded


def partition(values: Sequence[Any], key_schema: Any, num_partitions: int) -> int | None:
    """The partition of a whole key, as the helpers route it; None when a key column has a type
    this module does not hash (nested types), or fewer values than key columns are given."""
    fields = list(key_schema)
    if len(values) != len(fields):
        return None
    h = SEED
    for value, f in zip(values, fields, strict=True):
        if value is None:
            continue
        hashed = _hash(value, f.type, h)
        if hashed is None:
            return None
        h = hashed
    signed = h - (1 << 32) if h & 0x80000000 else h
    return signed % num_partitions  # Python's % of a positive count is Spark's pmod


def _hash(value: Any, t: Any, seed: int) -> int | None:
    """Spark's ``Murmur3Hash`` of one value of Arrow type ``t`` (unsigned 32 bits)."""
    import pyarrow.types as pt

    if pt.is_boolean(t):
        return _hash_int(1 if value else 0, seed)
    if pt.is_date32(t):
        return _hash_int((value - date(1970, 1, 1)).days, seed)
    if pt.is_int8(t) or pt.is_int16(t) or pt.is_int32(t):
        return _hash_int(value, seed)
    if pt.is_int64(t):
        return _hash_long(value, seed)
    if pt.is_timestamp(t):  # Spark's timestamps are microseconds
        delta = value.replace(tzinfo=value.tzinfo or UTC) - datetime.fromtimestamp(0, UTC)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return _hash_long(micros, seed)
    if pt.is_float32(t):
        bits = 0 if value == 0.0 else struct.unpack("<i", struct.pack("<f", value))[0]
        return _hash_int(0x7FC00000 if value != value else bits, seed)
    if pt.is_float64(t):
        bits = 0 if value == 0.0 else struct.unpack("<q", struct.pack("<d", value))[0]
        return _hash_long(0x7FF8000000000000 if value != value else bits, seed)
    if pt.is_string(t) or pt.is_large_string(t):
        return _hash_bytes(value.encode(), seed)
    if pt.is_binary(t) or pt.is_large_binary(t):
        return _hash_bytes(value, seed)
    if pt.is_decimal(t):
        unscaled = int(value.scaleb(t.scale).to_integral_value())
        if t.precision <= 18:
            return _hash_long(unscaled, seed)
        # Java's BigInteger.toByteArray(): the fewest bytes of two's complement, a sign bit
        # included (bitLength() counts a negative's bits as those of its complement).
        size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        return _hash_bytes(unscaled.to_bytes(size, "big", signed=True), seed)
    return None


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _MASK
    k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
    return (k1 * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _hash_int(value: int, seed: int) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(value & _MASK)), 4)


def _hash_long(value: int, seed: int) -> int:
    h1 = _mix_h1(seed, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1((value >> 32) & _MASK))
    return _fmix(h1, 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes``: whole little-endian words, then each byte left
    over as a word of its own (sign-extended, as Java reads a byte)."""
    h1 = seed
    aligned = len(data) - len(data) % 4
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = _mix_h1(h1, _mix_k1(word))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _MASK))
    return _fmix(h1, len(data))


__all__ = ["encode", "parse", "partition"]
