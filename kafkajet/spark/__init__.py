"""PySpark Python Data Source for Kafka: `kafkajet.spark.register(spark)`, then format("kafkajet").

Importing it imports PySpark's data source API only (Spark imports the data source in every application
where kafkajet is installed, through pyspark_kafkajet): from_avro / to_avro, and what reads and writes, are
imported when used.
"""

from __future__ import annotations

from typing import Any

_EXTRAS = ("pyspark", "py4j", "pyarrow", "numpy")


def _missing_extra(e: ImportError) -> ImportError:
    # Without the extras this would end in a bare "No module named 'pyspark'" from deep inside the import.
    return type(e)(f"kafkajet.spark needs PySpark 4.2 or later with pyarrow and numpy ({e}): "
                   "pip install 'kafkajet[spark]'", name=e.name)


try:
    from kafkajet.spark.data_source import KafkaDataSource
except ImportError as e:
    if (e.name or "").split(".")[0] not in _EXTRAS:
        raise
    raise _missing_extra(e) from e

__all__ = ["KafkaDataSource", "from_avro", "register", "to_avro"]
_FUNCTIONS = ("from_avro", "to_avro")


def __getattr__(name: str) -> Any:
    if name not in _FUNCTIONS:
        raise AttributeError(f"module 'kafkajet.spark' has no attribute {name!r}")
    try:
        from kafkajet.spark import functions
    except ImportError as e:
        if (e.name or "").split(".")[0] not in _EXTRAS:
            raise
        raise _missing_extra(e) from e
    return getattr(functions, name)

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
            found = _ask_the_workers(spark)
        except Exception as e:  # the worker could not even start (no pyspark in that interpreter)
            raise ConfigError(f"Spark's Python workers failed to start ({type(e).__name__}). {WORKER_ADVICE}") from e
        if not all(found):
            raise ConfigError(f"Spark's Python workers cannot import kafkajet. {WORKER_ADVICE}")
    _quiet_local_task_errors(spark)
    if _session_knows_the_format(spark):
        # Found by Spark itself (pyspark_kafkajet) or registered before. Registering again changes nothing but
        # earns Spark's "replaced a ... registered data source" warning, then and at every stream start (each
        # query's session clone registers the runtime sources again, over the one Spark found).
        return
    try:
        spark.dataSource.register(KafkaDataSource)
    except Exception as e:
        # Spark registered it already: it found the pyspark_kafkajet module (Spark 4's lookup of installed
        # data sources), and a name found that way cannot be registered again.
        if _condition(e) != "DATA_SOURCE_ALREADY_EXISTS":
            raise


def _ask_the_workers(spark: Any) -> list[bool]:
    """Whether Spark's Python workers import kafkajet, asked through one tiny job."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        # A Spark Connect client has no SparkContext (it needs py4j): the same question as a one-row Python
        # UDF, which the server's workers run, as they will run the data source.
        from pyspark.sql.functions import lit, udf

        asked = udf(_worker_has_kafkajet, "boolean")
        return [bool(row[0]) for row in spark.range(1).select(asked(lit(0))).collect()]
    return list(spark.sparkContext.parallelize([0], 1).map(_worker_has_kafkajet).collect())


def _session_knows_the_format(spark: Any) -> bool:
    """Whether a classic session already has the "kafkajet" data source; False when there is no JVM to ask
    (Spark Connect), where register() then registers as before."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return False
    return bool(jsession.sessionState().dataSourceManager().dataSourceExists(KafkaDataSource.name()))


# In local mode the executor is the driver's JVM: its "Exception in task" ERROR prints the trace that the
# scheduler's "Lost task" warning prints again, before the job's exception carries it a third time.
_EXECUTOR_LOGGER = "org.apache.spark.executor.Executor"


def _quiet_local_task_errors(spark: Any) -> None:
    """In local mode, leave a failed task's trace to the scheduler's warning and the job's exception: the
    executor's own copy of it goes. Not when the user's log4j configuration names the executor's logger, nor
    on a cluster, where the executor's log is the only copy on that machine."""
    context = getattr(spark, "sparkContext", None) if getattr(spark, "_jsparkSession", None) is not None else None
    if context is None or not str(context.master).startswith("local"):
        return
    jvm = context._jvm
    log4j = jvm.org.apache.logging.log4j
    configuration = log4j.LogManager.getContext(False).getConfiguration()
    if configuration.getLoggerConfig(_EXECUTOR_LOGGER).getName() == _EXECUTOR_LOGGER:
        return  # the user set this logger's level: theirs to keep
    log4j.core.config.Configurator.setLevel(_EXECUTOR_LOGGER, log4j.Level.FATAL)


def _condition(e: Exception) -> str | None:
    """A PySpark error's condition ("DATA_SOURCE_ALREADY_EXISTS"); None for other exceptions."""
    get = getattr(e, "getCondition", None) or getattr(e, "getErrorClass", None)
    return get() if callable(get) else None


def _worker_has_kafkajet(_: object) -> bool:
    import importlib.util

    return importlib.util.find_spec("kafkajet") is not None
