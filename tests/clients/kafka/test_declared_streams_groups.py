"""A group that spec.policy.protocol declares a streams group, read on Apache Kafka 4.4 as the
observer's first look reads it: StreamsGroupDescribe straight away, no ListGroups. A group id
nobody uses and a live classic group both have no streams group; librdkafka's view of the
classic one is the broker's word against the declaration (planning.protocol_checks)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafka_support import Fleet, eventually, fresh

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.streams_groups import describe_streams_group
from rebalancer.planning.protocol_checks import judge_protocol, reads_as_streams
from rebalancer.structs.brokers import BrokerGroupView, GroupState
from rebalancer.structs.specs import ProtocolChoice
from rebalancer_lab.producer import ensure_topic


def described(bootstrap: str, group_id: str) -> BrokerGroupView:
    gateway = AdminGateway({"bootstrap.servers": bootstrap})
    try:
        return asyncio.run(gateway.describe_group(group_id))
    finally:
        gateway.close()


def test_a_group_nobody_uses_reads_as_a_streams_group_not_created_yet(bootstrap: str) -> None:
    group_id = fresh("declared-streams")
    view = described(bootstrap, group_id)
    # As librdkafka describes a live streams group too: nothing to tell the two apart.
    assert (view.state, view.members) == (GroupState.DEAD, ())
    assert reads_as_streams(ProtocolChoice.STREAMS, view)
    assert asyncio.run(describe_streams_group({"bootstrap.servers": bootstrap}, group_id)) is None
    verdict = judge_protocol(ProtocolChoice.STREAMS, group_id, view, streams=False)
    assert (verdict.shown, verdict.mismatch) == ("streams", None)


def test_a_live_classic_group_declared_as_streams_is_a_mismatch(
    bootstrap: str, fleet: Fleet, tmp_path: Path
) -> None:
    topic, group_id = fresh("declared"), fresh("declared-classic")
    asyncio.run(ensure_topic(bootstrap, topic, 2))
    fleet.start("classic-0", group_id, topic)

    def stable() -> BrokerGroupView | None:
        view = described(bootstrap, group_id)
        return view if view.state is GroupState.STABLE and view.members else None

    view = eventually(stable, 30, "the classic group is Stable")
    # The broker itself has no streams group of this id: it answers GROUP_ID_NOT_FOUND.
    assert asyncio.run(describe_streams_group({"bootstrap.servers": bootstrap}, group_id)) is None
    # The observer does not even ask: librdkafka's view is a live classic group.
    assert not reads_as_streams(ProtocolChoice.STREAMS, view)
    message = judge_protocol(ProtocolChoice.STREAMS, group_id, view, streams=False).mismatch
    assert message is not None
    assert f"the broker reports group {group_id!r} as a classic group" in message
    assert "set spec.policy.protocol to classic (or auto)" in message
