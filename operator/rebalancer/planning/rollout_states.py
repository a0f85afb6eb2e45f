"""The rollout state machine's state, and its round trip through `status.rollout`.

The operator keeps nothing else between steps: a restarted operator reads this back from the
ConsumerGroup's status and carries on with the same batch. Times are epoch seconds held to the
millisecond, the precision status keeps, so a state read back equals the state written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from rebalancer.structs.times import format_rfc3339, parse_rfc3339


class RolloutPhase(StrEnum):
    """Where a rollout is. Allowed transitions (TRANSITIONS enforces them):

    Idle          -> Planning        the workload wants pods the group does not have yet
                                     (cold start, scale-up, new revision, pods at the gate)
    Idle          -> Paused          spec.policy.rollout.paused
    Planning      -> BatchOpening    batches decided
    Planning      -> Failed          the policy cannot be met on this workload and broker
    Planning      -> Idle            nothing to do after all
    BatchOpening  -> BatchJoining    the batch is released (gates opened, pods replaced,
                                     Deployment stepped or scaled)
    BatchOpening  -> Completed       nothing left to release
    BatchJoining  -> BatchSettling   the group is Stable with every partition assigned and the
                                     batch's members in it
    BatchSettling -> BatchJoining    the group stopped being settled before settleSeconds
    BatchSettling -> BatchOpening    settled for settleSeconds; next batch
    BatchSettling -> Completed       settled for settleSeconds after the last batch
    Completed     -> Planning        the next change
    Completed     -> Paused          spec.policy.rollout.paused
    any active    -> Failed          a batch missed its deadline, the workload vanished
    any active    -> Paused          spec.policy.rollout.paused
    any active    -> Planning        the target changed mid-rollout (a new revision or replicas)
    Paused        -> the phase it paused, with its timers moved on by the pause
    Failed        -> Idle            the spec or the workload's target changed, or the user
                                     wrote a new rebalancer.dev/resume-rollout annotation
    any           -> Idle            spec.policy.rollout.enabled is false

    Active phases are Planning, BatchOpening, BatchJoining and BatchSettling.
    """

    IDLE = "Idle"
    PLANNING = "Planning"
    BATCH_OPENING = "BatchOpening"
    BATCH_JOINING = "BatchJoining"
    BATCH_SETTLING = "BatchSettling"
    COMPLETED = "Completed"
    FAILED = "Failed"
    PAUSED = "Paused"

    @property
    def active(self) -> bool:
        return self in ACTIVE

    @property
    def resting(self) -> bool:
        return self in (RolloutPhase.IDLE, RolloutPhase.COMPLETED)


ACTIVE = frozenset(
    {
        RolloutPhase.PLANNING,
        RolloutPhase.BATCH_OPENING,
        RolloutPhase.BATCH_JOINING,
        RolloutPhase.BATCH_SETTLING,
    }
)

_P = RolloutPhase
TRANSITIONS: Mapping[RolloutPhase, frozenset[RolloutPhase]] = {
    _P.IDLE: frozenset({_P.PLANNING, _P.PAUSED}),
    _P.PLANNING: frozenset({_P.BATCH_OPENING, _P.FAILED, _P.IDLE, _P.PAUSED}),
    _P.BATCH_OPENING: frozenset(
        {_P.BATCH_JOINING, _P.COMPLETED, _P.FAILED, _P.PAUSED, _P.PLANNING}
    ),
    _P.BATCH_JOINING: frozenset({_P.BATCH_SETTLING, _P.FAILED, _P.PAUSED, _P.PLANNING}),
    _P.BATCH_SETTLING: frozenset(
        {_P.BATCH_JOINING, _P.BATCH_OPENING, _P.COMPLETED, _P.FAILED, _P.PAUSED, _P.PLANNING}
    ),
    _P.COMPLETED: frozenset({_P.PLANNING, _P.PAUSED}),
    _P.FAILED: frozenset({_P.IDLE}),
    _P.PAUSED: frozenset(ACTIVE | {_P.IDLE, _P.COMPLETED}),
}


def allowed(before: RolloutPhase, after: RolloutPhase) -> bool:
    """Whether one step may take the machine from `before` to `after` (staying is allowed)."""
    return before == after or after in TRANSITIONS[before] or after is RolloutPhase.IDLE


class RolloutKind(StrEnum):
    COLD_START = "cold-start"  # the group has no members
    SCALE_UP = "scale-up"  # new pods join a running group
    ROLLING_UPDATE = "rolling-update"  # pods are replaced by pods of a new revision


class Mechanism(StrEnum):
    """How batches are released."""

    # Pods wait at their gates; a batch is released by opening its gates together.
    GATE_QUEUE = "gate-queue"
    # A StatefulSet's batch is deleted (partition lowered first), recreated at the new
    # revision, and released at the gate (together, or one by one for static members).
    STATEFULSET_REPLACE = "statefulset-replace"
    # An ungated Deployment is resumed until a batch of pods is updated, then paused.
    DEPLOYMENT_STEPS = "deployment-steps"
    # An ungated workload is scaled up one batch at a time.
    SCALE_STEPS = "scale-steps"


def stamp(moment: float) -> float:
    """`moment` at the precision status keeps, so that it survives the round trip."""
    return round(moment, 3)


def encode_ordinals(ordinals: tuple[int, ...]) -> str:
    """Runs of consecutive ordinals as ranges, in the given order: (5, 4, 3, 1) -> "5-3,1"."""
    runs: list[str] = []
    index = 0
    while index < len(ordinals):
        start = end = ordinals[index]
        step = 0
        while index + 1 < len(ordinals) and abs(ordinals[index + 1] - end) == 1:
            next_step = ordinals[index + 1] - end
            if step and next_step != step:
                break
            step = next_step
            end = ordinals[index + 1]
            index += 1
        runs.append(str(start) if start == end else f"{start}-{end}")
        index += 1
    return ",".join(runs)


def decode_ordinals(text: str) -> tuple[int, ...]:
    ordinals: list[int] = []
    for run in filter(None, text.split(",")):
        first, _, last = run.partition("-")
        start = int(first)
        end = int(last) if last else start
        step = 1 if end >= start else -1
        ordinals.extend(range(start, end + step, step))
    return tuple(ordinals)


@dataclass(frozen=True)
class RolloutState:
    """Everything the planner remembers between steps (and across operator restarts)."""

    phase: RolloutPhase = RolloutPhase.IDLE
    kind: RolloutKind | None = None
    mechanism: Mechanism | None = None
    # Names this rollout's gate annotations; changes with every new rollout.
    rollout_id: str | None = None
    # What the rollout brings the workload to: "<revision>@<replicas>".
    target: str | None = None
    # The ConsumerGroup's metadata.generation the rollout was planned for.
    spec_generation: int | None = None
    static: bool = False
    batch: int = 0  # 1-based; 0 before the first
    sizes: tuple[int, ...] = ()
    # STATEFULSET_REPLACE: the ordinals to replace, highest first, cut into batches by sizes.
    ordinals: tuple[int, ...] = ()
    # DEPLOYMENT_STEPS: updated pods at the start; SCALE_STEPS: replicas at the start.
    base: int = 0
    # SCALE_STEPS: the replicas the user asked for (spec.replicas is ours meanwhile).
    target_replicas: int | None = None
    opened: tuple[str, ...] = ()  # pods released in the current batch
    # "pod=slot": the identity slots this rollout gave (planning.identity_slots), kept so that
    # a pod is given its slot again, never another, and no slot twice.
    slots: tuple[str, ...] = ()
    members_joined: int = 0
    rebalances: int = 0
    rebalances_at_start: int | None = None
    generation_at_open: int | None = None
    started_at: float | None = None
    phase_since: float | None = None
    opened_at: float | None = None
    gather_until: float | None = None
    deadline: float | None = None
    settle_until: float | None = None
    paused_from: RolloutPhase | None = None
    paused_at: float | None = None
    # When an active rollout was last stepped (refreshed every half minute): a longer gap is
    # time the operator was away, which does not count against the batch's timers.
    seen_at: float | None = None
    # The operator paused the Deployment and owes it a resume.
    holding_deployment: bool = False
    # The operator parked the StatefulSet's partition at its replicas.
    parked: bool = False
    # SCALE_STEPS: spec.replicas while nothing was rolling out.
    steady_replicas: int | None = None
    # RESUME_ANNOTATION's value when the rollout failed; a different one resumes it.
    resume_token: str | None = None
    reason: str | None = None
    message: str | None = None
    # Another field manager moved the partition while this rollout held it (its name): the
    # operator set it back once; `yielded`: it did so again, and the operator leaves the
    # partition to it for the rest of the rollout and parks nothing after it, until that
    # writer no longer owns the field (rollout_phases.writers.taken_back).
    contested_by: str | None = None
    yielded: bool = False
    # What other writers did to the workload during this rollout, said again at its end.
    interference: str | None = None
    # The autoscaler on the workload and what rollouts do about it (planning.autoscalers).
    autoscaler: str | None = None
    # A cold start's or scale-up's arrival plan (structs.plan_costs.ArrivalPlan), its predicted
    # cost beside the runner-up's, and why (planning.rollout_choices).
    plan: str | None = None
    plan_cost: int | None = None
    runner_up: str | None = None
    runner_up_cost: int | None = None
    plan_reason: str | None = None

    @property
    def batches(self) -> int:
        return len(self.sizes)

    def moved(self, **changes: object) -> RolloutState:
        """A copy with `changes`, every time in it held to status precision."""
        updated = replace(self, **changes)  # type: ignore[arg-type]
        stamped = {
            name: stamp(value)
            for name in _TIMES
            if isinstance(value := getattr(updated, name), float)
        }
        return replace(updated, **stamped)  # type: ignore[arg-type]

    def to_status(self) -> dict[str, object]:
        """status.rollout: camelCase, times as RFC 3339, unset fields left out."""
        body: dict[str, object] = {"phase": self.phase.value, "batches": self.batches}
        for item in fields(self):
            value = getattr(self, item.name)
            key = _camel(item.name)
            if value is None or item.name == "phase":
                continue
            if item.name in _TIMES:
                body[key] = format_rfc3339(value, milliseconds=True)
            elif item.name == "ordinals":
                if value:
                    body[key] = encode_ordinals(value)
            elif item.name == "sizes":
                body["batchSizes"] = list(value)
            elif item.name in ("opened", "slots"):
                if value or item.name == "opened":
                    body[key] = list(value)
            elif isinstance(value, StrEnum):
                body[key] = value.value
            else:
                body[key] = value
        return body

    @classmethod
    def from_status(cls, raw: object) -> RolloutState:
        """Read status.rollout back; anything unreadable starts from Idle rather than guess."""
        if not isinstance(raw, Mapping) or not raw:
            return cls()
        try:
            return _read(raw)
        except (TypeError, ValueError, KeyError):
            return cls(message="status.rollout was unreadable; started again from Idle")


_TIMES = frozenset(
    {
        "started_at",
        "phase_since",
        "opened_at",
        "gather_until",
        "deadline",
        "settle_until",
        "paused_at",
        "seen_at",
    }
)


_TEXTS = frozenset(
    {
        "rollout_id",
        "target",
        "resume_token",
        "reason",
        "message",
        "contested_by",
        "interference",
        "autoscaler",
        "plan",
        "runner_up",
        "plan_reason",
    }
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _read(raw: Mapping[str, object]) -> RolloutState:
    values: dict[str, object] = {}
    for item in fields(RolloutState):
        key = "batchSizes" if item.name == "sizes" else _camel(item.name)
        value = raw.get(key)
        if value is None:
            continue
        if item.name in _TIMES:
            values[item.name] = stamp(parse_rfc3339(_text(value)))
        elif item.name in ("phase", "paused_from"):
            values[item.name] = RolloutPhase(_text(value))
        elif item.name == "kind":
            values[item.name] = RolloutKind(_text(value))
        elif item.name == "mechanism":
            values[item.name] = Mechanism(_text(value))
        elif item.name == "ordinals":
            values[item.name] = decode_ordinals(_text(value))
        elif item.name in ("sizes", "opened", "slots"):
            if not isinstance(value, list):
                raise TypeError(f"{key} must be a list")
            convert = int if item.name == "sizes" else str
            values[item.name] = tuple(convert(entry) for entry in value)
        elif item.name in ("static", "holding_deployment", "parked", "yielded"):
            values[item.name] = bool(value)
        elif item.name in _TEXTS:
            values[item.name] = _text(value)
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{key} must be an integer")
            values[item.name] = value
    return RolloutState(**values)  # type: ignore[arg-type]


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value
