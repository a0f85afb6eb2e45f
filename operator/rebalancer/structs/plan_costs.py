"""The plans a cold start or scale-up can be released by, and what each is expected to cost.

The planner (rebalancer.planning.rollout_choices) asks an estimator for the cost of each plan
and picks the cheapest; the estimator is the coordinator model (rebalancer.simulation.plan_costs).
Both sides speak these types, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ArrivalPlan(StrEnum):
    """How the pods a cold start or scale-up brings are let through their gates."""

    # Each pod's gate opens as soon as the pod exists: its consumer starts and joins when it
    # would without the operator, and Kafka's initial delay (restarted by every join of an
    # Empty group) gathers what arrives close together.
    ON_ARRIVAL = "OnArrival"
    # The batch waits at its gates until every pod of it is there, then all open together:
    # one join of many members, bought with the time the early pods wait.
    GATHER = "Gather"
    # A scale-up of a classic group: the batch gathers until its last pod is expected less the
    # operator's open (ArrivalQuestion.release_ms), then whoever waits opens together and later
    # pods as they come. The open's own delay and the consumers' start overlap the last
    # arrivals, and the rebalance the first joins start lasts until the members' next
    # heartbeat, which the last joiners make if they come in time.
    OPEN_AHEAD = "OpenAhead"


# The plans the planner chooses among. OPEN_AHEAD is taken only when the spec names it: on
# Apache Kafka its 24-pod scale-ups' last joiners missed the first rebalance in 6 runs of 6,
# which the model, timing arrivals exactly, does not foresee (BENCHMARKS.md, "Scale-ups opened
# ahead").
CHOSEN_PLANS = (ArrivalPlan.ON_ARRIVAL, ArrivalPlan.GATHER)


class GroupKind(StrEnum):
    """Which coordinator the group has: the classic one (eager or cooperative) or KIP-848's."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"
    KIP848 = "kip848"


@dataclass(frozen=True)
class CostWeights:
    """What a partition-second of each kind costs the user (spec.policy.rollout.costWeights)."""

    # A partition no member owns, from the change until it is first owned (a cold start's wait
    # for its first assignment included).
    unowned: float = 1.0
    # Extra for a partition that had an owner and lost it (revoked, or its owner gone): a
    # consumer that stops mid-stream, as opposed to one that has not started.
    stop_the_world: float = 1.0
    # A partition a scale-up's joining members will take, from the change until they have it.
    # A group is scaled up because its members fall behind: until the move, each such partition
    # is the work the old members cannot keep up with (with the new size just enough, the old
    # members' shortfall is exactly as many partitions as move to the joiners).
    waiting: float = 1.0


@dataclass(frozen=True)
class ArrivalQuestion:
    """What the estimator is asked: pods arriving at their gates, joining a group."""

    group: GroupKind
    joiners: int
    # Members already in the group (0 for a cold start).
    members: int
    partitions: int
    # group.initial.rebalance.delay.ms of the broker (classic Empty groups only).
    initial_delay_ms: float
    heartbeat_ms: float
    session_ms: float
    # When each joining pod reaches its gate, in milliseconds from the change, sorted.
    arrivals_ms: tuple[float, ...]
    # From an open gate to the consumer's JoinGroup: the gate's exit and the consumer's start.
    start_ms: float
    # From the last pod of a gathered batch reaching its gate until the operator has opened
    # them all (its next look and its writes). A pod released on arrival is opened before its
    # gate runs, so it does not wait for this.
    release_ms: float
    # Whether arrivals_ms and start_ms were measured on this workload's past start-ups (False:
    # the planner's documented assumption).
    measured: bool = False
    # A streams group (KIP-1071) asked about as KIP848 (`group`): the model has no coordinator
    # of streams groups, and KIP-848's is the nearest (no join barrier, epochs).
    streams: bool = False

    @property
    def open_ahead_ms(self) -> float:
        """When ArrivalPlan.OPEN_AHEAD opens the pods that wait, from the change."""
        return max(max(self.arrivals_ms, default=0.0) - self.release_ms, 0.0)


@dataclass(frozen=True)
class PlanCost:
    """One plan's expected outcome under the coordinator model."""

    plan: ArrivalPlan
    unowned_ps: float
    stop_the_world_ps: float
    rebalances: int
    # From the change until the group is Stable with every joiner in it.
    stable_s: float
    # A scale-up's partitions bound for its joiners, times the wait for them (CostWeights.waiting).
    waiting_ps: float = 0.0

    def score(self, weights: CostWeights) -> float:
        return (
            weights.unowned * self.unowned_ps
            + weights.stop_the_world * self.stop_the_world_ps
            + weights.waiting * self.waiting_ps
        )
