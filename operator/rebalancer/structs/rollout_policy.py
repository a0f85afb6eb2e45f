"""`spec.policy.rollout`: how the operator staggers a group's rollouts, as the planner reads it.

The block is defined, validated and described once, by the model in structs/rollout_spec.py
(the CRD's schema is rendered from it); this module turns a validated block into the frozen
RolloutPolicy the planner and the reconcilers read. Every problem names the field path and the
fix, as the rest of the spec does. Checks that need the workload or the broker (a deadline
shorter than the join window, an OrderedReady StatefulSet that cannot gather a batch) live in
rebalancer.planning.rollout_plans.check_rollout. A maxBatchSize above the workload's replicas is
no problem: rollout_plans.batch_limit and split_batches cap each batch at the pods there are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS, GateHold
from rebalancer.structs.plan_costs import ArrivalPlan, CostWeights
from rebalancer.structs.rollout_spec import ArrivalPlanChoice, RolloutSpec, StaticMembership
from rebalancer.structs.spec_models import read_spec

__all__ = [
    "PATH",
    "ConsumerTimings",
    "RolloutPolicy",
    "StaticMembership",
    "parse_rollout_policy",
    "policy_of",
]

PATH = "spec.policy.rollout"


@dataclass(frozen=True)
class ConsumerTimings:
    """The consumers' classic-protocol settings the planner times batches with (milliseconds)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000


@dataclass(frozen=True)
class RolloutPolicy:
    enabled: bool = True
    # None: cold starts and scale-ups release every pod at once (one rebalance); rolling
    # updates replace a quarter of the replicas per batch, as Kubernetes' default
    # maxUnavailable does.
    max_batch_size: int | None = None
    # Rolling updates only, in place of max_batch_size (None: max_batch_size, else a quarter).
    update_batch_size: int | None = None
    batch_deadline_seconds: int = 300
    gather_seconds: int = 120
    settle_seconds: int = 10
    gate_joins: bool = True
    inject_gate: bool = False
    # What an injected gate holds: the pod (an init container) or only the join (a native
    # sidecar; the consumer must wait for REBALANCER_JOIN_GATE's file before it subscribes).
    gate_holds: GateHold = GateHold.POD
    gate_image: str | None = None
    gate_timeout_seconds: int = 900
    bypass_gate_after_seconds: int = DEFAULT_BYPASS_SECONDS
    static_membership: StaticMembership = StaticMembership.AUTO
    # None: what the session timeout allows on the broker (see rollout_plans.static_budget).
    static_restart_budget_seconds: int | None = None
    scale_steps: bool = False
    # With an HPA on the workload: a scale-up's batch opens once the HPA has not scaled for
    # this long (at most gatherSeconds), so that its quick steps join as one wave; 0: never held.
    autoscaler_window_seconds: int = 20
    park_statefulsets: bool = True
    paused: bool = False
    initial_rebalance_delay_ms: int = 3000
    consumers: ConsumerTimings = field(default_factory=ConsumerTimings)
    cost_weights: CostWeights = field(default_factory=CostWeights)
    # None: the cheapest on the coordinator model (planning.rollout_choices); else this plan.
    arrival_plan: ArrivalPlan | None = None


def parse_rollout_policy(
    raw: object, bypass_default: int = DEFAULT_BYPASS_SECONDS
) -> RolloutPolicy:
    """Parse `spec.policy.rollout` (None or {} for the defaults), or raise SpecInvalid.

    `bypass_default` stands for an unset bypassGateAfterSeconds: the operator's own default
    (--gate-bypass-after-seconds), which the chart sets for every group at once."""
    return policy_of(read_spec(RolloutSpec, raw, PATH), bypass_default)


def policy_of(spec: RolloutSpec, bypass_default: int = DEFAULT_BYPASS_SECONDS) -> RolloutPolicy:
    """The planner's RolloutPolicy of a validated block."""
    bypass = spec.bypass_gate_after_seconds
    return RolloutPolicy(
        # An unset `enabled` keeps RolloutPolicy's default (on), as parse_rollout_policy always
        # has; structs/specs.py turns rollouts off for a resource that does not set it, which is
        # what the CRD's default (false) says.
        enabled=spec.enabled if "enabled" in spec.model_fields_set else RolloutPolicy.enabled,
        max_batch_size=spec.max_batch_size,
        update_batch_size=spec.update_batch_size,
        batch_deadline_seconds=spec.batch_deadline_seconds,
        gather_seconds=spec.gather_seconds,
        settle_seconds=spec.settle_seconds,
        gate_joins=spec.gate_joins,
        inject_gate=spec.inject_gate,
        gate_holds=spec.gate_holds,
        gate_image=spec.gate_image,
        gate_timeout_seconds=spec.gate_timeout_seconds,
        bypass_gate_after_seconds=bypass_default if bypass is None else bypass,
        static_membership=spec.static_membership,
        static_restart_budget_seconds=spec.static_restart_budget_seconds,
        scale_steps=spec.scale_steps,
        autoscaler_window_seconds=spec.autoscaler_window_seconds,
        park_statefulsets=spec.park_stateful_sets,
        paused=spec.paused,
        initial_rebalance_delay_ms=spec.initial_rebalance_delay_ms,
        consumers=ConsumerTimings(
            session_timeout_ms=spec.consumers.session_timeout_ms,
            heartbeat_interval_ms=spec.consumers.heartbeat_interval_ms,
            max_poll_interval_ms=spec.consumers.max_poll_interval_ms,
        ),
        cost_weights=CostWeights(
            unowned=float(spec.cost_weights.unowned_partition_seconds),
            stop_the_world=float(spec.cost_weights.stop_the_world_partition_seconds),
            waiting=float(spec.cost_weights.waiting_partition_seconds),
        ),
        arrival_plan=(
            None
            if spec.arrival_plan is ArrivalPlanChoice.AUTO
            else ArrivalPlan(spec.arrival_plan.value)
        ),
    )
