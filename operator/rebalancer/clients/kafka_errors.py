"""Kafka failures in words a user can act on, and what the connection has said about itself.

librdkafka reports "cannot connect" through its error callback (connection refused, DNS, TLS,
SASL) while the request itself only ends with "Failed while waiting for controller: Local: Timed
out". ConnectionWatch keeps the former so the exception can name the real cause.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.kafka_problems import KafkaProblem

# A broker's answer that the principal lacks an ACL; the condition says KafkaNotAuthorized.
AUTHORIZATION_CODES = frozenset(
    {
        "GROUP_AUTHORIZATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    }
)
NOT_AUTHORIZED = KafkaProblem.NOT_AUTHORIZED.value


class KafkaGatewayError(RebalancerError):
    """Base of the gateway's errors; str() is a complete sentence for users."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def reason(self) -> str:
        """The reason a status condition gives when this error stops the work."""
        return KafkaProblem.REQUEST_FAILED.value


# The names are the operator's vocabulary (conditions say KafkaUnreachable, KafkaRequestFailed).
class KafkaUnavailable(KafkaGatewayError):
    """The cluster could not be reached, or refused our identity."""

    def __init__(self, message: str, *, problem: KafkaProblem = KafkaProblem.UNREACHABLE) -> None:
        super().__init__(message)
        self.problem = problem

    @property
    def reason(self) -> str:
        return self.problem.value


class KafkaRequestFailed(KafkaGatewayError):
    """The cluster answered, and said no."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable

    @property
    def reason(self) -> str:
        if self.code in AUTHORIZATION_CODES:
            return NOT_AUTHORIZED
        return KafkaProblem.REQUEST_FAILED.value


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
    "COORDINATOR_NOT_AVAILABLE": "the group coordinator is not available yet",
    "NOT_COORDINATOR": "the group coordinator moved",
    "COORDINATOR_LOAD_IN_PROGRESS": "the group coordinator is still loading",
    "GROUP_ID_NOT_FOUND": "the group does not exist",
    "INVALID_GROUP_ID": "the group id is not valid",
    "UNSUPPORTED_VERSION": "the broker does not support this request",
    "_UNSUPPORTED_FEATURE": "the broker does not support this request",
    "_INVALID_ARG": "the request was invalid",
}

# Default ACLs to name when the caller did not say which one its request needs.
_ACL_BY_CODE: dict[str, str] = {
    "GROUP_AUTHORIZATION_FAILED": "Describe on the group",
    "TOPIC_AUTHORIZATION_FAILED": "Describe on the topics",
    "CLUSTER_AUTHORIZATION_FAILED": "the operation this request needs on the cluster",
}

_WHERE = re.compile(r"^(?:\[thrd:[^\]]*\]: )?\S+/(?:bootstrap|\d+|\w+): ")
_AFTER = re.compile(r"\s*\(after (\d+)ms in state (\w+)\)\s*$")
# A listener that wants SASL answers a client without it until its first request other than
# ApiVersions, then closes: measured on Apache Kafka 4.4, within a few ms of the connection.
_EARLY_CLOSE_MS = 1000


def connection_problem(
    text: str, setup_timeout_s: float | None = None, sasl: bool | None = None
) -> tuple[KafkaProblem, str]:
    """What kind of problem one librdkafka connection error is, and a short phrase for it.

    `sasl`: whether the client authenticates with SASL (None: not known), which tells a
    listener that wants SASL from a broker that went away."""
    after = _AFTER.search(text.strip())
    state = after.group(2) if after else None
    elapsed_ms = int(after.group(1)) if after else None
    core = _AFTER.sub("", _WHERE.sub("", text.strip()))
    lower = core.lower()
    found = (
        _unreached(lower, setup_timeout_s)
        or _security_mismatch(lower, state, elapsed_ms, sasl)
        or _refused_credentials(lower, core)
    )
    if found is not None:
        return found
    if "connection timed out" in lower or "timed out" in lower:
        return KafkaProblem.UNREACHABLE, "connection timed out"
    if "no route to host" in lower or "network is unreachable" in lower:
        return KafkaProblem.UNREACHABLE, (
            core[0].lower() + core[1:] if core else "network unreachable"
        )
    return KafkaProblem.UNREACHABLE, core or text


def _unreached(lower: str, setup_timeout_s: float | None) -> tuple[KafkaProblem, str] | None:
    """No Kafka answered at the address."""
    if "connection refused" in lower:
        return KafkaProblem.UNREACHABLE, "connection refused"
    if "failed to resolve" in lower:
        return KafkaProblem.UNREACHABLE, "the host name does not resolve"
    if "connection setup timed out" in lower:
        within = f" within {setup_timeout_s:g} s" if setup_timeout_s else ""
        return KafkaProblem.UNREACHABLE, (
            f"the server accepted the connection but did not answer as Kafka{within} "
            "(wrong port, or a TLS listener reached without TLS?)"
        )
    return None


def _security_mismatch(
    lower: str, state: str | None, elapsed_ms: int | None, sasl: bool | None
) -> tuple[KafkaProblem, str] | None:
    """The client and the listener disagree on TLS or SASL."""
    if "plaintext broker listener" in lower:
        return KafkaProblem.SECURITY_MISMATCH, (
            "the client speaks TLS but the listener does not (the TLS handshake met a "
            "plaintext Kafka listener)"
        )
    if "disconnected while requesting apiversion" in lower or (
        "closed by peer" in lower and state == "APIVERSION_QUERY"
    ):
        return KafkaProblem.SECURITY_MISMATCH, (
            "the server closed the connection at the first Kafka request: the listener "
            "probably expects TLS and the client does not use it (or it is not a Kafka port)"
        )
    if (
        "closed by peer" in lower
        and state == "UP"
        and sasl is False
        and elapsed_ms is not None
        and elapsed_ms < _EARLY_CLOSE_MS
    ):
        return KafkaProblem.SECURITY_MISMATCH, (
            "the broker closed each connection right after it opened: the listener probably "
            "expects SASL authentication and the client sends none"
        )
    return None


def _refused_credentials(lower: str, core: str) -> tuple[KafkaProblem, str] | None:
    """The listener took the connection but not the client's TLS or SASL credentials."""
    if "mechanism handshake failed" in lower:
        offered = lower.rpartition("supported mechanisms:")[2].strip()
        if not offered:
            return KafkaProblem.SECURITY_MISMATCH, (
                "the client authenticates with SASL but the listener takes no SASL (it offers "
                "no mechanism)"
            )
        return KafkaProblem.AUTHENTICATION, (
            f"the listener does not take the client's SASL mechanism; it takes {offered.upper()}"
        )
    if "certificate verify failed" in lower:
        # librdkafka's own advice names its ssl.ca.location, which the caller may not set.
        return KafkaProblem.TLS, (
            "TLS handshake failed: the broker's certificate could not be verified (signed by a "
            "CA the client does not trust, or not naming the host it was reached at)"
        )
    if "ssl handshake failed" in lower:
        return KafkaProblem.TLS, f"TLS handshake failed: {core}"
    if "sasl" in lower or "authentication" in lower:
        return KafkaProblem.AUTHENTICATION, f"authentication failed: {core}"
    return None


