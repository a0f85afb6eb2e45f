"""Group describes and committed offsets batched per coordinator, on a real Apache Kafka broker.

Groups of every kind the observer meets (classic with members, KIP-848 with members, groups that
only hold committed offsets, groups nobody ever used) are described and offset-fetched in one
pass through the gateway. The answers must equal librdkafka's for the same groups, and the pass
must cost the coordinator one ConsumerGroupDescribe, one DescribeGroups and one OffsetFetch,
plus one FindCoordinator for all the groups the first time. librdkafka's own count for the same
pass is taken too, so the test prints what batching saves.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from kafka_support import Fleet, eventually, fresh

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.clients.kafka_errors import KafkaRequestFailed
from rebalancer.structs.brokers import BrokerGroupView, CommittedOffsets, GroupState
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic

PARTITIONS = 4
KIP848 = {"KAFKA_GROUP_PROTOCOL": "consumer"}


@dataclass
class Groups:
    bootstrap: str
    topic: str
    classic: list[str]
    kip848: list[str]
    committed: list[str]
    unused: list[str]

    @property
    def every(self) -> list[str]:
        return [*self.classic, *self.kip848, *self.committed, *self.unused]


def commit(bootstrap: str, group_id: str, topic: str, offset: int) -> None:
    """Offsets committed the way a tool does it: no member, no generation."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": "false"}
    )
    try:
        partitions = [KafkaPartition(topic, p, offset + p) for p in range(PARTITIONS)]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


Pass = tuple[list[BrokerGroupView], list[CommittedOffsets]]


async def read_all(gateway: AdminGateway, groups: list[str]) -> Pass:
    """Every group described and offset-fetched at once, as the observers of a cluster do."""
    views = asyncio.gather(*(gateway.describe_group(group) for group in groups))
    offsets = asyncio.gather(*(gateway.committed_offsets(group) for group in groups))
    return list(await views), list(await offsets)


@pytest.fixture(scope="module")
def groups(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Groups]:
    bootstrap = kafka.bootstrap
    topic = fresh("batched")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    made = Groups(
        bootstrap,
        topic,
        classic=[fresh("classic") for _ in range(2)],
        kip848=[fresh("kip848") for _ in range(2)],
        committed=[fresh("committed") for _ in range(2)],
        unused=[fresh("unused") for _ in range(3)],
    )
    # Offsets first: a group with members takes no commit from outside its generation.
    for index, group in enumerate([*made.classic, *made.kip848, *made.committed]):
        commit(bootstrap, group, topic, 10 * (index + 1))
    fleet = Fleet(bootstrap, Path(tmp_path_factory.mktemp("batched")))
    try:
        for group in made.classic:
            fleet.start(f"{group}-0", group, topic)
        for group in made.kip848:
            fleet.start(f"{group}-0", group, topic, **KIP848)
        old = AdminGateway(build_client_config([bootstrap], None), batched_reads=False)
        try:
            for group in [*made.classic, *made.kip848]:
                eventually(lambda g=group: settled(old, g), 60, f"{group} Stable with its member")
        finally:
            old.close()
        yield made
    finally:
        fleet.kill_all()


def settled(gateway: AdminGateway, group: str) -> bool:
    async def run() -> BrokerGroupView:
        return await gateway.describe_group(group)

    view = asyncio.run(run())
    owned = sum(len(member.partitions) for member in view.members)
    return view.state is GroupState.STABLE and len(view.members) == 1 and owned == PARTITIONS


class Tally:
    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()

    def add(self, requests: Mapping[str, int]) -> None:
        self.sent.update(requests)


def librdkafka_pass(groups: Groups) -> tuple[list[BrokerGroupView], list[CommittedOffsets], int]:
    """The old path's answers, and the group requests librdkafka sent for them (its own count)."""
    tally = Tally()
    config = {**build_client_config([groups.bootstrap], None), "statistics.interval.ms": "500"}
    old = AdminGateway(config, batched_reads=False, count_requests=tally.add)
    try:
        asyncio.run(old.list_topics())
        before = settled_count(tally)
        views, offsets = asyncio.run(read_all(old, groups.every))
        spent = settled_count(tally) - before
    finally:
        old.close()
    kinds = ("DescribeGroups", "ConsumerGroupDescribe", "OffsetFetch", "FindCoordinator")
    return views, offsets, sum(spent[kind] for kind in kinds)


