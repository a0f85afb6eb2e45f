"""Member reports, sending side: a consumer tells the operator its generation and assignment.

The convention is in docs/member-reports.md. A report must never slow the consumer down: calls
only append to a bounded queue, a background thread POSTs, and while the operator is away the
oldest reports are dropped (the newest say everything a report can say anyway).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.group_metadata import parse_group_metadata
from rebalancer.structs.reports import REPORT_VERSION, ReportEvent

logger = logging.getLogger(__name__)

URL_ENV = "REBALANCER_REPORT_URL"
TOKEN_ENV = "REBALANCER_REPORT_TOKEN"
NAMESPACE_ENV = "REBALANCER_NAMESPACE"
CONSUMER_GROUP_ENV = "REBALANCER_CONSUMER_GROUP"

_RETRY_MIN_S = 0.5
_RETRY_MAX_S = 5.0


@dataclass(frozen=True)
class MemberIdentity:
    """Who is reporting: the fields of a report that do not change from one event to the next."""

    group_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    namespace: str | None = None
    consumer_group: str | None = None
    protocol: str = "classic"
    assignment_strategy: str | None = None


def _partition_entry(part: TopicPartition | tuple[str, int]) -> dict[str, object]:
    if isinstance(part, TopicPartition):
        return {"topic": part.topic, "partition": part.partition}
    topic, partition = part
    return {"topic": topic, "partition": int(partition)}


def build_report_body(
    identity: MemberIdentity,
    event: ReportEvent | str,
    *,
    member_id: str,
    generation: int,
    partitions: Iterable[TopicPartition | tuple[str, int]],
    lag: int | None,
    timestamp: float,
) -> dict[str, object]:
    """The JSON body of one report, with exactly the keys docs/member-reports.md lists."""
    entries = [_partition_entry(part) for part in partitions]
    entries.sort(key=lambda entry: (str(entry["topic"]), int(str(entry["partition"]))))
    return {
        "version": REPORT_VERSION,
        "groupId": identity.group_id,
        "namespace": identity.namespace,
        "consumerGroup": identity.consumer_group,
        "member": {
            "clientId": identity.client_id,
            "memberId": member_id,
            "instanceId": identity.instance_id,
            "host": identity.host,
        },
        "event": ReportEvent(event).value,
        "generation": generation,
        "protocol": identity.protocol,
        "assignmentStrategy": identity.assignment_strategy,
        "partitions": entries,
        "lag": lag,
        "timestamp": round(timestamp, 3),
    }


def consumer_position(consumer: Any) -> tuple[str, int]:
    """(member id, generation) of a confluent-kafka Consumer; ("", -1) when not in a group yet.

    Not from the revoke callback that close() raises: librdkafka can block memberid() there
    until the process is killed (docs/member-reports.md); use the values from before."""
    try:
        member_id = consumer.memberid() or ""
    except Exception:  # raises when the consumer is closed or not subscribed
        member_id = ""
    try:
        raw = consumer.consumer_group_metadata()
    except Exception:
        raw = None
    return member_id, parse_group_metadata(raw).generation


class _RejectedError(RebalancerError):
    """The operator answered and refused the report: sending it again cannot help."""

    retriable = False


class MemberReporter:
    """POSTs member reports from a background thread; every method returns at once."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        group_id: str,
        client_id: str,
        host: str,
        instance_id: str | None = None,
        namespace: str | None = None,
        consumer_group: str | None = None,
        protocol: str = "classic",
        assignment_strategy: str | None = None,
        max_queued: int = 256,
        timeout: float = 3.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.identity = MemberIdentity(
            group_id=group_id,
            client_id=client_id,
            host=host,
            instance_id=instance_id,
            namespace=namespace,
            consumer_group=consumer_group,
            protocol=protocol,
            assignment_strategy=assignment_strategy,
        )
        self.timeout = timeout
        self._clock = clock
        self._headers = {"Content-Type": "application/json", "User-Agent": "rebalancer-reporter"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        # Reports go straight to the operator's Service; an HTTP(S)_PROXY meant for the outside
        # world would only get in the way.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._queue: deque[bytes] = deque(maxlen=max_queued)
        self._wakeup = threading.Condition()
        self._closing = False
        self._close_deadline = 0.0
        self._outage_logged = False
        self._rejections_logged: set[int] = set()
        self.sent = 0
        self.dropped = 0
        self.rejected = 0
        self._thread = threading.Thread(target=self._run, name="member-reporter", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(
        cls,
        *,
        group_id: str,
        client_id: str,
        host: str,
        environ: Mapping[str, str] | None = None,
        **identity: Any,
    ) -> MemberReporter | None:
        """A reporter configured by REBALANCER_REPORT_URL/TOKEN, or None when no URL is set."""
        env = os.environ if environ is None else environ
        url = env.get(URL_ENV, "").strip()
        if not url:
            return None
        identity.setdefault("namespace", env.get(NAMESPACE_ENV) or None)
        identity.setdefault("consumer_group", env.get(CONSUMER_GROUP_ENV) or None)
        token = env.get(TOKEN_ENV, "").strip() or None
        return cls(url, token, group_id=group_id, client_id=client_id, host=host, **identity)

    def __repr__(self) -> str:
        return f"MemberReporter({self.url!r}, group_id={self.identity.group_id!r})"

    def report(
        self,
        event: ReportEvent | str,
        *,
        member_id: str,
        generation: int,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        lag: int | None = None,
    ) -> None:
        """Queue one report; `partitions` is the member's whole assignment after the event."""
        body = build_report_body(
            self.identity,
            event,
            member_id=member_id,
            generation=generation,
            partitions=partitions,
            lag=lag,
            timestamp=self._clock(),
        )
        payload = json.dumps(body, separators=(",", ":")).encode()
        with self._wakeup:
            if self._closing:
                return
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1
            self._queue.append(payload)
            self._wakeup.notify()

    def pending(self) -> int:
        with self._wakeup:
            return len(self._queue)

    def close(self, timeout: float = 3.0) -> None:
        """Send what is queued for up to `timeout` seconds, then stop the thread."""
        deadline = time.monotonic() + timeout
        with self._wakeup:
            self._closing = True
            self._close_deadline = deadline
            self._wakeup.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()) + 0.5)

    def _run(self) -> None:
        delay = _RETRY_MIN_S
        while True:
            with self._wakeup:
                while not self._queue and not self._closing:
                    self._wakeup.wait()
                if not self._queue:
                    return
                if self._closing and time.monotonic() >= self._close_deadline:
                    return
                payload = self._queue[0]
            try:
                self._post(payload)
                done = True
            except _RejectedError:
                done = True
            except Exception as error:  # any failure to deliver is an outage; keep the report
                done = False
                self._note_outage(error)
            with self._wakeup:
                if done:
                    if self._queue and self._queue[0] is payload:
                        self._queue.popleft()
                    delay = _RETRY_MIN_S
                    continue
                if self._closing:
                    remaining = self._close_deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._wakeup.wait(min(delay, remaining))
                else:
                    self._wakeup.wait(delay)
                delay = min(delay * 2, _RETRY_MAX_S)

    def _post(self, payload: bytes) -> None:
        request = urllib.request.Request(self.url, data=payload, headers=self._headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                response.read()
        except urllib.error.HTTPError as error:
            # 408, 429 and 5xx mean "not now"; any other answer is a verdict on the report.
            if error.code in (408, 429) or error.code >= 500:
                raise
            self.rejected += 1
            if error.code not in self._rejections_logged:
                self._rejections_logged.add(error.code)
                detail = error.read(300).decode(errors="replace").strip()
                logger.warning(
                    "the operator at %s refused a member report with HTTP %d: %s",
                    self.url,
                    error.code,
                    detail or error.reason,
                )
            raise _RejectedError from None
        self.sent += 1
        if self._outage_logged:
            self._outage_logged = False
            logger.info(
                "member reports reach %s again (%d dropped meanwhile)", self.url, self.dropped
            )

    def _note_outage(self, error: Exception) -> None:
        if self._outage_logged:
            return
        self._outage_logged = True
        reason = getattr(error, "reason", None) or error
        logger.warning(
            "cannot deliver member reports to %s (%s); keeping the newest %d and retrying",
            self.url,
            reason,
            self._queue.maxlen,
        )
