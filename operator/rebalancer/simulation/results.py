"""What a simulation run reports: each rebalance and the costs of the whole run.

Times here are seconds from time zero of the run (inputs are milliseconds, like Kafka settings;
outputs are seconds, like the operator's metrics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# Why the coordinator started a rebalance:
# initial-join           the first JoinGroup of an Empty group;
# member-join            a JoinGroup from a new member (or a new process of a dynamic member);
# member-leave           a LeaveGroup;
# session-expiry         a member stopped heartbeating for session.timeout.ms;
# metadata-change        a member rejoined with a changed subscription (KAFKA-7126);
# cooperative-follow-up  a member rejoined after revoking partitions (KIP-429's second rebalance);
# member-rejoin          a known member rejoined with unchanged metadata where that still
#                        rebalances (the leader in Stable, a static member in CompletingRebalance);
# enforced               the operator made a member rejoin on purpose (KIP-568's use cases).
Cause = Literal[
    "initial-join",
    "member-join",
    "member-leave",
    "session-expiry",
    "metadata-change",
    "cooperative-follow-up",
    "member-rejoin",
    "enforced",
]


@dataclass(frozen=True)
class Rebalance:
    """One pass through the coordinator's join phase, and the generation it produced.

    `completed` is False when the generation was superseded before it became Stable (a join or a
    departure while the leader's assignment was pending); `end_s` is then when that happened.
    """

    generation: int
    cause: Cause
    start_s: float
    end_s: float
    completed: bool
    members: tuple[str, ...]

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class SimulationResult:
    """The run's rebalances and what they cost.

    time_to_stable_s: from the first member's start to the last moment the group became Stable
    with every running member holding an assignment (None if that never happened).
    stop_the_world_partition_s: the integral, from the first start to the run's end, of the
    number of partitions no running member was consuming (unassigned, revoked for an eager
    rebalance, withheld for a cooperative one, or held by a member that crashed). The first
    generation's formation counts too: that is what an initial delay costs.
    revocations: partitions each member gave up to a rebalance (not those lost to a crash).
    end_s: the run's last activity (a change of ownership or of a rebalance).
    """

    rebalances: tuple[Rebalance, ...]
    time_to_stable_s: float | None
    stop_the_world_partition_s: float
    revocations: Mapping[str, int]
    end_s: float

    @property
    def rebalance_count(self) -> int:
        return len(self.rebalances)

    def count_caused_by(self, *causes: Cause) -> int:
        """How many rebalances had one of these causes."""
        return sum(1 for rebalance in self.rebalances if rebalance.cause in causes)


@dataclass(frozen=True)
class RunCost:
    """What one change cost a group, counted from the change (the plan estimator's unit).

    unowned_ps: partition-seconds no member consumed, from the change until every partition is
    owned for good; stop_the_world_ps: the part of it after a partition had first been owned.
    """

    unowned_ps: float
    stop_the_world_ps: float
    rebalances: int
    stable_s: float
