"""Requests a group's coordinator answers are bounded by the gateway, never by librdkafka, and a
coordinator that moved is looked up anew.

librdkafka 2.16 aborts the process when such a request timed out inside librdkafka before the
coordinator was known and the coordinator is found later (rd_kafka_enq_once_del_source_return);
a coordinator SIGKILLed on a three-node cluster took the operator down that way. So the gateway
gives librdkafka a timeout no request reaches and gives up by its own clock, with a message
that names the coordinator, not the cluster, as what did not answer. Here a fake librdkafka
client that never answers stands in for the cluster (tests/clients/kafka/test_gateway_outage.py
kills a real coordinator).

A node that answers it is the group's coordinator no longer (the group moved back to a restarted
broker) is asked again by a new client: librdkafka caches the coordinator it found and keeps the
entry fresh with every use, so the same client asked the old node at every look and the
observer failed with "the group coordinator moved" for minutes.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace as Obj
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from rebalancer.clients import kafka_admin
from rebalancer.clients.kafka_admin import COORDINATOR_REQUEST_TIMEOUT_S, AdminGateway
from rebalancer.clients.kafka_errors import (
    ConnectionWatch,
    KafkaRequestFailed,
    KafkaUnavailable,
)
from rebalancer.planning.kafka_problems import kafka_problem
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.specs import KafkaSpec

# Below the gateway's 1.5 s grace after an all-brokers-down report: whatever the real client
# made at construction says about the address, the deadline is what ends the wait.
TIMEOUT_S = 0.4


class Silent:
    """A librdkafka AdminClient whose requests are never answered; it notes their timeouts."""

    def __init__(self) -> None:
        self.timeouts: dict[str, float] = {}
        self.polled = threading.Event()

    def poll(self, timeout: float) -> int:
        self.polled.set()
        time.sleep(timeout)
        return 0

    def _pending(self, keys: list[str]) -> dict[str, concurrent.futures.Future[Any]]:
        return {key: concurrent.futures.Future() for key in keys}

    def describe_consumer_groups(
        self, groups: list[str], request_timeout: float
    ) -> dict[str, concurrent.futures.Future[Any]]:
        self.timeouts["describe_consumer_groups"] = request_timeout
        return self._pending(groups)

    def list_consumer_group_offsets(
        self, requests: list[Any], request_timeout: float
    ) -> dict[str, concurrent.futures.Future[Any]]:
        self.timeouts["list_consumer_group_offsets"] = request_timeout
        return self._pending([request.group_id for request in requests])

    def describe_cluster(self, request_timeout: float) -> concurrent.futures.Future[Any]:
        self.timeouts["describe_cluster"] = request_timeout
        return concurrent.futures.Future()


@pytest.fixture
def gateway() -> Iterator[AdminGateway]:
    # librdkafka's path: it reads groups when the batch reader cannot (clients/kafka_admin.py).
    made = AdminGateway(
        {"bootstrap.servers": "127.0.0.1:9"}, request_timeout=TIMEOUT_S, batched_reads=False
    )
    try:
        yield made
    finally:
        made.close()


async def test_a_silent_coordinator_is_given_up_by_the_gateway_not_by_librdkafka(
    gateway: AdminGateway,
) -> None:
    silent = Silent()
    gateway._admin = silent
    started = time.monotonic()
    with pytest.raises(KafkaUnavailable) as raised:
        await gateway.describe_group("orders")
    waited = time.monotonic() - started
    # librdkafka would have timed the request out much later than the gateway gave up.
    assert silent.timeouts["describe_consumer_groups"] == COORDINATOR_REQUEST_TIMEOUT_S
    assert COORDINATOR_REQUEST_TIMEOUT_S > 10 * 60 * TIMEOUT_S
    # The gateway's own deadline is the request timeout itself: no backstop slack on top.
    assert TIMEOUT_S <= waited < TIMEOUT_S + 1.0, waited
    message = str(raised.value)
    assert message.startswith("no coordinator of group 'orders' answered at 127.0.0.1:9"), message
    assert "a lost broker's groups have none until Kafka names a new one" in message
    # The Degraded reason names the coordinator, and its fix is no field of the ConsumerGroup.
    assert raised.value.reason == "KafkaCoordinatorUnavailable"
    told = kafka_problem(raised.value.reason, message, KafkaSpec(("k:9092",)), "default")
    assert told.startswith(message + "; fix: nothing in the ConsumerGroup: Kafka names a new")
    assert "spec.kafka.bootstrapServers" not in told
    # The client that holds the unanswered request is replaced: the next look asks anew.
    assert gateway._admin is not silent


async def test_committed_offsets_are_bounded_the_same_way(gateway: AdminGateway) -> None:
    silent = Silent()
    gateway._admin = silent
    with pytest.raises(KafkaUnavailable, match="no coordinator of group 'orders'"):
        await gateway.committed_offsets("orders")
    assert silent.timeouts["list_consumer_group_offsets"] == COORDINATOR_REQUEST_TIMEOUT_S


async def test_requests_to_any_broker_keep_librdkafka_s_own_timeout(gateway: AdminGateway) -> None:
    # No coordinator lookup there: librdkafka times them out first and says more.
    silent = Silent()
    gateway._admin = silent
    with pytest.raises(KafkaUnavailable) as raised:
        await gateway.describe_cluster()
    assert silent.timeouts["describe_cluster"] == TIMEOUT_S
    assert "cannot reach Kafka at 127.0.0.1:9" in str(raised.value)
    assert raised.value.reason == "KafkaUnreachable"


class Answering(Silent):
    """A client whose coordinator lookups find `node`: it answers, or says it is the group's
    coordinator no longer (`moved`)."""

    def __init__(self, node: int, moved: bool = False) -> None:
        super().__init__()
        self.node = node
        self.moved = moved
        self.asked = 0

    def _pending(self, keys: list[str]) -> dict[str, concurrent.futures.Future[Any]]:
        self.asked += 1
        answers = super()._pending(keys)
        for key, future in answers.items():
            if self.moved:
                future.set_exception(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
            elif key == "orders":
                future.set_result(
                    Obj(
                        group_id=key,
                        members=[],
                        partition_assignor="",
                        state=Obj(name="EMPTY"),
                        type=Obj(name="CLASSIC"),
                        coordinator=Obj(id=self.node),
                    )
                )
        return answers


async def test_a_coordinator_that_moved_is_looked_up_anew_by_a_new_client(
    gateway: AdminGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = Answering(node=1, moved=True)
    fresh = Answering(node=3)
    gateway._admin = stale
    monkeypatch.setattr(kafka_admin, "AdminClient", lambda config: fresh)
    view = await gateway.describe_group("orders")
    # Asked once where the stale client thought the coordinator was, once more by a new one.
    assert (stale.asked, fresh.asked) == (1, 1)
    assert view.coordinator_id == 3 and view.state is GroupState.EMPTY
    assert gateway._admin is fresh


async def test_a_coordinator_that_keeps_moving_is_reported_after_one_new_client(
    gateway: AdminGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Answering] = []

    def client(config: Any) -> Answering:
        made.append(Answering(node=2, moved=True))
        return made[-1]

    gateway._admin = Answering(node=1, moved=True)
    monkeypatch.setattr(kafka_admin, "AdminClient", client)
    with pytest.raises(KafkaRequestFailed, match="the group coordinator moved") as raised:
        await gateway.committed_offsets("orders")
    assert raised.value.code == "NOT_COORDINATOR"
    # One new client, not one per answer: the next observation asks again.
    assert len(made) == 1 and made[0].asked == 1


class Dropping(Silent):
    """A client whose every request fails as librdkafka fails one whose broker was killed
    mid-request: the connection was reset."""

    def _pending(self, keys: list[str]) -> dict[str, concurrent.futures.Future[Any]]:
        answers = super()._pending(keys)
        for future in answers.values():
            reset = KafkaError(KafkaError._TRANSPORT, "Disconnected: connection reset by peer")
            future.set_exception(KafkaException(reset))
        return answers

    def describe_cluster(self, request_timeout: float) -> concurrent.futures.Future[Any]:
        future = super().describe_cluster(request_timeout)
        reset = KafkaError(KafkaError._TRANSPORT, "Disconnected: connection reset by peer")
        future.set_exception(KafkaException(reset))
        return future


async def test_a_coordinator_killed_mid_request_is_named_not_the_cluster(
    gateway: AdminGateway,
) -> None:
    # Measured on three nodes: the coordinator SIGKILLed while the observer described the
    # group read "cannot reach Kafka ... check spec.kafka.bootstrapServers" with two brokers up.
    dropping = Dropping()
    gateway._admin = dropping
    # What the real client made at construction reported about 127.0.0.1:9 (all brokers down)
    # is not what is under test: here the other brokers answer. Its callbacks are served while
    # it is polled, so the record is cleared once the gateway's poller has moved to the fake.
    assert dropping.polled.wait(timeout=30)
    gateway._watch = ConnectionWatch()
    with pytest.raises(KafkaUnavailable) as raised:
        await gateway.describe_group("orders")
    message = str(raised.value)
    assert raised.value.reason == "KafkaCoordinatorUnavailable", message
    assert message.startswith("the coordinator of group 'orders' at 127.0.0.1:9 dropped"), message
    assert "connection reset" in message, message
    # A request any broker answers says the cluster, as before.
    gateway._admin = Dropping()
    with pytest.raises(KafkaUnavailable) as cluster:
        await gateway.describe_cluster()
    assert cluster.value.reason == "KafkaUnreachable", str(cluster.value)
