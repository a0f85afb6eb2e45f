"""Admin answers read into structs, with stand-ins shaped like confluent-kafka's results."""

from __future__ import annotations

from types import SimpleNamespace as Obj

import pytest

from rebalancer.clients.kafka_errors import describe_connection_problem
from rebalancer.clients.kafka_reading import (
    cluster_profile_hint,
    read_cluster,
    read_group,
    read_offsets,
    read_topics,
)
from rebalancer.structs.brokers import (
    BrokerProfile,
    GroupProtocol,
    GroupState,
    TopicPartition,
)


def description(**fields: object) -> Obj:
    base: dict[str, object] = {
        "group_id": "orders",
        "members": [],
        "partition_assignor": "",
        "state": Obj(name="STABLE"),
        "type": Obj(name="CLASSIC"),
        "coordinator": Obj(id=1),
    }
    base.update(fields)
    return Obj(**base)


def member(host: str, *partitions: int) -> Obj:
    return Obj(
        member_id=f"{host}-m",
        client_id=host,
        host=f"/{host}",
        group_instance_id=None,
        assignment=Obj(topic_partitions=[Obj(topic="t", partition=p) for p in partitions]),
    )


def test_a_described_classic_group_keeps_members_and_assignments() -> None:
    view = read_group(
        description(members=[member("b", 2, 1), member("a", 0)], partition_assignor="range")
    )
    assert view.state is GroupState.STABLE
    assert view.protocol is GroupProtocol.CLASSIC
    assert view.assignor == "range"
    assert view.members_known
    assert [m.host for m in view.members] == ["a", "b"]
    assert view.members[1].partitions == (TopicPartition("t", 1), TopicPartition("t", 2))
    assert view.coordinator_id == 1


def test_a_kip_848_group_keeps_each_members_target_assignment() -> None:
    moving = member("a", 0, 1)
    moving.target_assignment = Obj(topic_partitions=[Obj(topic="t", partition=0)])
    settled = member("b", 2)
    settled.target_assignment = Obj(topic_partitions=[Obj(topic="t", partition=2)])
    view = read_group(
        description(
            type=Obj(name="CONSUMER"),
            state=Obj(name="RECONCILING"),
            partition_assignor="uniform",
            members=[moving, settled],
        )
    )
    assert view.protocol is GroupProtocol.CONSUMER and view.assignor == "uniform"
    assert view.state is GroupState.RECONCILING
    a, b = view.members
    assert a.target_partitions == (TopicPartition("t", 0),) and a.reconciling
    assert b.target_partitions == b.partitions and not b.reconciling


def test_a_classic_member_has_no_target_assignment() -> None:
    view = read_group(description(members=[member("a", 0)]))
    assert view.members[0].target_partitions is None
    assert not view.members[0].reconciling


def test_an_empty_kip_848_group_is_known_as_such() -> None:
    view = read_group(description(type=Obj(name="CONSUMER"), state=Obj(name="EMPTY")))
    assert view.protocol is GroupProtocol.CONSUMER
    assert view.members_known and view.members == ()


def test_a_live_group_described_without_members_has_unknown_membership() -> None:
    view = read_group(description(type=Obj(name="CONSUMER")))
    assert view.state is GroupState.STABLE
    assert not view.members_known


def test_groups_described_as_unknown_have_unknown_state_and_members() -> None:
    view = read_group(description(state=Obj(name="UNKNOWN"), type=Obj(name="CONSUMER")))
    assert view.state is GroupState.UNKNOWN
    assert not view.members_known


