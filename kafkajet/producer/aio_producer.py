"""AIOProducer: the producer for asyncio programs, in the shape aiokafka users know.

It drives one thread Producer (the sender thread does the network work) and never blocks the event loop:
memory and metadata waits are awaited, not slept in. Completions come back from the sender thread through
one queue and reach the loop in groups, one call_soon_threadsafe per group rather than per record.

Each record's asyncio future is its own delivery callback (a Future subclass made per AIOProducer, callable as
callback(metadata, exception)) that keeps its done-callbacks until delivery, so that a group's run in one handle
rather than one call_soon each; and the queue is flat, three entries a record: a partial and a tuple per record
that lived until the loop drained them were, with the future, what made the garbage collector over a quarter
of the event loop's time in the gather benchmark (py-spy). For the same reason no thread RecordFuture
is built beside it (the send path of Producer._async_view()) while send() is the plain one; a wrapped send() (the
opentelemetry one) is called as before, so that it sees every record.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import Context, copy_context
from functools import partial
from types import TracebackType
from typing import Any

from kafkajet.errors import IllegalStateError, ProducerClosedError
from kafkajet.producer.futures import DeliveryCallback, RecordMetadata
from kafkajet.producer.producer import Producer
from kafkajet.producer.send_gate import AsyncView, SendGate

log = logging.getLogger("kafkajet.aio")

_YIELD_EVERY = 256  # sends between turns given to the loop's other tasks (about 2 ms of sending)
_ALLOCATION_FRAMING = 128  # what a record's memory must cover beyond key and value: record and batch framing


class AIOProducer:
    """`async with AIOProducer(bootstrap_servers=...) as p: await (await p.send(topic, value))`.

    Takes the Producer's configuration (a dict of Java keys and/or snake_case keyword arguments).
    `await send(...)` returns once the record is queued, with an asyncio future of its RecordMetadata;
    `send_and_wait()` awaits that too. max.block.ms bounds how long send() waits (asynchronously) for
    metadata and buffer memory. Cancelling the future a send() returned does not recall the record: it is
    still delivered or fails, and a failure nobody can hear of any more is logged.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._config = dict(config or {})
        self._kwargs = kwargs
        self._producer: Producer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # future, metadata, exception, ... (flat, three entries a record) from the sender thread, resolved on the
        # loop by _deliver().
        self._completed: collections.deque[Any] = collections.deque()
        # callback, metadata, exception, ... (flat) of produce(callback=) records, run on the loop by _deliver().
        self._called_back: collections.deque[Any] = collections.deque()
        self._last_callback: Any = None  # produce()'s last callback and its loop-side wrapper, made once per callback
        self._last_wrapper: Any = None
        # Each pending record future's done-callbacks: (callback, context), or a list of them when there are
        # several; _deliver() takes them out and runs a whole group in one handle.
        self._waiting: dict[_RecordDelivery, Any] = {}
        self._future_type: type[_RecordDelivery] = _delivery_future_type(self)
        self._scheduled = False
        self._memory_freed: asyncio.Event | None = None
        self._stopped = False
        self._gate: SendGate | None = None
        # The producer's own send and its path without a RecordFuture (Producer._async_view()), kept here so
        # that each send() reads two attributes of its own.
        self._plain_send: Any = None
        self._send_without_future: Any = None
        self._batch_size = 0
        self._unyielded = 0
        self.memory_waits = 0  # how often send() awaited buffer memory (on the loop, without blocking it)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the underlying producer (off the loop: it resolves the bootstrap servers and starts a thread)."""
        if self._stopped:
            raise IllegalStateError("this AIOProducer was stopped; create a new one")
        if self._producer is not None:
            return
        self._loop = loop = asyncio.get_running_loop()
        self._producer = await loop.run_in_executor(None, partial(Producer, self._config, **self._kwargs))
        view: AsyncView = self._producer._async_view()
        self._gate, self._plain_send, self._send_without_future = view.gate, view.plain_send, view.send_without_future
        self._memory_freed = asyncio.Event()
        self._batch_size = self._producer.config["batch.size"]

    async def stop(self, timeout: float | None = None) -> None:
        """Deliver what is pending (at most `timeout` seconds, then fail the rest) and close."""
        p = self._producer
        self._stopped = True
        self._gate = None  # send() goes the slow way, to _open_producer's error
        if p is None:
            return
        await asyncio.get_running_loop().run_in_executor(None, p.close, timeout)
        self._deliver()  # every outcome is known now: resolve the futures before returning

    async def __aenter__(self) -> AIOProducer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    @property
    def producer(self) -> Producer:
        """The thread Producer underneath (for metrics(), partitions_for() and the transactional calls)."""
        if self._producer is None:
            raise IllegalStateError("AIOProducer not started: use `async with AIOProducer(...)` or await start()")
        return self._producer

    def _open_producer(self, api: str) -> Producer:
        """The producer for a call that queues records: refused at once once stop() was called (the thread
        producer is closed, so a topic's metadata would otherwise be waited for until max.block.ms)."""
        if self._stopped:
            raise ProducerClosedError(f"{api}() called after stop(); create a new AIOProducer")
        return self.producer

    # --- sending -----------------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns an asyncio future that resolves to its RecordMetadata or raises its error."""
        p, gate = self._producer, self._gate
        if p is None or gate is None:  # stop() clears the gate: one check on the hot path
            p = self._open_producer("send")  # raises: not started, or stopped
            gate = p._async_view().gate
        need = self._batch_size
        if type(value) is bytes and len(value) + _ALLOCATION_FRAMING > need:
            need = len(value) + (len(key) if type(key) is bytes else 0) + _ALLOCATION_FRAMING
        if not gate.ready(topic, need):
            await self._make_room(p, gate, topic, need)
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY:
            # A loop of sends that never wait (memory to spare) would otherwise hold the event loop for as
            # long as the caller keeps sending: give other tasks a turn now and then.
            self._unyielded = 0
            await asyncio.sleep(0)
        fut = self._future_type(loop=self._loop)
        # Only this loop allocates from the pool, and the sender thread only frees: the memory checked above
        # is still there, so send() does not block. The future is the record's delivery callback.
        if p.send is self._plain_send:
            self._send_without_future(topic, value, key, headers, partition, timestamp_ms, fut)
        else:  # wrapped (opentelemetry): the wrapper must see the record
            p.send(topic, value, key, headers, partition, timestamp_ms, callback=fut)
        return fut

    async def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Producer.produce() from the loop: queue one record and make no future for it (fire and forget).

        Awaits, as send() does, only while the topic's metadata or buffer memory is not there yet (at most
        max.block.ms, without blocking the loop); raises send()'s errors. `callback(metadata, exception)` runs
        once per record on this event loop (not on the sender thread), in send order within a partition;
        stop() returns after every callback ran. Without a callback a failed record is logged and counted
        (`record-error-no-callback-total`), as Producer.produce() does.
        """
        p, gate = self._producer, self._gate
        if p is None or gate is None:
            p = self._open_producer("produce")  # raises: not started, or stopped
            gate = p._async_view().gate
        need = self._batch_size
        if type(value) is bytes and len(value) + _ALLOCATION_FRAMING > need:
            need = len(value) + (len(key) if type(key) is bytes else 0) + _ALLOCATION_FRAMING
        if not gate.ready(topic, need):
            await self._make_room(p, gate, topic, need)
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY:
            self._unyielded = 0  # as send(): other tasks get a turn now and then
            await asyncio.sleep(0)
        if callback is not None and callable(callback):  # a non-callable one gets the producer's TypeError
            callback = self._on_loop(callback)
        p.produce(topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers,
                  callback=callback)

    def _on_loop(self, callback: DeliveryCallback) -> DeliveryCallback:
        """`callback` as the sender thread calls it: the outcome is queued for the loop, which runs `callback`
        (_deliver()). Made once per distinct callback: a loop passes the same function for every record."""
        if callback is self._last_callback:
            return self._last_wrapper  # type: ignore[no-any-return]
        queue, owner = self._called_back.extend, self

        def delivered(md: RecordMetadata, exc: BaseException | None) -> None:
            queue((callback, md, exc))  # one extend, atomic under the GIL, as RecordDelivery's
            if not owner._scheduled:
                owner._schedule_delivery()

        self._last_callback, self._last_wrapper = callback, delivered
        return delivered

    async def _make_room(self, p: Producer, gate: SendGate, topic: str, need: int) -> None:
        """The topic's metadata and `need` bytes of buffer memory, awaited (send() and produce() when the gate
        says they are not there yet)."""
        if gate.partition_count(topic) is None:
            await self._wait_for_topic(p, topic)
        if gate.free_memory_estimate() < need:
            await self._wait_for_memory(gate, need)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
                            partition: int | None = None, timestamp_ms: int | None = None) -> RecordMetadata:
        """send(), then wait for the record's acknowledgement."""
        return await (await self.send(topic, value, key, headers, partition, timestamp_ms))

    async def send_batch(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None = None,
                         headers: Sequence[Any] | None = None, partitions: Sequence[int | None] | None = None,
                         timestamps_ms: Sequence[int | None] | None = None) -> asyncio.Future[list[RecordMetadata]]:
        """Producer.send_batch() from the loop: queue many records to one topic; returns an asyncio future of
        every RecordMetadata in input order (or the first failure; the BatchFuture is its `batch` attribute
        for errors())."""
        p = self._open_producer("send_batch")
        gate = p._async_view().gate
        if gate.partition_count(topic) is None:
            await self._wait_for_topic(p, topic)
        # Memory for the records and a batch per partition they may open: what send_batch() will allocate.
        sized = sum(len(v) for v in values if type(v) is bytes) + _ALLOCATION_FRAMING * len(values)
        count = gate.partition_count(topic) or 1
        need = min(sized + self._batch_size * (count + 1), gate.total_memory)
        if gate.free_memory() < need:
            await self._wait_for_memory(gate, need)
        batch = p.send_batch(topic, values, keys, headers, partitions, timestamps_ms)
        fut = asyncio.wrap_future(batch, loop=self._loop)  # one hop to the loop per batch, not per record
        fut.batch = batch  # type: ignore[attr-defined]
        return fut

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far has an outcome (KafkaTimeoutError after `timeout` seconds)."""
        await asyncio.get_running_loop().run_in_executor(None, self.producer.flush, timeout)
        self._deliver()

    async def partitions_for(self, topic: str) -> list[Any]:
        """The topic's partitions, as Producer.partitions_for(), waited for without blocking the loop."""
        p = self.producer
        return await asyncio.get_running_loop().run_in_executor(None, p.partitions_for, topic)

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """As Producer.client_instance_id() (KIP-714), waited for without blocking the loop."""
        p = self.producer
        return await asyncio.get_running_loop().run_in_executor(None, p.client_instance_id, timeout)

    def metrics(self) -> dict[str, float]:
        """The producer's metrics by Java's names, as Producer.metrics()."""
        return self.producer.metrics()

    # --- waiting without blocking the loop ---------------------------------------------------------------

    async def _wait_for_topic(self, p: Producer, topic: str) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, p._wait_for_partitions, topic)  # bounded by max.block.ms, raises after

    async def _wait_for_memory(self, gate: SendGate, need: int) -> None:
        """Wait (on the loop) until the pool has `need` bytes, at most max.block.ms."""
        loop, event = self._loop, self._memory_freed
        assert loop is not None and event is not None
        deadline = loop.time() + gate.max_block_ms / 1000.0

        def freed() -> None:  # on the sender thread, after each release
            loop.call_soon_threadsafe(event.set)

        gate.on_memory_freed(freed)
        self.memory_waits += 1
        gate.wake_sender()
        try:
            while gate.free_memory() < need:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise gate.exhausted(need)
                event.clear()
                if gate.free_memory() >= need:
                    break
                # Not asyncio.wait_for(): on 3.11 it can swallow a cancellation that races the event.
                timer = loop.call_later(remaining, event.set)
                try:
                    await event.wait()
                finally:
                    timer.cancel()
        finally:
            gate.on_memory_freed(None)

    # --- completions -------------------------------------------------------------------------------------

    def _schedule_delivery(self) -> None:
        """On the sender thread, after queueing an outcome: wake the loop once for everything queued meanwhile."""
        if not self._scheduled:
            self._scheduled = True
            loop = self._loop
            assert loop is not None
            try:
                loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:  # the loop closed before stop(): nobody is left to hear the outcome
                self._scheduled = False
                log.warning("AIOProducer: the event loop closed before stop(); outcomes are dropped")

    def _deliver(self) -> None:
        """On the loop: resolve every queued future, then run their done-callbacks in one handle."""
        # Cleared before draining: an outcome queued after this line either is drained below or schedules
        # another call, never neither.
        self._scheduled = False
        completed, waiting = self._completed, self._waiting
        pop, take = completed.popleft, waiting.pop
        ready: list[Any] = []  # future, callbacks, ... (flat)
        while completed:  # whole entries only: the sender thread queues each with one extend()
            fut, md, exc = pop(), pop(), pop()
            if fut.cancelled():
                if exc is not None:
                    log.warning("a record whose send() future was cancelled failed: %s-%d: %r",
                                md.topic, md.partition, exc)
                continue
            if exc is None:
                fut.set_result(md)
            else:
                fut.set_exception(exc)
            callbacks = take(fut, None)
            if callbacks is not None:
                ready += (fut, callbacks)
        if ready:
            assert self._loop is not None
            self._loop.call_soon(self._run_callbacks, ready)
        called_back = self._called_back
        if called_back:
            self._run_produce_callbacks(called_back)

    def _run_produce_callbacks(self, called_back: collections.deque[Any]) -> None:
        """On the loop: produce()'s delivery callbacks, in the order the sender thread queued them; one that
        raises is reported as asyncio reports a callback's, and the rest still run."""
        pop = called_back.popleft
        while called_back:
            fn, md, exc = pop(), pop(), pop()
            try:
                fn(md, exc)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as e:
                assert self._loop is not None
                self._loop.call_exception_handler({"message": f"Exception in produce() callback {fn!r}",
                                                   "exception": e})

    def _run_callbacks(self, ready: list[Any]) -> None:
        """On the loop, a turn after _deliver(): each resolved future's done-callbacks, in order, each in its
        own context, a failure reported as asyncio reports a callback's (what Handles of their own would do)."""
        for i in range(0, len(ready), 2):
            fut, callbacks = ready[i], ready[i + 1]
            # The one pair inline, not through _pairs() and a loop, which measured slower (send_cost.py: 2.92-3.10
            # against 2.77-2.82 us a record).
            if type(callbacks) is tuple:
                fn, context = callbacks
                try:
                    context.run(fn, fut)
                except BaseException as exc:
                    self._callback_failed(exc, fn, fut, (), ready[i + 2:])
            else:
                for j, (fn, context) in enumerate(callbacks):
                    try:
                        context.run(fn, fut)
                    except BaseException as exc:
                        self._callback_failed(exc, fn, fut, callbacks[j + 1:], ready[i + 2:])

    def _callback_failed(self, exc: BaseException, fn: Any, fut: _RecordDelivery, same_future: Sequence[Any],
                         later: list[Any]) -> None:
        loop = self._loop
        assert loop is not None
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            # These end the loop's turn (Handle._run lets them through): what is left runs in a later turn.
            for later_fn, later_context in same_future:
                loop.call_soon(later_fn, fut, context=later_context)
            if later:
                loop.call_soon(self._run_callbacks, later)
            raise exc
        loop.call_exception_handler({"message": f"Exception in callback {fn!r}({fut!r})", "exception": exc,
                                     "future": fut})


