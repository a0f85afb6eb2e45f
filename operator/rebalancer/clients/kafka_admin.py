"""The Kafka admin gateway: one confluent-kafka AdminClient per cluster, awaited from asyncio.

Every admin call returns concurrent futures resolved on librdkafka's threads; the gateway wraps
them for asyncio and bounds them in time, so an unreachable cluster costs the operator seconds,
not minutes. Failures surface as KafkaUnavailable or KafkaRequestFailed with a readable message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from rebalancer.clients.batch_reading import (
    DROPPED,
    UNREACHED,
    GroupBatchReader,
    GroupReadFailed,
    batch_readable,
)
from rebalancer.clients.kafka_errors import (
    UNREACHABLE_CODES,
    ConnectionWatch,
    KafkaGatewayError,
    KafkaRequestFailed,
    KafkaUnavailable,
    describe_connection_problem,
    error_code,
    principal_of,
    request_failed,
    unreachable,
)
from rebalancer.clients.kafka_reading import (
    RequestTally,
    cluster_profile_hint,
    read_cluster,
    read_group,
    read_offsets,
    read_request_totals,
    read_topics,
)
from rebalancer.clients.librdkafka_config import build_client_config, redacted
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerProfile,
    ClusterView,
    CommittedOffsets,
    cluster_key,
)
from rebalancer.structs.kafka_problems import KafkaProblem

__all__ = [
    "AdminGateway",
    "AdminPool",
    "KafkaGatewayError",
    "KafkaRequestFailed",
    "KafkaUnavailable",
    "build_client_config",
    "cluster_key",
]

logger = logging.getLogger(__name__)
LIBRDKAFKA_LOGGER_NAME = "rebalancer.kafka.librdkafka"

# librdkafka's defaults wait 30 s to connect and 60 s per request; an operator that watches many
# groups must learn about a dead cluster much sooner. Callers' own values win.
FAST_FAILURE_DEFAULTS: Mapping[str, str] = {
    "client.id": "rebalancer-admin",
    "socket.connection.setup.timeout.ms": "5000",
    "socket.timeout.ms": "10000",
    "reconnect.backoff.ms": "200",
    "reconnect.backoff.max.ms": "2000",
    "retry.backoff.max.ms": "1000",
}
# After librdkafka says every broker is down, give one reconnect a chance before giving up.
UNREACHABLE_GRACE_S = 1.5
_NO_COORDINATOR_YET = "a lost broker's groups have none until Kafka names a new one"
# A connection error this old still explains a timeout on a later request.
CAUSE_MEMORY_S = 60.0
# Requests a group's coordinator answers (DescribeGroups, OffsetFetch) get this long in
# librdkafka, and the gateway's own deadline (request_timeout) bounds the wait instead.
# librdkafka 2.16 aborts the process when such a request timed out in librdkafka before its
# coordinator was known and the coordinator is found later: the late lookup is answered with
# _DESTROY, and the failed lookup's reply releases the request's enq_once once more
# ("rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed"). Measured: the
# operator gone ~10 s after a group's coordinator was SIGKILLed on a three-node cluster, the
# moment Kafka named the new coordinator. A request still pending then completes as usual, and
# the client it belongs to is replaced at the gateway's deadline anyway.
COORDINATOR_REQUEST_TIMEOUT_S = 600.0
# A group's coordinator that answers it no longer is (the group moved to another node, as when
# a restarted broker takes its partitions back). librdkafka keeps the node it found in a cache
# that each use keeps fresh (it expires metadata.max.age.ms after the last use), so the same
# client would ask the old node again at every look: measured, an observer that failed with
# "the group coordinator moved" for minutes after a preferred leader election.
MOVED_CODES = frozenset({"NOT_COORDINATOR"})
# Answers that change by themselves: the coordinator loads, moves or is elected.
PASSING_CODES = frozenset(
    {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"}
)
_WAIT_STEP_S = 0.1
# Describes asked within this long of each other go to librdkafka as one call: at rest the
# observers of a cluster look at about the same moments (planning.observe_cadence), and one call
# with every group id costs librdkafka one coordinator lookup batch instead of one per group.
DESCRIBE_BATCH_WINDOW_S = 0.05
# How often librdkafka reports its per-broker request counts (statistics.interval.ms), when the
# gateway is asked to count them.
STATISTICS_INTERVAL_MS = "10000"
# Called with the Kafka requests of each kind sent since the last call (kind: librdkafka's
# name, "DescribeGroups", "Metadata", ...), on the gateway's poll thread.
RequestCounter = Callable[[Mapping[str, int]], None]
# Called with how many groups each describe call carried.
BatchCounter = Callable[[int], None]


class _RepeatFilter(logging.Filter):
    """librdkafka retries a dead broker every second and logs each try; keep one per minute."""

    _AFTER = re.compile(
        r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)"
    )

    _CLIENT = re.compile(r"(#[a-z]+)-\d+(?=\])")

    def __init__(self, window_s: float = 60.0, max_keys: int = 1000) -> None:
        super().__init__()
        self.window_s = window_s
        self.max_keys = max_keys
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        # Without the client's instance number: a replaced client says the same things anew.
        key = self._CLIENT.sub(r"\1", self._AFTER.sub("", record.getMessage()))
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last < self.window_s:
                return False
            if len(self._seen) >= self.max_keys:
                self._seen.clear()
            self._seen[key] = now
        return True


librdkafka_logger = logging.getLogger(LIBRDKAFKA_LOGGER_NAME)
librdkafka_logger.addFilter(_RepeatFilter())
# aiokafka's connection (the batch reader) logs each failed connection the same way.
for _name in ("aiokafka.client", "aiokafka.conn"):
    logging.getLogger(_name).addFilter(_RepeatFilter())


class _ClientLog:
    """librdkafka's `logger`: forwards to Python logging and reads connection failures.

    The error callback misses some causes (a connection setup timeout only says "all brokers
    down"); the FAIL log line always names it.
    """

    def __init__(self, watch: ConnectionWatch) -> None:
        self._watch = watch

    def log(self, level: int, message: str, *args: object) -> None:
        librdkafka_logger.log(level, message, *args)
        if len(args) == 3 and args[0] == "FAIL":
            self._watch.record("_TRANSPORT", str(args[2]))


class AdminGateway:
    """One AdminClient, its log and error callbacks served by a small thread of its own."""

    def __init__(
        self,
        config: Mapping[str, str],
        *,
        request_timeout: float | None = None,
        count_requests: RequestCounter | None = None,
        count_batch: BatchCounter | None = None,
        batched_reads: bool = True,
    ) -> None:
        settings = {**FAST_FAILURE_DEFAULTS, **config}
        self.bootstrap = settings.get("bootstrap.servers", "(no bootstrap servers)")
        self.request_timeout = request_timeout or float(settings["socket.timeout.ms"]) / 1000
        self._setup_timeout = float(settings["socket.connection.setup.timeout.ms"]) / 1000
        # Who the cluster sees, for messages that say whom to grant an ACL (never a secret).
        self.principal = principal_of(settings)
        self._sasl = str(settings.get("security.protocol", "")).upper().startswith("SASL")
        self._watch = ConnectionWatch()
        self._cluster_profile: BrokerProfile | None = None
        client_config: dict[str, Any] = dict(settings)
        client_config["logger"] = _ClientLog(self._watch)
        client_config["error_cb"] = self._on_error
        self._count_requests = count_requests
        self._count_batch = count_batch
        self._tally = RequestTally()
        if count_requests is not None:
            client_config.setdefault("statistics.interval.ms", STATISTICS_INTERVAL_MS)
            client_config["stats_cb"] = self._on_statistics
        self._client_config = client_config
        # Group describes and offsets go through the batch reader unless the security settings
        # cannot be carried over to it (clients/batch_reading.py); then librdkafka reads them.
        unbatched = batch_readable(settings) if batched_reads else "batched reads are off"
        self._batch_settings: Mapping[str, str] | None = None if unbatched else settings
        if unbatched and batched_reads:
            logger.info("group reads of %s go through librdkafka: %s", self.bootstrap, unbatched)
        self._groups: GroupBatchReader | None = None
        # Group ids asked for since the last describe call, each with what its askers await.
        self._describes: dict[str, asyncio.Future[tuple[Any, concurrent.futures.Future[Any]]]] = {}
        self._describe_flush: asyncio.TimerHandle | None = None
        # The topic metadata last read (monotonic time, topics), and a read under way.
        self._topics: tuple[float, dict[str, int]] | None = None
        self._topics_reading: asyncio.Future[dict[str, int]] | None = None
        self._replacing = threading.Lock()
        try:
            self._admin: Any = AdminClient(client_config)
        except Exception as error:
            _, text, _ = error_code(error)
            raise KafkaRequestFailed(
                f"the Kafka client settings for {self.bootstrap} are not valid: {text}"
            ) from None
        logger.debug("Kafka admin client for %s: %s", self.bootstrap, redacted(settings))
        self._closed = threading.Event()
        self._metadata_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="kafka-metadata"
        )
        # Logs and error callbacks are queued until someone polls; nothing else polls an admin.
        self._poller = threading.Thread(target=self._serve, name="kafka-admin-poll", daemon=True)
        self._poller.start()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"AdminGateway({self.bootstrap!r}, {state})"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def profile(self) -> BrokerProfile | None:
        """The broker implementation as far as the cluster id tells."""
        return self._cluster_profile

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                self._admin.poll(0.2)
            except Exception:  # a failing log handler must not stop error reporting
                logger.exception("serving Kafka admin callbacks failed")
                time.sleep(0.2)

    def _on_statistics(self, text: str) -> None:
        if self._count_requests is None:
            return
        try:
            sent = self._tally.since_last(read_request_totals(text))
        except ValueError:
            logger.debug("unreadable librdkafka statistics for %s", self.bootstrap)
            return
        if sent:
            self._count_requests(sent)

    def _on_error(self, error: Any) -> None:
        fatal = error.fatal() if callable(getattr(error, "fatal", None)) else False
        self._watch.record(str(error.name()), str(error.str()), bool(fatal))

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._groups is not None:
            self._groups.close_soon()
        self._poller.join(timeout=2)
        self._metadata_pool.shutdown(wait=False, cancel_futures=True)
        # Dropping the last reference destroys the librdkafka handle and its threads.
        self._admin = None

    def _check_open(self) -> Any:
        admin = self._admin
        if admin is None or self._closed.is_set():
            raise KafkaUnavailable(f"the Kafka connection to {self.bootstrap} is closed")
        return admin

    def _unreachable(self, started: float, waited: float) -> KafkaUnavailable:
        cause = self._watch.cause(since=started - CAUSE_MEMORY_S)
        problem, message = unreachable(
            self.bootstrap, cause, round(waited, 1), self._setup_timeout, self._sasl
        )
        return KafkaUnavailable(message, problem=problem)

    def _silent(self, started: float, waited: float, group_id: str | None) -> KafkaUnavailable:
        """No answer by the deadline. For a request to a group's coordinator (no broker said
        all brokers are down), the coordinator is what did not answer, not the cluster."""
        if group_id is None:
            return self._unreachable(started, waited)
        cause = self._watch.cause(since=started - CAUSE_MEMORY_S)
        seen = ""
        if cause is not None:
            seen = f" (last connection problem: {describe_connection_problem(cause.text)})"
        return KafkaUnavailable(
            f"no coordinator of group {group_id!r} answered at {self.bootstrap} within "
            f"{waited:.0f} s{seen}; {_NO_COORDINATOR_YET}",
            problem=KafkaProblem.COORDINATOR_UNAVAILABLE,
        )

    def _translate(
        self,
        error: Exception,
        operation: str,
        started: float,
        acl: str | None = None,
        coordinator: str | None = None,
    ) -> KafkaGatewayError:
        code, text, retriable = error_code(error)
        if code == "_TRANSPORT" and coordinator is not None and self._watch.down_since() is None:
            # The connection to the group's coordinator broke mid-request (the broker was
            # killed) while no report says every broker is down: the coordinator is what is
            # missing, and the others answer.
            return KafkaUnavailable(
                f"the coordinator of group {coordinator!r} at {self.bootstrap} dropped the "
                f"request ({describe_connection_problem(text)}); {_NO_COORDINATOR_YET}",
                problem=KafkaProblem.COORDINATOR_UNAVAILABLE,
            )
        if code in UNREACHABLE_CODES:
            return self._unreachable(started, time.monotonic() - started)
        message = request_failed(operation, code, text, acl=acl, principal=self.principal)
        return KafkaRequestFailed(message, code=code, retriable=retriable)

    async def _await(
        self,
        future: concurrent.futures.Future[Any],
        operation: str,
        admin: Any,
        acl: str | None = None,
        coordinator: str | None = None,
    ) -> Any:
        started = time.monotonic()
        # librdkafka's own request timeout should fire first and say more; this is the backstop,
        # and the only deadline of a request to `coordinator`'s group coordinator (see
        # COORDINATOR_REQUEST_TIMEOUT_S).
        deadline = started + self.request_timeout + (0.0 if coordinator else 2.0)
        waiting = asyncio.wrap_future(future)
        try:
            while not waiting.done():
                now = time.monotonic()
                down = self._watch.down_since()
                if down is not None and now - max(down, started) >= UNREACHABLE_GRACE_S:
                    raise self._unreachable(started, now - started)
                if now >= deadline:
                    raise self._silent(started, now - started, coordinator)
                await asyncio.wait({waiting}, timeout=min(_WAIT_STEP_S, deadline - now))
        except KafkaUnavailable:
            waiting.cancel()
            self._replace_client(admin)
            raise
        except BaseException:
            waiting.cancel()
            raise
        try:
            result = waiting.result()
        except Exception as error:
            failure = self._translate(error, operation, started, acl, coordinator)
            if isinstance(failure, KafkaUnavailable):
                self._replace_client(admin)
            raise failure from None
        self._watch.note_success()
        return result

    def _replace_client(self, used: Any, why: str = "it lost the cluster") -> None:
        """A new librdkafka client in place of one whose request went unanswered for want of
        a broker (or that holds a coordinator that moved), once however many requests of it
        failed.

        librdkafka 2.16.0 (confluent-kafka 2.16.1) aborts the whole process when such a client
        sees the broker come back after about 15 s away (an assertion in
        rd_kafka_enq_once_del_source_return, measured with a restarted broker); a client dropped
        before then does not, and a new one connects at once when the broker is back.
        """
        with self._replacing:
            if self._admin is not used or self._closed.is_set():
                return
            self._admin = AdminClient(self._client_config)
        logger.info("replaced the Kafka admin client for %s: %s", self.bootstrap, why)

    async def _ask_coordinator(
        self,
        group_id: str,
        operation: str,
        acl: str,
        request: Callable[[Any], concurrent.futures.Future[Any]],
        sent: tuple[Any, concurrent.futures.Future[Any]] | None = None,
    ) -> Any:
        """What `request(admin)` asks `group_id`'s coordinator. A node that answers it is the
        coordinator no longer is asked again once, by a new client that looks the coordinator
        up anew (see MOVED_CODES). `sent`: the client and future of a first ask already under
        way (a batched describe), awaited instead of sending `request` first."""
        if sent is None:
            admin = self._check_open()
            sent = (admin, request(admin))
        admin, future = sent
        try:
            return await self._await(future, operation, admin, acl=acl, coordinator=group_id)
        except KafkaRequestFailed as error:
            if error.code not in MOVED_CODES:
                raise
            self._replace_client(admin, f"group {group_id!r} has another coordinator")
        admin = self._check_open()
        return await self._await(request(admin), operation, admin, acl=acl, coordinator=group_id)

    async def call(
        self,
        operation: str,
        request: Callable[[Any], concurrent.futures.Future[Any]],
        *,
        acl: str | None = None,
    ) -> Any:
        """Any admin request, with the gateway's timeouts and readable errors.

        `request` gets the librdkafka AdminClient and returns the one future to wait for;
        `operation` completes "... failed while <operation>" in error messages; `acl` is what
        a refusal asks to grant ("DescribeConfigs on the cluster").
        """
        admin = self._check_open()
        return await self._await(request(admin), operation, admin, acl)

    async def describe_cluster(self) -> ClusterView:
        admin = self._check_open()
        future = admin.describe_cluster(request_timeout=self.request_timeout)
        view = read_cluster(await self._await(future, "describing the cluster", admin))
        self._cluster_profile = cluster_profile_hint(view.cluster_id) or self._cluster_profile
        return view

    async def describe_group(self, group_id: str) -> BrokerGroupView:
        """The group as its coordinator describes it. Groups asked for within
        DESCRIBE_BATCH_WINDOW_S of each other share one request per coordinator (the batch
        reader); a coordinator that moved is looked up anew and asked once more."""
        operation = f"describing group {group_id!r}"
        acl = f"Describe on group {group_id!r}"
        description = await self._read_batched(GroupBatchReader.describe, group_id, operation, acl)
        if description is None:
            description = await self._describe_through_librdkafka(group_id, operation, acl)
        return read_group(description)

    def _group_reader(self) -> GroupBatchReader | None:
        """The batch reader of the running event loop, None when group reads go through
        librdkafka (see __init__)."""
        if self._batch_settings is None:
            return None
        self._check_open()
        loop = asyncio.get_running_loop()
        reader = self._groups
        if reader is None or reader.loop is not loop:
            if reader is not None:
                reader.close_soon()
            reader = self._groups = GroupBatchReader(
                self._batch_settings,
                window_s=DESCRIBE_BATCH_WINDOW_S,
                # Past the gateway's own deadline, which ends the wait with a better message.
                request_timeout_s=self.request_timeout + 2.0,
                count_requests=self._count_requests,
                count_batch=self._count_batch,
            )
        return reader

    async def _read_batched(
        self,
        ask: Callable[[GroupBatchReader, str], Awaitable[Any]],
        group_id: str,
        operation: str,
        acl: str,
    ) -> Any:
        """What `ask` answers for the group through the batch reader, asked once more after an
        answer that the coordinator moved (the reader looks it up anew). None when group reads
        go through librdkafka, or when no broker or no coordinator could be reached: librdkafka
        then asks, because its error callbacks name why (refused, DNS, TLS, SASL, a killed
        coordinator) where aiokafka's connection only logs it."""
        reader = self._group_reader()
        if reader is None:
            return None
        for last in (False, True):
            started = time.monotonic()
            try:
                answer = await asyncio.wait_for(ask(reader, group_id), self.request_timeout)
            except TimeoutError:
                raise self._silent(started, time.monotonic() - started, group_id) from None
            except GroupReadFailed as error:
                if error.code in (UNREACHED, DROPPED):
                    return None
                if error.code in MOVED_CODES and not last:
                    continue
                message = request_failed(
                    operation, error.code, error.text, acl=acl, principal=self.principal
                )
                retriable = error.code in PASSING_CODES
                raise KafkaRequestFailed(message, code=error.code, retriable=retriable) from None
            self._watch.note_success()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def _describe_through_librdkafka(self, group_id: str, operation: str, acl: str) -> Any:
        """The description librdkafka gives, in a call shared with the groups asked for within
        DESCRIBE_BATCH_WINDOW_S; a coordinator that moved is asked again alone, by a new client
        (_ask_coordinator)."""

        def request(admin: Any) -> concurrent.futures.Future[Any]:
            futures = admin.describe_consumer_groups(
                [group_id], request_timeout=COORDINATOR_REQUEST_TIMEOUT_S
            )
            future: concurrent.futures.Future[Any] = futures[group_id]
            return future

        sent = await self._batched_describe(group_id)
        return await self._ask_coordinator(group_id, operation, acl, request, sent)

    async def _batched_describe(self, group_id: str) -> tuple[Any, concurrent.futures.Future[Any]]:
        """(the client asked, the future of `group_id`'s description) from the next batch."""
        loop = asyncio.get_running_loop()
        waiter = self._describes.get(group_id)
        if waiter is None:
            waiter = self._describes[group_id] = loop.create_future()
        if self._describe_flush is None:
            self._describe_flush = loop.call_later(DESCRIBE_BATCH_WINDOW_S, self._flush_describes)
        # Shielded: one asker given up must not cancel what another awaits.
        return await asyncio.shield(waiter)

    def _flush_describes(self) -> None:
        waiting, self._describes = self._describes, {}
        self._describe_flush = None
        try:
            admin = self._check_open()
            futures = admin.describe_consumer_groups(
                list(waiting), request_timeout=COORDINATOR_REQUEST_TIMEOUT_S
            )
        except Exception as error:  # the askers raise it, each in its own observation
            for waiter in waiting.values():
                if not waiter.done():
                    waiter.set_exception(error)
            return
        if self._count_batch is not None:
            self._count_batch(len(waiting))
        for group_id, waiter in waiting.items():
            if not waiter.done():
                waiter.set_result((admin, futures[group_id]))

    async def committed_offsets(self, group_id: str) -> CommittedOffsets:
        """Every offset the group committed. Groups asked for within DESCRIBE_BATCH_WINDOW_S of
        each other share one OffsetFetch per coordinator (the batch reader)."""
        operation = f"reading committed offsets of group {group_id!r}"
        acl = f"Describe on group {group_id!r} and on its topics"
        offsets = await self._read_batched(GroupBatchReader.offsets, group_id, operation, acl)
        if offsets is not None:
            return read_offsets(group_id, offsets)

        def request(admin: Any) -> concurrent.futures.Future[Any]:
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_id)],
                request_timeout=COORDINATOR_REQUEST_TIMEOUT_S,
            )
            future: concurrent.futures.Future[Any] = futures[group_id]
            return future

        result = await self._ask_coordinator(group_id, operation, acl, request)
        return read_offsets(group_id, result)

    async def list_topics(self, max_age: float = 0.0) -> dict[str, int]:
        """Topic name to partition count, Kafka's internal topics left out. With `max_age`,
        a read at most that many seconds old is answered again, and callers that ask while a
        read is under way share it: every group of a cluster costs one Metadata request per
        `max_age`, not one each."""
        if max_age <= 0:
            return await self._read_topics()
        if self._topics is not None and time.monotonic() - self._topics[0] < max_age:
            return dict(self._topics[1])
        if self._topics_reading is None or self._topics_reading.done():
            self._topics_reading = asyncio.ensure_future(self._read_topics())
        return dict(await asyncio.shield(self._topics_reading))

    async def _read_topics(self) -> dict[str, int]:
        admin = self._check_open()
        # Metadata has no future-returning call; run the blocking one off the event loop.
        future = self._metadata_pool.submit(admin.list_topics, timeout=self.request_timeout)
        metadata = await self._await(future, "listing topics", admin)
        self._cluster_profile = cluster_profile_hint(metadata.cluster_id) or self._cluster_profile
        topics = read_topics(metadata)
        self._topics = (time.monotonic(), topics)
        return dict(topics)

    async def refused_topics(self, topics: Sequence[str]) -> KafkaRequestFailed | None:
        """The error of a refusal to describe some of `topics` to this principal; None when
        none is refused (each exists, or merely does not exist yet).

        The metadata of all topics leaves out, without a word, both a topic that does not exist
        and one the principal may not Describe. DescribeTopics tells them apart, and unlike a
        metadata request for named topics it never asks the broker to create them."""
        if not topics:
            return None
        admin = self._check_open()
        futures = admin.describe_topics(
            TopicCollection(list(topics)), request_timeout=self.request_timeout
        )
        refused: list[str] = []
        for topic, future in futures.items():
            try:
                await self._await(future, f"describing topic {topic!r}", admin)
            except KafkaRequestFailed as error:
                if error.code == "TOPIC_AUTHORIZATION_FAILED":
                    refused.append(str(topic))
        if not refused:
            return None
        names = ", ".join(repr(topic) for topic in refused)
        noun = "topic" if len(refused) == 1 else "topics"
        code = "TOPIC_AUTHORIZATION_FAILED"
        message = request_failed(
            f"describing {noun} {names}",
            code,
            "",
            acl=f"Describe on {noun} {names}",
            principal=self.principal,
        )
        return KafkaRequestFailed(message, code=code)

    async def create_topic(self, name: str, partitions: int, replication_factor: int = -1) -> bool:
        """Create a topic; False if it already existed. -1 takes the broker's replication."""
        # A topic made here is seen by the next read, whatever `max_age` it asks.
        self._topics = None
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, not {partitions}")
        admin = self._check_open()
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)
        futures = admin.create_topics(
            [topic], request_timeout=self.request_timeout, operation_timeout=self.request_timeout
        )
        try:
            await self._await(
                futures[name],
                f"creating topic {name!r}",
                admin,
                acl=f"Create on topic {name!r} (or on the cluster)",
            )
        except KafkaRequestFailed as error:
            if error.code == "TOPIC_ALREADY_EXISTS":
                return False
            raise
        return True


