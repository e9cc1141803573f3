"""PySpark Python Data Source for Kafka: `kafkajet.spark.register(spark)`, then format("kafkajet")."""

from __future__ import annotations

from typing import Any

from kafkajet.spark.source import KafkaDataSource

__all__ = ["KafkaDataSource", "register"]

WORKER_ADVICE = (
    "Spark starts its Python workers with `python3` from PATH unless PYSPARK_PYTHON or spark.pyspark.python "
    "names an interpreter: set PYSPARK_PYTHON to the interpreter that has kafkajet (sys.executable) before the "
    "SparkSession starts. On a cluster, install kafkajet on every node, or ship it with --py-files / "
    "spark.archives (a packed virtualenv).")


def register(spark: Any, *, check_workers: bool = True) -> None:
    """Register the "kafkajet" format, and (one tiny job) check that Spark's Python workers can import
    kafkajet, so a misconfigured interpreter fails here with what to do instead of inside the first task."""
    if check_workers:
        from kafkajet.errors import ConfigError

        try:
            found = spark.sparkContext.parallelize([0], 1).map(_worker_has_kafkajet).collect()
        except Exception as e:  # the worker could not even start (no pyspark in that interpreter)
            raise ConfigError(f"Spark's Python workers failed to start ({type(e).__name__}). {WORKER_ADVICE}") from e
        if not all(found):
            raise ConfigError(f"Spark's Python workers cannot import kafkajet. {WORKER_ADVICE}")
    spark.dataSource.register(KafkaDataSource)


def _worker_has_kafkajet(_: object) -> bool:
    import importlib.util

    return importlib.util.find_spec("kafkajet") is not None
