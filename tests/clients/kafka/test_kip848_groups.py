"""KIP-848 groups (`group.protocol=consumer`) on Apache Kafka: what the operator reads of them
and what an enforced rebalance does to them, with real consumer processes and a sidecar in every
pod."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_support import Fleet, ReportCollector, eventually, fresh, partitions_of
from sidecar_support import SidecarProcess, wait_joined

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.structs.brokers import BrokerGroupView, GroupProtocol, GroupState
from rebalancer.structs.enforcement import control_topic, flip_topic
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic

PARTITIONS = 6
REPORT_TOKEN = "report-token"
PROTOCOL = {"KAFKA_GROUP_PROTOCOL": "consumer"}
APPS = ["kip-0", "kip-1", "kip-2"]


@dataclass
class Kip848Group:
    bootstrap: str
    topic: str
    group_id: str
    collector: ReportCollector
    sidecars: list[SidecarProcess]

    @property
    def everything(self) -> set[tuple[str, int]]:
        return {(self.topic, partition) for partition in range(PARTITIONS)}

    def owned(self) -> dict[str, set[tuple[str, int]]] | None:
        """Each application member's partitions once they split the topic, else None."""
        owned = {host: partitions_of(self.collector.latest(host)) for host in APPS}
        union = set().union(*owned.values())
        disjoint = sum(map(len, owned.values())) == len(self.everything)
        return owned if union == self.everything and disjoint and all(owned.values()) else None

    def describe(self) -> BrokerGroupView:
        async def run() -> BrokerGroupView:
            gateway = AdminGateway({"bootstrap.servers": self.bootstrap})
            try:
                return await gateway.describe_group(self.group_id)
            finally:
                gateway.close()

        return asyncio.run(run())

    def settled_view(self) -> BrokerGroupView:
        def probe() -> BrokerGroupView | None:
            view = self.describe()
            settled = view.state is GroupState.STABLE and len(view.members) == 2 * len(APPS)
            return view if settled and not any(m.reconciling for m in view.members) else None

        return eventually(
            probe, 45, "the group is Stable with every member at its target", every=0.5
        )


@pytest.fixture(scope="module")
def group(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kip848Group]:
    bootstrap = kafka.bootstrap
    topic, group_id = fresh("kip848"), fresh("kip848")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    logs = tmp_path_factory.mktemp("kip848")
    collector = ReportCollector(REPORT_TOKEN).start()
    fleet = Fleet(bootstrap, logs)
    sidecars: list[SidecarProcess] = []
    report = {
        "REBALANCER_REPORT_URL": collector.url,
        "REBALANCER_REPORT_TOKEN": REPORT_TOKEN,
        "REBALANCER_REPORT_INTERVAL_S": "1",
    }
    try:
        for pod in APPS:
            fleet.start(pod, group_id, topic, **PROTOCOL, **report)
            # A sidecar in every pod, as `spec.policy.enforce.sidecar.inject` puts them.
            sidecars.append(SidecarProcess(pod, bootstrap, group_id, logs, env=PROTOCOL))
        formed = Kip848Group(bootstrap, topic, group_id, collector, sidecars)
        wait_joined(sidecars)
        eventually(formed.owned, 45, "the application's members split the partitions")
        yield formed
    finally:
        for sidecar in sidecars:
            sidecar.kill()
        fleet.kill_all()
        collector.close()


def test_the_broker_describes_the_group_with_its_protocol_and_target_assignment(
    group: Kip848Group,
) -> None:
    view = group.settled_view()
    assert view.protocol is GroupProtocol.CONSUMER
    # The broker's assignor, not a client's: Kafka 4's default group.consumer.assignors.
    assert view.assignor == "uniform"
    apps = {m.client_id: m for m in view.members if not m.client_id.endswith("-sidecar")}
    assert sorted(apps) == APPS
    owned = group.owned()
    assert owned is not None
    for host, member in apps.items():
        # ConsumerGroupDescribe's two assignments agree once Stable, and with what the
        # member itself reports.
        assert member.target_partitions == member.partitions
        assert {(p.topic, p.partition) for p in member.partitions} == owned[host]
    # The uniform assignor honours each member's subscription: the sidecars, subscribed to
    # the control topics only, hold no application partition.
    sidecar_topics = {
        p.topic for m in view.members if m.client_id.endswith("-sidecar") for p in m.partitions
    }
    assert sidecar_topics <= {control_topic(group.group_id), flip_topic(group.group_id)}


def test_enforcing_through_any_sidecar_moves_no_partition_and_calls_no_callback(
    group: Kip848Group,
) -> None:
    group.settled_view()
    before = group.owned()
    assert before is not None
    actors = [s for s in group.sidecars if (s.group() or {}).get("actor")]
    # Several sidecars in one KIP-848 group elect exactly one actor, as in a classic group.
    assert len(actors) == 1, [s.group() for s in group.sidecars]
    other = next(s for s in group.sidecars if s is not actors[0])
    started = time.time()
    status, body = other.enforce(group.group_id, "kip848-once", waitSeconds=30)
    assert status == 200 and body["status"] == "enforced", body
    # The sidecar's subscription change bumped the group epoch: the coordinator computed a
    # new target assignment.
    assert body["generation"] > body["fromGeneration"]
    time.sleep(3)
    view = group.settled_view()
    assert group.owned() == before
    for member in view.members:
        assert member.target_partitions == member.partitions
    for host in APPS:
        events = [
            report["event"]
            for report in group.collector.reports(host)
            if report["timestamp"] >= started and report["event"] != "heartbeat"
        ]
        # Members whose assignment does not change get no callback under KIP-848.
        assert events == [], (host, events)


def test_a_sidecar_whose_settings_name_no_protocol_follows_the_groups_kind(
    group: Kip848Group, tmp_path: Path
) -> None:
    """A fleet whose settings the sidecar does not get (no KAFKA_GROUP_PROTOCOL): it reads the
    group's kind from the broker and joins as a KIP-848 member (planning/group_levers.py)."""
    before = group.owned()
    sidecar = SidecarProcess("kip-late", group.bootstrap, group.group_id, tmp_path, strategy=None)
    try:
        wait_joined([sidecar])
        view = sidecar.group() or {}
        assert view["lever"] == "subscription", view
        # A classic JoinGroup into this group would have been refused; this one is a member.
        assert view["memberId"] and view["lastError"] is None, view
        assert group.owned() == before  # the application's members kept their partitions
    finally:
        sidecar.stop()
