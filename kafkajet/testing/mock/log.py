"""One partition's log: record batches stored as bytes, as a broker keeps them, with offsets assigned."""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from kafkajet.records import Record, RecordBatch, decode_batches

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12  # after baseOffset (8) and batchLength (4); outside the CRC like the base offset


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    max_timestamp: int
    data: bytes


class PartitionLog:
    """Append-only; offsets are contiguous from 0. Not thread-safe: the cluster's lock guards it."""

    def __init__(self) -> None:
        self._batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0

    def __len__(self) -> int:
        return len(self._batches)

    def append(self, data: bytes, last_offset_delta: int, max_timestamp: int, leader_epoch: int) -> int:
        """Store one validated batch at the log end; returns its base offset.

        The base offset and leader epoch are stamped into the bytes as a broker does (neither is covered by
        the CRC), so a Fetch hands out real batches with their real offsets.
        """
        base = self.log_end_offset
        patched = bytearray(data)
        _BASE_OFFSET.pack_into(patched, 0, base)
        _LEADER_EPOCH.pack_into(patched, _LEADER_EPOCH_AT, leader_epoch)
        stored = StoredBatch(base, base + last_offset_delta, max_timestamp, bytes(patched))
        self._batches.append(stored)
        self._bases.append(base)
        self.log_end_offset = stored.last_offset + 1
        return base

    def read(self, offset: int, max_bytes: int, *, at_least_one: bool) -> bytes:
        """Whole batches from the one holding `offset`, up to max_bytes (KIP-74: the first batch even if larger
        when at_least_one, so a big batch can never stall a consumer)."""
        return self.read_until(offset, max_bytes, at_least_one=at_least_one)[0]

    def read_until(self, offset: int, max_bytes: int, *, at_least_one: bool,
                   upper: int | None = None) -> tuple[bytes, int]:
        """read(), stopping before the batch at offset `upper` (a read_committed Fetch stops at the last stable
        offset, which is always a batch boundary); also returns the offset after the data returned."""
        upper = self.log_end_offset if upper is None else min(upper, self.log_end_offset)
        if offset >= upper or not self._batches:
            return b"", offset
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        parts: list[bytes] = []
        size = 0
        end = offset
        for stored in self._batches[i:]:
            n = len(stored.data)
            if stored.base_offset >= upper or (size + n > max_bytes and (parts or not at_least_one)):
                break
            parts.append(stored.data)
            size += n
            end = stored.last_offset + 1
        return b"".join(parts), end

    def stored(self) -> list[StoredBatch]:
        return list(self._batches)

    def decoded(self) -> list[RecordBatch]:
        return decode_batches(b"".join(b.data for b in self._batches))

    def records(self) -> list[Record]:
        return [r for batch in self.decoded() for r in batch.records]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp`, as ListOffsets answers it."""
        for stored in self._batches:
            if stored.max_timestamp < timestamp:
                continue
            for batch in decode_batches(stored.data):
                for rec in batch.records:
                    if rec.timestamp >= timestamp:
                        return rec.offset, rec.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (the first such), for ListOffsets -3."""
        best: tuple[int, int] | None = None
        for batch in self.decoded():
            for rec in batch.records:
                if best is None or rec.timestamp > best[1]:
                    best = (rec.offset, rec.timestamp)
        return best
