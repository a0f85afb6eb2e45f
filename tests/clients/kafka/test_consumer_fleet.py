"""Two real consumer processes form a group on Apache Kafka; the gateway and their reports see it.

The group forms in two steps on purpose: fleet-0 alone, then fleet-1 joins, so there is a
rebalance to see (cooperative-sticky: fleet-0 first gives up half, then fleet-1 gets it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka_support import (
    ConsumerProcess,
    Fleet,
    ReportCollector,
    eventually,
    fresh,
    partitions_of,
)

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.structs.brokers import BrokerProfile, GroupState, TopicPartition
from rebalancer.structs.reports import parse_report
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import NumberedProducer, ensure_topic

PARTITIONS = 4
MESSAGES = 40
TOKEN = "fleet-token"
REPORT_KEYS = {
    "version",
    "groupId",
    "namespace",
    "consumerGroup",
    "member",
    "event",
    "generation",
    "protocol",
    "assignmentStrategy",
    "partitions",
    "lag",
    "timestamp",
}


@dataclass
class FormedGroup:
    bootstrap: str
    topic: str
    group_id: str
    collector: ReportCollector
    first: ConsumerProcess
    second: ConsumerProcess
    records: list[Path]
    first_generation: int
    formed_generation: int

    @property
    def everything(self) -> set[tuple[str, int]]:
        return {(self.topic, partition) for partition in range(PARTITIONS)}


def converged(collector: ReportCollector, hosts: list[str], everything: set[Any]) -> int | None:
    """The shared generation once the members' latest reports split `everything` between them."""
    latest = [collector.latest(host) for host in hosts]
    if any(report is None or report["event"] not in ("assigned", "heartbeat") for report in latest):
        return None
    owned = [partitions_of(report) for report in latest]
    generations = {report["generation"] for report in latest if report is not None}
    if len(generations) != 1 or set().union(*owned) != everything:
        return None
    if sum(len(part) for part in owned) != len(everything) or not all(owned):
        return None
    return generations.pop()


@pytest.fixture(scope="module")
def formed(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormedGroup]:
    bootstrap = kafka.bootstrap
    topic, group_id = fresh("orders"), fresh("fleet")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    producer = NumberedProducer(bootstrap, topic)
    producer.run(rate=0, count=MESSAGES)
    assert producer.delivered == MESSAGES

    logs = tmp_path_factory.mktemp("fleet")
    collector = ReportCollector(TOKEN).start()
    fleet = Fleet(bootstrap, logs)
    env = {
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
        "REBALANCER_REPORT_URL": collector.url,
        "REBALANCER_REPORT_TOKEN": TOKEN,
        "REBALANCER_REPORT_INTERVAL_S": "1",
    }
    records = [logs / "fleet-0.records", logs / "fleet-1.records"]
    everything = {(topic, partition) for partition in range(PARTITIONS)}
    try:
        first = fleet.start("fleet-0", group_id, topic, RECORD_FILE=str(records[0]), **env)
        alone = eventually(
            lambda: next(
                (
                    report
                    for report in collector.reports("fleet-0", "assigned")
                    if partitions_of(report) == everything
                ),
                None,
            ),
            30,
            "fleet-0 owns every partition",
        )
        second = fleet.start("fleet-1", group_id, topic, RECORD_FILE=str(records[1]), **env)
        generation = eventually(
            lambda: converged(collector, ["fleet-0", "fleet-1"], everything),
            45,
            "fleet-0 and fleet-1 split the partitions",
        )
        yield FormedGroup(
            bootstrap,
            topic,
            group_id,
            collector,
            first,
            second,
            records,
            alone["generation"],
            generation,
        )
    finally:
        fleet.kill_all()
        collector.close()


def test_reports_show_increasing_generations_and_a_disjoint_cover(formed: FormedGroup) -> None:
    collector = formed.collector
    assert collector.refused == 0
    for body in collector.reports():
        assert set(body) == REPORT_KEYS
        parse_report(body, received_at=time.time())  # the operator's parser accepts it
        assert body["groupId"] == formed.group_id
        assert body["assignmentStrategy"] == "cooperative-sticky"
    for host in ("fleet-0", "fleet-1"):
        generations = [r["generation"] for r in collector.reports(host) if r["generation"] >= 0]
        assert generations == sorted(generations), f"{host} went back a generation"
    assert formed.formed_generation > formed.first_generation
    # Cooperative: fleet-0 revoked only what moved, and kept the rest throughout.
    revoked = collector.reports("fleet-0", "revoked")
    assert revoked and 0 < len(partitions_of(revoked[0])) < PARTITIONS
    owned = [partitions_of(collector.latest(host)) for host in ("fleet-0", "fleet-1")]
    assert owned[0].isdisjoint(owned[1])
    assert owned[0] | owned[1] == formed.everything


async def test_gateway_sees_the_group_the_fleet_formed(formed: FormedGroup) -> None:
    gateway = AdminGateway(build_client_config([formed.bootstrap], None))
    try:
        deadline = time.monotonic() + 15
        view = await gateway.describe_group(formed.group_id)
        while view.state is not GroupState.STABLE and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            view = await gateway.describe_group(formed.group_id)
        assert view.state is GroupState.STABLE
        assert view.coordinator_id is not None
        # Apache Kafka describes every member with its assignment.
        assert view.members_known
        assigned = {tp for member in view.members for tp in member.partitions}
        assert assigned == {TopicPartition(t, p) for t, p in formed.everything}
        topics = await gateway.list_topics()
        assert topics[formed.topic] == PARTITIONS
        # Known from the cluster id the metadata carries.
        assert gateway.profile is BrokerProfile.APACHE_KAFKA
    finally:
        gateway.close()


async def test_committed_offsets_cover_every_message(formed: FormedGroup) -> None:
    gateway = AdminGateway(build_client_config([formed.bootstrap], None))
    try:
        deadline = time.monotonic() + 15
        offsets = await gateway.committed_offsets(formed.group_id)
        while offsets.total() < MESSAGES and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            offsets = await gateway.committed_offsets(formed.group_id)
        assert offsets.total() == MESSAGES
        assert {entry.partition.partition for entry in offsets.offsets} == set(range(PARTITIONS))
    finally:
        gateway.close()
    keys: set[int] = set()
    for path in formed.records:
        if path.exists():
            for line in path.read_text().splitlines():
                keys.add(int(line.split("\t")[3]))
    assert keys == set(range(MESSAGES))


def test_heartbeats_carry_lag(formed: FormedGroup) -> None:
    for host in ("fleet-0", "fleet-1"):
        eventually(
            lambda host=host: any(
                report["lag"] == 0 and report["partitions"]
                for report in formed.collector.reports(host, "heartbeat")
            ),
            10,
            f"{host} reports its lag",
        )


def test_a_member_that_stops_says_so_and_hands_over(formed: FormedGroup) -> None:
    collector = formed.collector
    assert formed.second.stop(timeout=20) == 0
    assert "stopped after processing" in formed.second.output()
    last_two = collector.reports("fleet-1")[-2:]
    assert [report["event"] for report in last_two] == ["revoked", "stopped"]
    assert all(report["partitions"] == [] for report in last_two)
    assert last_two[-1]["member"]["memberId"]
    handed_over = eventually(
        lambda: next(
            (
                report
                for report in collector.reports("fleet-0", "assigned")
                if partitions_of(report) == formed.everything
                and report["generation"] > formed.formed_generation
            ),
            None,
        ),
        30,
        "fleet-0 owns every partition again",
    )
    assert handed_over["generation"] > formed.formed_generation
