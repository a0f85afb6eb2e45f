"""Requests a group's coordinator answers are bounded by the gateway, never by librdkafka.

librdkafka 2.16 aborts the process when such a request timed out inside librdkafka before the
coordinator was known and the coordinator is found later (rd_kafka_enq_once_del_source_return);
a coordinator SIGKILLed on a three-node cluster took the operator down that way. So the gateway
gives librdkafka a timeout no request reaches and gives up by its own clock, with a message
that names the coordinator, not the cluster, as what did not answer. Here a fake librdkafka
client that never answers stands in for the cluster (tests/kafka/test_gateway_outage.py kills a
real coordinator).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rebalancer.clients.kafka_admin import COORDINATOR_REQUEST_TIMEOUT_S, AdminGateway
from rebalancer.clients.kafka_errors import KafkaUnavailable

# Below the gateway's 1.5 s grace after an all-brokers-down report: whatever the real client
# made at construction says about the address, the deadline is what ends the wait.
TIMEOUT_S = 0.4


class Silent:
    """A librdkafka AdminClient whose requests are never answered; it notes their timeouts."""

    def __init__(self) -> None:
        self.timeouts: dict[str, float] = {}

    def poll(self, timeout: float) -> int:
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
    made = AdminGateway({"bootstrap.servers": "127.0.0.1:9"}, request_timeout=TIMEOUT_S)
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
