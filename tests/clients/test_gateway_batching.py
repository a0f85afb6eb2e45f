"""The gateway's Kafka reads shared by the observers of one cluster: the groups asked for at the
same moment go to librdkafka in one describe call, the topic metadata is read once per max_age
for all of them, and librdkafka's request counts come out as requests sent since the last
report. A fake librdkafka client stands in for the cluster (it counts calls); the real one is
measured in bench/scale.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Iterator
from types import SimpleNamespace as Obj
from typing import Any

import pytest

from rebalancer.clients.kafka_admin import DESCRIBE_BATCH_WINDOW_S, AdminGateway
from rebalancer.clients.kafka_errors import KafkaRequestFailed
from rebalancer.clients.kafka_reading import RequestTally, read_request_totals
from rebalancer.structs.brokers import GroupState


def described(group_id: str) -> Obj:
    return Obj(
        group_id=group_id,
        members=[],
        partition_assignor="",
        state=Obj(name="EMPTY"),
        type=Obj(name="CLASSIC"),
        coordinator=Obj(id=1),
    )


class Counting:
    """Answers every describe at once and every metadata read after `delay`; notes each call."""

    def __init__(self, delay: float = 0.0, refuse: frozenset[str] = frozenset()) -> None:
        self.describe_calls: list[list[str]] = []
        self.metadata_calls = 0
        self.delay = delay
        self.refuse = refuse

    def poll(self, timeout: float) -> int:
        return 0

    def describe_consumer_groups(
        self, groups: list[str], request_timeout: float
    ) -> dict[str, concurrent.futures.Future[Any]]:
        self.describe_calls.append(list(groups))
        answers: dict[str, concurrent.futures.Future[Any]] = {}
        for group in groups:
            answers[group] = concurrent.futures.Future()
            if group in self.refuse:
                from confluent_kafka import KafkaError, KafkaException

                error = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
                answers[group].set_exception(KafkaException(error))
            else:
                answers[group].set_result(described(group))
        return answers

    def list_topics(self, timeout: float) -> Obj:
        import time

        self.metadata_calls += 1
        time.sleep(self.delay)
        return Obj(cluster_id=None, topics={"orders": Obj(partitions={0: 0, 1: 1})})


@pytest.fixture
def gateway() -> Iterator[AdminGateway]:
    batches: list[int] = []
    # librdkafka's path: it reads groups when the batch reader cannot (clients/kafka_admin.py).
    made = AdminGateway(
        {"bootstrap.servers": "127.0.0.1:9"},
        request_timeout=2.0,
        count_batch=batches.append,
        batched_reads=False,
    )
    made.batches = batches  # type: ignore[attr-defined]
    try:
        yield made
    finally:
        made.close()


async def test_groups_asked_together_share_one_describe_call(gateway: AdminGateway) -> None:
    fake = Counting()
    gateway._admin = fake
    groups = [f"g{i}" for i in range(200)]
    views = await asyncio.gather(*(gateway.describe_group(group) for group in groups))
    assert [view.group_id for view in views] == groups
    assert all(view.state is GroupState.EMPTY for view in views)
    assert len(fake.describe_calls) == 1 and sorted(fake.describe_calls[0]) == sorted(groups)
    assert gateway.batches == [200]  # type: ignore[attr-defined]
    # Asked later: a call of its own.
    await asyncio.sleep(DESCRIBE_BATCH_WINDOW_S * 2)
    await gateway.describe_group("late")
    assert fake.describe_calls[-1] == ["late"]


async def test_one_refused_group_fails_alone(gateway: AdminGateway) -> None:
    gateway._admin = Counting(refuse=frozenset({"secret"}))
    results = await asyncio.gather(
        gateway.describe_group("open"), gateway.describe_group("secret"), return_exceptions=True
    )
    assert results[0].group_id == "open"  # type: ignore[union-attr]
    assert isinstance(results[1], KafkaRequestFailed)
    assert "Describe on group 'secret'" in str(results[1])


async def test_topic_metadata_is_read_once_per_max_age(gateway: AdminGateway) -> None:
    fake = Counting(delay=0.1)
    gateway._admin = fake
    # Many observers at once: one read under way is shared.
    answers = await asyncio.gather(*(gateway.list_topics(max_age=5.0) for _ in range(50)))
    assert answers == [{"orders": 2}] * 50 and fake.metadata_calls == 1
    assert await gateway.list_topics(max_age=5.0) == {"orders": 2}
    assert fake.metadata_calls == 1
    # Without max_age (every caller before this change): a read of its own.
    await gateway.list_topics()
    assert fake.metadata_calls == 2
    # Older than max_age: read again.
    await asyncio.sleep(0.05)
    await gateway.list_topics(max_age=0.01)
    assert fake.metadata_calls == 3


def statistics(name: str, **per_broker: dict[str, int]) -> str:
    return json.dumps(
        {"name": name, "brokers": {broker: {"req": req} for broker, req in per_broker.items()}}
    )


def test_librdkafka_totals_become_requests_since_the_last_report() -> None:
    tally = RequestTally()
    first = statistics("admin#1", b1={"DescribeGroups": 3, "Metadata": 1}, b2={"DescribeGroups": 2})
    assert tally.since_last(read_request_totals(first)) == {"DescribeGroups": 5, "Metadata": 1}
    second = statistics(
        "admin#1", b1={"DescribeGroups": 4, "Metadata": 1}, b2={"DescribeGroups": 2}
    )
    assert tally.since_last(read_request_totals(second)) == {"DescribeGroups": 1}
    # A new client (after a replacement) counts from zero, the old one's totals kept apart.
    third = statistics("admin#2", b1={"Metadata": 2})
    assert tally.since_last(read_request_totals(third)) == {"Metadata": 2}
    with pytest.raises(ValueError, match="not JSON"):
        read_request_totals("{")


def test_the_gateway_counts_what_its_client_reports() -> None:
    counted: list[dict[str, int]] = []
    gateway = AdminGateway({"bootstrap.servers": "127.0.0.1:9"}, count_requests=counted.append)
    try:
        assert gateway._client_config["statistics.interval.ms"] == "10000"
        gateway._on_statistics(statistics("a", b={"DescribeGroups": 2}))
        gateway._on_statistics(statistics("a", b={"DescribeGroups": 2}))
        gateway._on_statistics(statistics("a", b={"DescribeGroups": 7, "FindCoordinator": 1}))
        gateway._on_statistics("not json")
    finally:
        gateway.close()
    assert counted == [{"DescribeGroups": 2}, {"DescribeGroups": 5, "FindCoordinator": 1}]
