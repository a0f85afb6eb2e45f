"""Kafka failures in words a user can act on, and what the connection has said about itself.

librdkafka reports "cannot connect" through its error callback (connection refused, DNS, TLS,
SASL) while the request itself only ends with "Failed while waiting for controller: Local: Timed
out". ConnectionWatch keeps the former so the exception can name the real cause.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


class KafkaGatewayError(Exception):
    """Base of the gateway's errors; str() is a complete sentence for users."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# The names are the operator's vocabulary (conditions say KafkaUnreachable, KafkaRequestFailed).
class KafkaUnavailable(KafkaGatewayError):
    """The cluster could not be reached, or refused our identity."""


class KafkaRequestFailed(KafkaGatewayError):
    """The cluster answered, and said no."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable


# Local (client-side) librdkafka codes that mean "we could not talk to the cluster".
UNREACHABLE_CODES = frozenset(
    {
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
        "_TIMED_OUT",
        "_RESOLVE",
        "_SSL",
        "_AUTHENTICATION",
        "_WAIT_COORD",
        "_DESTROY",
        # A broker connection torn down under the request (the broker went away meanwhile).
        "_DESTROY_BROKER",
        "SASL_AUTHENTICATION_FAILED",
        "_UNKNOWN_BROKER",
    }
)
# Codes whose error-callback text explains why brokers are down.
_CAUSE_CODES = frozenset({"_TRANSPORT", "_RESOLVE", "_SSL", "_AUTHENTICATION"})
_AUTH_CODES = frozenset({"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"})

_BROKER_WORDS: dict[str, str] = {
    "TOPIC_ALREADY_EXISTS": "the topic already exists",
    "INVALID_PARTITIONS": "the partition count is not valid",
    "INVALID_REPLICATION_FACTOR": "the replication factor is larger than the number of brokers",
    "POLICY_VIOLATION": "a broker-side create-topic policy refused it",
    "GROUP_AUTHORIZATION_FAILED": (
        "not authorised: grant the operator's user Describe (and Read for offsets) on the group"
    ),
    "TOPIC_AUTHORIZATION_FAILED": "not authorised: grant the operator's user Describe on topics",
    "CLUSTER_AUTHORIZATION_FAILED": (
        "not authorised: grant the operator's user Describe/Create on the cluster"
    ),
    "COORDINATOR_NOT_AVAILABLE": "the group coordinator is not available yet",
    "NOT_COORDINATOR": "the group coordinator moved",
    "COORDINATOR_LOAD_IN_PROGRESS": "the group coordinator is still loading",
    "GROUP_ID_NOT_FOUND": "the group does not exist",
    "INVALID_GROUP_ID": "the group id is not valid",
    "UNSUPPORTED_VERSION": "the broker does not support this request",
    "_UNSUPPORTED_FEATURE": "the broker does not support this request",
    "_INVALID_ARG": "the request was invalid",
}

_WHERE = re.compile(r"^(?:\[thrd:[^\]]*\]: )?\S+/(?:bootstrap|\d+|\w+): ")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")


def describe_connection_problem(text: str, setup_timeout_s: float | None = None) -> str:
    """Turn one librdkafka connection error into a short phrase ("connection refused")."""
    core = _AFTER.sub("", _WHERE.sub("", text.strip()))
    lower = core.lower()
    if "connection refused" in lower:
        return "connection refused"
    if "failed to resolve" in lower:
        return "the host name does not resolve"
    if "connection setup timed out" in lower:
        within = f" within {setup_timeout_s:g} s" if setup_timeout_s else ""
        return (
            f"the server accepted the connection but did not answer as Kafka{within} "
            "(wrong port, or a TLS listener reached without TLS?)"
        )
    if "disconnected while requesting apiversion" in lower:
        return (
            "the server closed the connection during the Kafka handshake "
            "(not a Kafka port, or it expects TLS?)"
        )
    if "ssl handshake failed" in lower or "certificate verify failed" in lower:
        return f"TLS handshake failed: {core}"
    if "sasl" in lower or "authentication" in lower:
        return f"authentication failed: {core}"
    if "connection timed out" in lower or "timed out" in lower:
        return "connection timed out"
    if "no route to host" in lower or "network is unreachable" in lower:
        return core[0].lower() + core[1:] if core else "network unreachable"
    return core or text


@dataclass(frozen=True)
class ConnectionEvent:
    at: float
    code: str
    text: str


class ConnectionWatch:
    """What the error callback said lately; written from librdkafka's poll thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._cause: ConnectionEvent | None = None
        self._all_down: ConnectionEvent | None = None
        self._fatal: ConnectionEvent | None = None
        self._last_success: float | None = None

    def record(self, code: str, text: str, fatal: bool = False) -> None:
        event = ConnectionEvent(self._clock(), code, text)
        with self._lock:
            if code in _CAUSE_CODES:
                self._cause = event
            if code == "_ALL_BROKERS_DOWN" or code in _AUTH_CODES:
                self._all_down = event
            if fatal:
                self._fatal = event

    def note_success(self) -> None:
        with self._lock:
            self._last_success = self._clock()

    def down_since(self) -> float | None:
        """When all brokers were last reported down, unless a request has succeeded since."""
        with self._lock:
            event, success = self._all_down, self._last_success
        if event is None or (success is not None and success >= event.at):
            return None
        return float(event.at)

    def cause(self, since: float | None = None) -> ConnectionEvent | None:
        with self._lock:
            event = self._fatal or self._cause
        if event is None or (since is not None and event.at < since):
            return None
        return event


def unreachable_message(
    bootstrap: str, event: ConnectionEvent | None, waited_s: float, setup_timeout_s: float | None
) -> str:
    if event is None:
        return f"cannot reach Kafka at {bootstrap}: no answer within {waited_s:g} s"
    phrase = describe_connection_problem(event.text, setup_timeout_s)
    return f"cannot reach Kafka at {bootstrap}: {phrase}"


def error_code(error: BaseException) -> tuple[str | None, str, bool]:
    """(code name, librdkafka's text, retriable) for a KafkaException; (None, str, False) else."""
    inner = error.args[0] if error.args else None
    name = getattr(inner, "name", None)
    text_of = getattr(inner, "str", None)
    if callable(name) and callable(text_of):
        retriable = getattr(inner, "retriable", None)
        return str(name()), str(text_of()), bool(retriable()) if callable(retriable) else False
    return None, str(error), False


def request_failed(operation: str, code: str | None, text: str) -> str:
    words = _BROKER_WORDS.get(code or "")
    if words is None:
        words = f"{text} ({code})" if code else text
    return f"{operation} failed: {words}"
