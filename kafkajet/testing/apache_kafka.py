"""Apache Kafka itself, for tests: one or three KRaft nodes (broker and controller in one JVM each) in child
processes on free loopback ports, with the listeners and security a test asks for, and nodes that can be
killed, stopped and restarted mid-test.

The jars come from Maven Central: in a clone of kafkajet, `make kafka` copies them into
`.cache/apache-kafka-<version>` (the version is KAFKA_VERSION here, and jvm/pom.xml names the same); an installed kafkajet (pip) finds
no clone, so point KAFKAJET_KAFKA_LIBS at that folder, or at the `libs/` folder of an Apache Kafka download. Java 17 or later runs them (JAVA_HOME, else `java` on the PATH).

```python
with ApacheKafka(brokers=3) as kafka:
    producer = Producer(bootstrap_servers=kafka.bootstrap_servers)
    kafka.kill(kafka.leader_of("events", 0))
```
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kafkajet.testing.embedded_broker import BrokerStartError, _answers_api_versions
from kafkajet.testing.ports import START_ATTEMPTS, free_port

log = logging.getLogger("kafkajet.testing.apache_kafka")

LIBS_ENV = "KAFKAJET_KAFKA_LIBS"
_REPO = Path(__file__).resolve().parents[2]
_POM = _REPO / "jvm" / "pom.xml"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# Settings that make a test cluster quick to use and that no test should have to repeat; a caller's
# broker_config wins over each. Internal topics follow the cluster's size: with three nodes they are
# replicated three ways with a minimum ISR of 2, so losing one node never takes a coordinator's state.
_BASE_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.flush.interval.messages": "9223372036854775807",
    "auto.create.topics.enable": "true",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka_request.name = kafka.request.logger
logger.kafka_request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""


# Tools and referee programs print their answers on stdout: their log goes to stderr, warnings only.
_LOG4J2_TOOLS = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


# The C1 compiler only: a JVM that lives seconds or minutes on few cores never repays C2's compile time.
C1_ONLY = "-XX:TieredStopAtLevel=1"

# A short-lived JVM (a tool, a referee program): small heap, quick start rather than peak speed.
TOOL_JVM_OPTIONS = ("-Xmx256m", C1_ONLY, "-XX:+UseSerialGC")


# What a node's log says when another process holds a port it was given.
_PORT_TAKEN = "Address already in use"


class ApacheKafkaUnavailable(BrokerStartError):
    """Apache Kafka's jars or a Java runtime are missing: the message says what to install or run."""


# The Apache Kafka release the suite runs and the protocol layouts were taken from. An installed package has no
# clone to read it from; jvm/pom.xml, which `make kafka` fetches with, names the same (a unit test holds them equal).
KAFKA_VERSION = "4.4.0"


def kafka_version() -> str:
    """The Apache Kafka version ApacheKafka runs: the package's KAFKA_VERSION."""
    return KAFKA_VERSION


def default_libs() -> Path:
    """Where `make kafka` puts the jars in a clone of kafkajet."""
    return _REPO / ".cache" / f"apache-kafka-{kafka_version()}"


def find_kafka_libs(libs: str | Path | None = None) -> Path:
    """The folder of Apache Kafka's jars: the argument, else KAFKAJET_KAFKA_LIBS, else the clone's cache."""
    chosen = libs or os.environ.get(LIBS_ENV)
    path = Path(chosen) if chosen else default_libs()
    if path.is_dir() and any(path.glob("kafka_2.13-*.jar")):
        return path
    version = kafka_version()
    folders = (f"the folder `make kafka` fills in a clone of kafkajet (<clone>/.cache/apache-kafka-{version}, "
               f"Apache Kafka {version} from Maven Central) or the libs/ folder of an Apache Kafka download")
    if chosen:
        raise ApacheKafkaUnavailable(f"Apache Kafka's jars are not in {path} "
                                     f"({'given' if libs else LIBS_ENV}): name {folders}")
    if _POM.is_file():  # a clone: its own cache is looked in without the variable
        raise ApacheKafkaUnavailable(
            f"Apache Kafka's jars are not in {path}: run `make kafka` in the kafkajet clone (Maven fetches "
            f"Apache Kafka {version} from Maven Central into it), or set {LIBS_ENV} to the libs/ folder of an "
            "Apache Kafka download")
    # An installed kafkajet (pip): the folder beside the package is site-packages, where `make kafka` never
    # writes, so naming it, or `make kafka` alone, would send the user to the wrong place.
    raise ApacheKafkaUnavailable(f"Apache Kafka's jars: {LIBS_ENV} is not set; set it to {folders}")