def settled_count(tally: Tally) -> Counter[str]:
    last = Counter(tally.sent)
    for _ in range(20):
        time.sleep(0.6)
        if tally.sent == last:
            break
        last = Counter(tally.sent)
    return Counter(tally.sent)


def without_generations(view: BrokerGroupView) -> BrokerGroupView:
    members = tuple(replace(member, joined_generation=None) for member in view.members)
    return replace(view, group_epoch=None, members=members)


def test_one_pass_costs_each_coordinator_one_request_per_kind_and_answers_as_before(
    groups: Groups,
) -> None:
    old_views, old_offsets, old_requests = librdkafka_pass(groups)
    tally = Tally()
    gateway = AdminGateway(build_client_config([groups.bootstrap], None), count_requests=tally.add)
    counts: list[Counter[str]] = []

    async def two_passes() -> tuple[Pass, Pass]:
        first = await read_all(gateway, groups.every)
        counts.append(Counter(tally.sent))
        return first, await read_all(gateway, groups.every)

    try:
        (views, offsets), (again_views, again_offsets) = asyncio.run(two_passes())
        first, second = counts[0], Counter(tally.sent) - counts[0]
        reader = gateway._groups
        assert reader is not None
        by_node = {key: n for key, n in reader.sent.items() if key[1] != "FindCoordinator"}
    finally:
        gateway.close()
    # What librdkafka's describe carries is the same; the batched reads add the generation
    # (a KIP-848 group's epoch, the generation each classic member joined from).
    assert [without_generations(view) for view in views] == old_views
    epochs = {view.group_id: view.group_epoch for view in views}
    assert all(isinstance(epochs[g], int) and epochs[g] >= 1 for g in groups.kip848), epochs
    assert offsets == old_offsets
    assert (again_views, again_offsets) == (views, offsets)
    # The answers are of every kind the pass meant to cover.
    kinds = {view.group_id: (view.protocol.value, view.state.value) for view in views}
    assert {kinds[g] for g in groups.kip848} == {("consumer", "Stable")}, kinds
    assert {kinds[g] for g in groups.classic} == {("classic", "Stable")}, kinds
    assert {kinds[g] for g in groups.unused} == {("classic", "Dead")}, kinds
    assert all(o.offsets for o in offsets[: -len(groups.unused)]), offsets
    # First pass: the bootstrap's Metadata, one lookup for every group, one request per kind.
    assert first == Counter(
        Metadata=1, FindCoordinator=1, ConsumerGroupDescribe=1, DescribeGroups=1, OffsetFetch=1
    ), first
    # The coordinators are remembered: the next pass asks the coordinator alone.
    assert second == Counter(ConsumerGroupDescribe=1, DescribeGroups=1, OffsetFetch=1), second
    # Both passes, as the coordinator (the one node) received them.
    assert by_node == {
        (None, "Metadata"): 1,
        (1, "ConsumerGroupDescribe"): 2,
        (1, "DescribeGroups"): 2,
        (1, "OffsetFetch"): 2,
    }, by_node
    print(
        f"\n{len(groups.every)} groups described and offset-fetched: librdkafka "
        f"{old_requests} group requests, batched {sum(first.values()) - 1} on the first pass "
        f"and {sum(second.values())} on the next"
    )


def test_an_error_in_a_batch_stays_with_its_group(groups: Groups) -> None:
    gateway = AdminGateway(build_client_config([groups.bootstrap], None))

    async def run() -> list[BrokerGroupView | BaseException]:
        asked = [*groups.classic, "", *groups.kip848]
        return await asyncio.gather(
            *(gateway.describe_group(group) for group in asked), return_exceptions=True
        )

    try:
        answers = asyncio.run(run())
    finally:
        gateway.close()
    refused = answers.pop(len(groups.classic))
    assert isinstance(refused, KafkaRequestFailed), refused
    assert all(isinstance(answer, BrokerGroupView) for answer in answers), answers
