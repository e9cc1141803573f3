"""Lets Spark find the "kafkajet" format by itself, without `kafkajet.spark.register(spark)`.

When a session first looks up a Python data source, Spark (4.0+) starts its Python interpreter (PYSPARK_PYTHON
or spark.pyspark.python, else python3), imports every installed module whose name begins with `pyspark_`, and
registers each one's DefaultSource under DefaultSource.name(). Nothing else imports this module. It imports
PySpark's data source API and kafkajet's data source class only: nothing heavy until the format is used.
"""

from __future__ import annotations

try:
    from kafkajet.spark.data_source import KafkaDataSource as DefaultSource  # noqa: F401  (Spark looks it up)
except ImportError:
    # PySpark without kafkajet's Spark extras: Spark's lookup imports every pyspark_* module at once, so a
    # failure here would hide every other installed data source too.
    pass
