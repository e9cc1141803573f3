"""The source and sink on a real Spark cluster, not local mode: a standalone master and two workers started
from the pyspark package's own launcher on 127.0.0.1, executors in separate JVMs and Python workers (pickling,
the per-worker producer cache and worker Python paths must hold there), against the embedded broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.ports import free_port
from tests.helpers.readback import read_topic
from tests.helpers.waiting import wait_for
from tests.spark.conftest import make_topic

SPARK_HOME = Path(pyspark.__file__).parent


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(work)}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_port = free_port()
    url = f"spark://127.0.0.1:{master_port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        log = open(work / "master.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(master_port), "--webui-port", str(free_port())],
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for(lambda: port_open(master_port), 120, "the Spark master listening")
        for i in range(2):
            log = open(work / f"worker-{i}.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                                           "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                                           str(free_port()), "--work-dir", str(work / f"w{i}")],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for(lambda: all((work / f"worker-{i}.log").read_bytes().count(b"Successfully registered with master")
                             for i in range(2)), 120, "two workers registered with the master")
        yield url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()


JOB = """
import os, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafkajet.spark
master, bootstrap, topic, out, checkpoint = sys.argv[1:6]
spark = (SparkSession.builder.master(master).appName("kafkajet-standalone")
         .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
         .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "2").getOrCreate())
kafkajet.spark.register(spark)  # the executors' workers must import kafkajet: checked on them
n = 500_000
(spark.range(n, numPartitions=4).selectExpr("cast(cast(id as string) as binary) as value")
 .write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
 .save())
q = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200000").load()
     .selectExpr("value").writeStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", out).option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
q.awaitTermination(300)
executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
print("EXECUTORS", executors)
spark.stop()
"""


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is Spark's cluster mode (executors in their own JVMs, pickling, the workers' Python "
    "path) on the broker the demo runs; the sink and source on each broker are tested in local mode"))
def test_a_write_and_a_stream_through_a_standalone_cluster_are_exact(
    standalone: str, broker: EmbeddedBroker, topic_name: str, tmp_path: Path
) -> None:
    make_topic(broker, topic_name, 4)
    make_topic(broker, topic_name + "-out", 4)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = subprocess.run([sys.executable, str(script), standalone, broker.bootstrap_servers, topic_name,
                          topic_name + "-out", str(tmp_path / "ck")], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert out.returncode == 0, out.stderr[-4000:]
    assert "EXECUTORS 2" in out.stdout, out.stdout  # two executor JVMs, one per worker
    for topic in (topic_name, topic_name + "-out"):
        got = sorted(int(r.value) for r in read_topic(broker.bootstrap_servers, topic, 500_000))  # type: ignore[arg-type]
        assert got == list(range(500_000)), f"{topic}: a row lost or repeated"
