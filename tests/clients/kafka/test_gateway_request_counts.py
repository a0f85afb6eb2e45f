"""What the observers' shared reads cost a real Apache Kafka broker, counted by librdkafka itself
(its statistics, as rebalancer_kafka_requests_total reads them).

Forty groups asked for at once are one describe call to librdkafka. librdkafka 2.16 still sends
the broker one DescribeGroups per group (after a ConsumerGroupDescribe, which Apache Kafka 4
answers for classic groups with GROUP_ID_NOT_FOUND) and looks each group's coordinator up: the
test pins that on the gateway's librdkafka path (the batch reader's counts are in
test_batched_group_reads.py), so a librdkafka that batches per coordinator shows here first.
Forty reads of the topic metadata within max_age are one Metadata request.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator, Mapping

import pytest
from kafka_support import fresh

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config

GROUPS = 40


@pytest.fixture
def counted(bootstrap: str) -> Iterator[tuple[AdminGateway, Counter[str], list[int]]]:
    sent: Counter[str] = Counter()
    batches: list[int] = []

    def add(requests: Mapping[str, int]) -> None:
        sent.update(requests)

    config = {**build_client_config([bootstrap], None), "statistics.interval.ms": "500"}
    admin = AdminGateway(
        config, count_requests=add, count_batch=batches.append, batched_reads=False
    )
    yield admin, sent, batches
    admin.close()


def settled(sent: Counter[str]) -> Counter[str]:
    """The counts once two statistics reports in a row agree."""
    last = Counter(sent)
    for _ in range(20):
        time.sleep(0.6)
        if sent == last:
            return Counter(sent)
        last = Counter(sent)
    return Counter(sent)


async def test_one_describe_call_and_one_metadata_read_for_many_groups(
    counted: tuple[AdminGateway, Counter[str], list[int]],
) -> None:
    gateway, sent, batches = counted
    await gateway.list_topics()  # connected, and the client's start-up requests counted
    before = await asyncio.to_thread(settled, sent)
    groups = [fresh("batched") for _ in range(GROUPS)]
    views = await asyncio.gather(*(gateway.describe_group(group) for group in groups))
    topics = await asyncio.gather(*(gateway.list_topics(max_age=5.0) for _ in range(GROUPS)))
    after = await asyncio.to_thread(settled, sent)
    spent = after - before
    assert sorted(view.group_id for view in views) == sorted(groups)
    assert all(answer == topics[0] for answer in topics)
    assert batches[-1] == GROUPS and len(batches) == 1
    assert spent["Metadata"] <= 2, spent  # the shared read (and at most one refresh of its own)
    # One DescribeGroups per group on the wire, whatever the call carried.
    assert spent["DescribeGroups"] == GROUPS, spent
    assert spent["FindCoordinator"] >= 1, spent
