"""read_committed filtering: the aborted transactions list and the markers decide, as in Java's consumer."""

from __future__ import annotations

from kafkajet.records import build_control_batch, decode_batches, encode_batch
from kafkajet.records.isolation import committed_batches


def _data(offset: int, pid: int, values: list[bytes], transactional: bool = True) -> bytes:
    return encode_batch([(1, None, v, None) for v in values], producer_id=pid, producer_epoch=0, base_sequence=0,
                        transactional=transactional, base_offset=offset)


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    return build_control_batch(commit, producer_id=pid, producer_epoch=0, timestamp=1, base_offset=offset)


def _visible(log: bytes, aborted: list[tuple[int, int]] | None) -> list[bytes | None]:
    entries = None if aborted is None else [{"producer_id": p, "first_offset": o} for p, o in aborted]
    return [r.value for b in committed_batches(decode_batches(log), entries) for r in b.records]


def test_interleaved_transactions_only_the_aborted_producers_records_are_dropped() -> None:
    log = b"".join([
        _data(0, 7, [b"a0", b"a1"]),        # producer 7, aborted later
        _data(2, 8, [b"c0"]),               # producer 8, committed
        _data(3, 9, [b"plain"], transactional=False),
        _data(4, 7, [b"a2"]),
        _marker(5, 7, commit=False),
        _marker(6, 8, commit=True),
        _data(7, 7, [b"next"]),             # producer 7's next transaction, committed: visible again
        _marker(8, 7, commit=True),
    ])
    assert _visible(log, [(7, 0)]) == [b"c0", b"plain", b"next"]
    # read_uncommitted semantics when nothing is aborted: every data record, never a marker.
    assert _visible(log, []) == [b"a0", b"a1", b"c0", b"plain", b"a2", b"next"]
    assert _visible(log, None) == [b"a0", b"a1", b"c0", b"plain", b"a2", b"next"]


def test_an_aborted_transaction_starting_mid_fetch_only_hides_from_its_first_offset() -> None:
    log = b"".join([
        _data(0, 7, [b"t1"]),
        _marker(1, 7, commit=True),
        _data(2, 7, [b"t2"]),
        _marker(3, 7, commit=False),
    ])
    assert _visible(log, [(7, 2)]) == [b"t1"]


def test_read_committed_works_on_undecoded_batches_too() -> None:
    # The Spark source decodes data batches itself (decode=False): the abort marker must still end the
    # aborted range, or every later transaction of the producer would be dropped as aborted.
    from kafkajet.records import decode_batches
    from kafkajet.records.batch import build_control_batch, encode_batch
    from kafkajet.records.isolation import committed_batches

    pid = 9
    log = (encode_batch([(1, None, b"aborted", None)], base_offset=0, producer_id=pid, producer_epoch=0,
                        base_sequence=0, transactional=True)
           + build_control_batch(False, base_offset=1, producer_id=pid, producer_epoch=0, timestamp=1)
           + encode_batch([(1, None, b"committed", None)], base_offset=2, producer_id=pid, producer_epoch=0,
                          base_sequence=1, transactional=True)
           + build_control_batch(True, base_offset=3, producer_id=pid, producer_epoch=0, timestamp=1))
    batches = decode_batches(log, decode=False)
    kept = list(committed_batches(batches, [{"producer_id": pid, "first_offset": 0}]))
    assert [b.base_offset for b in kept] == [2]
