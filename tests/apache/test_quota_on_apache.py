"""A byte-rate quota on Apache Kafka 4.4 (KIP-219): the producer waits out every throttle window the broker
announces, delivers every record once, and lands near the quota; the Java producer runs beside it as the
reference, under the same quota, and both rates are printed.

The broker measures its quota over quota.window.num samples of quota.window.size.seconds and, until that many
samples exist, as if they did: with its defaults (11 x 1 s) a fresh client may burst ten seconds' worth before the
first throttle, which no 20-second run averages out. This broker keeps 2 samples of 1 s, so the burst is at most
a second's worth and the rate over 20 s says what the client does.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import TOOL_JVM_OPTIONS, ApacheKafka
from tests.helpers.apache import running_apache_kafka
from tests.helpers.throttle_watch import ThrottleWatch

QUOTA = 1024 * 1024  # bytes/s, producer_byte_rate for every client id
SECONDS = 20
VALUE = 4096
RECORDS = QUOTA * SECONDS // VALUE
BENCH = Path(__file__).resolve().parents[2] / "jvm" / "ProducerBench.java"
MIB = 1024 * 1024


def _config_command(kafka: ApacheKafka, *args: str) -> None:
    done = kafka.run_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", kafka.bootstrap_servers,
                          "--entity-type", "clients", "--entity-default", *args, timeout_s=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def test_a_byte_rate_quota_is_waited_out_window_by_window(tmp_path: Path) -> None:
    with running_apache_kafka(broker_config={"quota.window.num": 2, "quota.window.size.seconds": 1}) as kafka:
        with Admin(kafka.bootstrap_servers) as admin:
            admin.create_topics(["quota-kafkajet", "quota-java"], num_partitions=3)
        # Answered once the controller has committed it; the broker applies it from its metadata log at once.
        _config_command(kafka, "--alter", "--add-config", f"producer_byte_rate={QUOTA}")

        # The Java producer beside kafkajet's: another client id, so a quota of its own.
        java = subprocess.Popen(
            kafka.java_command(str(BENCH), "send", kafka.bootstrap_servers, "quota-java", str(RECORDS), str(VALUE),
                               "client.id=quota-java", jvm_options=TOOL_JVM_OPTIONS),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            watch = ThrottleWatch()
            with Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="quota-kafkajet") as producer:
                # As the Java bench: connected, with one record acknowledged, before the clock starts.
                producer.send("quota-kafkajet", value=b"warm-up").result(timeout=30)
                watch.attach(producer._client)
                started = time.monotonic()
                futures = [producer.send("quota-kafkajet", value=b"%08d" % i + b"x" * (VALUE - 8))
                           for i in range(RECORDS)]
                producer.flush(timeout=SECONDS * 3)
                elapsed = time.monotonic() - started
                metrics = producer.metrics()
            assert all(f.exception(timeout=0) is None for f in futures)
            java_out, java_err = java.communicate(timeout=SECONDS * 4)
        finally:
            java.kill()
            java.wait(timeout=30)
        assert java.returncode == 0, java_err.decode(errors="replace")[-3000:]
        bench = json.loads(java_out.decode().strip().splitlines()[-1])

        with FetchClient(bootstrap_servers=kafka.bootstrap_servers) as reader:
            values: list[bytes] = []
            for partition in reader.partitions("quota-kafkajet"):
                start, end = reader.offsets("quota-kafkajet", partition)
                values.extend(bytes(r.value or b"")[:8] for r in reader.fetch_range("quota-kafkajet", partition,
                                                                                     start, end)
                              if r.value != b"warm-up")

    rate = RECORDS * VALUE / elapsed
    java_rate = bench["acked"] * VALUE / bench["wall"]
    print(f"\nproducer_byte_rate {QUOTA / MIB:.2f} MiB/s, {RECORDS * VALUE / MIB:.0f} MiB each:"
          f"\n  kafkajet: {rate / MIB:.3f} MiB/s over {elapsed:.1f} s, {len(watch.sends)} Produce requests, "
          f"{len(watch.windows)} throttled answers, {len(watch.sends_inside_windows())} requests inside a window, "
          f"produce-throttle-time-avg {metrics['produce-throttle-time-avg']:.0f} ms "
          f"max {metrics['produce-throttle-time-max']:.0f} ms"
          f"\n  Java:     {java_rate / MIB:.3f} MiB/s over {bench['wall']:.1f} s, {bench['acked']} records acked")

    assert not watch.sends_inside_windows(), watch.sends_inside_windows()[:5]
    # The quota really throttled: windows all along the run (the batches grow to ~1 MiB while the node is muted).
    assert len(watch.windows) >= SECONDS // 2
    assert metrics["produce-throttle-time-max"] > 0
    assert sorted(values) == [b"%08d" % i for i in range(RECORDS)]  # every record, once
    assert abs(rate - QUOTA) <= 0.2 * QUOTA, f"{rate / MIB:.3f} MiB/s against a quota of {QUOTA / MIB:.2f}"
    assert bench["acked"] == RECORDS and bench["errors"] == 0
