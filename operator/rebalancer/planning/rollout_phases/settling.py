"""The rollout planner's BatchSettling phase: the group settled with the batch in it, held for
the settle time before the next batch."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.planning.rollout_actions import Action, ResumeDeployment
from rebalancer.planning.rollout_choices import opens_late_arrivals
from rebalancer.planning.rollout_phases.common import (
    Observation,
    Outcome,
    Phase,
    _also,
    _plural,
    autoscaled,
    batch_names,
    batch_size,
    chunk,
    dynamic_members,
    names,
)
from rebalancer.planning.rollout_phases.planning import begin_batch
from rebalancer.planning.rollout_plans import (
    RolloutSetup,
    advances_on_ready,
    batch_limit,
    batch_window_s,
    classify,
    split_batches,
    static_budget_s,
    through_pods,
)
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.snapshots import GroupSnapshot, Source
from rebalancer.structs.workloads import PodView, WorkloadView


def settling(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """BatchSettling -> the next batch's BatchOpening, or Completed, after the settle time;
    back to BatchJoining if the group stops being settled."""
    setup = observation.setup
    if not (
        settled(state, observation, workload) or back_in_time(state, observation, now, workload)
    ):
        return state.moved(phase=Phase.BATCH_JOINING, phase_since=now), []
    if state.settle_until is not None and now < state.settle_until:
        return state, []
    joined = state.members_joined + (len(state.opened) or batch_size(state))
    state = state.moved(members_joined=joined)
    if state.batch < state.batches:
        return begin_batch(state, setup.policy, now, state.batch + 1), []
    if state.mechanism is Mechanism.GATE_QUEUE:
        remaining = max(workload.replicas - len(through_pods(workload)), 0)
        if remaining:
            # Pods that missed their batch (gathering timed out) get batches of their own.
            change = classify(
                setup, workload, observation.group, state.steady_replicas, autoscaled(observation)
            )
            limit = remaining
            if change is not None:
                limit = batch_limit(setup, workload, change, remaining)
            extra = split_batches(remaining, limit)
            more = state.moved(sizes=state.sizes + extra)
            return begin_batch(more, setup.policy, now, state.batch + 1), []
    actions: list[Action] = []
    if state.mechanism is Mechanism.DEPLOYMENT_STEPS and workload.paused:
        actions.append(ResumeDeployment())
    done = state.moved(
        phase=Phase.COMPLETED,
        phase_since=now,
        holding_deployment=False,
        steady_replicas=workload.replicas,
        message=_also(
            f"{_plural(state.batches, 'batch')}, {_plural(joined, 'member')} joined",
            state.interference,
        ),
    )
    return done, actions


def settled(state: RolloutState, observation: Observation, workload: WorkloadView) -> bool:
    """The group is settled with this batch in it, as far as the figures tell."""
    group = observation.group
    if group is None or state.opened_at is None or group.observed_at < state.opened_at:
        return False
    if not group.settled:
        return False
    live = {pod.name: pod for pod in workload.live_pods}
    batch = [live[name] for name in batch_names(state, workload) if name in live]
    if not all(pod.ready and pod.updated and pod.gate.through for pod in batch):
        return False
    if opens_late_arrivals(state.plan) and len(state.opened) < batch_size(state):
        return False  # pods of the batch are still to arrive
    if state.mechanism is Mechanism.STATEFULSET_REPLACE:
        by_ordinal = {pod.ordinal for pod in workload.live_pods if pod.updated}
        if not set(chunk(state)) <= by_ordinal:
            return False
    if state.mechanism is Mechanism.DEPLOYMENT_STEPS:
        goal = min(state.base + sum(state.sizes[: state.batch]), workload.replicas)
        ready = sum(1 for pod in workload.live_pods if pod.updated and pod.ready)
        if ready < goal:
            return False
    if state.mechanism is Mechanism.SCALE_STEPS:
        goal = state.base + sum(state.sizes[: state.batch])
        if workload.ready_replicas < goal:
            return False
    return members_in(state, observation.setup, group, workload, batch)


def back_in_time(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> bool:
    """A batch of static members that may be followed by the next without the group
    settling: every pod of it Ready at the new revision within the static budget of its
    release, and the group still at the generation it had then (advances_on_ready)."""
    setup = observation.setup
    if not advances_on_ready(setup, state.static, state.mechanism, state.kind):
        return False
    if state.batch >= state.batches or state.opened_at is None:
        return False
    if now - state.opened_at > static_budget_s(setup):
        return False
    group = observation.group
    generation = group.generation if group is not None else None
    opened = state.generation_at_open
    if generation is not None and opened is not None and generation != opened:
        return False
    live = {pod.name: pod for pod in workload.live_pods}
    batch = batch_names(state, workload)
    if not batch or any(name not in live for name in batch):
        return False
    if state.mechanism is Mechanism.STATEFULSET_REPLACE:
        # The next batch's dynamic members leave the group as they stop (a rebalance):
        # the group settles first (rollout_phases.joining.slide_statefulset says why).
        start = sum(state.sizes[: state.batch])
        following = state.ordinals[start : start + state.sizes[state.batch]]
        if any(dynamic_members(group, names(workload, following))):
            return False
    return all(
        live[name].ready and live[name].updated and live[name].gate.through for name in batch
    )


def members_in(
    state: RolloutState,
    setup: RolloutSetup,
    group: GroupSnapshot,
    workload: WorkloadView,
    batch: Sequence[PodView],
) -> bool:
    """Whether the group's members include the batch: by name when members say theirs,
    else by count, else by a new generation or time."""
    members = {m.host for m in group.member_details} | {
        m.instance_id for m in group.member_details if m.instance_id
    }
    pods = {pod.name for pod in workload.live_pods}
    if members & pods:
        return all(pod.name in members for pod in batch)
    members_known = group.sources.get("members", Source.NONE) is not Source.NONE
    if members_known:
        expected = sum(1 for pod in workload.live_pods if pod.gate.through and pod.ready)
        return group.members >= expected
    if state.static and state.mechanism is Mechanism.STATEFULSET_REPLACE:
        return True
    if state.generation_at_open is not None and group.generation is not None:
        return group.generation > state.generation_at_open
    window = batch_window_s(setup, state.generation_at_open is None)
    return state.opened_at is not None and group.observed_at >= state.opened_at + window