@dataclass
class _Lease:
    gateway: AdminGateway
    users: int


class AdminPool:
    """Shares one AdminGateway per cluster key; the last release closes it.

    A key (see cluster_key) names the cluster and identity, so the first acquirer's config is
    the one used; later acquirers with the same key share it.
    """

    def __init__(self, factory: Callable[[Mapping[str, str]], AdminGateway] = AdminGateway) -> None:
        self._factory = factory
        self._leases: dict[str, _Lease] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, config: Mapping[str, str]) -> AdminGateway:
        with self._lock:
            lease = self._leases.get(key)
            if lease is None or lease.gateway.closed:
                lease = self._leases[key] = _Lease(self._factory(config), 0)
                logger.info("connected a Kafka admin client for %s", key.split("|", 1)[0])
            lease.users += 1
            return lease.gateway

    def release(self, key: str) -> None:
        with self._lock:
            lease = self._leases.get(key)
            if lease is None:
                return
            lease.users -= 1
            if lease.users > 0:
                return
            del self._leases[key]
        lease.gateway.close()
        logger.info("closed the Kafka admin client for %s", key.split("|", 1)[0])

    def renew(self, key: str, stale: AdminGateway, config: Mapping[str, str]) -> AdminGateway:
        """A new gateway in place of `stale` for every user of `key`'s lease, made once however
        many users ask: a later asker gets the one the first made. The caller holds a lease."""
        with self._lock:
            lease = self._leases.get(key)
            if lease is None:
                lease = self._leases[key] = _Lease(self._factory(config), 1)
            elif lease.gateway is stale or lease.gateway.closed:
                lease.gateway = self._factory(config)
            fresh = lease.gateway
        if fresh is not stale and not stale.closed:
            stale.close()
            logger.info("reconnected the Kafka admin client for %s", key.split("|", 1)[0])
        return fresh

    def users(self, key: str) -> int:
        with self._lock:
            lease = self._leases.get(key)
            return lease.users if lease is not None else 0

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._leases)

    def close_all(self) -> None:
        with self._lock:
            leases = list(self._leases.values())
            self._leases.clear()
        for lease in leases:
            lease.gateway.close()
