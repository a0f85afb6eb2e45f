"""What the operator knows about a group at one moment, and where each figure came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from rebalancer.structs.brokers import GroupState


class Source(StrEnum):
    BROKER = "broker"
    MEMBER_REPORTS = "member-reports"
    NONE = "none"


@dataclass(frozen=True)
class MemberSummary:
    host: str
    member_id: str
    instance_id: str | None
    generation: int | None
    partitions: int
    source: Source
    # KIP-848: the partitions the coordinator's target assignment gives the member.
    target_partitions: int | None = None


@dataclass(frozen=True)
class GroupSnapshot:
    state: GroupState
    protocol: str | None
    assignor: str | None
    generation: int | None
    members: int
    member_details: tuple[MemberSummary, ...]
    assigned_partitions: int | None
    total_partitions: int | None
    lag: int | None
    observed_at: float
    sources: dict[str, Source] = field(default_factory=dict)
    # The broker node coordinating the group, when the broker said (DescribeGroups).
    coordinator: int | None = None
    # KIP-848: members whose assignment is not yet their target; None for classic groups.
    members_reconciling: int | None = None

    @property
    def member_keys(self) -> frozenset[str]:
        return frozenset(m.instance_id or m.host or m.member_id for m in self.member_details)

    @property
    def settled(self) -> bool:
        """Stable with every partition owned, as far as the figures tell."""
        if self.state != GroupState.STABLE:
            return False
        if self.assigned_partitions is None or self.total_partitions is None:
            return True
        return self.assigned_partitions >= self.total_partitions


def moved_for_rollouts(before: GroupSnapshot | None, after: GroupSnapshot) -> bool:
    """Whether the group shows a rollout planner something new: its state, generation, members
    or owned partitions changed (a batch joined, the group settled, a member left). The planner
    is woken on such an observation instead of finding it at its next poll."""
    if before is None:
        return True

    def progress(snapshot: GroupSnapshot) -> tuple[object, ...]:
        return (
            snapshot.state,
            snapshot.generation,
            snapshot.member_keys,
            snapshot.assigned_partitions,
            snapshot.members_reconciling,
        )

    return progress(before) != progress(after)