def find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found:
        return found
    raise ApacheKafkaUnavailable("Apache Kafka needs Java 17 or later: install a JDK (Debian: openjdk-17-jdk-headless) "
                                 "or set JAVA_HOME")


def compiled_program(java: str, classpath: str, source: Path) -> Path:
    """The folder of a single-file Java program's classes, compiled once per source text and classpath.

    Java's source launcher would compile it in every run: about a second of a core per referee call, on a machine
    the suite keeps short of cores. And when the program's exception has a shorter stack than the launcher's own
    frames, the launcher's trimming of them replaces it with "IllegalArgumentException: 0 > -7" (seen under load).
    """
    digest = hashlib.sha256(source.read_bytes() + b"\0" + classpath.encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"kafkajet-javac-{source.stem}-{digest}"
    if (target / f"{source.stem}.class").is_file():
        return target
    javac = Path(java).resolve().with_name("javac")
    if not javac.is_file():
        raise ApacheKafkaUnavailable(f"compiling {source.name} needs javac beside {java}: install a JDK (Debian: "
                                     "openjdk-17-jdk-headless), not only a runtime")
    # Compiled aside and renamed into place, so that a process reading the folder never sees half of it.
    scratch = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    try:
        done = subprocess.run([str(javac), "-nowarn", "-cp", classpath, "-d", str(scratch), str(source)],
                              capture_output=True, timeout=300, check=False)
        if done.returncode != 0:
            raise BrokerStartError(f"javac could not compile {source}:\n{done.stderr.decode(errors='replace')}")
        with contextlib.suppress(OSError):  # another process put its copy there first: the same classes
            scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _die_with_parent() -> None:
    """Run in the child before exec: a JVM must not outlive the test run that started it (Linux only).

    The signal follows the thread that started the child, so start and restart nodes from one long-lived
    thread (a test's own thread is one)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def random_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid()`` makes one: URL-safe base64 of 16 random bytes.

    Like Kafka, it draws again when the text would start with ``-``: the storage tool's argument parser reads
    such an id as an option and refuses to format (one id in 64 did, failing a whole test session).
    """
    while True:
        text = base64.urlsafe_b64encode(random_bytes()).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class TlsFiles:
    """The broker's TLS identity, PEM files: its certificate chain, its private key (PKCS#8, unencrypted), and
    the CA that signs client certificates. client_auth "required" asks every SSL/SASL_SSL client for one."""

    certificate: Path
    key: Path
    ca: Path | None = None
    client_auth: str = "none"


@dataclass(frozen=True)
class OAuthValidation:
    """The broker validates OAUTHBEARER tokens itself: keys from the identity provider's JWKS, and the
    audience and issuer it expects."""

    jwks_url: str
    audience: str
    issuer: str


@dataclass
class _Node:
    node_id: int
    ports: dict[str, int]
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    log_file: object | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"


@dataclass
class _Settings:
    listeners: tuple[str, ...]
    mechanisms: tuple[str, ...]
    users: dict[str, str]
    tls: TlsFiles | None
    oauth: OAuthValidation | None
    authorizer: bool
    broker_config: dict[str, str] = field(default_factory=dict)


class ApacheKafka:
    """Apache Kafka in child JVMs; stopped on exit from the `with` block, also when the body raised.

    - brokers: 1, or 3 (three voters; internal topics replicated three ways, minimum ISR 2).
    - listeners: the client listeners, by security protocol; bootstrap_servers is the first one's address,
      bootstrap(protocol) any other's. Brokers talk to each other and to the controllers in plain text on
      listeners of their own.
    - sasl_mechanisms / users: the mechanisms the SASL listeners accept, and the users (name: password) that
      PLAIN and SCRAM know (SCRAM users are made when the storage is formatted). oauth: token validation.
    - tls: the broker's certificate for SSL and SASL_SSL listeners.
    - authorizer: the StandardAuthorizer, with the plain-text (anonymous) and `admin` principals as super users;
      add_acl() grants, deny_acl() refuses.
    - broker_config: any broker setting, passed through, the same on every node.
    - racks: each node's broker.rack (node 1's first), as Metadata reports it to clients.
    - classpath: more class path entries for the brokers (and the tools run_tool starts), after the release's
      jars: a plugin that broker_config names, such as a metric reporter.
    - jvm_options: more JVM options for every node, after kafkajet's own (a later one wins), e.g. (C1_ONLY,)
      for clusters that live minutes on a machine short of CPU; the default is tuned for peak speed.
    - features: feature levels the storage is formatted with (kafka-storage format --feature name=level), e.g.
      {"transaction.version": 1} for a cluster that does not finalize transaction version 2 (KIP-890); the
      others keep the release's defaults (Kafka 4.4 finalizes transaction.version 2).

    Nodes are named by their node.id (1, 2, 3), as Metadata reports them.
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        listeners: Sequence[str] = ("PLAINTEXT",),
        sasl_mechanisms: Sequence[str] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        users: Mapping[str, str] | None = None,
        tls: TlsFiles | None = None,
        oauth: OAuthValidation | None = None,
        authorizer: bool = False,
        broker_config: Mapping[str, object] | None = None,
        racks: Sequence[str] | None = None,
        features: Mapping[str, int] | None = None,
        classpath: Sequence[str | Path] = (),
        libs: str | Path | None = None,
        heap: str = "768m",
        jvm_options: Sequence[str] = (),
        start_timeout_s: float = 90.0,
        keep_logs: bool = False,
    ) -> None:
        if brokers not in (1, 3):
            raise ValueError(f"brokers={brokers}: ApacheKafka runs 1 node or 3 (a quorum that survives one loss)")
        protocols = tuple(p.upper() for p in listeners)
        for p in protocols:
            if p not in SECURITY_PROTOCOLS:
                raise ValueError(f"listener {p!r}: use one of {', '.join(SECURITY_PROTOCOLS)}")
        if len(set(protocols)) != len(protocols) or not protocols:
            raise ValueError(f"listeners={list(listeners)}: name each security protocol once, at least one")
        mechanisms = tuple(m.upper() for m in sasl_mechanisms)
        for m in mechanisms:
            if m not in SASL_MECHANISMS:
                raise ValueError(f"SASL mechanism {m!r}: ApacheKafka serves {', '.join(SASL_MECHANISMS)}")
        if "OAUTHBEARER" in mechanisms and oauth is None:
            raise ValueError("OAUTHBEARER needs oauth=OAuthValidation(jwks_url, audience, issuer)")
        if any(p.endswith("SSL") for p in protocols) and tls is None:
            raise ValueError("an SSL or SASL_SSL listener needs tls=TlsFiles(certificate, key, ca)")
        if racks is not None and len(racks) != brokers:
            raise ValueError(f"racks={list(racks)}: give one rack per node, {brokers} in all")
        self.brokers = brokers
        self._racks = list(racks) if racks is not None else None
        self._settings = _Settings(
            listeners=protocols, mechanisms=mechanisms,
            users=dict(users if users is not None else {"admin": "admin-secret", "alice": "alice-secret"}),
            tls=tls, oauth=oauth, authorizer=authorizer,
            broker_config={k: _setting(v) for k, v in (broker_config or {}).items()},
        )
        for name, level in (features or {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9._]*", name) or isinstance(level, bool) or not isinstance(level, int):
                raise ValueError(f"feature {name!r}={level!r}: give a feature name and an integer level, e.g. "
                                 "features={'transaction.version': 1}")
        self.features: dict[str, int] = dict(features or {})
        self._libs_arg = libs
        self._extra_classpath = [str(p) for p in classpath]
        self._heap = heap
        self._jvm_options = list(jvm_options)
        self.start_timeout_s = start_timeout_s
        self.keep_logs = keep_logs
        self.cluster_id = random_cluster_id()
        self._nodes: dict[int, _Node] = {}
        self._workdir: Path | None = None
        self._lock = threading.RLock()

    # --- addresses ---------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap(self._settings.listeners[0])

    def bootstrap(self, protocol: str) -> str:
        """The addresses of one client listener on every node, e.g. bootstrap("SASL_SSL")."""
        name = protocol.upper()
        if name not in self._settings.listeners:
            raise ValueError(f"no {name} listener: this cluster has {', '.join(self._settings.listeners)}")
        return ",".join(f"127.0.0.1:{n.ports[name]}" for n in self._nodes.values())

    @property
    def port(self) -> int:
        """The first client listener's port on the first node."""
        return self._node(1).ports[self._settings.listeners[0]]

    @property
    def node_id(self) -> int:
        """The node.id of a one-node cluster (as the embedded broker has one)."""
        if self.brokers != 1:
            raise ValueError(f"a {self.brokers}-node cluster has node ids {self.node_ids}")
        return 1

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    def address(self, node_id: int, protocol: str | None = None) -> str:
        return f"127.0.0.1:{self._node(node_id).ports[(protocol or self._settings.listeners[0]).upper()]}"

    @property
    def internal_bootstrap(self) -> str:
        """A plain-text listener on every node, for tools and checks that must not need the clients' security."""
        return ",".join(f"127.0.0.1:{n.ports['INTERNAL']}" for n in self._nodes.values())

    def running_nodes(self) -> list[int]:
        return [i for i, n in sorted(self._nodes.items()) if n.proc is not None and n.proc.poll() is None]

    # --- life cycle --------------------------------------------------------------------------------

    def start(self) -> ApacheKafka:
        libs = find_kafka_libs(self._libs_arg)
        self._java = find_java()
        self._classpath = os.pathsep.join([str(libs / "*"), *self._extra_classpath])
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_on_free_ports()
            except BaseException as e:
                self._stop_all(kill=True)
                # A port can still be taken between its pick and the JVM's bind (by another server's pick); only
                # that is worth another try, on new ports: any other failure would fail the same way again.
                taken = None
                if isinstance(e, BrokerStartError) and attempt < START_ATTEMPTS:
                    taken = next((n.node_id for n in self._nodes.values()
                                  if n.log_path.exists() and _PORT_TAKEN in n.log_path.read_text(errors="replace")),
                                 None)
                if taken is not None:
                    log.warning("Apache Kafka node %d could not bind its port; starting again on new ports", taken)
                    assert self._workdir is not None
                    shutil.rmtree(self._workdir, ignore_errors=True)
                    self._nodes.clear()
                    continue
                log.error("Apache Kafka did not start; its logs are kept in %s", self._workdir)
                self.keep_logs = True
                raise
            break
        log.info("Apache Kafka %s ready at %s (%d node%s)", kafka_version(), self.bootstrap_servers, self.brokers,
                 "" if self.brokers == 1 else "s")
        return self

    def _start_on_free_ports(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="kafkajet-apache-kafka-"))
        (self._workdir / "log4j2.properties").write_text(_LOG4J2)
        (self._workdir / "log4j2-tools.properties").write_text(_LOG4J2_TOOLS)
        for node_id in range(1, self.brokers + 1):
            ports = {"CONTROLLER": free_port(), "INTERNAL": free_port()}
            ports.update({p: free_port() for p in self._settings.listeners})
            directory = self._workdir / f"node-{node_id}"
            directory.mkdir()
            self._nodes[node_id] = _Node(node_id, ports, directory)
        for node in self._nodes.values():
            (node.directory / "server.properties").write_text(_properties(self._node_settings(node)))
        self._format()
        for node in self._nodes.values():
            self._launch(node)
        self._await(lambda ids: set(ids) == set(self._nodes), "every node to join the cluster", self.start_timeout_s)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop every node (controlled shutdown, then SIGKILL after timeout_s) and remove the data."""
        self._stop_all(kill=False, timeout_s=timeout_s)
        if self._workdir is not None and not self.keep_logs:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def kill(self, node_id: int, timeout_s: float = 60.0) -> None:
        """SIGKILL one node, and wait until the cluster no longer lists it (its broker session expired)."""
        node = self._node(node_id)
        if node.proc is not None:
            node.proc.kill()
            node.proc.wait(timeout=timeout_s)
        self._close_log(node)
        self._await(lambda ids: node_id not in ids, f"the cluster to drop node {node_id}", timeout_s)

    def stop_node(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Stop one node with a controlled shutdown (its leaderships move first); wait until it has exited."""
        node = self._node(node_id)
        if node.proc is not None:
            node.proc.terminate()
            try:
                node.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired as e:
                node.proc.kill()
                raise BrokerStartError(f"node {node_id} did not finish a controlled shutdown in {timeout_s} s:\n"
                                       f"{self.log_tail(node_id)}") from e
        self._close_log(node)
        self._await(lambda ids: node_id not in ids, f"the cluster to drop node {node_id}", timeout_s)

    def restart(self, node_id: int, timeout_s: float | None = None) -> None:
        """Start a stopped or killed node on its old ports and data; wait until the cluster lists it again."""
        node = self._node(node_id)
        if node.proc is not None and node.proc.poll() is None:
            raise ValueError(f"node {node_id} is running: stop_node() or kill() it first")
        self._launch(node)
        self._await(lambda ids: node_id in ids, f"node {node_id} to rejoin the cluster",
                    timeout_s or self.start_timeout_s)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ApacheKafka({kafka_version()}, nodes {self.running_nodes()} of {self.node_ids})"

    # --- looking at the cluster --------------------------------------------------------------------

    def live_brokers(self, timeout_s: float = 10.0) -> list[int]:
        """The brokers the cluster reports as alive, asked of any running node."""
        from kafkajet.admin import Admin

        errors: list[str] = []
        for node_id in self.running_nodes():
            try:
                with Admin(bootstrap_servers=self.address(node_id, "INTERNAL"),
                           request_timeout_ms=int(timeout_s * 1000)) as admin:
                    return sorted(b.node_id for b in admin.describe_cluster(timeout_s=timeout_s).brokers)
            except Exception as e:  # noqa: BLE001 - the next node may answer
                errors.append(f"node {node_id}: {e}")
        raise BrokerStartError("no running node answered: " + "; ".join(errors or ["none is running"]))

    def leader_of(self, topic: str, partition: int, timeout_s: float = 30.0) -> int:
        """The node that leads a partition now."""
        from kafkajet.admin import Admin

        with Admin(bootstrap_servers=self.internal_bootstrap_of_running()) as admin:
            description = admin.describe_topics(topic, timeout_s=timeout_s)[topic]
        for p in description.partitions:
            if p.partition == partition:
                return int(p.leader)
        raise ValueError(f"{topic} has no partition {partition}")

    def internal_bootstrap_of_running(self) -> str:
        return ",".join(self.address(i, "INTERNAL") for i in self.running_nodes())

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        path = self._node(node_id).log_path
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def log_path(self, node_id: int) -> Path:
        return self._node(node_id).log_path

    def data_dir(self, node_id: int) -> Path:
        """A node's log.dirs: one folder per partition replica (`<topic>-<partition>`) holding its segments,
        for Kafka's DumpLogSegments or kafkajet's own batch reader."""
        return self._node(node_id).directory / "data"

    def finalized_features(self, node_id: int | None = None, timeout_s: float = 10.0) -> dict[str, int]:
        """The feature levels a node's ApiVersions answer finalizes (name -> max_version_level)."""
        from kafkajet.network.blocking import BlockingConnection

        host, _, port = self.address(node_id or self.running_nodes()[0], "INTERNAL").rpartition(":")
        with BlockingConnection(host, int(port), timeout_s=timeout_s) as connection:
            return dict(connection.finalized_features)

    # --- tools -------------------------------------------------------------------------------------

    def run_tool(self, main_class: str, *args: str, timeout_s: float = 120.0,
                 input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run one of Kafka's command line tools (a main class from the jars) against this cluster's jars."""
        cmd = self.java_command(main_class, *args, jvm_options=TOOL_JVM_OPTIONS)
        return subprocess.run(cmd, input=input_bytes, capture_output=True, timeout=timeout_s, check=False)

    def java_command(self, main: str, *args: str, jvm_options: Iterable[str] = (),
                     log_config: str = "log4j2-tools.properties") -> list[str]:
        """The command line that runs a class, or a single-file Java program, with Kafka's jars on its path (its
        log on stderr, warnings only, unless log_config names the brokers' file)."""
        classpath = self._classpath
        if main.endswith(".java"):
            classes = compiled_program(self._java, classpath, Path(main))
            classpath, main = f"{classpath}{os.pathsep}{classes}", Path(main).stem
        return [self._java, *jvm_options, f"-Dlog4j2.configurationFile={self._workdir_path() / log_config}",
                "-cp", classpath, main, *args]

    def add_acl(self, principal: str, *, operation: str, topic: str | None = None,
                transactional_id: str | None = None, group: str | None = None, deny: bool = False) -> None:
        """Grant (or with deny=True refuse) one operation on one resource, through Kafka's AclCommand."""
        resource = (["--topic", topic] if topic is not None else
                    ["--transactional-id", transactional_id] if transactional_id is not None else
                    ["--group", group] if group is not None else ["--cluster"])
        verb = "--deny-principal" if deny else "--allow-principal"
        done = self.run_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server",
                             self.internal_bootstrap_of_running(), "--add", verb, principal, "--operation", operation,
                             *resource, "--force")
        if done.returncode != 0:
            raise BrokerStartError(f"AclCommand failed ({done.returncode}): {done.stderr.decode(errors='replace')}"
                                   f"{done.stdout.decode(errors='replace')}")

    # --- internals ---------------------------------------------------------------------------------

    def _workdir_path(self) -> Path:
        if self._workdir is None:
            raise BrokerStartError("the cluster is not started")
        return self._workdir

    def _node(self, node_id: int) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ValueError(f"no node {node_id}: the nodes are {self.node_ids}") from None

    def _node_settings(self, node: _Node) -> dict[str, str]:
        s = self._settings
        three = self.brokers == 3
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in self._nodes.values())
        names = ["CONTROLLER", "INTERNAL", *s.listeners]
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listeners": ",".join(f"{n}://127.0.0.1:{node.ports[n]}" for n in names),
            "advertised.listeners": ",".join(f"{n}://127.0.0.1:{node.ports[n]}" for n in names[1:]),
            "listener.security.protocol.map": ",".join(
                ["CONTROLLER:PLAINTEXT", "INTERNAL:PLAINTEXT", *(f"{p}:{p}" for p in s.listeners)]),
            "log.dirs": str(self.data_dir(node.node_id)),
            "offsets.topic.replication.factor": "3" if three else "1",
            "transaction.state.log.replication.factor": "3" if three else "1",
            "transaction.state.log.min.isr": "2" if three else "1",
            **_BASE_SETTINGS,
        }
        if any(p.startswith("SASL") for p in s.listeners):
            props["sasl.enabled.mechanisms"] = ",".join(s.mechanisms)
            for listener in (p for p in s.listeners if p.startswith("SASL")):
                prefix = f"listener.name.{listener.lower()}"
                for mechanism in s.mechanisms:
                    props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = _jaas(mechanism, s.users)
                if "OAUTHBEARER" in s.mechanisms:
                    props[f"{prefix}.oauthbearer.sasl.server.callback.handler.class"] = (
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler")
        if s.oauth is not None:
            props.update({
                "sasl.oauthbearer.jwks.endpoint.url": s.oauth.jwks_url,
                "sasl.oauthbearer.expected.audience": s.oauth.audience,
                "sasl.oauthbearer.expected.issuer": s.oauth.issuer,
            })
        if s.tls is not None:
            bundle = node.directory / "keystore.pem"
            bundle.write_text(Path(s.tls.key).read_text() + Path(s.tls.certificate).read_text())
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(bundle),
                          "ssl.client.auth": s.tls.client_auth})
            if s.tls.ca is not None:
                props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(s.tls.ca)})
        if s.authorizer:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = "User:ANONYMOUS;User:admin"
            # Mutual TLS principals are the certificate's CN, as users would configure it.
            props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
        if self._racks is not None:
            props["broker.rack"] = self._racks[node.node_id - 1]
        props.update(s.broker_config)
        return props

    def _format(self) -> None:
        scram = [arg for mechanism in self._settings.mechanisms if mechanism.startswith("SCRAM")
                 for name, password in self._settings.users.items()
                 for arg in ("--add-scram", f"{mechanism}=[name={name},password={password}]")]
        features = [arg for name, level in self.features.items() for arg in ("--feature", f"{name}={level}")]
        procs = []
        for node in self._nodes.values():
            cmd = self.java_command("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c",
                                    str(node.directory / "server.properties"), *scram, *features,
                                    jvm_options=TOOL_JVM_OPTIONS)
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)))
        for node, proc in procs:
            out, _ = proc.communicate(timeout=self.start_timeout_s)
            if proc.returncode != 0:
                raise BrokerStartError(f"formatting node {node.node_id}'s storage failed (exit {proc.returncode}):\n"
                                       f"{out.decode(errors='replace')[-3000:]}")

    def _launch(self, node: _Node) -> None:
        node.starts += 1
        log_file = open(node.log_path, "ab")  # noqa: SIM115 - closed when the node stops
        node.log_file = log_file
        options = [f"-Xmx{self._heap}", "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Xss1m",
                   "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true", *self._jvm_options]
        if self._settings.oauth is not None:
            options.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self._settings.oauth.jwks_url}")
        cmd = self.java_command("kafka.Kafka", str(node.directory / "server.properties"), jvm_options=options,
                                log_config="log4j2.properties")
        # Its own session, as the embedded broker: Ctrl-C in a terminal must not stop the cluster under the
        # tool that started it; stop() ends it, and the parent's death ends it too.
        node.proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)

    def _await(self, condition: Callable[[list[int]], bool], what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        last = "no answer yet"
        while True:
            for node in self._nodes.values():
                if node.proc is not None and node.proc.poll() is not None and node.log_file is not None:
                    code = node.proc.returncode
                    self._close_log(node)
                    raise BrokerStartError(f"node {node.node_id} exited with code {code} while waiting for {what}:\n"
                                           f"{self.log_tail(node.node_id)}\n(logs: {node.log_path})")
            listening = [i for i in self.running_nodes()
                         if _answers_api_versions(self._nodes[i].ports["INTERNAL"], timeout_s=1.0)]
            if listening:
                try:
                    ids = self.live_brokers(timeout_s=min(10.0, max(1.0, deadline - time.monotonic())))
                    if condition(ids):
                        return
                    last = f"the cluster lists nodes {ids}"
                except BrokerStartError as e:
                    last = str(e)
            if time.monotonic() >= deadline:
                tails = "\n".join(f"--- node {i} ({n.log_path}):\n{self.log_tail(i, 15)}" for i, n in self._nodes.items())
                raise BrokerStartError(f"waited {timeout_s} s for {what}; {last}\n{tails}")
            time.sleep(delay)  # the JVMs give no readiness signal to wait on; bounded by the deadline
            delay = min(delay * 2, 0.5)

    def _close_log(self, node: _Node) -> None:
        if node.log_file is not None:
            node.log_file.close()  # type: ignore[attr-defined]
            node.log_file = None

    def _stop_all(self, *, kill: bool, timeout_s: float = 15.0) -> None:
        with self._lock:
            running = [n for n in self._nodes.values() if n.proc is not None and n.proc.poll() is None]
            for node in running:
                if kill:
                    node.proc.kill()  # type: ignore[union-attr]
                else:
                    node.proc.terminate()  # type: ignore[union-attr]
            deadline = time.monotonic() + timeout_s
            for node in running:
                assert node.proc is not None
                try:
                    node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    # The last voters cannot finish a controlled shutdown without a quorum: nothing is lost by
                    # ending them, the data is thrown away.
                    node.proc.kill()
                    node.proc.wait(timeout=30)
            for node in self._nodes.values():
                self._close_log(node)


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _jaas(mechanism: str, users: Mapping[str, str]) -> str:
    if mechanism == "PLAIN":
        entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
        return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"
    if mechanism.startswith("SCRAM"):
        return "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def _properties(props: Mapping[str, str]) -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{key}={escape(value)}\n" for key, value in props.items())
