"""librdkafka's mock cluster, driven through its C API with ctypes: a second, independent Kafka for tests.

The confluent-kafka wheel bundles librdkafka, which exports the mock cluster API of `rdkafka_mock.h`
(fault injection included). confluent-kafka's Python API starts a mock cluster when a client has
`test.mock.num.brokers`, but offers no way to drive it; this module creates its own rd_kafka_t with that
setting, takes the cluster with rd_kafka_handle_mock_cluster and exposes the calls the tests need. The
signatures below are copied from src/rdkafka_mock.h and src/rdkafka.h; a wrong argtype would corrupt the call
silently, so every function used is declared, and nothing is called through an undeclared prototype.

The cluster lives as long as the rd_kafka_t that owns it: leaving the context manager calls rd_kafka_destroy.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from types import TracebackType
from typing import Any

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_ERRSTR_SIZE = 512

_rk_p = ctypes.c_void_p  # rd_kafka_t *
_conf_p = ctypes.c_void_p  # rd_kafka_conf_t *
_mcluster_p = ctypes.c_void_p  # rd_kafka_mock_cluster_t *
_mreq_p = ctypes.c_void_p  # rd_kafka_mock_request_t *
_err_t = ctypes.c_int  # rd_kafka_resp_err_t, a C enum


class RdkafkaMockError(RuntimeError):
    """A mock API call failed; the message carries librdkafka's error name."""


def library_path() -> str:
    """The librdkafka shared object inside the installed confluent-kafka wheel."""
    import confluent_kafka

    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    candidates = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    if not candidates:
        raise RdkafkaMockError(f"no librdkafka*.so* in {site}/confluent_kafka.libs: is confluent-kafka a wheel "
                               "build with its bundled librdkafka? (pip install confluent-kafka)")
    return candidates[0]


def _declare(lib: ctypes.CDLL, name: str, restype: Any, *argtypes: Any) -> None:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


@cache
def load() -> ctypes.CDLL:
    """The library with every function this module calls declared exactly (loaded once per process)."""
    lib = ctypes.CDLL(library_path())
    c_char_p, c_int, c_size_t = ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
    i16, i32, i64 = ctypes.c_int16, ctypes.c_int32, ctypes.c_int64
    # rdkafka.h
    _declare(lib, "rd_kafka_conf_new", _conf_p)
    _declare(lib, "rd_kafka_conf_destroy", None, _conf_p)
    _declare(lib, "rd_kafka_conf_set", c_int, _conf_p, c_char_p, c_char_p, c_char_p, c_size_t)
    _declare(lib, "rd_kafka_new", _rk_p, c_int, _conf_p, c_char_p, c_size_t)
    _declare(lib, "rd_kafka_destroy", None, _rk_p)
    _declare(lib, "rd_kafka_err2name", c_char_p, _err_t)
    # rdkafka_mock.h
    _declare(lib, "rd_kafka_handle_mock_cluster", _mcluster_p, _rk_p)
    _declare(lib, "rd_kafka_mock_cluster_bootstraps", c_char_p, _mcluster_p)
    _declare(lib, "rd_kafka_mock_topic_create", _err_t, _mcluster_p, c_char_p, c_int, c_int)
    _declare(lib, "rd_kafka_mock_topic_set_error", None, _mcluster_p, c_char_p, _err_t)
    _declare(lib, "rd_kafka_mock_partition_set_leader", _err_t, _mcluster_p, c_char_p, i32, i32)
    _declare(lib, "rd_kafka_mock_push_request_errors_array", None, _mcluster_p, i16, c_size_t,
             ctypes.POINTER(_err_t))
    # Variadic (cnt pairs of rd_kafka_resp_err_t err, int rtt_ms follow): only the fixed arguments are
    # declared; the pairs are passed as explicit c_int so the default promotions are exactly C's.
    _declare(lib, "rd_kafka_mock_broker_push_request_error_rtts", _err_t, _mcluster_p, i32, i16, c_size_t)
    _declare(lib, "rd_kafka_mock_broker_error_stack_cnt", _err_t, _mcluster_p, i32, i16,
             ctypes.POINTER(c_size_t))
    _declare(lib, "rd_kafka_mock_clear_request_errors", None, _mcluster_p, i16)
    _declare(lib, "rd_kafka_mock_broker_set_down", _err_t, _mcluster_p, i32)
    _declare(lib, "rd_kafka_mock_broker_set_up", _err_t, _mcluster_p, i32)
    _declare(lib, "rd_kafka_mock_broker_set_rtt", _err_t, _mcluster_p, i32, c_int)
    _declare(lib, "rd_kafka_mock_set_apiversion", _err_t, _mcluster_p, i16, i16, i16)
    _declare(lib, "rd_kafka_mock_start_request_tracking", None, _mcluster_p)
    _declare(lib, "rd_kafka_mock_stop_request_tracking", None, _mcluster_p)
    _declare(lib, "rd_kafka_mock_clear_requests", None, _mcluster_p)
    _declare(lib, "rd_kafka_mock_get_requests", ctypes.POINTER(_mreq_p), _mcluster_p, ctypes.POINTER(c_size_t))
    _declare(lib, "rd_kafka_mock_request_destroy_array", None, ctypes.POINTER(_mreq_p), c_size_t)
    _declare(lib, "rd_kafka_mock_request_id", i32, _mreq_p)
    _declare(lib, "rd_kafka_mock_request_api_key", i16, _mreq_p)
    _declare(lib, "rd_kafka_mock_request_timestamp", i64, _mreq_p)
    return lib


