"""spec.policy.protocol held against what the broker says of the group (pure).

A declared protocol decides how the group is read and what the operator may do to it: a
streams group (KIP-1071) is read with StreamsGroupDescribe from the first look, its settings
and enforced rebalances are refused, its rollouts are planned without a join barrier. The
broker has the last word on what the group is: when it reports a live classic or KIP-848 group
for a declared streams group (or a streams group for a declared classic or consumer one), the
observation follows the broker and Degraded ProtocolMismatch names the field and the fix.

librdkafka's describe shows a classic or KIP-848 group as it is, and a streams group as a Dead
classic group without members (planning.streams_observing); an Empty classic group holds only
committed offsets and says nothing of the protocol its next members will speak, so neither
counts as the broker's word against the declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.planning.streams_observing import STREAMS_PROTOCOL
from rebalancer.structs.brokers import BrokerGroupView, GroupProtocol, GroupState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.specs import ProtocolChoice

PROTOCOL_PATH = "spec.policy.protocol"
MISMATCH_REASON = "ProtocolMismatch"
_NAMES = {
    "classic": "a classic group (JoinGroup/SyncGroup)",
    "consumer": "a KIP-848 consumer group (group.protocol=consumer)",
    STREAMS_PROTOCOL: "a streams group (KIP-1071, group.protocol=streams)",
}


def live_protocol(view: BrokerGroupView | None) -> str | None:
    """The protocol librdkafka's describe shows the group live with: "consumer" for a KIP-848
    group that exists, "classic" for a classic group with members; None when it shows none (no
    group, a streams group librdkafka cannot see, an Empty classic group)."""
    if view is None:
        return None
    if view.protocol is GroupProtocol.CONSUMER and view.state is not GroupState.DEAD:
        return GroupProtocol.CONSUMER.value
    if view.protocol is GroupProtocol.CLASSIC and (view.members or view.state.has_members):
        return GroupProtocol.CLASSIC.value
    return None


def reads_as_streams(declared: ProtocolChoice, view: BrokerGroupView | None) -> bool:
    """Whether the observer sends StreamsGroupDescribe straight away, without ListGroups: the
    spec declares a streams group and librdkafka shows no live group of another protocol."""
    return declared is ProtocolChoice.STREAMS and live_protocol(view) is None


@dataclass(frozen=True)
class ProtocolVerdict:
    # status.group.protocol in place of the observation's own (None: the observation's).
    shown: str | None = None
    # The ProtocolMismatch message: the declaration and the broker disagree.
    mismatch: str | None = None

    def condition(self) -> Condition | None:
        if self.mismatch is None:
            return None
        return Condition(
            ConditionType.DEGRADED, ConditionStatus.TRUE, MISMATCH_REASON, self.mismatch
        )


def judge_protocol(
    declared: ProtocolChoice, group_id: str, view: BrokerGroupView | None, streams: bool
) -> ProtocolVerdict:
    """spec.policy.protocol against the broker: `view` as librdkafka describes the group,
    `streams` whether StreamsGroupDescribe found a streams group of this id.

    A declared streams group that does not exist yet shows `streams` (its members will make
    one; an absent group has no protocol of its own). Only streams disagreements are told:
    classic and consumer are one group through a KIP-848 migration, which the operator's own
    settings rollout may be in the middle of."""
    observed = STREAMS_PROTOCOL if streams else live_protocol(view)
    if declared is ProtocolChoice.STREAMS:
        if observed is None or observed == STREAMS_PROTOCOL:
            return ProtocolVerdict(shown=STREAMS_PROTOCOL)
        return ProtocolVerdict(mismatch=_mismatch(declared, observed, group_id))
    if declared is not ProtocolChoice.AUTO and observed == STREAMS_PROTOCOL:
        return ProtocolVerdict(mismatch=_mismatch(declared, observed, group_id))
    return ProtocolVerdict()


def _mismatch(declared: ProtocolChoice, observed: str, group_id: str) -> str:
    if declared is ProtocolChoice.STREAMS:
        fix = (
            f"set {PROTOCOL_PATH} to {observed} (or auto); or, if the application is to use the "
            "streams protocol, set group.protocol=streams in its StreamsConfig (Apache Kafka "
            "4.2+) and restart it once the old group is empty"
        )
    else:
        fix = (
            f"set {PROTOCOL_PATH} to streams (or auto), and remove spec.policy.settings and "
            "spec.policy.enforce, which a streams group does not take"
        )
    return (
        f"{PROTOCOL_PATH} is {declared.value}, but the broker reports group {group_id!r} as "
        f"{_NAMES[observed]}: the group is observed as the broker reports it. Fix: {fix}"
    )