def describe_connection_problem(text: str, setup_timeout_s: float | None = None) -> str:
    """Turn one librdkafka connection error into a short phrase ("connection refused")."""
    return connection_problem(text, setup_timeout_s)[1]


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
            # The first report of an outage marks its start; librdkafka repeats it on every
            # retry (an authentication failure every second or so), and taking each repeat as
            # the start kept a request waiting for its whole timeout.
            if (code == "_ALL_BROKERS_DOWN" or code in _AUTH_CODES) and not self._is_down():
                self._all_down = event
            if fatal:
                self._fatal = event

    def _is_down(self) -> bool:
        event, success = self._all_down, self._last_success
        return event is not None and (success is None or success < event.at)

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
    return unreachable(bootstrap, event, waited_s, setup_timeout_s)[1]


def unreachable(
    bootstrap: str,
    event: ConnectionEvent | None,
    waited_s: float,
    setup_timeout_s: float | None,
    sasl: bool | None = None,
) -> tuple[KafkaProblem, str]:
    """The kind of connection problem and the sentence that names it."""
    if event is None:
        return (
            KafkaProblem.UNREACHABLE,
            f"cannot reach Kafka at {bootstrap}: no answer within {waited_s:g} s",
        )
    problem, phrase = connection_problem(event.text, setup_timeout_s, sasl)
    if event.code in _AUTH_CODES and problem is KafkaProblem.UNREACHABLE:
        problem = KafkaProblem.AUTHENTICATION
    return problem, f"cannot reach Kafka at {bootstrap}: {phrase}"


def principal_of(settings: Mapping[str, object]) -> str | None:
    """The Kafka principal a client with these settings authenticates as, when it can be told
    from them (a SASL user name, or ANONYMOUS on a plaintext connection)."""
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    mechanism = str(settings.get("sasl.mechanism", "")).upper()
    user = settings.get("sasl.username")
    if protocol.startswith("SASL") and mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return f"User:{user}" if user else None
    if protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    return None


def error_code(error: BaseException) -> tuple[str | None, str, bool]:
    """(code name, librdkafka's text, retriable) for a KafkaException; (None, str, False) else."""
    inner = error.args[0] if error.args else None
    name = getattr(inner, "name", None)
    text_of = getattr(inner, "str", None)
    if callable(name) and callable(text_of):
        retriable = getattr(inner, "retriable", None)
        return str(name()), str(text_of()), bool(retriable()) if callable(retriable) else False
    return None, str(error), False


def request_failed(
    operation: str,
    code: str | None,
    text: str,
    *,
    acl: str | None = None,
    principal: str | None = None,
) -> str:
    """`operation` failed, in words that say what to do. For an authorization failure, `acl`
    names what the request needs ("Describe on group 'orders'") and `principal` who needs it."""
    if code in AUTHORIZATION_CODES:
        who = principal or "the client's principal"
        need = acl or _ACL_BY_CODE.get(code or "", "the ACL this request needs")
        return f"{operation} failed: Kafka refused it to {who} ({code}): grant {who} {need}"
    words = _BROKER_WORDS.get(code or "")
    if words is None:
        words = f"{text} ({code})" if code else text
    return f"{operation} failed: {words}"
