"""`spec.policy.rollout`: how the operator staggers a group's rollouts, parsed and checked.

Every problem names the field path and the fix, as the rest of the spec does. Checks that need
the workload or the broker (a deadline shorter than the join window, an OrderedReady
StatefulSet that cannot gather a batch) live in rebalancer.planning.rollout_plans.check_rollout.
A maxBatchSize above the workload's replicas is no problem: rollout_plans.batch_limit and
split_batches cap each batch at the pods there are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS, GateHold
from rebalancer.structs.plan_costs import ArrivalPlan, CostWeights
from rebalancer.structs.problems import FieldProblem, SpecInvalid

PATH = "spec.policy.rollout"


class StaticMembership(StrEnum):
    """Whether the consumers set group.instance.id (KIP-345)."""

    AUTO = "auto"  # yes if the workload is a StatefulSet and every member reports one
    ENABLED = "enabled"
    DISABLED = "disabled"


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


def _integer(
    raw: Mapping[str, object],
    key: str,
    path: str,
    default: int | None,
    low: int,
    high: int,
    problems: list[FieldProblem],
) -> int | None:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(FieldProblem(f"{path}.{key}", "must be an integer", "use a number"))
        return default
    if not low <= value <= high:
        problems.append(
            FieldProblem(
                f"{path}.{key}",
                f"must be between {low} and {high}, got {value}",
                f"set a value from {low} to {high}",
            )
        )
        return default
    return value


def _required_integer(
    raw: Mapping[str, object],
    key: str,
    path: str,
    default: int,
    low: int,
    high: int,
    problems: list[FieldProblem],
) -> int:
    value = _integer(raw, key, path, default, low, high, problems)
    return default if value is None else value


def _boolean(
    raw: Mapping[str, object], key: str, path: str, default: bool, problems: list[FieldProblem]
) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.append(FieldProblem(f"{path}.{key}", "must be true or false", "use a bool"))
        return default
    return value


def _weight(
    raw: Mapping[str, object], key: str, path: str, default: float, problems: list[FieldProblem]
) -> float:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1000:
        problems.append(
            FieldProblem(f"{path}.{key}", f"must be a number from 0 to 1000, got {value!r}",
                         "use a weight such as 1 (the default) or 0 to ignore this cost")
        )  # fmt: skip
        return default
    return float(value)


def parse_cost_weights(raw: object, problems: list[FieldProblem]) -> CostWeights:
    path = f"{PATH}.costWeights"
    body = _mapping(raw, path, problems)
    base = CostWeights()
    weights = CostWeights(
        unowned=_weight(body, "unownedPartitionSeconds", path, base.unowned, problems),
        stop_the_world=_weight(
            body, "stopTheWorldPartitionSeconds", path, base.stop_the_world, problems
        ),
    )
    if weights.unowned == 0 and weights.stop_the_world == 0:
        problems.append(
            FieldProblem(path, "weighs every cost at 0, so no plan is cheaper than another",
                         "give unownedPartitionSeconds or stopTheWorldPartitionSeconds a weight")
        )  # fmt: skip
        return base
    return weights


def parse_arrival_plan(raw: object, problems: list[FieldProblem]) -> ArrivalPlan | None:
    if raw is None or raw == "Auto":
        return None
    allowed = ["Auto"] + [plan.value for plan in ArrivalPlan]
    if raw not in allowed:
        problems.append(
            FieldProblem(f"{PATH}.arrivalPlan", f"unsupported value {raw!r}",
                         "use one of: " + ", ".join(allowed))
        )  # fmt: skip
        return None
    return ArrivalPlan(str(raw))


def parse_gate_holds(raw: object, problems: list[FieldProblem]) -> GateHold:
    if raw is None:
        return GateHold.POD
    allowed = [hold.value for hold in GateHold]
    if raw not in allowed:
        problems.append(
            FieldProblem(f"{PATH}.gateHolds", f"unsupported value {raw!r}",
                         "use one of: " + ", ".join(allowed))
        )  # fmt: skip
        return GateHold.POD
    return GateHold(str(raw))


def _mapping(raw: object, path: str, problems: list[FieldProblem]) -> Mapping[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(FieldProblem(path, "must be an object", f"write {path} as a mapping"))
        return {}
    return raw


def parse_rollout_policy(
    raw: object, bypass_default: int = DEFAULT_BYPASS_SECONDS
) -> RolloutPolicy:
    """Parse `spec.policy.rollout` (None or {} for the defaults), or raise SpecInvalid.

    `bypass_default` stands for an unset bypassGateAfterSeconds: the operator's own default
    (--gate-bypass-after-seconds), which the chart sets for every group at once."""
    problems: list[FieldProblem] = []
    body = _mapping(raw, PATH, problems)
    defaults = RolloutPolicy()

    def number(key: str, default: int, low: int, high: int) -> int:
        return _required_integer(body, key, PATH, default, low, high, problems)

    def flag(key: str, default: bool) -> bool:
        return _boolean(body, key, PATH, default, problems)

    max_batch = _integer(body, "maxBatchSize", PATH, None, 1, 10000, problems)
    static_raw = body.get("staticMembership", defaults.static_membership.value)
    allowed = [choice.value for choice in StaticMembership]
    static = defaults.static_membership
    if static_raw in allowed:
        static = StaticMembership(static_raw)
    else:
        problems.append(
            FieldProblem(
                f"{PATH}.staticMembership",
                f"unsupported value {static_raw!r}",
                "use one of: " + ", ".join(allowed),
            )
        )
    image = body.get("gateImage")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        problems.append(
            FieldProblem(f"{PATH}.gateImage", "must be an image reference", "name an image")
        )
        image = None
    cpath = f"{PATH}.consumers"
    consumers_raw = _mapping(body.get("consumers"), cpath, problems)
    base = ConsumerTimings()
    consumers = ConsumerTimings(
        session_timeout_ms=_required_integer(
            consumers_raw, "sessionTimeoutMs", cpath, base.session_timeout_ms, 1000, 3600000,
            problems,
        ),
        heartbeat_interval_ms=_required_integer(
            consumers_raw, "heartbeatIntervalMs", cpath, base.heartbeat_interval_ms, 100, 600000,
            problems,
        ),
        max_poll_interval_ms=_required_integer(
            consumers_raw, "maxPollIntervalMs", cpath, base.max_poll_interval_ms, 1000,
            2147483647, problems,
        ),
    )  # fmt: skip
    policy = RolloutPolicy(
        enabled=flag("enabled", defaults.enabled),
        max_batch_size=max_batch,
        batch_deadline_seconds=number("batchDeadlineSeconds", 300, 5, 86400),
        gather_seconds=number("gatherSeconds", 120, 0, 3600),
        settle_seconds=number("settleSeconds", 10, 0, 3600),
        gate_joins=flag("gateJoins", defaults.gate_joins),
        inject_gate=flag("injectGate", defaults.inject_gate),
        gate_holds=parse_gate_holds(body.get("gateHolds"), problems),
        gate_image=image if isinstance(image, str) else None,
        gate_timeout_seconds=number("gateTimeoutSeconds", 900, 0, 86400),
        bypass_gate_after_seconds=number("bypassGateAfterSeconds", bypass_default, 0, 86400),
        static_membership=static,
        static_restart_budget_seconds=_integer(
            body, "staticRestartBudgetSeconds", PATH, None, 1, 3600, problems
        ),
        scale_steps=flag("scaleSteps", defaults.scale_steps),
        autoscaler_window_seconds=number("autoscalerWindowSeconds", 20, 0, 600),
        park_statefulsets=flag("parkStatefulSets", defaults.park_statefulsets),
        paused=flag("paused", defaults.paused),
        initial_rebalance_delay_ms=number("initialRebalanceDelayMs", 3000, 0, 600000),
        consumers=consumers,
        cost_weights=parse_cost_weights(body.get("costWeights"), problems),
        arrival_plan=parse_arrival_plan(body.get("arrivalPlan"), problems),
    )
    problems.extend(check_policy(policy))
    if problems:
        raise SpecInvalid(tuple(problems))
    return policy


def check_policy(policy: RolloutPolicy) -> list[FieldProblem]:
    """Problems between fields of the policy itself."""
    problems: list[FieldProblem] = []
    consumers = policy.consumers
    if consumers.heartbeat_interval_ms >= consumers.session_timeout_ms:
        problems.append(
            FieldProblem(
                f"{PATH}.consumers.heartbeatIntervalMs",
                f"({consumers.heartbeat_interval_ms}) is not below sessionTimeoutMs "
                f"({consumers.session_timeout_ms})",
                "use the consumers' real settings; Kafka clients require a heartbeat well below "
                "the session timeout (a third is usual)",
            )
        )
    if 0 < policy.gate_timeout_seconds <= policy.gather_seconds:
        problems.append(
            FieldProblem(
                f"{PATH}.gateTimeoutSeconds",
                f"({policy.gate_timeout_seconds}) is not longer than gatherSeconds "
                f"({policy.gather_seconds}): gates would give up while their batch is gathering",
                f"set gateTimeoutSeconds above {policy.gather_seconds} (or 0 to wait forever)",
            )
        )
    if 0 < policy.bypass_gate_after_seconds < 30:
        problems.append(
            FieldProblem(
                f"{PATH}.bypassGateAfterSeconds",
                f"({policy.bypass_gate_after_seconds}) is shorter than the 30 s a busy operator "
                "may take between two refreshes",
                "set 0 (never bypass) or at least 30",
            )
        )
    return problems
