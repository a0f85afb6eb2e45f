"""librdkafka's built-in mock cluster as a second lab broker, driven through its C API.

The mock starts in milliseconds and speaks KIP-848 (`group.protocol=consumer`) as well as the
classic protocol, so fast tests of client behaviour and the enforcement benchmark's second
opinion use it next to Apache Kafka. It lives inside this process: its brokers listen on
127.0.0.1 and other processes connect to `bootstrap` like to any broker, but it dies with the
process.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from types import TracebackType

import confluent_kafka

_RD_KAFKA_PRODUCER = 0


def _library() -> ctypes.CDLL:
    # The wheel bundles librdkafka next to the package; loading the same file again returns the
    # handle confluent_kafka already uses, so the mock is the very library the clients run.
    base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = sorted(glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*")))
    if not found:
        raise RuntimeError("librdkafka's shared library was not found next to confluent_kafka")
    lib = ctypes.CDLL(found[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_set_group_consumer_session_timeout_ms.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_set_controller_id.restype = ctypes.c_int
    lib.rd_kafka_mock_set_controller_id.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


class MockCluster:
    """One mock cluster of `brokers` brokers; a context manager that destroys it on exit."""

    def __init__(self, brokers: int = 1, *, initial_rebalance_delay_ms: int = 3000) -> None:
        self._lib = _library()
        self._lock = threading.Lock()
        error = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # No bootstrap: this handle exists only to own the mock cluster.
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"0", error, len(error))
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, error, len(error))
        if not self._rk:
            raise RuntimeError(f"librdkafka refused a handle: {error.value.decode()}")
        self._cluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._cluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise RuntimeError("librdkafka could not start a mock cluster")
        self.bootstrap: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()
        # The admin client asks for a controller; the mock has none until told.
        self._lib.rd_kafka_mock_set_controller_id(self._cluster, 1)
        self.set_initial_rebalance_delay(initial_rebalance_delay_ms)

    def __repr__(self) -> str:
        state = "running" if self._cluster else "destroyed"
        return f"MockCluster({self.bootstrap!r}, {state})"

    def _handle(self) -> int:
        if not self._cluster:
            raise RuntimeError("the mock cluster is destroyed")
        return int(self._cluster)

    def create_topic(self, name: str, partitions: int) -> None:
        """The mock has no CreateTopics API: topics come from here (or auto-creation)."""
        with self._lock:
            code = self._lib.rd_kafka_mock_topic_create(
                self._handle(), name.encode(), partitions, 1
            )
        if code != 0:
            raise RuntimeError(f"the mock cluster refused topic {name!r}: error {code}")

    def set_initial_rebalance_delay(self, delay_ms: int) -> None:
        with self._lock:
            self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._handle(), delay_ms)

    def set_consumer_group_timeouts(self, session_ms: int, heartbeat_ms: int) -> None:
        """KIP-848 groups: the broker-side session and heartbeat (group configs in Kafka 4)."""
        with self._lock:
            self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(
                self._handle(), session_ms
            )
            self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(
                self._handle(), heartbeat_ms
            )

    def close(self) -> None:
        with self._lock:
            if self._cluster:
                self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
                self._cluster = None
            if self._rk:
                self._lib.rd_kafka_destroy(self._rk)
                self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
