"""Which arrival plan a cold start or scale-up takes: the cheapest on the coordinator model.

A batch of pods can be let through their gates as each arrives (ArrivalPlan.ON_ARRIVAL) or
gathered and opened together (GATHER); a spec may name a third, OPEN_AHEAD (gathered until its
last pod is expected less the operator's open, later pods opened as they come), which the
planner does not take by itself (structs.plan_costs.CHOSEN_PLANS). Neither always wins: on
Apache Kafka an Empty group's initial delay, restarted by every join (KIP-134), already gathers
pods that start close together, so gathering them at the gate only adds the early pods' wait;
a Stable group has no such delay, so each pod joining on its own costs a rebalance (all
partitions stopped, on the eager protocol); a KIP-848 group has no join barrier at all, so
gathered pods leave every partition unowned while they wait. The planner asks the model
(RolloutSetup.estimate, the simulation layer's estimate_arrival_plans) what each plan costs this
group with these pods and takes the cheapest.
The pods arrive and start as this workload's did before (RolloutSetup.startups, measured from
its history by planning.startup_history) when enough of them were recorded; else as a
documented assumption, which the plan's reason then states.

The cost is what the user loses: partition-seconds without an owner plus stop-the-world
partition-seconds plus, in a scale-up, the partition-seconds its joiners' partitions wait for
them (the work the old members were scaled up for not keeping up with), weighted by
spec.policy.rollout.costWeights. Plans within TIE_SHARE of each other are a tie. A
rebalance's own cost is in those partition-seconds already; what a tie leaves for the user is
how long the new consumers wait for work (a scale-up is made because the group is behind), so a
tie goes to the plan Stable sooner by more than SOONER_S, and between plans closer than that to
fewer rebalances.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rebalancer.planning.rollout_plans import Change, RolloutSetup, group_is_empty, group_members
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutState
from rebalancer.planning.streams_observing import STREAMS_PROTOCOL
from rebalancer.structs.plan_costs import (
    CHOSEN_PLANS,
    ArrivalPlan,
    ArrivalQuestion,
    GroupKind,
    PlanCost,
)
from rebalancer.structs.snapshots import GroupSnapshot
from rebalancer.structs.specs import ProtocolChoice
from rebalancer.structs.workloads import WorkloadView

TIE_SHARE = 0.05
# Within a tie, a plan Stable sooner by more than this is taken over one with fewer rebalances:
# about the spread of the model's time between its seeds.
SOONER_S = 1.0
# Without enough measured start-ups (planning.startup_history: MIN_MEASURED_PODS) the model
# assumes the pods reach their gates evenly over this long, and their consumers join this long
# after their gates open (a Python or JVM client's start on a busy node). Stated in the plan's
# reason whenever used.
ASSUMED_ARRIVAL_SPREAD_MS = 6000.0
ASSUMED_START_MS = 1500.0
# A gate that holds only the join lets the consumer start while its batch gathers: once opened,
# the consumer sees the gate's file within its poll (50 ms) and sends its JoinGroup.
JOIN_HOLD_START_MS = 200.0
# The operator's look (about a second while a batch gathers) and its gate writes.
RELEASE_MS = 1000.0
# KIP-848's broker default group.consumer.heartbeat.interval.ms.
KIP848_HEARTBEAT_MS = 5000.0
# A classic group's members learn of a rebalance at their next heartbeat, so a rebalance that
# new members start lasts until the slowest has heard: the plan's reason says what this
# heartbeat would save when the model finds it cuts the plan's cost by ADVISED_SAVING_SHARE.
# Measured on Apache Kafka 4.4 (BENCHMARKS.md, "Scale-ups, released at once"): a cooperative
# 24-pod scale-up left 26 unowned partition-s with it against 73 with the client's 3 s.
ADVISED_HEARTBEAT_MS = 1000.0
ADVISED_SAVING_SHARE = 0.2


@dataclass(frozen=True)
class PlanChoice:
    chosen: PlanCost
    runner_up: PlanCost | None
    score: float
    runner_up_score: float | None
    reason: str


def chooses_arrival_plan(change: Change) -> bool:
    """Whether `change` lets pods through gates in a batch the planner may gather or not."""
    return change.mechanism is Mechanism.GATE_QUEUE and change.kind in (
        RolloutKind.COLD_START,
        RolloutKind.SCALE_UP,
    )


def group_protocol(
    setup: RolloutSetup, workload: WorkloadView, group: GroupSnapshot | None
) -> str | None:
    """The protocol the joining consumers will speak: what the pod template sets them to,
    else spec.policy.protocol, else what the broker says of a group that has members (an Empty
    or unknown group is described as classic whatever its consumers will speak)."""
    known = group if group is not None and not group_is_empty(group) else None
    declared = None if setup.protocol is ProtocolChoice.AUTO else setup.protocol.value
    return workload.group_protocol or declared or (known.protocol if known is not None else None)


def group_kind(
    setup: RolloutSetup, workload: WorkloadView, group: GroupSnapshot | None
) -> GroupKind:
    """The coordinator the joining consumers will have (group_protocol). A streams group
    (KIP-1071) has no JoinGroup barrier either: the model has no coordinator of its own for
    it, so it is costed on KIP-848's, and the plan's reason says so."""
    protocol = group_protocol(setup, workload, group)
    if protocol in ("consumer", STREAMS_PROTOCOL):
        return GroupKind.KIP848
    known = group if group is not None and not group_is_empty(group) else None
    assignor = workload.assignment_strategy or (known.assignor if known is not None else None)
    if assignor and "cooperative" in assignor:
        return GroupKind.COOPERATIVE
    return GroupKind.EAGER


def arrival_question(
    setup: RolloutSetup,
    workload: WorkloadView,
    group: GroupSnapshot | None,
    joiners: int,
) -> ArrivalQuestion:
    """What the model is asked about `joiners` new pods of `workload` joining `group`."""
    kind = group_kind(setup, workload, group)
    members = 0 if group_is_empty(group) else group_members(group)
    partitions = (group.total_partitions if group is not None else None) or 2 * max(
        workload.replicas, 1
    )
    history = setup.startups
    measured = history is not None and history.enough
    if history is not None and measured:
        arrivals = history.arrivals_ms(joiners)
        start = round(history.join_median_ms, 1)
    else:
        spread = ASSUMED_ARRIVAL_SPREAD_MS
        arrivals = tuple(spread * index / max(joiners - 1, 1) for index in range(joiners))
        start = ASSUMED_START_MS
    if workload.gate_holds_join:
        # Its consumers started while they waited: what the history measured from their
        # containers' start to their join is the wait at the gate, not a start-up.
        start = JOIN_HOLD_START_MS
    heartbeat = KIP848_HEARTBEAT_MS if kind is GroupKind.KIP848 else setup.heartbeat_s * 1000
    return ArrivalQuestion(
        group=kind,
        joiners=joiners,
        members=members,
        partitions=partitions,
        initial_delay_ms=setup.join_window_s * 1000,
        heartbeat_ms=heartbeat,
        session_ms=setup.session_s * 1000,
        arrivals_ms=arrivals,
        start_ms=start,
        release_ms=RELEASE_MS,
        measured=measured,
        streams=group_protocol(setup, workload, group) == STREAMS_PROTOCOL,
    )


def choose_plan(
    question: ArrivalQuestion, costs: Sequence[PlanCost], setup: RolloutSetup
) -> PlanChoice:
    """The cheapest of `costs` (see the module docstring), with the runner-up and why."""
    weights = setup.policy.cost_weights
    ranked = sorted(
        (cost for cost in costs if cost.plan in CHOSEN_PLANS), key=lambda cost: cost.score(weights)
    )
    best = ranked[0]
    tied = [c for c in ranked if c.score(weights) <= best.score(weights) * (1 + TIE_SHARE)]
    soonest = min(cost.stable_s for cost in tied)
    timely = [cost for cost in tied if cost.stable_s <= soonest + SOONER_S]
    chosen = min(timely, key=lambda cost: (cost.rebalances, cost.stable_s, ranked.index(cost)))
    others = [cost for cost in ranked if cost is not chosen]
    runner_up = others[0] if others else None
    return PlanChoice(
        chosen=chosen,
        runner_up=runner_up,
        score=round(chosen.score(weights), 1),
        runner_up_score=round(runner_up.score(weights), 1) if runner_up else None,
        reason=_reason(question, chosen, runner_up, setup),
    )


def _reason(
    question: ArrivalQuestion, chosen: PlanCost, runner_up: PlanCost | None, setup: RolloutSetup
) -> str:
    weights = setup.policy.cost_weights
    group = {
        GroupKind.KIP848: "a KIP-848 group (no join barrier)",
        GroupKind.COOPERATIVE: "a cooperative classic group",
        GroupKind.EAGER: "an eager classic group",
    }[question.group]
    if question.streams:
        group = (
            "a streams group (no join barrier), costed on the KIP-848 coordinator model: the "
            "model has none of streams groups, so their initial delay and task warm-ups are "
            "not counted"
        )
    where = "an Empty group" if not question.members else f"{question.members} members"
    text = (
        f"{chosen.plan.value} for {question.joiners} pods joining {where}, {group}: "
        f"{_costs(chosen)}, cost {chosen.score(weights):.0f}"
    )
    if runner_up is not None:
        text += f"; {runner_up.plan.value} {_costs(runner_up)}, cost {runner_up.score(weights):.0f}"
    history = setup.startups
    if question.measured and history is not None:
        starts = "start" if history.starts == 1 else "starts"
        text += (
            f"; from {history.starts} past {starts} of this workload ({history.pods} pods): "
            f"arrivals over {history.arrival_p90_ms / 1000:.1f} s (p90), join "
            f"{history.join_median_ms / 1000:.1f} s after open "
            f"(p90 {history.join_p90_ms / 1000:.1f} s)"
        )
        if question.start_ms != round(history.join_median_ms, 1):
            text += (
                f"; its gate holds only the join: consumers joining "
                f"{question.start_ms / 1000:.1f} s after their gates open"
            )
    else:
        text += (
            "; no start-up history for this workload: the model assumed pods reaching their "
            f"gates over {ASSUMED_ARRIVAL_SPREAD_MS / 1000:.0f} s and consumers joining "
            f"{question.start_ms / 1000:.1f} s after their gates open"
        )
    return text


def _costs(cost: PlanCost) -> str:
    waiting = f", {cost.waiting_ps:.0f} waiting for the new members" if cost.waiting_ps else ""
    return (
        f"{cost.unowned_ps:.0f} unowned and {cost.stop_the_world_ps:.0f} stop-the-world "
        f"partition-s{waiting}, {cost.rebalances} rebalances, Stable after {cost.stable_s:.1f} s"
    )


def arrival_fields(
    setup: RolloutSetup,
    workload: WorkloadView,
    group: GroupSnapshot | None,
    change: Change,
    joiners: int,
    *,
    hpa_window: bool = False,
    now: float = 0.0,
) -> dict[str, object]:
    """The RolloutState fields that record a change's arrival plan (all None for a change that
        has none: rolling updates, ungated steps). `hpa_window`: an HPA scales the workload and
        spec.policy.rollout.autoscalerWindowSeconds asks for its quick steps to be gathered, so a
        scale-up is gathered whatever the model prefers. `now`: the change's moment, from which
    an OpenAhead plan's gather ends (its gather_until)."""
    fields: dict[str, object] = dict.fromkeys(
        ("plan", "plan_cost", "runner_up", "runner_up_cost", "plan_reason")
    )
    if not chooses_arrival_plan(change) or joiners <= 0:
        return fields
    forced = setup.policy.arrival_plan
    if setup.estimate is None:
        fields["plan"] = (forced or ArrivalPlan.GATHER).value
        return fields
    question = arrival_question(setup, workload, group, joiners)
    costs = setup.estimate(question)
    choice = choose_plan(question, costs, setup)
    weights = setup.policy.cost_weights
    chosen, runner_up, reason = choice.chosen, choice.runner_up, choice.reason
    if forced is None and hpa_window and change.kind is RolloutKind.SCALE_UP:
        forced = ArrivalPlan.GATHER
        said = "an HPA scales the workload and spec.policy.rollout.autoscalerWindowSeconds"
    else:
        said = "spec.policy.rollout.arrivalPlan"
    named = next((cost for cost in costs if cost.plan is forced), None)
    if named is not None and named is not chosen:
        runner_up, chosen = chosen, named
        reason = f"{named.plan.value}, as {said} says; the model would take {reason}"
    advice = heartbeat_advice(question, chosen.score(weights), setup)
    if advice:
        reason = f"{reason}; {advice}"
    fields.update(
        plan=chosen.plan.value,
        plan_cost=round(chosen.score(weights)),
        runner_up=runner_up.plan.value if runner_up else None,
        runner_up_cost=round(runner_up.score(weights)) if runner_up else None,
        plan_reason=reason,
    )
    if chosen.plan is ArrivalPlan.OPEN_AHEAD:
        fields["gather_until"] = now + question.open_ahead_ms / 1000
        reason = (
            f"{reason}; OpenAhead opens the pods waiting {question.open_ahead_ms / 1000:.1f} s "
            "after the change together, and later ones as they come"
        )
        fields["plan_reason"] = reason
    return fields


