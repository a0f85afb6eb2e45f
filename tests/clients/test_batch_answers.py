"""Batched answers read into librdkafka's shapes, so the gateway's readers give the same structs."""

from __future__ import annotations

import uuid

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from rebalancer.clients.batch_reading import (
    GroupReadFailed,
    batch_readable,
    classic_description,
    consumer_description,
    group_offsets,
)
from rebalancer.clients.kafka_reading import read_group, read_offsets
from rebalancer.structs.brokers import GroupProtocol, GroupState, TopicPartition


def assignment(
    *partitions: int,
) -> tuple[list[tuple[uuid.UUID, str, list[int], dict[int, bytes]]], dict[int, bytes]]:
    return ([(uuid.uuid4(), "orders", list(partitions), {})], {})


def test_a_kip848_group_keeps_its_target_assignment() -> None:
    member = (
        "m1",
        "pod-0",
        None,
        3,
        "client",
        "/10.0.0.1",
        ["orders"],
        None,
        assignment(0),
        assignment(0, 1),
        {},
    )
    raw = (0, None, "g", "Reconciling", 4, 4, "uniform", [member], -1, {})
    view = read_group(consumer_description(raw, 2))
    assert (view.state, view.protocol, view.assignor, view.coordinator_id) == (
        GroupState.RECONCILING,
        GroupProtocol.CONSUMER,
        "uniform",
        2,
    )
    (read,) = view.members
    assert read.host == "10.0.0.1" and read.instance_id == "pod-0"
    assert read.partitions == (TopicPartition("orders", 0),)
    assert read.target_partitions == (TopicPartition("orders", 0), TopicPartition("orders", 1))
    assert read.reconciling


def test_a_classic_member_assignment_is_decoded_and_an_unassigned_member_has_none() -> None:
    given = ConsumerProtocolMemberAssignment(0, [("orders", [1, 0])], b"").encode()
    members = [("m1", None, "c", "/h", b"", given, {}), ("m2", "i", "c", "/h", b"", b"", {})]
    raw = (0, "g", "CompletingRebalance", "consumer", "range", members, -1, {})
    view = read_group(classic_description(raw, 1))
    assert (view.state, view.protocol, view.assignor) == (
        GroupState.COMPLETING_REBALANCE,
        GroupProtocol.CLASSIC,
        "range",
    )
    assert [m.partitions for m in view.members] == [
        (TopicPartition("orders", 0), TopicPartition("orders", 1)),
        (),
    ]
    assert view.members_known


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ((30, "g", "", "", "", [], -1, {}), "GROUP_AUTHORIZATION_FAILED"),
        ((0, "g", "Stable", "connect", "default", [], -1, {}), "_INVALID_ARG"),
    ],
)
def test_a_group_librdkafka_would_refuse_is_refused_alone(
    raw: tuple[object, ...], code: str
) -> None:
    with pytest.raises(GroupReadFailed) as refused:
        classic_description(raw, 1)
    assert refused.value.code == code


def test_offsets_keep_committed_partitions_and_a_group_error_stays_with_its_group() -> None:
    partitions = [(0, 5, -1, "", 0, {}), (1, -1, -1, "", 0, {}), (2, 7, -1, "", 3, {})]
    offsets = read_offsets("g", group_offsets(("g", [("orders", partitions, {})], 0, {})))
    assert offsets.by_partition() == {TopicPartition("orders", 0): 5}
    with pytest.raises(GroupReadFailed, match="GROUP_AUTHORIZATION_FAILED"):
        group_offsets(("g", [], 30, {}))


def test_settings_aiokafka_cannot_carry_keep_reads_on_librdkafka() -> None:
    plain = {"bootstrap.servers": "k:9092"}
    assert batch_readable(plain) is None
    assert batch_readable({**plain, "security.protocol": "SSL", "ssl.certificate.pem": "x"})
    assert batch_readable({**plain, "enable.ssl.certificate.verification": "false"})
    oauth = {**plain, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
    assert "OAUTHBEARER" in str(batch_readable(oauth))
