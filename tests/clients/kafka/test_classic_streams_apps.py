"""A classic-protocol Kafka Streams application (StreamsPartitionAssignor) on Apache Kafka 4.4:
its group's protocol is `stream`, and the lever decision refuses it (planning/group_levers.py)
instead of visiting a group whose leader fails on a foreign member; its generation is read from
its members' subscriptions, as it sends no member reports."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from kafka_support import eventually, fresh
from sidecar_support import SidecarProcess

from rebalancer.clients.group_visiting import ClassicGroup, GroupVisitor
from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.planning.group_levers import GroupFacts, Lever, choose_lever
from rebalancer.planning.observing import broker_generation
from rebalancer.structs.brokers import GroupState
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.streams_app import StreamsApp


def described(bootstrap: str, group_id: str) -> ClassicGroup:
    async def run() -> ClassicGroup:
        visitor = GroupVisitor({"bootstrap.servers": bootstrap}, group_id, "streams-test")
        try:
            return await visitor.describe()
        finally:
            await visitor.close()

    return asyncio.run(run())


def test_a_classic_streams_app_is_refused_not_visited(kafka: KafkaBroker, tmp_path: Path) -> None:
    app_id, source, sink = fresh("classic-upper"), fresh("words"), fresh("upper")
    for topic in (source, sink):
        asyncio.run(ensure_topic(kafka.bootstrap, topic, 4))
    with StreamsApp(kafka.bootstrap, app_id, source, sink, tmp_path, "classic") as app:
        app.wait_running()

        def stable() -> ClassicGroup | None:
            group = described(kafka.bootstrap, app_id)
            return group if group.state == "Stable" else None

        group = eventually(stable, 60, "the Streams app's classic group is Stable", 0.5)
        assert (group.protocol_type, group.protocol_name) == ("consumer", "stream")
        assert len(group.member_ids) == 1
        facts = GroupFacts("classic", True, group.protocol_type, group.protocol_name)
        choice = choose_lever(facts, configured_strategy=None, configured_protocol=None)
        assert choice.lever is Lever.UNSUPPORTED
        assert "Kafka Streams" in choice.reason

        # The sidecar's other source, librdkafka's describe, names the same assignor.
        gateway = AdminGateway({"bootstrap.servers": kafka.bootstrap})
        try:
            view = asyncio.run(gateway.describe_group(app_id))
        finally:
            gateway.close()
        assert view.assignor == "stream"
        by_admin = GroupFacts(view.protocol.value, True, "consumer", view.assignor)
        assert choose_lever(
            by_admin, configured_strategy="range", configured_protocol=None
        ).lever is (Lever.UNSUPPORTED)
        assert app.states()[-1].endswith("RUNNING")

        # The sidecar itself, beside the app: it refuses, and no member of its joins the group.
        sidecar = SidecarProcess("pod0", kafka.bootstrap, app_id, tmp_path, strategy=None)
        try:
            seen = eventually(
                lambda: (v := sidecar.group()) is not None and v["lever"] == "unsupported" and v,
                60,
                "the sidecar refuses the Streams group",
            )
            assert "Kafka Streams" in seen["leverReason"], seen
            status, body = sidecar.enforce(app_id, "enforce-1", waitSeconds=2)
            assert status == 422 and "spec.policy.enforce" in body["error"], body
        finally:
            sidecar.stop()
        after = described(kafka.bootstrap, app_id)
        assert (after.state, after.member_ids) == ("Stable", group.member_ids)
        assert app.states()[-1].endswith("RUNNING")


def test_a_classic_streams_groups_generation_is_read_from_its_members(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    """A Streams application sends the operator no member reports; its members' subscriptions
    name the generation each joined from (KIP-792), so the broker's describe gives the group's
    generation once one member has rejoined, as the coordinator logged it."""
    app_id, source, sink = fresh("classic-gen"), fresh("words"), fresh("upper")
    for topic in (source, sink):
        asyncio.run(ensure_topic(kafka.bootstrap, topic, 4))
    gateway = AdminGateway(build_client_config([kafka.bootstrap], None))
    first = StreamsApp(kafka.bootstrap, app_id, source, sink, tmp_path / "a", "classic")
    second = StreamsApp(kafka.bootstrap, app_id, source, sink, tmp_path / "b", "classic")
    try:
        first.start().wait_running()
        alone = asyncio.run(gateway.describe_group(app_id))
        # Its only member joined afresh: nothing names the generation yet.
        assert broker_generation(alone) is None, alone
        second.start().wait_running()

        def settled() -> tuple[int, int] | None:
            view = asyncio.run(gateway.describe_group(app_id))
            found = broker_generation(view)
            logged = stabilized(kafka, app_id)
            if view.state is not GroupState.STABLE or found is None or not logged:
                return None
            return (found, logged[-1]) if found == logged[-1] else None

        found, logged = eventually(settled, 90, "the generation both ways", 0.5)
    finally:
        second.stop()
        first.stop()
        gateway.close()
    # The coordinator's own word: generation 2 when the second instance joined, 3 when the
    # cooperative follow-up gave it the tasks the first revoked.
    assert found == logged >= 2


def stabilized(kafka: KafkaBroker, group_id: str) -> list[int]:
    """The generations the group coordinator logged the group Stable at, in order."""
    pattern = re.compile(rf"Stabilized group {re.escape(group_id)} generation (\d+)")
    return [int(found) for found in pattern.findall(kafka.log_path.read_text(errors="replace"))]