def heartbeat_advice(question: ArrivalQuestion, score: float, setup: RolloutSetup) -> str | None:
    """What a shorter heartbeat would save a classic group's change, when the model finds it
    worth saying (a KIP-848 group's heartbeat is the broker's, and its minimum 5 s by default).
    """
    if setup.estimate is None or question.group is GroupKind.KIP848:
        return None
    if question.heartbeat_ms <= ADVISED_HEARTBEAT_MS:
        return None
    shorter = replace(question, heartbeat_ms=ADVISED_HEARTBEAT_MS)
    best = choose_plan(shorter, setup.estimate(shorter), setup)
    if best.score > score * (1 - ADVISED_SAVING_SHARE):
        return None
    return (
        f"with heartbeat.interval.ms {ADVISED_HEARTBEAT_MS:.0f} (the consumers', or "
        f"spec.policy.settings.heartbeatIntervalMs) the model puts it at cost {best.score:.0f} "
        f"({best.chosen.plan.value}, Stable after {best.chosen.stable_s:.1f} s): members hear "
        "of a rebalance at their next heartbeat"
    )


def released_on_arrival(plan: str | None) -> bool:
    return plan == ArrivalPlan.ON_ARRIVAL.value


def opens_late_arrivals(plan: str | None) -> bool:
    """Whether pods of a released batch that reach their gates later are opened as they come
    (rather than the batch waiting for them as a gathered one does)."""
    return plan in (ArrivalPlan.ON_ARRIVAL.value, ArrivalPlan.OPEN_AHEAD.value)


def lets_go_together(state: RolloutState) -> bool:
    """Whether a batch's gates let go at one common release moment, or each as soon as it sees
    its patch.

    The moment waits for the batch's slowest gate to be watching (rollout_actions
    release_moment), which on the lab cost a gathered scale-up 0.4 to 0.9 s after its last pod
    arrived. A scale-up's pods join a group that has members: the rebalance their first join
    starts lasts until every member has rejoined (at its next heartbeat, classic protocol), or
    is paced by heartbeats anyway (KIP-848), so joins a few tenths apart, as the concurrent
    patches give, fall into it without a common moment. An Empty group keeps the moment: its
    joins are what its first assignment waits for, and nothing else holds them together.
    """
    if released_on_arrival(state.plan):
        return False
    return state.kind is not RolloutKind.SCALE_UP
