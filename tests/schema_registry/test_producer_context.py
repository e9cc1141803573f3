"""The producer gives context-aware serializers (topic, key or value, headers) what Java's
serialize(topic, headers, data) gets, and keeps calling one-argument serializers with the object alone."""

from __future__ import annotations

from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.errors import SerializationError
from kafkajet.serialization import (
    InContext,
    MessageField,
    SerializationContext,
    resolve_serializer,
    wants_context,
)
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 1, "u": 1}), pytest.mark.timeout(120)]


class Recording:
    """A context-aware serializer: records what it was told and writes it into the bytes."""

    wants_serialization_context = True

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, str, Any]] = []

    def __call__(self, obj: Any, ctx: SerializationContext) -> bytes:
        self.seen.append((obj, ctx.topic, ctx.field, ctx.headers))
        if isinstance(ctx.headers, list):
            ctx.headers.append(("added-by-serializer", ctx.field.encode()))
        return f"{ctx.field}:{ctx.topic}:{obj}".encode()


def test_decided_once_at_construction() -> None:
    plain = resolve_serializer(lambda o: b"x", what="value.serializer")
    assert type(plain) is not InContext
    wrapped = resolve_serializer(Recording(), what="key.serializer")
    assert type(wrapped) is InContext and wrapped.field == MessageField.KEY
    assert not wants_context(str.encode)
    with pytest.raises(SerializationError, match="needs the topic"):
        wrapped("obj")  # called outside the producer without a context


def test_send_and_send_batch_pass_topic_field_and_headers(cluster: MockCluster) -> None:
    keys, values = Recording(), Recording()
    calls: list[Any] = []
    with Producer(bootstrap_servers=cluster.bootstrap_servers, key_serializer=keys, value_serializer=values) as p:
        headers: list[tuple[str, bytes | None]] = [("h", b"1")]
        p.send("t", value="v1", key="k1", headers=headers).result(timeout=30)
        batch_headers: list[list[tuple[str, bytes | None]]] = [[("a", b"x")], []]
        p.send_batch("t", ["v2", "v3"], keys=["k2", "k3"], headers=batch_headers).result(timeout=30)
    with Producer(bootstrap_servers=cluster.bootstrap_servers,
                  value_serializer=lambda o: calls.append(o) or str(o).encode()) as p:
        p.send("t", value=7).result(timeout=30)
    assert calls == [7]  # a one-argument callable is still called with the object alone
    assert [(o, t, f) for o, t, f, _ in values.seen] == [("v1", "t", "value"), ("v2", "t", "value"),
                                                          ("v3", "t", "value")]
    assert [(o, f) for o, _, f, _ in keys.seen] == [("k1", "key"), ("k2", "key"), ("k3", "key")]
    assert values.seen[0][3] is headers  # the record's own headers object
    # send_batch(): each record's own headers, not its neighbour's nor none
    assert [v[3] for v in values.seen[1:]] == [batch_headers[0], batch_headers[1]]
    assert all(v[3] is h for v, h in zip(values.seen[1:], batch_headers, strict=True))
    assert all(k[3] is h for k, h in zip(keys.seen[1:], batch_headers, strict=True))
    records = cluster.records("t", 0)
    assert [r.value for r in records[:3]] == [b"value:t:v1", b"value:t:v2", b"value:t:v3"]
    assert [r.key for r in records[:3]] == [b"key:t:k1", b"key:t:k2", b"key:t:k3"]
    # Headers a serializer adds travel with the record (the header form of the schema id needs this).
    assert ("added-by-serializer", b"value") in list(records[0].headers)


def test_records_without_headers_get_their_own_topics_context(cluster: MockCluster) -> None:
    values = Recording()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, value_serializer=values) as p:
        for topic in ("t", "u", "t", "u"):  # the context reused per topic, never another topic's
            p.send(topic, value=topic).result(timeout=30)
        p.send("u", value="h", headers=[("a", b"1")]).result(timeout=30)
    assert [(o, t, h) for o, t, _, h in values.seen] == [("t", "t", None), ("u", "u", None), ("t", "t", None),
                                                          ("u", "u", None),
                                                          ("h", "u", [("a", b"1"), ("added-by-serializer", b"value")])]
    assert [r.value for r in cluster.records("u", 0)] == [b"value:u:u", b"value:u:u", b"value:u:h"]


def test_a_failing_context_serializer_names_the_topic(cluster: MockCluster) -> None:
    def boom(obj: Any, ctx: SerializationContext) -> bytes:
        raise ValueError("no")

    boom.wants_serialization_context = True  # type: ignore[attr-defined]
    with Producer(bootstrap_servers=cluster.bootstrap_servers, value_serializer=boom) as p:
        with pytest.raises(SerializationError, match="value.serializer failed on str for topic 't': no"):
            p.send("t", value="x")
