"""read_committed: which fetched batches a reader may see, from the batches and the fetch response's aborted
transactions list. Java's consumer (CompletedFetch.nextFetchedRecord) applies the same rule; no I/O here.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kafkajet.records.batch import CONTROL_ABORT, RecordBatch, control_record_type


def committed_batches(batches: Iterable[RecordBatch],
                      aborted_transactions: Iterable[Mapping[str, Any]] | None) -> Iterator[RecordBatch]:
    """The data batches of committed (or non-transactional) producers, in log order.

    `aborted_transactions` are the response's (producer_id, first_offset) entries: a transactional batch of a
    producer whose aborted transaction started at or before the batch is dropped, until that producer's abort
    marker (a control batch) ends the aborted range. Control batches themselves are never yielded.
    """
    pending = [(int(a["first_offset"]), int(a["producer_id"])) for a in aborted_transactions or ()]
    heapq.heapify(pending)
    aborting: set[int] = set()
    for batch in batches:
        last = batch.base_offset + batch.last_offset_delta
        while pending and pending[0][0] <= last:
            aborting.add(heapq.heappop(pending)[1])
        if batch.is_control:
            if batch.records and control_record_type(batch.records[0].key) == CONTROL_ABORT:
                aborting.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborting:
            continue
        yield batch
