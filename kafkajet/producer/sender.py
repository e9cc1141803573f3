"""The sender thread's loop: metadata, producer id, ready -> drain -> produce, responses, expiry.

`run_once(now)` does one pass and is what tests drive; `run()` loops until close.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kafkajet.clock import now_ms
from kafkajet.cluster import Cluster, Node, metadata_request_body
from kafkajet.errors import (
    NO_ERROR,
    AuthenticationError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    RebootstrapRequiredError,
    RecordListTooLargeError,
    TransactionAbortedError,
    make_error,
)
from kafkajet.network import ClientResponse, NetworkClient
from kafkajet.network.versions import for_transaction_version
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch import ProducerBatch
from kafkajet.producer.futures import RecordMetadata
from kafkajet.producer.idempotence import IdempotenceManager, Verdict
from kafkajet.producer.metadata import RELIABLE_EPOCHS_FROM_VERSION, Metadata
from kafkajet.producer.metrics import ProducerMetrics
from kafkajet.producer.metrics_push import ClientMetricsPush
from kafkajet.producer.transactions import State, TransactionManager, TxnRequest
from kafkajet.protocol import ApiKey

log = logging.getLogger("kafkajet.producer.sender")

# Produce answers the sender treats by kind rather than by retriability.
_SUCCESS_CODES = (NO_ERROR, DuplicateSequenceNumberError.code)  # a duplicate: an earlier attempt was appended
_TOO_LARGE_CODES = (MessageTooLargeError.code, RecordListTooLargeError.code)
# Produce names topics by id from this version on (KIP-516).
TOPIC_IDS_FROM_PRODUCE_VERSION = 13
# Refusals that may name the partition's new leader (KIP-951, Produce v10+).
_LEADER_MOVED_CODES = (NotLeaderOrFollowerError.code, FencedLeaderEpochError.code)
MAX_POLL_MS = 5000.0  # an upper bound on one sleep, so a missed wake-up can never stall the producer
ResponseHandler = Callable[[ClientResponse], None]


class Sender:
    def __init__(
        self,
        *,
        client: NetworkClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        idempotence: IdempotenceManager | None,
        metrics: ProducerMetrics,
        acks: int,
        retries: int,
        request_timeout_ms: int,
        max_request_size: int,
        retry_backoff_ms: float,
        allow_auto_create_topics: bool,
        interceptors: list[Any] | None = None,
        clock: Callable[[], float] | None = None,
        on_fatal: Callable[[KafkaError], None] | None = None,
        transactions: TransactionManager | None = None,
        metrics_push: ClientMetricsPush | None = None,
    ) -> None:
        self.client = client
        self.metadata = metadata
        self.accumulator = accumulator
        self.idempotence = idempotence
        self.metrics = metrics
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        self.retry_backoff_ms = retry_backoff_ms
        self.allow_auto_create_topics = allow_auto_create_topics
        self.interceptors = interceptors or []
        self._clock = clock or now_ms
        self._running = True
        self._forced = False
        self._metadata_in_flight = False
        self._init_pid_retry_at = 0.0
        self.fatal_error: KafkaError | None = None
        self._on_fatal = on_fatal
        self.transactions = transactions
        self.metrics_push = metrics_push
        self._transactional_id = transactions.transactional_id if transactions is not None else None
        self._txn_flushing = False  # the accumulator flush this thread began for a committing transaction
        if transactions is not None:
            transactions.on_fatal = self._fatal
            transactions.on_epoch = accumulator.reset_sequences
            transactions.features = client.finalized_features

    # --- lifecycle --------------------------------------------------------------------------------

    def wakeup(self) -> None:
        self.client.wakeup()

    def initiate_close(self) -> None:
        self.accumulator.closed = True
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        self._forced = True
        self.initiate_close()

    def run(self) -> None:  # pragma: no mutate block  (the thread's loops: tests drive run_once())
        log.debug("sender thread started")
        while self._running:
            self._run_once_safely()
        txn = self.transactions
        if txn is not None and not self._forced and txn.state in (State.IN_TRANSACTION, State.ABORTABLE_ERROR):
            # Java's Sender: an open transaction is aborted on close, so nothing of it ever becomes visible.
            log.info("aborting the open transaction of %s because the producer is closing", txn.transactional_id)
            try:
                txn.begin_abort()
            except KafkaError as e:
                log.warning("could not abort the open transaction on close: %s", e)
        while not self._forced and txn is not None and txn.is_completing and self.fatal_error is None:
            self._run_once_safely()
        # Graceful close: keep going until every record has an outcome (bounded by delivery.timeout.ms).
        while not self._forced and (self.accumulator.has_incomplete() or self.client.has_in_flight()):
            self._run_once_safely()
        push = self.metrics_push
        if push is not None and not self._forced:
            # Java's ClientTelemetryReporter.initiateClose: one last, terminating push, within a request timeout.
            push.initiate_close()
            deadline = self._clock() + self.request_timeout_ms
            while not self._forced and push.closing and self._clock() < deadline:
                self._run_once_safely()
        if self._forced or self.accumulator.has_incomplete():
            n = self.accumulator.abort_all(ProducerClosedError("producer closed forcefully"))
            if n:
                log.info("failed %d incomplete batch(es) on forced close", n)
        self.client.close()
        log.debug("sender thread stopped")

    def _run_once_safely(self) -> None:  # pragma: no mutate block  (only run() calls it)
        try:
            self.run_once()
        except Exception:
            # The sender thread must outlive any single bad pass, or every future would hang.
            log.exception("unexpected error in the sender loop; continuing")
            time.sleep(0.05)

    # --- one pass ---------------------------------------------------------------------------------

    def run_once(self, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        if self.fatal_error is not None:
            # A record appended while the error was being raised still gets its outcome (Java's maybeAbortBatches).
            self.accumulator.abort_undrained(self.fatal_error)
        if self.transactions is not None:
            wait, produce = self._maybe_send_transactional(now)
            timeout = wait
            if produce:
                timeout = min(timeout, self._send_produce_data(now))
        else:
            # A requested epoch bump is local (KIP-360) and comes first, so the batches it renumbers go this pass.
            if self.idempotence is not None:
                self._maybe_bump_epoch()
            timeout = self._send_produce_data(now)
        # After produce data, as Java's NetworkClient.poll asks for metadata after sendProducerData: a batch a
        # leader hint moved goes to its new leader before the metadata request the refusal also asked for.
        timeout = min(timeout, self._maybe_update_metadata(now))
        if self.transactions is None and self.idempotence is not None:
            # After metadata: an InitProducerId a broker is slow to answer must not hold up, on the same
            # connection, the metadata every send() waits for.
            timeout = min(timeout, self._maybe_init_producer_id(now))
        if self.metrics_push is not None:
            timeout = min(timeout, self.metrics_push.poll(now))
        for response in self.client.poll(max(0.0, min(timeout, MAX_POLL_MS)), self._clock()):
            self._handle(response)
        if self.client.server_disconnects():
            # A leader that refuses connections may have lost its leadership: without new metadata its
            # batches would wait for it until delivery.timeout.ms (Java requests an update on every disconnect).
            self.metadata.request_update()
        for error in self.client.authentication_failures():
            self._on_authentication_failure(error)

    def _on_authentication_failure(self, error: AuthenticationError) -> None:
        """As Java: an authentication failure is not retried record by record until delivery.timeout.ms; the
        records waiting to be sent fail at once and callers waiting for metadata get the error. The client
        keeps reconnecting, no faster than reconnect.backoff.max.ms, so fixed credentials or a renewed
        certificate on the broker side heal the producer."""
        self.metadata.authentication_failed(error)
        gap = any(b.has_sequence and not b.in_flight for b in self.accumulator.incomplete_batches())
        failed = self.accumulator.abort_undrained(error)
        if failed:
            log.error("failed %d batch(es) waiting to be sent: %s", failed, error)  # pragma: no mutate (log text)
        if gap and self.idempotence is not None:
            # A failed numbered batch leaves a sequence gap: renumber what comes next.
            self.idempotence.request_epoch_bump(f"batches failed authentication: {error}")

    def _maybe_update_metadata(self, now: float) -> float:
        if self._metadata_in_flight:
            return float("inf")
        wait = self.metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        node = self.client.least_loaded_node(now)
        if node is None:
            return self.retry_backoff_ms
        if not self.client.ready(node, now):
            err = self.client.last_error(node)
            if err is not None:
                self.metadata.last_error = err  # the cause a caller waiting for a topic will be shown
            delay = self.client.connection_delay(node, now)
            return delay if delay > 0 else float("inf")
        topics = self.metadata.attempt_started(now)
        body = metadata_request_body(topics, allow_auto_topic_creation=self.allow_auto_create_topics)
        self.client.send(node, ApiKey.METADATA, body, now, context=self._handle_metadata)
        self._metadata_in_flight = True
        return float("inf")

    def _maybe_send_transactional(self, now: float) -> tuple[float, bool]:
        """Java's maybeSendAndPollTransactionalRequest: coordinator requests go before produce data, one at a
        time. Returns how long to wait and whether produce data may be sent in this pass."""
        txn = self.transactions
        assert txn is not None
        if txn.is_completing:
            if not self._txn_flushing:
                # A commit sends everything queued at once: no batch waits out linger.ms.
                self.accumulator.begin_flush()
                self._txn_flushing = True
        elif self._txn_flushing:
            self.accumulator.end_flush()
            self._txn_flushing = False
        if txn.in_flight is not None:
            return float("inf"), False  # its answer wakes the poll
        if txn.has_abortable_error or txn.state is State.ABORTING:
            # A batch waiting for a retry already has its sequence numbers: failing it leaves a gap the broker
            # would refuse the next transaction's batches for, so the epoch is bumped after the abort (KIP-360).
            gap = any(b.has_sequence and not b.in_flight for b in self.accumulator.incomplete_batches())
            aborted = TransactionAbortedError("Failing batch since transaction was aborted")
            if self.accumulator.abort_undrained(txn.last_error or aborted if txn.has_abortable_error else aborted):
                log.info("failed the batches of %s not yet sent: the transaction is aborting", txn.transactional_id)  # pragma: no mutate (log text)
                if gap and self.idempotence is not None:
                    self.idempotence.request_epoch_bump("batches with sequence numbers were aborted")
        req, wait = txn.next_request(self.accumulator.has_incomplete(), now)
        if req is None:
            return wait, True
        if req.api == ApiKey.FIND_COORDINATOR:
            node = self.client.least_loaded_node(now)
        else:
            node = txn.coordinator_node(req)
        if node is None or not self.client.ready(node, now):
            # A coordinator that metadata no longer lists (a killed broker, fenced by the controller) has no
            # connection and no error left to report: it is as lost as one that refused us, and only a new
            # FindCoordinator names its successor (Java looks the coordinator up again whenever it is not ready).
            reason = None
            if node is not None:
                reason = (self.client.last_error(node) if self.client.knows(node) else
                          KafkaConnectionError(f"coordinator node {node} is no longer in the cluster metadata"))
            txn.request_not_sent(req, now, forget_coordinator=reason is not None, reason=reason)
            delay = self.client.poll_delay(node, now) if node is not None else self.retry_backoff_ms
            return max(1.0, min(delay, self.retry_backoff_ms)), True
        version = self.client.api_version(node, req.api)  # capped where clients send less (versions.py)
        if req.transaction_version is not None:
            version = for_transaction_version(req.api, version, req.transaction_version)
        log.debug("sending %s v%d to node %d for %s", req.api.name, version, node, txn.transactional_id)  # pragma: no mutate (log text)
        self.client.send(node, req.api, req.build(), now, version=version, context=partial(self._handle_txn, req=req))
        return float("inf"), False

    def _handle_txn(self, response: ClientResponse, req: TxnRequest) -> None:
        txn = self.transactions
        assert txn is not None
        txn.handle_response(req, response.body, response.error, self._clock())
        if req.api == ApiKey.FIND_COORDINATOR and response.body is not None:
            for node_id, (host, port) in txn.coordinator_addresses.items():
                self.client.add_node(node_id, host, port)

    def _maybe_bump_epoch(self) -> None:
        """Apply a requested epoch bump once the partitions it renumbers have nothing on the wire (woken by the
        responses of what still is); first, decide the partitions whose expired batches' fate is now known."""
        idem = self.idempotence
        assert idem is not None
        if idem.init_in_progress or idem.fatal_error is not None:
            return
        idem.maybe_resolve()
        if not idem.bump_requested or not idem.can_bump_now():
            return
        rewrite = idem.partitions_to_rewrite()
        if idem.bump_epoch():
            self.accumulator.reset_sequences(rewrite)
        # Otherwise the epoch is exhausted and the id dropped: _maybe_init_producer_id asks for a new one.

    def _maybe_init_producer_id(self, now: float) -> float:
        idem = self.idempotence
        assert idem is not None
        if idem.has_producer_id or idem.init_in_progress or idem.fatal_error is not None or idem.bump_requested:
            return float("inf")
        if now < self._init_pid_retry_at:
            return self._init_pid_retry_at - now
        node = self.client.least_loaded_node(now)
        if node is None:
            return self.retry_backoff_ms
        if not self.client.ready(node, now):
            delay = self.client.connection_delay(node, now)
            return delay if delay > 0 else float("inf")
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": 2147483647,
            # Only ever for a new id (epochs are bumped locally): Java sends no id and no epoch here.
            "producer_id": -1,
            "producer_epoch": -1,
        }
        self.client.send(node, ApiKey.INIT_PRODUCER_ID, body, now, context=self._handle_init_pid)
        idem.init_in_progress = True
        return float("inf")

    def _send_produce_data(self, now: float) -> float:
        cluster = self.metadata.cluster
        ready = self.accumulator.ready(cluster, now)
        if ready.unknown_leaders:
            self.metadata.request_update()
        timeout = ready.next_check_ms
        sendable = []
        for node in ready.nodes:
            can_send = self.client.ready(node, now)
            # How long a node could not take its ready batches: partitioner.availability.timeout.ms.
            self.accumulator.update_node_latency(node, now, can_send)
            if can_send:
                sendable.append(node)
            else:
                delay = self.client.poll_delay(node, now)  # a reconnect backoff, or a quota's throttle
                if delay > 0:
                    timeout = min(timeout, delay)
        # Passes go on while connections take more: this thread gets the GIL in slices between the callers'
        # sends, so it fills the pipeline (up to max in flight) in one slice instead of one request a wake-up.
        for rounds in range(self.client.max_in_flight):
            if rounds:
                self.client.write_pending(now)
                ready = self.accumulator.ready(cluster, now)
                sendable = [node for node in ready.nodes if self.client.ready(node, now)]
            drained = self.accumulator.drain(cluster, sendable, self.max_request_size, now) if sendable else {}
            if not drained:
                break
            for node, batches in drained.items():
                self._send_produce_request(node, batches, now)
        expired = self.accumulator.expire(now, self.cause_for)
        for batch in expired:
            if self.idempotence is not None and batch.has_sequence:
                # A numbered batch was sent and may have been written: its partition waits for the answers of
                # its other batches to tell whether it left a gap (Java's markSequenceUnresolved).
                self.idempotence.expired(batch)
            self._on_failed(batch)
        return min(timeout, self.accumulator.next_expiry_ms(now))

    def cause_for(self, batch: ProducerBatch) -> KafkaError | None:
        """Why a batch is still waiting: no leader known, or its leader's connection error."""
        leader = self.metadata.cluster.leader_for(batch.topic, batch.partition)
        if leader is None:
            return self.metadata.last_error or KafkaError(
                f"no leader known for {batch.topic}-{batch.partition}")
        return self.client.last_error(leader)

    def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for b in batches:
            by_topic.setdefault(b.topic, []).append({"index": b.partition, "records": b.wire})
        topic_data: list[dict[str, Any]] = [{"name": t, "partition_data": parts} for t, parts in by_topic.items()]
        body = {
            "transactional_id": self._transactional_id,
            "acks": self.acks,
            "timeout_ms": self.request_timeout_ms,
            "topic_data": topic_data,
        }
        version = self.client.api_version(node, ApiKey.PRODUCE)
        if self.transactions is not None and not self.transactions.tv2:
            # Produce v12+ would add the partitions to the transaction implicitly, which a transaction of
            # version 1 does with AddPartitionsToTxn (Java's ProduceRequest.builder(data, useTransactionV1Version)).
            version = for_transaction_version(ApiKey.PRODUCE, version, 1)
        names: dict[bytes, str] = {}
        if version >= TOPIC_IDS_FROM_PRODUCE_VERSION:
            # v13 names topics by id alone (KIP-516), the ids metadata gave (Java's topicIdsForBatches); a topic
            # whose id is not known (a broker keeping none) goes by name, at v12.
            ids = self.metadata.cluster.topic_ids
            names = {ids[t]: t for t in by_topic if ids.get(t) is not None}
            if len(names) == len(by_topic):
                for data in topic_data:
                    data["topic_id"] = ids[data["name"]]
            else:
                version, names = TOPIC_IDS_FROM_PRODUCE_VERSION - 1, {}
        self.client.send(node, ApiKey.PRODUCE, body, now, version=version, expect_response=self.acks != 0,
                         context=partial(self._handle_produce, batches=batches, names=names))
        # Queue time ends now, read fresh as Java's updateProduceRequestMetrics does: `now` was read at the top of
        # the pass, and a caller thread holding the GIL meanwhile may have opened batches this pass drained
        # (record-queue-time-avg came out at -34 ms under a send() loop).
        sent_at = self._clock()
        self.metrics.request_sent([b.stats(sent_at) for b in batches], sum(b.count for b in batches))

    # --- responses --------------------------------------------------------------------------------

    def _handle(self, response: ClientResponse) -> None:
        # Each request carries its completion handler as its context (Java's RequestCompletionHandler): a
        # new kind of request brings its own, and nothing can be dropped for want of a matching tag.
        handler: ResponseHandler = response.context
        if response.body is not None:
            # Java's produce-throttle-time sensor is the NetworkClient's: every answer counts, Produce or not.
            self.metrics.throttle_time(response.body.get("throttle_time_ms", 0))
        handler(response)

    def _handle_metadata(self, response: ClientResponse) -> None:
        self._metadata_in_flight = False
        now = self._clock()
        if response.error is not None or response.body is None:
            self.metadata.failed(response.error or KafkaConnectionError("empty metadata response"), now)
            return
        if response.body.get("error_code") == RebootstrapRequiredError.code:
            # KIP-1102: the top-level error of Metadata v13+: this broker's view is not ours to adopt.
            self.client.rebootstrap(f"node {response.node_id} answered Metadata with REBOOTSTRAP_REQUIRED")
            self.metadata.failed(RebootstrapRequiredError("the broker asked the client to rebootstrap"), now)
            return
        top_error = make_error(response.body.get("error_code", NO_ERROR), "Metadata request refused")
        if top_error is not None:  # v13+: the whole answer refused
            self.metadata.failed(top_error, now)
            return
        cluster = Cluster.from_metadata_response(response.body)
        self.client.set_nodes({n.node_id: (n.host, n.port) for n in cluster.nodes.values()}, cluster.cluster_id)
        self.metadata.update(cluster, now, reliable_epochs=response.api_version >= RELIABLE_EPOCHS_FROM_VERSION)

    def _handle_init_pid(self, response: ClientResponse) -> None:
        idem = self.idempotence
        assert idem is not None
        idem.init_in_progress = False
        now = self._clock()
        body = response.body
        err = response.error if body is None else make_error(body.get("error_code", NO_ERROR))
        if err is None and body is not None:
            idem.set_producer_id(body["producer_id"], body["producer_epoch"])
            self.accumulator.reset_sequences()
            return
        assert err is not None
        if err.retriable or isinstance(err, KafkaConnectionError):
            log.info("InitProducerId failed, will retry: %s", err)  # pragma: no mutate (log text)
            self._init_pid_retry_at = now + self.retry_backoff_ms
            return
        if body is not None:
            # Records fail with the broker's own error class (as Java's), its message saying what was asked.
            err = make_error(body["error_code"], "InitProducerId: could not obtain a producer id for idempotence")
            assert err is not None
        self._fatal(err)

    def _fatal(self, error: KafkaError, cause: KafkaError | None = None) -> None:
        log.error("fatal producer error: %s", error)  # pragma: no mutate (log text)
        if cause is not None:
            error.__cause__ = cause
        self.fatal_error = error
        if self._on_fatal is not None:
            self._on_fatal(error)
        if self.idempotence is not None:
            self.idempotence.fatal_error = error
        self.metadata.fatal(error)
        self.accumulator.abort_all(error)

    def _handle_produce(self, response: ClientResponse, batches: list[ProducerBatch], names: dict[bytes, str]) -> None:
        now = self._clock()
        if response.error is not None:
            self.metadata.request_update()
            for b in batches:
                self._retry_or_fail(b, response.error, now)
            return
        self.metrics.request_latency(response.latency_ms, response.node_id)
        if response.body is None:  # acks=0: done once written
            for b in batches:
                self._complete(b, -1, -1)
            return
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for topic in response.body.get("responses", ()):
            # v13 answers by topic id: the name is the one the request gave that id.
            name: str = topic["name"] if "name" in topic else names.get(topic["topic_id"], "")
            for p in topic.get("partition_responses", ()):
                results[(name, p["index"])] = p
        hints: dict[tuple[str, int], tuple[int, int]] = {}
        for b in batches:
            p = results.get(b.tp)
            if p is None:
                self._retry_or_fail(b, KafkaError(f"the broker's response did not mention {b.topic}-{b.partition}"), now)
                continue
            self._handle_partition(b, p, now)
            hint = p.get("current_leader")
            if hint and p.get("error_code") in _LEADER_MOVED_CODES and hint["leader_id"] >= 0 \
                    and hint["leader_epoch"] >= 0:
                hints[b.tp] = (hint["leader_id"], hint["leader_epoch"])
        if hints:
            self._take_leader_hints(hints, response.body.get("node_endpoints") or ())

    def _take_leader_hints(self, hints: dict[tuple[str, int], tuple[int, int]], endpoints: Any) -> None:
        """Java's Sender after handleProduceResponse: the refused batches' partitions move to the leaders the
        answer names when those are newer than the producer's view, so their retries go there without waiting
        for a Metadata round trip (KIP-951)."""
        nodes = [Node(e["node_id"], e["host"], e["port"], e.get("rack")) for e in endpoints if e["node_id"] >= 0]
        moved = self.metadata.update_leaders(hints, nodes)
        for leader in {hints[tp][0] for tp in moved}:
            node = self.metadata.cluster.nodes[leader]
            self.client.add_node(node.node_id, node.host, node.port)  # a leader no Metadata answer named yet
        if moved:
            log.debug("leader hints moved %s", ", ".join(  # pragma: no mutate (log text)
                f"{t}-{p} to node {hints[(t, p)][0]} (epoch {hints[(t, p)][1]})" for t, p in sorted(moved)))

    def _handle_partition(self, b: ProducerBatch, p: dict[str, Any], now: float) -> None:
        code = p.get("error_code", NO_ERROR)
        idem = self.idempotence
        if code in _SUCCESS_CODES:
            self._complete(b, p.get("base_offset", -1), p.get("log_append_time_ms", -1))
            return
        msg = p.get("error_message")
        err = make_error(code, f"{b.topic}-{b.partition}" + (f": {msg}" if msg else ""))
        assert err is not None
        # Past delivery.timeout.ms a batch is not split again but fails: a split that cannot shrink it must not
        # go on for ever (in-flight batches have no other deadline here).
        if code in _TOO_LARGE_CODES and b.count > 1 and now - b.created_ms < self.accumulator.delivery_timeout_ms:
            if idem is not None:
                idem.batch_split(b, err)
            n = self.accumulator.split_and_reenqueue(b, now)
            self.metrics.batch_split()
            log.info("split a batch of %d records for %s-%d into %d after %s", b.count, b.topic, b.partition, n, err.name)  # pragma: no mutate (log text)
            return
        if idem is not None:
            # The sequence rules are the idempotence manager's (Java's canRetry ends with the TransactionManager's).
            verdict = idem.verdict(b, err, self.transactions is not None)
            if verdict == Verdict.FAIL:
                self._fail(b, err)
                return
            if verdict != Verdict.NOT_SEQUENCE:  # retried in order, or under the new epoch it asked for
                self._reenqueue(b, err, now)
                return
        if err.invalid_metadata:
            self.metadata.request_update()
        self._retry_or_fail(b, err, now)

    def _retry_or_fail(self, b: ProducerBatch, err: KafkaError, now: float) -> None:
        retriable = err.retriable or isinstance(err, KafkaConnectionError)
        within_time = now - b.created_ms < self.accumulator.delivery_timeout_ms
        if retriable and b.attempts < self.retries and within_time and not self._forced:
            self._reenqueue(b, err, now)
            return
        if retriable and not within_time:
            err = DeliveryTimeoutError(
                f"Expiring {b.count} record(s) for {b.topic}-{b.partition}: delivery.timeout.ms passed", err)
        self._fail(b, err)

    def _reenqueue(self, b: ProducerBatch, err: KafkaError, now: float) -> None:
        log.debug("retrying %r after %s", b, err)  # pragma: no mutate (log text)
        # It stays among its partition's unresolved batches (Java's inflightBatchesBySequence): the partition's
        # epoch cannot move on, nor a later retry overtake it, until it is answered.
        self.metrics.records_retried(b.count, b.topic)
        self.accumulator.reenqueue(b, err, now)

    def _fail(self, b: ProducerBatch, err: KafkaError) -> None:
        idem = self.idempotence
        if idem is not None and b.has_sequence:
            idem.remove_in_flight(b)
            # A failed numbered batch leaves a gap later batches would trip over: renumber from here.
            idem.request_epoch_bump(f"batch for {b.topic}-{b.partition} failed: {err}", b.tp)
        # Counted first, as _complete() counts (and Java's failBatch): completing wakes flush(), and a metrics()
        # read right after it must include the batch.
        self.metrics.records_failed(b.count, b.topic)
        self.accumulator.complete(b, -1, -1, err)
        self._after_failure(b)

    def _on_failed(self, b: ProducerBatch) -> None:
        self.metrics.records_failed(b.count, b.topic)
        self._after_failure(b)

    def _after_failure(self, b: ProducerBatch) -> None:
        if self.transactions is not None and b.error is not None:
            self.transactions.on_batch_failed(b.error)
        if self.interceptors:
            self._tell_interceptors(b, [None] * b.count)

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.idempotence is not None:
            self.idempotence.remove_in_flight(b)
            self.idempotence.acknowledged(b)
        # Read before the batch completes: completing gives its buffer back to the pool.
        sizes = self._record_sizes(b) if self.interceptors else None
        # Counted first: completing wakes flush(), and a metrics() read right after it must include the batch.
        self.metrics.records_sent(b.count, b.topic)
        self.accumulator.complete(b, base_offset, log_append_time, None)
        if sizes is not None:
            self._tell_interceptors(b, [
                RecordMetadata(b.topic, b.partition, base_offset + i if base_offset >= 0 else -1,
                               log_append_time if log_append_time >= 0 else ts, klen, vlen)
                for i, (ts, klen, vlen) in enumerate(sizes)])

    @staticmethod
    def _record_sizes(b: ProducerBatch) -> list[tuple[int, int, int]]:
        """(timestamp, key size, value size) of each record. Batches keep no futures, and interceptors are
        rare: the records are decoded for them."""
        records = b.records()
        return [(r.timestamp, -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value))
                for r in records]

    def _tell_interceptors(self, b: ProducerBatch, mds: list[RecordMetadata | None]) -> None:
        for md in mds:
            for icp in self.interceptors:
                try:
                    icp.on_acknowledgement(md, b.error)
                except Exception:
                    log.exception("interceptor %r on_acknowledgement raised", icp)  # pragma: no mutate (log text)
