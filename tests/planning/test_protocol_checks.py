"""spec.policy.protocol against the broker (planning.protocol_checks): a declared streams group
is read with StreamsGroupDescribe from the first look and shows `streams`; a live group of
another protocol is a Degraded ProtocolMismatch naming the field and the fix."""

from __future__ import annotations

import pytest
from tests.planning.test_scaled_to_zero import snapshot

from rebalancer.planning.protocol_checks import (
    MISMATCH_REASON,
    judge_protocol,
    live_protocol,
    reads_as_streams,
)
from rebalancer.planning.statuses import observation_conditions
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.conditions import ConditionStatus, ConditionType
from rebalancer.structs.specs import ProtocolChoice


def view(state: GroupState, protocol: GroupProtocol, members: int = 0) -> BrokerGroupView:
    listed = tuple(
        BrokerMember(f"m{i}", "c", "h", None, (TopicPartition("t", i),)) for i in range(members)
    )
    return BrokerGroupView("counts", state, protocol, None, listed, 1, bool(members))


# librdkafka's view of a streams group, and of a group id nobody uses.
UNSEEN = view(GroupState.DEAD, GroupProtocol.CLASSIC)
CLASSIC = view(GroupState.STABLE, GroupProtocol.CLASSIC, 2)
KIP848 = view(GroupState.STABLE, GroupProtocol.CONSUMER, 2)
OFFSETS_ONLY = view(GroupState.EMPTY, GroupProtocol.CLASSIC)


def test_only_a_live_classic_or_kip848_group_is_the_brokers_word() -> None:
    assert live_protocol(CLASSIC) == "classic"
    assert live_protocol(KIP848) == "consumer"
    assert live_protocol(view(GroupState.EMPTY, GroupProtocol.CONSUMER)) == "consumer"
    assert live_protocol(view(GroupState.PREPARING_REBALANCE, GroupProtocol.CLASSIC)) == "classic"
    for silent in (UNSEEN, OFFSETS_ONLY, view(GroupState.DEAD, GroupProtocol.CONSUMER), None):
        assert live_protocol(silent) is None


def test_a_declared_streams_group_is_described_at_once_unless_the_broker_says_otherwise() -> None:
    assert reads_as_streams(ProtocolChoice.STREAMS, UNSEEN)
    assert reads_as_streams(ProtocolChoice.STREAMS, OFFSETS_ONLY)
    assert not reads_as_streams(ProtocolChoice.STREAMS, CLASSIC)
    assert not reads_as_streams(ProtocolChoice.STREAMS, KIP848)
    # Undeclared groups wait for detection (ListGroups by type) as before.
    assert not reads_as_streams(ProtocolChoice.AUTO, UNSEEN)


@pytest.mark.parametrize("streams", [True, False])
def test_a_declared_streams_group_shows_streams_found_or_not_yet(streams: bool) -> None:
    verdict = judge_protocol(ProtocolChoice.STREAMS, "counts", UNSEEN, streams)
    assert (verdict.shown, verdict.mismatch, verdict.condition()) == ("streams", None, None)


@pytest.mark.parametrize(
    ("seen", "named", "fix"),
    [
        (CLASSIC, "a classic group", "set spec.policy.protocol to classic (or auto)"),
        (KIP848, "a KIP-848 consumer group", "set spec.policy.protocol to consumer (or auto)"),
    ],
)
def test_a_live_group_of_another_protocol_is_a_mismatch(
    seen: BrokerGroupView, named: str, fix: str
) -> None:
    verdict = judge_protocol(ProtocolChoice.STREAMS, "counts", seen, streams=False)
    assert verdict.shown is None  # the observation's own protocol stands
    message = verdict.mismatch
    assert message is not None
    assert message.startswith("spec.policy.protocol is streams, but the broker reports group ")
    assert named in message and fix in message
    assert "group.protocol=streams in its StreamsConfig" in message
    condition = verdict.condition()
    assert condition is not None
    assert (condition.type, condition.status, condition.reason) == (
        ConditionType.DEGRADED,
        ConditionStatus.TRUE,
        MISMATCH_REASON,
    )


@pytest.mark.parametrize("declared", [ProtocolChoice.CLASSIC, ProtocolChoice.CONSUMER])
def test_a_streams_group_declared_as_a_consumer_group_is_a_mismatch(
    declared: ProtocolChoice,
) -> None:
    message = judge_protocol(declared, "counts", UNSEEN, streams=True).mismatch
    assert message is not None
    assert f"spec.policy.protocol is {declared.value}" in message
    assert "a streams group (KIP-1071" in message
    assert "set spec.policy.protocol to streams (or auto)" in message


def test_classic_against_kip848_and_auto_are_left_alone() -> None:
    # A KIP-848 migration makes one group of both: not a disagreement.
    assert judge_protocol(ProtocolChoice.CONSUMER, "counts", CLASSIC, False).mismatch is None
    assert judge_protocol(ProtocolChoice.CLASSIC, "counts", KIP848, False).mismatch is None
    for seen, streams in ((UNSEEN, True), (CLASSIC, False), (KIP848, False)):
        verdict = judge_protocol(ProtocolChoice.AUTO, "counts", seen, streams)
        assert (verdict.shown, verdict.mismatch) == (None, None)


def test_the_mismatch_is_degraded_after_a_missing_workload() -> None:
    mismatch = judge_protocol(ProtocolChoice.STREAMS, "counts", CLASSIC, False).condition()
    conditions = observation_conditions(snapshot("Stable", 2), protocol_mismatch=mismatch)
    [degraded] = [c for c in conditions if c.type is ConditionType.DEGRADED]
    assert degraded == mismatch
    missing = observation_conditions(
        snapshot("Stable", 2),
        workload_missing="StatefulSet apps/counts",
        protocol_mismatch=mismatch,
    )
    [degraded] = [c for c in missing if c.type is ConditionType.DEGRADED]
    assert degraded.reason == "WorkloadNotFound"
