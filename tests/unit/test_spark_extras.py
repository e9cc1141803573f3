"""`import kafkajet.spark` where PySpark is missing or too old says what to install, not a bare import error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("blocked", ["pyspark", "pyspark.sql.datasource"])  # absent; older than the API
def test_import_without_pyspark_names_the_extra(blocked: str) -> None:
    # None in sys.modules makes the import fail as a missing module does (ModuleNotFoundError naming it).
    code = f"import sys; sys.modules[{blocked!r}] = None; import kafkajet.spark"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: kafkajet.spark needs PySpark 4.2 or later"), r.stderr
    assert "pip install 'kafkajet[spark]'" in last, r.stderr


@pytest.mark.parametrize(("fmt", "module", "extra"), [("avro", "fastavro", "avro"),
                                                       ("protobuf", "google.protobuf", "protobuf"),
                                                       ("json-schema", "jsonschema", "jsonschema")])
def test_a_registered_format_without_its_extra_fails_at_planning_naming_it(
        monkeypatch: pytest.MonkeyPatch, fmt: str, module: str, extra: str) -> None:
    # Planned on the driver: without this check, every task failed deep inside Spark with a bare import error.
    from kafkajet.errors import ConfigError
    from kafkajet.spark.registered_columns import sink_columns, source_columns

    monkeypatch.setitem(sys.modules, module, None)  # imported as a missing module is
    options = {"valueFormat": fmt, "schema.registry.url": "http://127.0.0.1:9"}  # never asked: it fails first
    with pytest.raises(ConfigError, match=rf"needs {module}: pip install 'kafkajet\[{extra}\]'$"):
        sink_columns(options, "t", {"value": None})
    with pytest.raises(ConfigError, match=rf"needs {module}: pip install 'kafkajet\[{extra}\]'$"):
        source_columns(options, ("t",))


def test_to_avro_without_fastavro_fails_on_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkajet.errors import ConfigError
    from kafkajet.spark import to_avro

    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(ConfigError, match=r"to_avro needs fastavro: pip install 'kafkajet\[avro\]'"):
        to_avro("value", "t-value", schema_registry_url="http://127.0.0.1:9")


def test_the_demo_without_fastavro_says_which_extra_in_one_line() -> None:
    # Checked before a broker, a registry or Spark starts: nothing else runs, so this takes a second.
    code = ("import sys; sys.modules['fastavro'] = None; from kafkajet.cli.main import main; "
            "sys.exit(main(['demo']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [
        "python -m kafkajet demo: error: the demo needs fastavro, for the registered Avro values (kafkajet[avro]): "
        "pip install 'kafkajet[avro]'"]
    assert r.stdout == ""


def test_the_demo_on_a_base_install_names_every_missing_extra_at_once(tmp_path: Path) -> None:
    # Once told one at a time: install [spark], run again to hear of [avro], again to hear of [broker].
    code = ("import sys; sys.modules['pyspark'] = sys.modules['fastavro'] = None; "
            "from kafkajet.cli.main import main; sys.exit(main(['demo']))")
    env = {**os.environ, "KAFKAJET_TANSU_BIN": str(tmp_path / "no-tansu-here")}  # the broker extra missing too
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "(kafkajet[spark])" in line and "(kafkajet[avro])" in line and "(kafkajet[broker])" in line, line
    assert line.endswith("pip install 'kafkajet[spark,avro,broker]'"), line
    # With a cluster of one's own, the embedded broker is not needed and not asked for.
    r = subprocess.run([sys.executable, "-c", code.replace("['demo']", "['demo', '--bootstrap-server', 'h:9092']")],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and r.stderr.strip().endswith("pip install 'kafkajet[spark,avro]'"), r.stderr


def _demo_with(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkajet", "demo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env)


def test_the_demo_without_java_says_spark_needs_java_17_in_one_line(tmp_path: Path) -> None:
    # Checked before a broker or Spark starts; once, 25 lines of traceback ending in [JAVA_GATEWAY_EXITED].
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    r = _demo_with({**env, "PATH": str(tmp_path)})
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [
        "python -m kafkajet demo: error: the demo runs Spark, which needs Java 17: no java found (PATH); install a "
        "JDK or JRE 17 or later (e.g. apt-get install openjdk-17-jre-headless, or https://adoptium.net) and put "
        "its java on PATH or set JAVA_HOME"]


def test_the_demo_with_an_old_java_names_its_version(tmp_path: Path) -> None:
    java = tmp_path / "jdk11" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    java.chmod(0o755)
    r = _demo_with({**os.environ, "JAVA_HOME": str(tmp_path / "jdk11")})
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert f"needs Java 17: {java} (JAVA_HOME={tmp_path / 'jdk11'}) is Java 11; install" in r.stderr


def test_send_arrow_without_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkajet import Producer

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # imported as a missing module is
    # Nothing is sent: the rows are read before any broker is asked.
    with Producer(bootstrap_servers="127.0.0.1:9") as p, pytest.raises(
            ModuleNotFoundError, match=r"^send_arrow\(\) needs pyarrow: pip install 'kafkajet\[spark\]'"):
        p.send_arrow("t", {"value": [b"v"]})
