"""`kubectl rebalancer history` and `why`: the rebalances the operator told as Events.

For every rebalance it detects, the operator posts an Event of reason `Rebalance` on the
ConsumerGroup whose message is `RebalanceEvent.describe()` (structs.history):
`generation 7; 3 members; cause member-joined; joined: orders-2 (source: member-reports)`.
That is what a user with `kubectl` can read of the history: the operator's history store
(docs/history.md) is files where the operator runs. Events last as long as the API server keeps
them (kube-apiserver `--event-ttl`, one hour by default), so `status.group` (the count, the last
cause and time) is shown beside them, and stands in for them once they have expired.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.kubectl.tables import MISSING, age, render_table
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.structs.history import RebalanceCause
from rebalancer.structs.times import format_rfc3339, read_rfc3339

REBALANCE_REASON = "Rebalance"
# describe() names at most this many members joined and left.
NAMES_SHOWN = 5

_SOURCE = re.compile(r"^(?P<body>.*) \(source: (?P<source>[^()]*)\)$", re.DOTALL)


@dataclass(frozen=True)
class RebalanceEntry:
    at: float | None
    generation: int | None
    members: int | None
    cause: str
    joined: tuple[str, ...]
    left: tuple[str, ...]
    source: str | None


def parse_description(message: str) -> RebalanceEntry | None:
    """A `Rebalance` Event's message read back; None when it is not one describe() wrote."""
    match = _SOURCE.match(message.strip())
    body, source = (match["body"], match["source"]) if match else (message.strip(), None)
    generation: int | None = None
    members: int | None = None
    cause: str | None = None
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    for part in body.split("; "):
        if part.startswith("generation "):
            value = part.removeprefix("generation ")
            generation = int(value) if value.isdigit() else None
        elif part.endswith(" members") and part.removesuffix(" members").isdigit():
            members = int(part.removesuffix(" members"))
        elif part.startswith("cause "):
            cause = part.removeprefix("cause ")
        elif part.startswith("joined: "):
            joined = tuple(name for name in part.removeprefix("joined: ").split(", ") if name)
        elif part.startswith("left: "):
            left = tuple(name for name in part.removeprefix("left: ").split(", ") if name)
    if cause is None:
        return None
    return RebalanceEntry(None, generation, members, cause, joined, left, source)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def event_time(event: Mapping[str, Any]) -> float | None:
    """When an Event happened: its eventTime, else its last or first timestamp, else when it
    was created (core v1 Events carry any of them)."""
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        moment = read_rfc3339(event.get(key))
        if moment is not None:
            return moment
    return read_rfc3339(_mapping(event.get("metadata")).get("creationTimestamp"))


def rebalances_from_events(
    events: Sequence[Mapping[str, Any]], uid: str | None = None
) -> list[RebalanceEntry]:
    """The `Rebalance` Events of one ConsumerGroup (of `uid`, when given: not those of a deleted
    object of the same name), oldest first."""
    entries = []
    for event in events:
        if event.get("reason") != REBALANCE_REASON:
            continue
        involved = _mapping(event.get("involvedObject"))
        if uid is not None and involved.get("uid") not in (None, uid):
            continue
        entry = parse_description(str(event.get("message") or ""))
        if entry is None:
            continue
        moment = event_time(event)
        entries.append(
            RebalanceEntry(
                moment,
                entry.generation,
                entry.members,
                entry.cause,
                entry.joined,
                entry.left,
                entry.source,
            )
        )
    return sorted(entries, key=lambda e: (e.at or 0.0, e.generation or 0))


def _names(names: tuple[str, ...]) -> str:
    return ",".join(names) if names else MISSING


def _ago(moment: float | None, now: float) -> str:
    return MISSING if moment is None else age(now - moment)


@dataclass(frozen=True)
class GroupStatus:
    """What status.group says of the rebalances, read once for history and why."""

    namespace: str
    name: str
    group_id: str
    rebalances: int | None
    last_cause: str | None
    last_at: float | None


def group_status(body: Mapping[str, Any]) -> GroupStatus:
    metadata = _mapping(body.get("metadata"))
    group = _mapping(_mapping(body.get("status")).get("group"))
    count = group.get("rebalances")
    cause = group.get("lastRebalanceCause")
    return GroupStatus(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        group_id=str(_mapping(body.get("spec")).get("groupId") or MISSING),
        rebalances=count if isinstance(count, int) and not isinstance(count, bool) else None,
        last_cause=cause if isinstance(cause, str) and cause else None,
        last_at=read_rfc3339(group.get("lastRebalanceTime")),
    )


HISTORY_HEADERS = ("AGE", "GENERATION", "MEMBERS", "CAUSE", "JOINED", "LEFT", "SOURCE")


def render_history(
    body: Mapping[str, Any], entries: Sequence[RebalanceEntry], now: float, limit: int
) -> str:
    """A heading from status.group, then the last `limit` rebalances, newest last."""
    status = group_status(body)
    total = "no" if status.rebalances is None else str(status.rebalances)
    lines = [
        f"ConsumerGroup {status.namespace}/{status.name} (group {status.group_id}): "
        f"{total} rebalances recorded since it was created"
    ]
    shown = list(entries)[-limit:]
    if not shown:
        if status.last_cause is not None:
            lines.append(
                f"The API server keeps no Rebalance Event of it any more; the last rebalance, "
                f"{_ago(status.last_at, now)} ago: {status.last_cause}"
            )
        else:
            lines.append("No rebalance seen yet.")
        return "\n".join(lines)
    rows = [
        [
            _ago(entry.at, now),
            MISSING if entry.generation is None else str(entry.generation),
            MISSING if entry.members is None else str(entry.members),
            entry.cause,
            _names(entry.joined),
            _names(entry.left),
            entry.source or MISSING,
        ]
        for entry in shown
    ]
    lines.append(render_table(HISTORY_HEADERS, rows))
    if status.rebalances is not None and status.rebalances > len(entries):
        lines.append(
            f"{status.rebalances - len(entries)} older rebalances have no Event left "
            "(the API server keeps Events for --event-ttl, an hour by default); the operator's "
            "history store keeps them all (docs/history.md)."
        )
    return "\n".join(lines)


