"""What a rollout shows in status: its conditions, and the group as status last recorded it.

The observer and the rollout driver both write conditions. A rollout's conditions go last, so
a failed rollout stays Degraded while the group itself is observed fine, and a rollout in
progress shows as Progressing; at rest the rollout says nothing and the observer's stand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.rollout_actions import Action, ClearDegraded, Wait
from rebalancer.planning.rollout_states import Mechanism as RolloutMechanism
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.times import parse_rfc3339


def rollout_conditions(state: RolloutState) -> list[Condition]:
    """Conditions the rollout imposes now ([] when it has nothing to say)."""
    batch = f"batch {state.batch} of {state.batches}"
    if state.mechanism is RolloutMechanism.STATEFULSET_REPLACE and state.ordinals:
        # A static StatefulSet's window slides the later batches into the current one
        # (rollout_phases.joining.slide_statefulset): the pods tell the progress better.
        released = sum(state.sizes[: max(state.batch - 1, 0)]) + len(state.opened)
        batch += f", {min(released, len(state.ordinals))} of {len(state.ordinals)} pods released"
    counts = f"{state.members_joined} members joined, {state.rebalances} rebalances so far"
    if state.phase is RolloutPhase.FAILED:
        reason = state.reason or "RolloutFailed"
        message = state.message or "the rollout failed"
        return [
            Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, reason, message),
            Condition(ConditionType.PROGRESSING, ConditionStatus.FALSE, "RolloutFailed", message),
        ]
    if state.phase.resting and state.reason == "PolicyCannotBeMet":
        message = state.message or "the rollout policy cannot be met"
        return [Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, state.reason, message)]
    if state.phase is RolloutPhase.PAUSED:
        return [
            Condition(
                ConditionType.PROGRESSING,
                ConditionStatus.FALSE,
                "RolloutPaused",
                f"rollout paused at {batch} (spec.policy.rollout.paused); {counts}",
            )
        ]
    if state.phase.active:
        kind = state.kind.value if state.kind is not None else "rollout"
        message = f"{kind}: {batch} ({state.phase.value}); {counts}"
        if state.interference:
            message += f"; {state.interference}"
        return [Condition(ConditionType.PROGRESSING, ConditionStatus.TRUE, "RollingOut", message)]
    return []


def ended_conditions(before: RolloutState, after: RolloutState) -> list[Condition]:
    """Progressing turned off the moment a rollout comes to rest.

    At rest the rollout imposes no condition and the observer's own stand; until the
    observer's next write, status would otherwise still show the last batch in progress.
    """
    if not before.phase.active or not after.phase.resting:
        return []
    kind = after.kind.value if after.kind is not None else "rollout"
    if after.phase is RolloutPhase.COMPLETED:
        message = f"{kind} completed"
        if after.message:
            message += f": {after.message}"
        reason = "RolloutCompleted"
    else:
        message = after.message or "no rollout in progress"
        reason = "RolloutIdle"
    return [Condition(ConditionType.PROGRESSING, ConditionStatus.FALSE, reason, message)]


@dataclass(frozen=True)
class RolloutWrite:
    """What the rollout daemon writes after a step: status.rollout and the conditions it sets
    (merged by type)."""

    rollout: dict[str, Any]
    conditions: list[Condition]


def rollout_write(
    before: RolloutState,
    after: RolloutState,
    actions: Sequence[Action],
    written: Mapping[str, Any] | None,
) -> RolloutWrite | None:
    """status.rollout after a step from `before` to `after`, with Progressing from the rollout
    and Degraded cleared where a step said so; None when `written` already says it all."""
    rollout = after.to_status()
    if after.phase is RolloutPhase.COMPLETED:
        rollout["completedRevision"] = rollout.get("rolloutId")
    cleared = [action for action in actions if isinstance(action, ClearDegraded)]
    if rollout == written and not cleared:
        return None
    conditions = (
        rollout_conditions(after)
        + ended_conditions(before, after)
        + [
            Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, a.reason, a.message)
            for a in cleared
        ]
    )
    return RolloutWrite(rollout, conditions)


@dataclass(frozen=True)
class Pace:
    """When the rollout daemon looks again after a step, and whether the observer looks now."""

    delay: float
    at_once: bool  # a new active phase, looked at again without waiting
    wake_observer: bool


def pace(
    before: RolloutState,
    after: RolloutState,
    actions: Sequence[Action],
    now: float,
    *,
    active_poll: float,
    resting_poll: float,
    followed_at_once: bool,
) -> Pace:
    """A new phase is looked at again at once (its first wait may already be over, as when a
    settled batch of static members lets the next go), but never twice in a row
    (`followed_at_once`: the last step was), so that a phase that flips back cannot spin.

    The observer looks sooner while a batch is out: settling is what the rollout waits for.
    Not while a batch gathers: the planner then looks every half second, and the group has
    nothing new to show. And once a rollout ends: an observer pass that began before this write
    merged its conditions from the rollout as it was, and the next pass puts them right."""
    moved_on = after.phase is not before.phase
    at_once = moved_on and after.phase.active and not followed_at_once
    ended = moved_on and not after.phase.active
    batch_out = after.phase in (RolloutPhase.BATCH_JOINING, RolloutPhase.BATCH_SETTLING)
    delay = active_poll if after.phase.active else resting_poll
    waits = [action.until for action in actions if isinstance(action, Wait)]
    if waits:
        delay = min(delay, max(min(waits) - now, 0.2))
    return Pace(0.0 if at_once else delay, at_once, batch_out or ended)


def snapshot_from_status(status: Mapping[str, object]) -> GroupSnapshot | None:
    """The group as status.group recorded it: what a restarted operator has before observing."""
    group = status.get("group")
    if not isinstance(group, Mapping) or not isinstance(group.get("observedAt"), str):
        return None
    details = []
    for item in group.get("memberDetails") or []:
        if not isinstance(item, Mapping):
            continue
        generation = item.get("generation")
        details.append(
            MemberSummary(
                host=str(item.get("host") or ""),
                member_id=str(item.get("memberId") or ""),
                instance_id=str(item["instanceId"]) if item.get("instanceId") else None,
                generation=generation if isinstance(generation, int) else None,
                partitions=_int(item.get("partitions")) or 0,
                source=_source(item.get("source")),
            )
        )
    sources_raw = group.get("sources")
    sources = (
        {str(key): _source(value) for key, value in sources_raw.items()}
        if isinstance(sources_raw, Mapping)
        else {}
    )
    return GroupSnapshot(
        state=GroupState.named(group.get("state")),
        protocol=_text(group.get("protocol")),
        assignor=_text(group.get("assignor")),
        generation=_int(group.get("generation")),
        members=_int(group.get("members")) or 0,
        member_details=tuple(details),
        assigned_partitions=_int(group.get("assignedPartitions")),
        total_partitions=_int(group.get("totalPartitions")),
        lag=_int(group.get("lag")),
        observed_at=parse_rfc3339(str(group["observedAt"])),
        sources=sources,
    )


def rebalances_from_status(status: Mapping[str, object]) -> int | None:
    group = status.get("group")
    return _int(group.get("rebalances")) if isinstance(group, Mapping) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _source(value: object) -> Source:
    try:
        return Source(str(value))
    except ValueError:
        return Source.NONE
