"""A small, obviously-correct reference model of verstore's semantics (docs/semantics.md).

The model keeps, per key, every accepted version as ``timestamp -> value | None`` (``None`` is a
tombstone) and never forgets anything. What a real store has physically dropped (§5) is derived
at read time from the current observed stream time, see ``_present``; so is the time-to-live of
newest versions (§2.15, ``latest_ttl_ms``): the end of every version is a function of the
versions, the stream time and the TTL alone (``_end``), and reads apply it. It is written for
clarity, not speed (only ``bisect`` keeps long crash-test streams tractable).

It has the same method names as ``verstore.VersionedStore`` so that tests can run one scenario
against both. Records are returned as ``Record`` named tuples ``(value, timestamp, valid_to)``;
tests compare store results through ``as_tuple`` so the model needs no compiled extension.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

NOT_PUT = -(2**63)
VALID_TO_UNDEFINED = -1
MIN_TIME = -(2**63)  # Long.MIN_VALUE: a missing from_time
MAX_TIME = 2**63 - 1  # Long.MAX_VALUE: a missing to_time


class Record(NamedTuple):
    """A record as every read returns it: valid_to is None for the newest version."""

    value: bytes
    timestamp: int
    valid_to: int | None


def as_tuple(record: object) -> tuple[bytes, int, int | None] | None:
    """Normalises a ``verstore.VersionedRecord`` or a model ``Record`` (or None) to a tuple."""
    if record is None:
        return None
    return (record.value, record.timestamp, record.valid_to)  # type: ignore[attr-defined]


def trunc_div(a: int, b: int) -> int:
    """Java's ``a / b`` on longs: the quotient truncated toward zero.

    Python's ``//`` floors, which differs for negative operands: Java gives ``-1 / 3 == 0`` and
    ``-4 / 3 == -1`` where Python gives ``-1`` and ``-2``. ``int(a / b)`` would be wrong for large
    values (float rounding), hence integer arithmetic only.
    """
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def segment_id(timestamp: int, segment_interval_ms: int) -> int:
    """§1.5: the segment whose bucket ``[k*I, (k+1)*I)`` holds ``timestamp``."""
    return trunc_div(timestamp, segment_interval_ms)


def default_segment_interval(history_retention_ms: int) -> int:
    """§1.5: Kafka's default segment interval for a given history retention."""
    r = history_retention_ms
    if r <= 60_000:
        return max(r // 3, 2_000)
    if r <= 300_000:
        return max(r // 5, 20_000)
    if r <= 3_600_000:
        return max(r // 12, 60_000)
    return max(r // 24, 300_000)


class ReferenceModel:
    """The versioned store of docs/semantics.md §1 and §2, with segment expiry (§5) on reads."""

    def __init__(
        self,
        *,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        latest_ttl_ms: int | None = None,
    ):
        if history_retention_ms < 0:
            raise ValueError("history_retention_ms must be >= 0")
        if segment_interval_ms is None:
            segment_interval_ms = default_segment_interval(history_retention_ms)
        if segment_interval_ms < 1:
            raise ValueError("segment_interval_ms must be >= 1")
        if latest_ttl_ms is not None and latest_ttl_ms < 1:
            raise ValueError("latest_ttl_ms must be >= 1")
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = segment_interval_ms
        self.latest_ttl_ms = latest_ttl_ms
        self.observed_stream_time = -1
        # §2.13: the times a key left counted_keys() because stream time advanced (a bucket of
        # latest values retired), not because a write replaced or deleted its newest version.
        # A store counts from when its object opened: compare differences across a reopen.
        self.ttl_expired_keys = 0
        # key -> sorted list of version timestamps, and key -> {timestamp: value | None}
        self._times: dict[bytes, list[int]] = {}
        self._values: dict[bytes, dict[int, bytes | None]] = {}

    # ------------------------------------------------------------------ helpers

    @property
    def horizon(self) -> int:
        """H = ST - R (§1.4). Reads at or after H are exact; writes before it are rejected."""
        return self.observed_stream_time - self.history_retention_ms

    def keys(self) -> list[bytes]:
        return list(self._times)

    def timestamps(self, key: bytes) -> list[int]:
        """Every version timestamp of key (values and tombstones, expired ones too), sorted."""
        return list(self._times.get(key, []))

    def _newest(self, key: bytes) -> tuple[int, bytes | None] | None:
        times = self._times.get(key)
        if not times:
            return None
        return times[-1], self._values[key][times[-1]]

    def _next_newer(self, key: bytes, timestamp: int) -> int | None:
        """The smallest version timestamp > timestamp (value or tombstone): the valid-to."""
        times = self._times.get(key, [])
        i = bisect.bisect_right(times, timestamp)
        return times[i] if i < len(times) else None

    def _expiry(self, timestamp: int) -> int:
        """t + L, saturating at i64::MAX as the store's arithmetic does."""
        assert self.latest_ttl_ms is not None
        return min(timestamp + self.latest_ttl_ms, MAX_TIME)

    def _live(self, timestamp: int) -> bool:
        """§2.15: is a newest version at timestamp still live (t + L > ST)? Always without TTL."""
        return self.latest_ttl_ms is None or self._expiry(timestamp) > self.observed_stream_time

    def _end(self, key: bytes, timestamp: int) -> int | None:
        """§2.15: where the version at timestamp ends, for reads and put results.

        With n the next newer version's timestamp (value or tombstone; None for the newest):
        ``min(n, t + L)``; for the newest, ``t + L`` once ST has reached it, else None (live).
        Without TTL it is n, Kafka's valid-to. A version is *TTL-cut* when its end is not n.
        """
        n = self._next_newer(key, timestamp)
        if self.latest_ttl_ms is None:
            return n
        expiry = self._expiry(timestamp)
        if n is not None:
            return min(n, expiry)
        return expiry if expiry <= self.observed_stream_time else None

    def bucket_ms(self) -> int:
        """§2.13: the width W = max(I, L // 32) of the buckets latest values are counted in."""
        assert self.latest_ttl_ms is not None
        return max(self.segment_interval_ms, self.latest_ttl_ms // 32, 1)

    def _counted(self, timestamp: int) -> bool:
        """Is a newest value at timestamp counted: its bucket b not retired, (b+1)W + L > ST?"""
        if self.latest_ttl_ms is None:
            return True
        width = self.bucket_ms()
        bucket_end = (timestamp // width + 1) * width
        return self._expiry(bucket_end) > self.observed_stream_time

    def counted_keys(self) -> int:
        """What ``stats().latest_keys`` reports (§2.13): keys whose newest version is a value,
        with TTL only those whose bucket has not retired (live keys, exact to one bucket)."""
        count = 0
        for key in self._times:
            newest = self._newest(key)
            if newest is not None and newest[1] is not None and self._counted(newest[0]):
                count += 1
        return count

    def _advance(self, timestamp: int) -> None:
        """ST := max(ST, timestamp), counting the keys whose bucket retires on the way."""
        if timestamp <= self.observed_stream_time:
            return
        before = self.counted_keys() if self.latest_ttl_ms is not None else 0
        self.observed_stream_time = timestamp
        if self.latest_ttl_ms is not None:
            self.ttl_expired_keys += before - self.counted_keys()

    def _present(self, valid_to: int | None) -> bool:
        """Is a version with this valid-to still physically stored (§2.5, §5)?

        The newest version (valid_to None) lives in the latest-value store and never expires.
        Any other version lives in the segment of its valid-to, and segments with an id below
        segment_id(H) are dropped on every accepted write.

        Checking against the *current* H is equivalent to tracking drops as they happen:
        * H never decreases (ST never does), so a segment dropped earlier is still below
          segment_id(H) now, and a segment live now was live at every earlier drop;
        * a version's valid-to never increases (versions are never removed; replacing one at
          its own timestamp keeps every valid-to), and it only decreases when an accepted write
          at ts (ts >= H at that time) splits it: then its old valid-to was > ts >= H, so it was
          live before, and its new valid-to ts >= H is live after; a dropped version is never
          moved or resurrected;
        * every accepted write lands in a live segment: a moved or inserted version gets a
          valid-to > ts >= H, a degenerate tombstone row sits in segment_id(ts), ts >= H.
        So "present iff valid_to is None or segment_id(valid_to) >= segment_id(H)" holds at
        every moment, with ST the stream time after the latest accepted write (reads and
        rejected writes change neither ST nor the segments).
        """
        if valid_to is None:
            return True
        interval = self.segment_interval_ms
        return segment_id(valid_to, interval) >= segment_id(self.horizon, interval)

    @staticmethod
    def _check_key(key: object) -> bytes:
        if not isinstance(key, bytes):
            raise TypeError("key must be bytes")
        return key

    # ------------------------------------------------------------------ writes

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """§2.1: store a version (None = tombstone); return its valid-to, -1 or NOT_PUT."""
        key = self._check_key(key)
        if timestamp < 0:
            raise ValueError("timestamp must be >= 0")
        if timestamp < self.horizon:  # strictly older than the grace period (G = R)
            return NOT_PUT
        times = self._times.setdefault(key, [])
        versions = self._values.setdefault(key, {})
        if timestamp not in versions:
            bisect.insort(times, timestamp)
        # Replaces any version at the same timestamp; in particular a tombstone written at the
        # latest value's own timestamp stays a tombstone (§Q1).
        versions[timestamp] = value
        # Placed at the old ST, then ST advances: only keys whose bucket retires on the way
        # count as expired, not one this write replaced (§2.13).
        self._advance(timestamp)
        # §2.15: a value's end; -1 only when it is the newest and live. A newest value already
        # expired on arrival (t + L <= ST, possible when L <= R) gives t + L. A tombstone has no
        # TTL end: it reports its valid-to as a scan with tombstones shows it (§2.12).
        if value is None:
            end = self._next_newer(key, timestamp)
        else:
            end = self._end(key, timestamp)
        return VALID_TO_UNDEFINED if end is None else end

    def advance_stream_time(self, timestamp: int) -> int:
        """§2.14: a write at timestamp that stores no version; returns ST after the call."""
        if timestamp < 0:
            raise ValueError("timestamp must be >= 0")
        self._advance(timestamp)
        return self.observed_stream_time

    def reclaim_expired(self) -> None:
        """§2.15: dropping expired latest values from storage changes no read."""

    def delete(self, key: bytes, timestamp: int) -> Record | None:
        """§2.4: the record valid at timestamp before the write, then a tombstone put."""
        key = self._check_key(key)
        if timestamp < 0:
            raise ValueError("timestamp must be >= 0")
        if timestamp < self.horizon:
            return None
        before = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return before

    # ------------------------------------------------------------------ reads

    def _record_at(self, key: bytes, timestamp: int) -> Record | None:
        """The value version at timestamp, valid to its end (§2.15), or None (a tombstone)."""
        value = self._values[key][timestamp]
        if value is None:
            return None
        return Record(value, timestamp, self._end(key, timestamp))

    def get(self, key: bytes, as_of: int | None = None) -> Record | None:
        """§2.2 latest / §2.3 point in time (inclusive), with the latest-value exception.

        With TTL (§2.15) only a live newest value answers ``get(key)`` and reads below H, and a
        version answers ``as_of`` only before its end: a time at or past it is a gap.
        """
        key = self._check_key(key)
        newest = self._newest(key)
        if newest is None:
            return None
        if as_of is None:
            ts, value = newest
            return None if value is None or not self._live(ts) else Record(value, ts, None)
        if as_of < self.horizon:
            ts, value = newest
            if value is not None and ts <= as_of and self._live(ts):
                return Record(value, ts, None)
            return None
        times = self._times[key]
        i = bisect.bisect_right(times, as_of)
        if i == 0:
            return None
        record = self._record_at(key, times[i - 1])
        if record is not None and record.valid_to is not None and as_of >= record.valid_to:
            return None  # TTL-cut before as_of (as_of < n always holds for Kafka's valid-to)
        return record

    def versions(
        self,
        key: bytes,
        from_time: int | None = None,
        to_time: int | None = None,
        ascending: bool = False,
    ) -> list[Record]:
        """§2.5 with the §Q2 fix: every present value version meeting [from_time, to_time].

        With TTL (§2.15) each version carries its end as valid-to, and a TTL-cut version is
        present exactly while its end is above H (not segment by segment: its end is not where
        a segment holds it). Below H only a live newest value is returned.
        """
        key = self._check_key(key)
        lo = MIN_TIME if from_time is None else from_time
        hi = MAX_TIME if to_time is None else to_time
        if lo > hi:
            raise ValueError("from_time must not be greater than to_time")
        out: list[Record] = []
        if hi < self.horizon:
            newest = self._newest(key)
            if (
                newest is not None
                and newest[1] is not None
                and newest[0] <= hi
                and self._live(newest[0])
            ):
                out.append(Record(newest[1], newest[0], None))
            return out
        for ts in self._times.get(key, []):
            record = self._record_at(key, ts)
            if record is None:
                continue  # tombstones are never returned
            if ts > hi:
                continue
            if record.valid_to is not None and record.valid_to <= lo:
                continue
            if record.valid_to != self._next_newer(key, ts):  # TTL-cut
                if record.valid_to is not None and record.valid_to <= self.horizon:
                    continue
            elif not self._present(record.valid_to):
                continue
            out.append(record)
        if not ascending:
            out.reverse()
        return out

    # ------------------------------------------------------------------ lifecycle (no-ops)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