# What each cause of structs.history means, for `why`.
CAUSES: Mapping[str, str] = {
    RebalanceCause.MEMBER_JOINED: (
        "members joined the group (a new pod, or a pod restarted under a new member id); the "
        "coordinator rebalanced to give them partitions"
    ),
    RebalanceCause.MEMBER_LEFT: (
        "members left the group (a LeaveGroup at shutdown, or a session that timed out); the "
        "coordinator rebalanced to hand their partitions to the others"
    ),
    RebalanceCause.MEMBERS_CHANGED: (
        "members joined and others left in the same generation, as when pods are replaced"
    ),
    RebalanceCause.REJOIN: (
        "the same members rejoined: a member's subscription or metadata changed, a member "
        "exceeded max.poll.interval.ms, or a static member came back within its session"
    ),
    RebalanceCause.STATE_CHANGE: (
        "the broker showed the group rebalancing; no member report named the generation, so "
        "who joined or left is not known (the group's members send no reports)"
    ),
    RebalanceCause.ENFORCED: (
        "an enforced rebalance the operator asked a sidecar for (spec.policy.enforce)"
    ),
    RebalanceCause.STREAMS_FOLLOW_UP: (
        "a Kafka Streams application rebalanced on its own with the same members: a KIP-441 "
        "probing rebalance (every probing.rebalance.interval.ms while warm-up replicas catch "
        "up) or the follow-up of a cooperative task move"
    ),
    RebalanceCause.UNKNOWN: "the operator could not tell why",
}


def _clock(moment: float | None) -> str:
    if moment is None:
        return "at an unknown time"
    return format_rfc3339(moment)


def _rollout_note(rollout: RolloutState, moment: float | None) -> str | None:
    """The rollout the rebalance happened in, when status.rollout is still that rollout."""
    if moment is None or rollout.started_at is None or moment < rollout.started_at:
        return None
    ended = None if rollout.phase.active else rollout.phase_since
    if ended is not None and moment > ended:
        return None
    kind = rollout.kind.value if rollout.kind is not None else "rollout"
    batches = f", {rollout.batches} batches" if rollout.batches else ""
    return (
        f"during the {kind} started {_clock(rollout.started_at)}{batches} "
        f"(now {rollout.phase.value}, batch {max(rollout.batch, 1)})"
    )


def _enforcement_note(status: Mapping[str, Any]) -> str | None:
    enforcement = _mapping(status.get("enforcement"))
    cause = enforcement.get("lastCause")
    if not isinstance(cause, str) or not cause:
        return None
    when = _clock(read_rfc3339(enforcement.get("lastTime")))
    outcome = enforcement.get("lastStatus")
    text = f"last enforcement request: {cause} {when}"
    if isinstance(outcome, str) and outcome:
        text += f", {outcome}"
    message = enforcement.get("message")
    if isinstance(message, str) and message:
        text += f" ({message})"
    return text


def explain_last(body: Mapping[str, Any], entries: Sequence[RebalanceEntry], now: float) -> str:
    """`why`: the newest rebalance, what its cause means, who joined and left, and the rollout
    or enforcement request it came with."""
    status = group_status(body)
    raw_status = _mapping(body.get("status"))
    rollout = RolloutState.from_status(raw_status.get("rollout"))
    head = f"ConsumerGroup {status.namespace}/{status.name} (group {status.group_id})"
    last = entries[-1] if entries else None
    if last is None:
        if status.last_cause is None:
            return f"{head}: no rebalance seen yet."
        lines = [
            f"{head}: last rebalance {_clock(status.last_at)} "
            f"({_ago(status.last_at, now)} ago), from status.group (its Event has expired)",
            f"cause:   {status.last_cause}: {CAUSES.get(status.last_cause, 'not known')}",
        ]
        moment = status.last_at
    else:
        generation = "?" if last.generation is None else str(last.generation)
        members = "?" if last.members is None else str(last.members)
        lines = [
            f"{head}: last rebalance {_clock(last.at)} ({_ago(last.at, now)} ago), "
            f"generation {generation}, {members} members",
            f"cause:   {last.cause}: {CAUSES.get(last.cause, 'not known')}",
            f"joined:  {_listed(last.joined)}",
            f"left:    {_listed(last.left)}",
            f"source:  {last.source or MISSING}",
        ]
        moment = last.at
    note = _rollout_note(rollout, moment)
    if note is not None:
        lines.append(f"rollout: {note}")
    enforced = last.cause if last is not None else status.last_cause
    if enforced == RebalanceCause.ENFORCED:
        note = _enforcement_note(raw_status)
        if note is not None:
            lines.append(f"request: {note}")
    return "\n".join(lines)


def _listed(names: tuple[str, ...]) -> str:
    if not names:
        return "none"
    more = " (an Event names five at most)" if len(names) >= NAMES_SHOWN else ""
    return ", ".join(names) + more