@dataclass(frozen=True)
class MockRequest:
    """One request the mock received while tracking was on."""

    broker_id: int
    api_key: int
    timestamp_us: int


class RdkafkaMockCluster:
    """`with RdkafkaMockCluster(brokers=3) as mock:` a librdkafka mock cluster; `mock.bootstraps` to connect.

    Broker ids are 1..brokers. Calls are safe from any thread (librdkafka serialises them onto the cluster's
    own thread), so a test may move leaders from a helper thread while a producer runs.
    """

    def __init__(self, brokers: int = 3, *, config: dict[str, str] | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        self.brokers = brokers
        self._config = {"test.mock.num.brokers": str(brokers), "log_level": "3", **(config or {})}
        self._lib = load()
        self._rk: int | None = None
        self._mcluster: int | None = None
        self._lock = threading.Lock()
        self.bootstraps = ""

    # --- lifetime -----------------------------------------------------------------------------------------

    def start(self) -> RdkafkaMockCluster:
        lib = self._lib
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = lib.rd_kafka_conf_new()
        try:
            for key, value in self._config.items():
                if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, _ERRSTR_SIZE) != \
                        _RD_KAFKA_CONF_OK:
                    raise RdkafkaMockError(f"rd_kafka_conf_set({key}={value}): {errstr.value.decode()}")
        except BaseException:
            lib.rd_kafka_conf_destroy(conf)
            raise
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)  # takes conf on success
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            raise RdkafkaMockError(f"rd_kafka_new: {errstr.value.decode()}")
        self._rk = rk
        mcluster = lib.rd_kafka_handle_mock_cluster(rk)
        if not mcluster:
            self.close()
            raise RdkafkaMockError("rd_kafka_handle_mock_cluster returned NULL: test.mock.num.brokers not honoured")
        self._mcluster = mcluster
        self.bootstraps = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        return self

    def close(self) -> None:
        with self._lock:
            rk, self._rk, self._mcluster = self._rk, None, None
        if rk:
            self._lib.rd_kafka_destroy(rk)  # also destroys the mock cluster it owns

    def __enter__(self) -> RdkafkaMockCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    # --- topology -----------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication: int = 1) -> None:
        self._check("rd_kafka_mock_topic_create", self._lib.rd_kafka_mock_topic_create(
            self._cluster(), name.encode(), partitions, replication))

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader; -1 leaves the partition leaderless."""
        self._check("rd_kafka_mock_partition_set_leader", self._lib.rd_kafka_mock_partition_set_leader(
            self._cluster(), topic.encode(), partition, broker_id))

    def topic_set_error(self, topic: str, error: int) -> None:
        """Metadata answers `error` for this topic until it is set back to 0."""
        self._lib.rd_kafka_mock_topic_set_error(self._cluster(), topic.encode(), error)

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """The range the brokers advertise (and accept) for `api_key`; -1, -1 disables the API."""
        self._check("rd_kafka_mock_set_apiversion", self._lib.rd_kafka_mock_set_apiversion(
            self._cluster(), api_key, min_version, max_version))

    # --- brokers ------------------------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Close the broker's client connections and refuse new ones until broker_up."""
        self._check("rd_kafka_mock_broker_set_down",
                    self._lib.rd_kafka_mock_broker_set_down(self._cluster(), broker_id))

    def broker_up(self, broker_id: int) -> None:
        self._check("rd_kafka_mock_broker_set_up", self._lib.rd_kafka_mock_broker_set_up(self._cluster(), broker_id))

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        self._check("rd_kafka_mock_broker_set_rtt",
                    self._lib.rd_kafka_mock_broker_set_rtt(self._cluster(), broker_id, rtt_ms))

    # --- injected errors ----------------------------------------------------------------------------------

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next len(errors) requests of `api_key`, to any broker, are answered with these codes in order."""
        arr = (_err_t * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster(), api_key, len(errors), arr)

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int,
                                       errors_and_rtts: Iterable[tuple[int, int]]) -> None:
        """The next requests of `api_key` to one broker: each answered with (error, after rtt_ms)."""
        pairs = list(errors_and_rtts)
        varargs: list[ctypes.c_int] = []
        for error, rtt_ms in pairs:
            varargs += [ctypes.c_int(error), ctypes.c_int(rtt_ms)]
        self._check("rd_kafka_mock_broker_push_request_error_rtts",
                    self._lib.rd_kafka_mock_broker_push_request_error_rtts(
                        self._cluster(), broker_id, api_key, len(pairs), *varargs))

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many errors pushed with broker_push_request_error_rtts are still unused."""
        cnt = ctypes.c_size_t(0)
        self._check("rd_kafka_mock_broker_error_stack_cnt", self._lib.rd_kafka_mock_broker_error_stack_cnt(
            self._cluster(), broker_id, api_key, ctypes.byref(cnt)))
        return cnt.value

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._cluster(), api_key)

    # --- request tracking ---------------------------------------------------------------------------------

    def start_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_start_request_tracking(self._cluster())

    def stop_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_stop_request_tracking(self._cluster())

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._cluster())

    def requests(self) -> list[MockRequest]:
        """The requests received since tracking started (or was cleared), oldest first."""
        lib = self._lib
        cnt = ctypes.c_size_t(0)
        arr = lib.rd_kafka_mock_get_requests(self._cluster(), ctypes.byref(cnt))
        if not arr:
            return []
        try:
            return [MockRequest(lib.rd_kafka_mock_request_id(arr[i]), lib.rd_kafka_mock_request_api_key(arr[i]),
                                lib.rd_kafka_mock_request_timestamp(arr[i])) for i in range(cnt.value)]
        finally:
            lib.rd_kafka_mock_request_destroy_array(arr, cnt.value)

    # --- internals ----------------------------------------------------------------------------------------

    def _cluster(self) -> int:
        if self._mcluster is None:
            raise RdkafkaMockError("the mock cluster is not running (use it inside `with RdkafkaMockCluster():`)")
        return self._mcluster

    def _check(self, call: str, err: int) -> None:
        if err:
            raise RdkafkaMockError(f"{call}: {self._lib.rd_kafka_err2name(err).decode()} ({err})")