def _pairs(held: Any) -> Sequence[tuple[Any, Context]]:
    """A pending future's done-callbacks as AIOProducer._waiting holds them: one (callback, context) pair (the
    usual case: gather's, or the awaiting task's) or a list of them."""
    return (held,) if type(held) is tuple else held


class _RecordDelivery(asyncio.Future[RecordMetadata]):
    """A record's asyncio future (the C-accelerated one, which gather() and wait() take) that is also its
    delivery callback, callback(metadata, exception): each AIOProducer makes its own subclass."""

    __slots__ = ()

    def __call__(self, md: RecordMetadata, exc: BaseException | None) -> None:
        raise NotImplementedError


def _delivery_future_type(owner: AIOProducer) -> type[_RecordDelivery]:
    """The future class of `owner`'s records: delivering queues the outcome for owner's loop, and the
    done-callbacks of a pending future wait in owner._waiting rather than in the C future. A C future schedules
    each callback with a call_soon of its own (a Handle and four Python calls), a record each: in the gather
    shape that was the largest of AIOProducer's own costs on the loop (py-spy), so owner._deliver()
    runs a group's callbacks in one handle instead. Once a future is done, a callback added goes to the C future
    (which schedules it at once) as usual."""
    queue = owner._completed.extend
    schedule = owner._schedule_delivery
    waiting = owner._waiting
    future = asyncio.Future

    class RecordDelivery(_RecordDelivery):
        __slots__ = ()

        def __call__(self, md: RecordMetadata, exc: BaseException | None) -> None:
            # One extend, atomic under the GIL: _deliver() never sees part of an entry, whichever thread
            # completes the batch (the sender's, or close()'s when it fails what is left).
            queue((self, md, exc))
            if not owner._scheduled:
                schedule()

        def add_done_callback(self, fn: Callable[[Any], object], /, *,
                              context: Context | None = None) -> None:
            if context is None:
                context = copy_context()
            if self.done():
                future.add_done_callback(self, fn, context=context)
                return
            pair = (fn, context)
            held = waiting.setdefault(self, pair)
            if held is not pair:
                if type(held) is tuple:
                    waiting[self] = [held, pair]
                else:
                    held.append(pair)

        def remove_done_callback(self, fn: Callable[[Any], object], /) -> int:
            held = waiting.pop(self, None)
            if held is None:
                return future.remove_done_callback(self, fn)
            pairs = _pairs(held)
            kept = [pair for pair in pairs if pair[0] != fn]  # != as asyncio compares
            if kept:
                waiting[self] = kept[0] if len(kept) == 1 else kept
            return len(pairs) - len(kept)

        def cancel(self, msg: Any | None = None) -> bool:
            if not future.cancel(self, msg):
                return False
            held = waiting.pop(self, None)
            if held is not None:
                loop = self.get_loop()
                for fn, context in _pairs(held):
                    loop.call_soon(fn, self, context=context)
            return True

    return RecordDelivery


__all__ = ["AIOProducer"]
