"""Streams groups (KIP-1071) on Apache Kafka 4.4 with a real Kafka Streams 4.4 application:
what librdkafka cannot see of them, and what ListGroups v5 and StreamsGroupDescribe show."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from kafka_support import eventually, fresh

from rebalancer.clients.broker_configs import set_group_configs
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.streams_groups import StreamsGroupReader, StreamsGroupUnreadable
from rebalancer.structs.streams_groups import StreamsGroupView
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.streams_app import StreamsApp

PARTITIONS = 4
EVERY_TASK = {("0", partition) for partition in range(PARTITIONS)}


def describe(bootstrap: str, group_id: str) -> StreamsGroupView:
    async def run() -> StreamsGroupView:
        reader = StreamsGroupReader({"bootstrap.servers": bootstrap})
        try:
            return await reader.describe(group_id)
        finally:
            await reader.close()

    return asyncio.run(run())


def streams_groups(bootstrap: str) -> dict[str, str]:
    async def run() -> dict[str, str]:
        reader = StreamsGroupReader({"bootstrap.servers": bootstrap})
        try:
            return {group.group_id: group.group_type for group in await reader.list_groups()}
        finally:
            await reader.close()

    return asyncio.run(run())


class StreamsFleet:
    def __init__(self, bootstrap: str, folder: Path) -> None:
        self.bootstrap = bootstrap
        self.folder = folder
        self.app_id = fresh("uppercase")
        self.input, self.output = fresh("words"), fresh("upper")
        self.apps: list[StreamsApp] = []
        for topic in (self.input, self.output):
            asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))

    def start(self) -> StreamsApp:
        folder = self.folder / f"instance-{len(self.apps)}"
        app = StreamsApp(self.bootstrap, self.app_id, self.input, self.output, folder)
        self.apps.append(app.start())
        return app

    def settled(self, members: int) -> StreamsGroupView:
        def probe() -> StreamsGroupView | None:
            view = describe(self.bootstrap, self.app_id)
            return view if view.settled and len(view.members) == members else None

        return eventually(probe, 90, f"the streams group settles with {members} member(s)", 0.5)


@pytest.fixture(scope="module")
def fleet(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamsFleet]:
    apps = StreamsFleet(kafka.bootstrap, tmp_path_factory.mktemp("streams"))
    try:
        apps.start().wait_running()
        yield apps
    finally:
        for app in apps.apps:
            app.stop()


def test_librdkafka_does_not_see_a_streams_group(kafka: KafkaBroker, fleet: StreamsFleet) -> None:
    """Why clients/streams_groups.py exists: confluent-kafka 2.16.1 lists no streams group and
    describes a live one as a Dead classic group without members."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert fleet.app_id not in {group.group_id for group in listed.valid}
    seen = admin.describe_consumer_groups([fleet.app_id])[fleet.app_id].result(timeout=30)
    assert (seen.type.name, seen.state.name, len(seen.members)) == ("CLASSIC", "DEAD", 0)


def test_list_groups_by_type_shows_the_streams_group(
    kafka: KafkaBroker, fleet: StreamsFleet
) -> None:
    listed = streams_groups(kafka.bootstrap)
    assert listed.get(fleet.app_id) == "streams"
    assert set(listed.values()) == {"streams"}  # the types filter holds


def test_describe_shows_members_topology_and_tasks(kafka: KafkaBroker, fleet: StreamsFleet) -> None:
    one = fleet.settled(members=1)
    assert one.state == "Stable"
    [member] = one.members
    assert member.assignment.tasks("active") == EVERY_TASK
    assert member.assignment.tasks("standby") == set()
    assert member.member_epoch == one.assignment_epoch
    assert one.topology is not None
    assert [sub.source_topics for sub in one.topology] == [(fleet.input,)]
    # A second instance joins: the coordinator splits the tasks, no task is held twice.
    fleet.start().wait_running()
    two = fleet.settled(members=2)
    assert two.group_epoch > one.group_epoch
    held = list(two.active_tasks().values())
    assert all(held) and set().union(*held) == EVERY_TASK
    assert sum(map(len, held)) == PARTITIONS
    assert len({member.process_id for member in two.members}) == 2


def test_an_unknown_group_is_named_in_the_refusal(kafka: KafkaBroker) -> None:
    missing = fresh("no-such-app")
    with pytest.raises(StreamsGroupUnreadable, match=f"{missing}.*GROUP_ID_NOT_FOUND"):
        describe(kafka.bootstrap, missing)


# How long a member may take to appear and get its tasks, JVM start included.
FIRST_TASKS_WITHIN_S = 90.0


async def join_to_assignment_seconds(bootstrap: str, app_id: str) -> float:
    """From the member's first sighting in the group to its holding every task."""
    reader = StreamsGroupReader({"bootstrap.servers": bootstrap})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_TASKS_WITHIN_S
    joined: float | None = None
    try:
        while loop.time() < deadline:
            try:
                view = await reader.describe(app_id)
            except StreamsGroupUnreadable:
                view = None  # not created yet: the JVM is still starting
            now = loop.time()
            if view is not None and view.members:
                joined = joined if joined is not None else now
                if view.members[0].assignment.tasks("active") == EVERY_TASK:
                    return now - joined
            await asyncio.sleep(0.1)
    finally:
        await reader.close()
    raise AssertionError(f"{app_id} got no tasks within {FIRST_TASKS_WITHIN_S} s ({joined=})")


@pytest.mark.parametrize("delay_ms", [0, 10000])
def test_the_per_group_initial_delay_holds_the_first_assignment(
    kafka: KafkaBroker, tmp_path: Path, delay_ms: int
) -> None:
    """streams.initial.rebalance.delay.ms set on one group before its first member joins holds
    that group's first assignment (KAFKA-19829), and no other group's."""
    apps = StreamsFleet(kafka.bootstrap, tmp_path)
    gateway = AdminGateway({"bootstrap.servers": kafka.bootstrap})
    try:
        asyncio.run(
            set_group_configs(
                gateway, apps.app_id, {"streams.initial.rebalance.delay.ms": str(delay_ms)}
            )
        )
    finally:
        gateway.close()
    apps.start()
    try:
        waited = asyncio.run(join_to_assignment_seconds(kafka.bootstrap, apps.app_id))
    finally:
        apps.apps[0].stop()
    print(f"streams.initial.rebalance.delay.ms={delay_ms}: first tasks {waited:.1f} s after join")
    assert delay_ms / 1000 - 1.0 <= waited <= delay_ms / 1000 + 5.0