@pytest.mark.parametrize("state", ["EMPTY", "DEAD"])
def test_empty_and_dead_groups_have_known_empty_membership(state: str) -> None:
    view = read_group(description(state=Obj(name=state)))
    assert view.members_known
    assert view.members == ()


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("PREPARING_REBALANCING", GroupState.PREPARING_REBALANCE),
        ("COMPLETING_REBALANCING", GroupState.COMPLETING_REBALANCE),
        ("ASSIGNING", GroupState.ASSIGNING),
        ("RECONCILING", GroupState.RECONCILING),
        ("SOMETHING_NEW", GroupState.UNKNOWN),
    ],
)
def test_states_map_to_kafka_names(name: str, state: GroupState) -> None:
    assert read_group(description(state=Obj(name=name), members=[member("a")])).state is state


def test_kip848_group_with_members_keeps_its_protocol() -> None:
    view = read_group(
        description(
            type=Obj(name="CONSUMER"), members=[member("a", 0)], partition_assignor="uniform"
        )
    )
    assert view.protocol is GroupProtocol.CONSUMER
    assert view.assignor == "uniform"


def test_cluster_and_its_profile() -> None:
    result = Obj(cluster_id="my_cluster", controller=Obj(id=111), nodes=[Obj(id=111)])
    view = read_cluster(result)
    assert (view.cluster_id, view.broker_count, view.controller_id) == ("my_cluster", 1, 111)
    assert read_cluster(Obj(cluster_id=None, controller=None, nodes=[])).controller_id is None
    assert cluster_profile_hint("redpanda.0a1b2c3d") is BrokerProfile.REDPANDA
    assert cluster_profile_hint("MkU3OEVBNTcwNTJENDM2Qg") is BrokerProfile.APACHE_KAFKA
    assert cluster_profile_hint("my-cluster") is None


def test_offsets_leave_out_uncommitted_and_failed_partitions() -> None:
    result = Obj(
        topic_partitions=[
            Obj(topic="t", partition=1, offset=5, error=None),
            Obj(topic="t", partition=0, offset=7, error=None),
            Obj(topic="t", partition=2, offset=-1001, error=None),
            Obj(topic="t", partition=3, offset=9, error="UNSTABLE_OFFSET_COMMIT"),
        ]
    )
    offsets = read_offsets("g", result)
    assert offsets.by_partition() == {TopicPartition("t", 0): 7, TopicPartition("t", 1): 5}
    assert offsets.total() == 12
    assert [entry.partition.partition for entry in offsets.offsets] == [0, 1]


def test_topics_leave_out_internal_and_partitionless_ones() -> None:
    metadata = Obj(
        topics={
            "orders": Obj(partitions={0: None, 1: None}),
            "__consumer_offsets": Obj(partitions={0: None}),
            "creating": Obj(partitions={}),
        }
    )
    assert read_topics(metadata) == {"orders": 2}


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
            "(after 0ms in state CONNECT)",
            "connection refused",
        ),
        (
            "no-such-host.invalid:9092/bootstrap: Failed to resolve 'no-such-host.invalid:9092': "
            "Name or service not known (after 0ms in state CONNECT)",
            "the host name does not resolve",
        ),
        (
            "127.0.0.1:5/bootstrap: Connection setup timed out in state APIVERSION_QUERY "
            "(after 3003ms in state APIVERSION_QUERY)",
            "did not answer as Kafka within 3 s",
        ),
        (
            "[thrd:127.0.0.1:5/bootstrap]: 127.0.0.1:5/bootstrap: Connect to ipv4#127.0.0.1:5 "
            "failed: Connection refused (after 0ms in state CONNECT)",
            "connection refused",
        ),
        (
            "b:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate "
            "verify failed (after 5ms in state SSL_HANDSHAKE)",
            "TLS handshake failed: the broker's certificate could not be verified",
        ),
        (
            "b:9092/1: SASL authentication error: Authentication failed during authentication "
            "due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            "authentication failed",
        ),
    ],
)
def test_connection_problems_in_plain_words(text: str, phrase: str) -> None:
    described = describe_connection_problem(text, setup_timeout_s=3)
    assert phrase in described
    assert "after 0ms" not in described and "/bootstrap" not in described
    assert "thrd:" not in described
