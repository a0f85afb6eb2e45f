"""`spec.policy.rollout` as a typed model: the one definition of the block.

The CRD's schema for the block is rendered from these classes (`make crd`; descriptions are
folded to one line, so write them as prose), and the operator validates the resource with them
(structs/rollout_policy.parse_rollout_policy). To add a field, add it here with its description,
default, bounds and CEL rule and run `make crd`: the CRD, the chart and the validation follow.
The planner reads the frozen RolloutPolicy made of this block (rollout_policy.policy_of); a field
it is to read is carried over there, one line that mypy checks.

Checks that need the workload or the broker (a deadline shorter than the join window, an
OrderedReady StatefulSet that cannot gather a batch) live in
rebalancer.planning.rollout_plans.check_rollout.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from rebalancer.structs.gates import GateHold
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.spec_models import Bool, Int, Number, SpecModel, Str, Wording, cel

WEIGHT_FIX = "use a weight such as 1 (the default) or 0 to ignore this cost"


class StaticMembership(StrEnum):
    """Whether the consumers set group.instance.id (KIP-345)."""

    AUTO = "auto"  # yes if the workload is a StatefulSet and every member reports one
    ENABLED = "enabled"
    DISABLED = "disabled"


class ArrivalPlanChoice(StrEnum):
    """spec.policy.rollout.arrivalPlan: a plan of structs.plan_costs.ArrivalPlan, or Auto."""

    AUTO = "Auto"  # the cheapest on the coordinator model (planning.rollout_choices)
    ON_ARRIVAL = "OnArrival"
    GATHER = "Gather"
    OPEN_AHEAD = "OpenAhead"


class ConsumerTimingsSpec(
    SpecModel,
    json_schema_extra={
        "default": {},
        "x-kubernetes-validations": [
            cel(
                "!has(self.heartbeatIntervalMs) || !has(self.sessionTimeoutMs) || "
                "self.heartbeatIntervalMs < self.sessionTimeoutMs",
                "consumers.heartbeatIntervalMs must be below consumers.sessionTimeoutMs",
                ".heartbeatIntervalMs",
            )
        ],
    },
):
    """The consumers' classic-protocol settings the planner times batches with, for consumers
    the operator does not configure. When spec.policy.settings configures them, the values it
    delivered (status.settings.sessionTimeoutMs, heartbeatIntervalMs, maxPollIntervalMs, once
    status.settings.applied is true) win over these."""

    session_timeout_ms: Annotated[
        Int, Field(ge=1000, le=3600000, description="The consumers' session.timeout.ms.")
    ] = 45000
    heartbeat_interval_ms: Annotated[
        Int,
        Field(
            ge=100,
            le=600000,
            description="The consumers' heartbeat.interval.ms; below sessionTimeoutMs.",
        ),
    ] = 3000
    max_poll_interval_ms: Annotated[
        Int,
        Field(
            ge=1000,
            le=2147483647,
            description="The consumers' max.poll.interval.ms (the JoinGroup rebalance timeout).",
        ),
    ] = 300000

    def problems(self, path: str) -> list[FieldProblem]:
        if self.heartbeat_interval_ms < self.session_timeout_ms:
            return []
        return [
            FieldProblem(
                f"{path}.heartbeatIntervalMs",
                f"({self.heartbeat_interval_ms}) is not below sessionTimeoutMs "
                f"({self.session_timeout_ms})",
                "use the consumers' real settings; Kafka clients require a heartbeat well below "
                "the session timeout (a third is usual)",
            )
        ]


class CostWeightsSpec(
    SpecModel,
    json_schema_extra={
        "default": {},
        "x-kubernetes-validations": [
            cel(
                "!has(self.unownedPartitionSeconds) || !has(self.stopTheWorldPartitionSeconds) || "
                "self.unownedPartitionSeconds > 0 || self.stopTheWorldPartitionSeconds > 0",
                "costWeights must weigh at least one cost above 0",
            )
        ],
    },
):
    """What the planner minimises when it chooses an arrival plan: the weighted sum of
    partition-seconds without an owner, stop-the-world partition-seconds (those that had an
    owner and lost it) and, in a scale-up, partition-seconds waiting for the new members.
    Within 5 %, the plan Stable sooner by more than a second wins, then fewer rebalances."""

    unowned_partition_seconds: Annotated[
        Number,
        Field(
            ge=0,
            le=1000,
            description="Weight of a partition-second without an owner (default 1).",
        ),
        Wording(fix=WEIGHT_FIX),
    ] = 1
    stop_the_world_partition_seconds: Annotated[
        Number,
        Field(
            ge=0,
            le=1000,
            description=(
                "Extra weight of a partition-second whose owner stopped consuming it (default 1)."
            ),
        ),
        Wording(fix=WEIGHT_FIX),
    ] = 1
    waiting_partition_seconds: Annotated[
        Number,
        Field(
            ge=0,
            le=1000,
            description=(
                "Weight of a partition-second a scale-up's new members wait for: the "
                "partitions they will take, from the change until they have them (default 1; "
                "0 weighs only rebalances' stops, and gathers a scale-up whenever that saves "
                "any)."
            ),
        ),
        Wording(fix=WEIGHT_FIX),
    ] = 1

    def problems(self, path: str) -> list[FieldProblem]:
        if self.unowned_partition_seconds > 0 or self.stop_the_world_partition_seconds > 0:
            return []
        return [
            FieldProblem(
                path,
                "weighs every cost at 0, so no plan is cheaper than another",
                "give unownedPartitionSeconds or stopTheWorldPartitionSeconds a weight",
            )
        ]


class RolloutSpec(
    SpecModel,
    json_schema_extra={
        "default": {},
        "x-kubernetes-validations": [
            cel(
                "!has(self.gateTimeoutSeconds) || !has(self.gatherSeconds) || "
                "self.gateTimeoutSeconds == 0 || self.gateTimeoutSeconds > self.gatherSeconds",
                "rollout.gateTimeoutSeconds must be 0 or longer than rollout.gatherSeconds",
                ".gateTimeoutSeconds",
            )
        ],
    },
):
    """How the operator staggers cold starts, scale-ups and rolling updates of the workload so
    that each batch of pods joins inside one join window of the group coordinator and costs one
    rebalance. Pods are held at the join gate (an init container running `rebalancer gate`)
    until their batch opens. Off unless enabled."""

    enabled: Annotated[
        Bool,
        Field(
            description="""Manage rollouts. When false (the default) the operator leaves the
            workload alone, and turning it off hands the workload back: every waiting gate
            opens, a Deployment it paused resumes and a StatefulSet's parked partition is
            released."""
        ),
    ] = False
    max_batch_size: Annotated[
        Int | None,
        Field(
            ge=1,
            le=10000,
            description="""Most pods released in one batch. Unset: a cold start or scale-up
            releases every pod at once (one rebalance), a rolling update replaces a quarter of
            the replicas per batch. A value above the pods there are to release is capped, not
            refused: a batch takes the pods there are (a workload an autoscaler runs at fewer
            replicas rolls out as usual). A gated Deployment's rolling update takes at most its
            maxSurge + maxUnavailable per batch.""",
        ),
    ] = None
    update_batch_size: Annotated[
        Int | None,
        Field(
            ge=1,
            le=10000,
            description="""Most pods replaced in one batch of a rolling update (a template
            change of a running workload), in place of maxBatchSize for rolling updates only:
            cold starts and scale-ups keep maxBatchSize and the arrival plan. Unset:
            maxBatchSize, else a quarter of the replicas. `rebalancer learn` recommends this
            one, so that a batch learned from rolling updates does not split cold starts.""",
        ),
    ] = None
    batch_deadline_seconds: Annotated[
        Int,
        Field(
            ge=5,
            le=86400,
            description="""Seconds a batch may take to be released, and then to settle (group
            Stable with every partition assigned and the batch's members in it). A batch that
            misses it stops the rollout with Degraded. Must exceed what one batch needs on the
            broker (its join window and the rebalance around it).""",
        ),
    ] = 300
    gather_seconds: Annotated[
        Int,
        Field(
            ge=0,
            le=3600,
            description="""Seconds to wait for all of a batch's pods to reach their gates; after
            that the batch opens with those that are there and the rest get a later batch.""",
        ),
    ] = 120
    autoscaler_window_seconds: Annotated[
        Int,
        Field(
            ge=0,
            le=600,
            description="""With a HorizontalPodAutoscaler on the workload: a cold start or
            scale-up of gated pods opens its batch only once the HPA has not changed the
            replicas for this many seconds (status.lastScaleTime; at most gatherSeconds), so
            that steps it makes in quick succession join as one wave. 0 opens at once.
            docs/autoscalers.md.""",
        ),
    ] = 20
    settle_seconds: Annotated[
        Int,
        Field(
            ge=0,
            le=3600,
            description=(
                "Seconds the group must stay settled after a batch before the next starts."
            ),
        ),
    ] = 10
    gate_joins: Annotated[
        Bool,
        Field(
            description="""Hold new pods at the join gate until their batch opens. Needs the
            rebalancer-gate init container in the pod template (see injectGate); without it
            pods join as they start."""
        ),
    ] = True
    inject_gate: Annotated[
        Bool,
        Field(
            description="""Add the rebalancer-gate init container to the workload's pod
            template when it is missing. This changes the template, which rolls the workload
            once. The pods' service account needs list and watch on pods in the namespace."""
        ),
    ] = False
    gate_holds: Annotated[
        GateHold,
        Field(
            description="""What an injected gate (injectGate) holds until the operator opens
            the pod. Pod (the default): an init container; the pod's containers start once it
            opens. Join: a native sidecar (Kubernetes 1.29 or later); the containers start at
            once and do their start-up while the batch gathers, and each consumer waits for the
            file named by $REBALANCER_JOIN_GATE before it subscribes (docs/join-gate.md). Only
            for consumers written to wait for it: one that does not joins as soon as it
            starts."""
        ),
    ] = GateHold.POD
    gate_image: Annotated[
        Str | None,
        Field(
            min_length=1,
            max_length=512,
            description="Image of the gate init container. Defaults to the operator's own image.",
        ),
        Wording("must be an image reference", "name an image"),
    ] = None
    gate_timeout_seconds: Annotated[
        Int,
        Field(
            ge=0,
            le=86400,
            description="""Seconds a gate waits before it fails, so the pod's init container
            restarts and waits again. 0 waits forever. Must exceed gatherSeconds.""",
        ),
    ] = 900
    # Unset: the operator's own default (--gate-bypass-after-seconds), which the CLI holds to
    # the same rule.
    bypass_gate_after_seconds: Annotated[
        Int | None,
        Field(
            ge=0,
            le=86400,
            description="""Seconds without a sign of the operator after which a gate lets its
            pod start anyway (the operator refreshes rebalancer.dev/gate-held-at on waiting
            pods), so an operator that is down never holds pods in Init for long. Unset: the
            operator's --gate-bypass-after-seconds (the chart's gate.bypassAfterSeconds, 120 by
            default). 0 never bypasses. The operator tells each bypass with a GateBypassed
            Warning Event and rebalancer_gate_bypasses_total. Carried by the gate's
            --bypass-after argument when the operator injects the gate (injectGate).""",
            json_schema_extra={
                "x-kubernetes-validations": [
                    cel(
                        "self == 0 || self >= 30", "bypassGateAfterSeconds must be 0 or at least 30"
                    )
                ]
            },
        ),
    ] = None
    static_membership: Annotated[
        StaticMembership,
        Field(
            description="""Whether the consumers set group.instance.id (KIP-345). auto: yes for
            a StatefulSet whose members all report one. Static members are restarted and
            released one by one as they come back, which costs no rebalance when each is back
            within its session."""
        ),
    ] = StaticMembership.AUTO
    static_restart_budget_seconds: Annotated[
        Int | None,
        Field(
            ge=1,
            le=3600,
            description="""Longest a static member may be away during a restart. Unset: what
            the session timeout allows (session minus one heartbeat); a longer value is
            rejected.""",
        ),
    ] = None
    scale_steps: Annotated[
        Bool,
        Field(
            description="""Without the gate, raise spec.replicas one batch at a time after a
            scale-up (the operator owns spec.replicas until the rollout completes; GitOps tools
            may fight it)."""
        ),
    ] = False
    park_stateful_sets: Annotated[
        Bool,
        Field(
            description="""Keep a StatefulSet's rollingUpdate.partition at its replicas while no
            rollout runs, so a template change waits for the operator to batch it instead of
            replacing a pod at once."""
        ),
    ] = True
    paused: Annotated[
        Bool,
        Field(
            description="""Pause the rollout where it is (no further batch is released; a
            stepped Deployment is paused). Set back to false to continue; timers resume where
            they stopped."""
        ),
    ] = False
    initial_rebalance_delay_ms: Annotated[
        Int,
        Field(
            ge=0,
            le=600000,
            description="""The brokers' group.initial.rebalance.delay.ms (KIP-134), which the
            planner times batches with on Apache Kafka and Redpanda. The only delay the planner
            uses: brokerDelay.delayMs (what this group asks the cluster for) and the value the
            broker reports (status.settings.brokerDelay.inForceMs) do not change it; set it to
            the value in force.""",
        ),
    ] = 3000
    arrival_plan: Annotated[
        ArrivalPlanChoice,
        Field(
            description="""How a cold start's or scale-up's pods are let through their gates.
            Auto (the default): the plan the coordinator model finds cheapest for this group (by
            costWeights), written with its cost and the runner-up's to status.rollout.plan.
            OnArrival: each pod's gate opens as soon as the pod exists. Gather: the batch waits
            until all its pods are at their gates, then all open together. OpenAhead: the batch
            waits until its last pod is expected less the operator's open, then the pods there
            open together and later ones as they come (a scale-up of a classic group: the
            rebalance the first joins start waits for the members' next heartbeat, which the
            last joiners make if they come in time); Auto never takes it."""
        ),
    ] = ArrivalPlanChoice.AUTO
    cost_weights: CostWeightsSpec = Field(default_factory=CostWeightsSpec)
    consumers: ConsumerTimingsSpec = Field(default_factory=ConsumerTimingsSpec)

    @field_validator("gate_image")
    @classmethod
    def _names_an_image(cls, image: str | None) -> str | None:
        if image is not None and not image.strip():
            raise ValueError("blank")
        return image

    def problems(self, path: str) -> list[FieldProblem]:
        problems: list[FieldProblem] = []
        if 0 < self.gate_timeout_seconds <= self.gather_seconds:
            problems.append(
                FieldProblem(
                    f"{path}.gateTimeoutSeconds",
                    f"({self.gate_timeout_seconds}) is not longer than gatherSeconds "
                    f"({self.gather_seconds}): gates would give up while their batch is "
                    "gathering",
                    f"set gateTimeoutSeconds above {self.gather_seconds} (or 0 to wait forever)",
                )
            )
        bypass = self.bypass_gate_after_seconds
        if bypass is not None and 0 < bypass < 30:
            problems.append(
                FieldProblem(
                    f"{path}.bypassGateAfterSeconds",
                    f"({bypass}) is shorter than the 30 s a busy operator may take between two "
                    "refreshes",
                    "set 0 (never bypass) or at least 30",
                )
            )
        return problems
