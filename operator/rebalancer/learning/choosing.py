"""Choosing settings from the scored candidates: a delay per cluster, batch and session per group.

Pure: the Spark job scores (the expensive part) and collects the table of scores, one row per
group and candidate, which is small; this module picks from it. The delay of classic groups is
broker-wide (group.initial.rebalance.delay.ms), so it is chosen for the cluster (the sum of its
groups' best start-up costs at each delay); batch size and session timeout are then each group's
own best at that delay. A streams group (KIP-1071) has a delay of its own
(streams.initial.rebalance.delay.ms, a GROUP config) and does not wait the broker's: its delay is
chosen from its own start-ups alone, and it takes no part in its cluster's.

The batch size learned is a rolling update's (rollout.updateBatchSize): cold starts and
scale-ups are planned per change by the operator's arrival plan (the coordinator model, fed with
the workload's own start-ups), which a learned cap would only split. Where the history has
rolling updates, a batch size is chosen against the operator's default (a quarter of the group)
by the planner's cost, partition-seconds without an owner; costs within BATCH_MARGIN of the
lowest are a tie, and a tie goes to the fewest rebalances, the default winning a tie it shares.
Without rolling updates in the history no batch size is recommended.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rebalancer.learning.rolling_updates import default_batch
from rebalancer.learning.scoring import (
    DEFAULT_DELAY_MS,
    DEFAULT_SESSION_MS,
    STREAMS_PROTOCOL,
    ScoreRow,
)

BATCH_MARGIN = 0.05
START_UPS_NOTE = (
    "no rolling updates in the history: no batch size recommended (cold starts and scale-ups "
    "are planned per change by the arrival plan)"
)
OWN_DELAY_NOTE = (
    "a streams group: the delay is its own (streams.initial.rebalance.delay.ms), chosen from "
    "its own start-ups, not the cluster's"
)
ONLY_OWN_DELAYS_NOTE = (
    "every group of this cluster is a streams group with a delay of its own: no broker delay chosen"
)
# How much lower a streams group's own delay must score than the delay in force to replace it:
# the streams group model's unowned task-seconds were 4 %, 6 % and 13 % off the live fleet's at
# 0, 3000 and 8000 ms (BENCHMARKS.md, the learned per-group delay), so a smaller gain may be none.
OWN_DELAY_MARGIN = 0.10
STREAMS_MODEL_NOTE = (
    "start-ups scored on the streams group model: no join barrier, the first assignment waits "
    "the delay from the first join (later joins do not restart it), each later join moves tasks "
    "as the sticky assignor rebalances them, a moved task unprocessed from its revocation until "
    "its new owner's heartbeat and hand-over; the cost is the task-seconds unprocessed, waiting "
    "for the delay included"
)
DEFAULTS_NOTE = (
    "the operator's own rolling-update batch (a quarter of the group) costs the least or ties: "
    "no batch size recommended"
)


@dataclass(frozen=True)
class GroupFacts:
    """A group as the history showed it: what it is, what was in force, how much evidence."""

    cluster: str
    namespace: str
    name: str
    group_id: str
    members: int
    partitions: int
    rollouts_per_day: float
    departures_per_day: float
    processing_ms: float
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    join_samples: int
    rebalance_samples: int
    departure_samples: int
    current_delay_ms: float | None = None
    current_batch_size: int | None = None
    current_session_ms: float | None = None
    notes: tuple[str, ...] = ()
    # Of rollouts_per_day, rolling updates of a running group.
    rolling_updates_per_day: float = 0.0
    # The protocol the history last recorded (classic, consumer, streams; None: unknown).
    protocol: str | None = None

    @property
    def own_delay(self) -> bool:
        """Whether the group's initial delay is its own rather than the broker's."""
        return self.protocol == STREAMS_PROTOCOL

    @property
    def startups_per_day(self) -> float:
        return max(self.rollouts_per_day - self.rolling_updates_per_day, 0.0)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.cluster, self.namespace, self.name, self.group_id)


@dataclass(frozen=True)
class GroupScores:
    facts: GroupFacts
    rows: tuple[ScoreRow, ...]

    def startup(self, delay_ms: float, batch_size: int) -> ScoreRow | None:
        for row in self.rows:
            if row.kind == "startup" and row.delay_ms == delay_ms and row.batch_size == batch_size:
                return row
        return None

    def best_startup(self, delay_ms: float) -> ScoreRow | None:
        candidates = [
            row for row in self.rows if row.kind == "startup" and row.delay_ms == delay_ms
        ]
        if not candidates:
            return None
        # Splitting a rollout into more batches must earn its keep: a smaller batch is chosen
        # only when it beats the larger ones by more than the simulation's noise.
        lowest = min(row.cost_s for row in candidates)
        near = [row for row in candidates if row.cost_s <= lowest * (1 + BATCH_MARGIN)]
        return max(near, key=lambda row: (row.batch_size, -row.cost_s))

    def planned_startup(self, delay_ms: float) -> ScoreRow | None:
        """A start-up as the arrival plan releases it: the whole group, where it was scored."""
        return self.startup(delay_ms, self.facts.members) or self.best_startup(delay_ms)

    def rolling(self, batch_size: int) -> ScoreRow | None:
        for row in self.rows:
            if row.kind == "rolling" and row.batch_size == batch_size:
                return row
        return None

    def best_batch(self, delay_ms: float) -> BatchChoice | None:
        """The rolling-update batch size losing the fewest partition-seconds, against the
        operator's default quarter (None: no rolling updates scored). Start-ups do not depend on
        it: they are costed at the whole group, as the arrival plan releases them."""
        facts = self.facts
        default_rolling = self.rolling(default_batch(facts.members))
        startup = self.planned_startup(delay_ms)
        if default_rolling is None or startup is None:
            return None
        options = [BatchChoice(None, startup, default_rolling, facts)]
        options += [
            BatchChoice(row.batch_size, startup, row, facts)
            for row in self.rows
            if row.kind == "rolling"
        ]
        lowest = min(option.rolling.unowned_s for option in options)
        near = [o for o in options if o.rolling.unowned_s <= lowest * (1 + BATCH_MARGIN) + 1e-9]
        # min() keeps the first of equals: the default, listed first, wins a tie it shares.
        return min(near, key=lambda option: option.rolling.rebalances)

    def departure(self, session_ms: float) -> ScoreRow | None:
        for row in self.rows:
            if row.kind == "departure" and row.session_timeout_ms == session_ms:
                return row
        return None

    def best_departure(self) -> ScoreRow | None:
        candidates = [row for row in self.rows if row.kind == "departure"]
        # Ties go to the session closest to Kafka's default: no change without a gain.
        return min(
            candidates,
            key=lambda row: (row.cost_s, abs(row.session_timeout_ms - DEFAULT_SESSION_MS)),
            default=None,
        )


@dataclass(frozen=True)
class BatchChoice:
    """A batch size (None: the operator's defaults) with its start-up and rolling-update rows."""

    batch_size: int | None
    startup: ScoreRow
    rolling: ScoreRow
    facts: GroupFacts

    @property
    def unowned_per_day_s(self) -> float:
        return (
            self.startup.unowned_s * self.facts.startups_per_day
            + self.rolling.unowned_s * self.facts.rolling_updates_per_day
        )

    @property
    def rebalances_per_day(self) -> float:
        return (
            self.startup.rebalances * self.facts.startups_per_day
            + self.rolling.rebalances * self.facts.rolling_updates_per_day
        )


@dataclass(frozen=True)
class GroupChoice:
    facts: GroupFacts
    delay_ms: float | None
    batch_size: int | None
    session_timeout_ms: float | None
    # Seconds per day of time to Stable plus stop-the-world, by the simulator, for the group.
    cost_per_day_s: float
    default_cost_per_day_s: float
    startup_cost_s: float | None
    default_startup_cost_s: float | None
    departure_cost_s: float | None
    default_departure_cost_s: float | None
    notes: tuple[str, ...] = ()

    @property
    def delay_scope(self) -> str:
        """Whose delay `delay_ms` is: the group's own (a streams group) or its cluster's."""
        return "group" if self.facts.own_delay else "cluster"

    @property
    def improvement(self) -> float:
        """Share of the default's daily cost the choice saves (0 when there is nothing to save)."""
        if self.default_cost_per_day_s <= 0:
            return 0.0
        return 1.0 - self.cost_per_day_s / self.default_cost_per_day_s


@dataclass(frozen=True)
class ClusterChoice:
    cluster: str
    delay_ms: float | None
    groups: int
    scored_groups: int
    current_delay_ms: float | None
    # Summed start-up cost per day of the cluster's groups at each delay (the curve in the report).
    curve: tuple[tuple[float, float], ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = ()
    # Streams groups of the cluster: each chose a delay of its own, outside `groups`.
    own_delay_groups: int = 0


def choose_delay(
    groups: Sequence[GroupScores],
) -> tuple[float | None, tuple[tuple[float, float], ...]]:
    """The delay minimising the cluster's summed start-up cost per day, and the whole curve."""
    totals: dict[float, float] = defaultdict(float)
    counts: dict[float, int] = defaultdict(int)
    scored = [group for group in groups if any(row.kind == "startup" for row in group.rows)]
    for group in scored:
        for delay in {row.delay_ms for row in group.rows if row.kind == "startup"}:
            best = group.planned_startup(delay)
            if best is not None:
                totals[delay] += best.per_day_s
                counts[delay] += 1
    # Only delays every scored group has a score for can be compared fairly.
    complete = sorted(delay for delay in totals if counts[delay] == len(scored))
    if not complete:
        return None, ()
    curve = tuple((delay, totals[delay]) for delay in complete)
    # Ties go to the delay closest to Kafka's default.
    chosen = min(complete, key=lambda delay: (totals[delay], abs(delay - DEFAULT_DELAY_MS)))
    return chosen, curve


def choose(groups: Sequence[GroupScores]) -> tuple[list[ClusterChoice], list[GroupChoice]]:
    """Delay per cluster (per group for a streams group), then batch size and session timeout
    per group."""
    by_cluster: dict[str, list[GroupScores]] = defaultdict(list)
    for group in groups:
        by_cluster[group.facts.cluster].append(group)
    clusters: list[ClusterChoice] = []
    choices: list[GroupChoice] = []
    for cluster in sorted(by_cluster):
        members = by_cluster[cluster]
        shared = [group for group in members if not group.facts.own_delay]
        own = [group for group in members if group.facts.own_delay]
        choice = _cluster_choice(cluster, shared, len(own))
        clusters.append(choice)
        for group in shared:
            choices.append(_choose_group(group, choice.delay_ms))
        for group in own:
            choices.append(_choose_own_delay(group))
    return clusters, choices


def _cluster_choice(cluster: str, shared: Sequence[GroupScores], own: int) -> ClusterChoice:
    """The broker-wide delay of the groups that wait it (streams groups do not)."""
    delay, curve = choose_delay(shared)
    scored = sum(1 for group in shared if any(row.kind == "startup" for row in group.rows))
    notes: list[str] = []
    if not shared and own:
        notes.append(ONLY_OWN_DELAYS_NOTE)
    elif delay is None:
        notes.append("no group of this cluster has start-up history: delay not chosen")
    elif scored == 1:
        notes.append("one group only: the delay is that group's best")
    currents = [g.facts.current_delay_ms for g in shared if g.facts.current_delay_ms]
    return ClusterChoice(
        cluster=cluster,
        delay_ms=delay,
        groups=len(shared),
        scored_groups=scored,
        current_delay_ms=max(currents) if currents else None,
        curve=curve,
        notes=tuple(notes),
        own_delay_groups=own,
    )


def _choose_own_delay(group: GroupScores) -> GroupChoice:
    """A streams group's choice: the delay its own start-ups cost least at, unless that beats
    the delay in force by less than OWN_DELAY_MARGIN; then its batch size and session timeout
    as any group's."""
    best, _ = choose_delay([group])
    delay, kept = _kept_unless_better(group, best)
    choice = _choose_group(group, delay)
    counted = _streams_model_note(group, delay)
    return replace(choice, notes=(OWN_DELAY_NOTE, *counted, *kept, *choice.notes))


def _kept_unless_better(
    group: GroupScores, best: float | None
) -> tuple[float | None, tuple[str, ...]]:
    """`best`, or the delay in force (Kafka's default when unknown) with a note saying why."""
    current = group.facts.current_delay_ms or DEFAULT_DELAY_MS
    chosen = group.planned_startup(best) if best is not None else None
    in_force = group.planned_startup(current)
    if chosen is None or in_force is None or best == current:
        return best, ()
    gain = 1.0 - chosen.cost_s / in_force.cost_s if in_force.cost_s > 0 else 0.0
    if gain >= OWN_DELAY_MARGIN:
        return best, ()
    note = (
        f"kept {current:.0f} ms: {best:.0f} ms scored only {gain:.0%} lower, within the streams "
        f"model's error ({OWN_DELAY_MARGIN:.0%})"
    )
    return current, (note,)


def _streams_model_note(group: GroupScores, delay: float | None) -> tuple[str, ...]:
    """What the streams group model counted, with the tasks it expects to move at the chosen
    delay and at Kafka's default."""
    chosen = group.planned_startup(delay) if delay is not None else None
    default = group.planned_startup(DEFAULT_DELAY_MS)
    if chosen is None:
        return ()
    moves = f"{chosen.tasks_moved:.1f} tasks moved a start-up at {chosen.delay_ms:.0f} ms"
    if default is not None and default.delay_ms != chosen.delay_ms:
        moves += f", {default.tasks_moved:.1f} at {DEFAULT_DELAY_MS:.0f} ms"
    return (f"{STREAMS_MODEL_NOTE}: {moves}",)


def _choose_group(group: GroupScores, delay: float | None) -> GroupChoice:
    facts = group.facts
    notes = list(facts.notes)
    startup, batch, rolling = _batch_and_startup(group, delay, notes)
    default_startup = group.startup(DEFAULT_DELAY_MS, facts.members)
    default_rolling = group.rolling(default_batch(facts.members))
    if startup is None:
        notes.append("not enough start-up history to choose a delay or batch size")
    departure = group.best_departure()
    default_departure = group.departure(DEFAULT_SESSION_MS)
    if departure is None:
        notes.append("no departures in the history: session timeout not chosen")
    if rolling is not None:
        # Batches were chosen by the planner's cost: start-ups count in it too, so that the
        # expected gain is the one the choice was made for.
        startup = _by_unowned(startup, facts.startups_per_day)
        default_startup = _by_unowned(default_startup, facts.startups_per_day)
    chosen = (startup, rolling, departure)
    defaults = (default_startup, default_rolling, default_departure)
    cost = sum(row.per_day_s for row in chosen if row is not None)
    # Where a default was not scored (outside the grid), compare with the choice itself.
    default = sum(_per_day(row, fallback) for row, fallback in zip(defaults, chosen, strict=True))
    return GroupChoice(
        facts=facts,
        delay_ms=delay if startup is not None else None,
        batch_size=batch,
        session_timeout_ms=departure.session_timeout_ms if departure else None,
        cost_per_day_s=cost,
        default_cost_per_day_s=default,
        startup_cost_s=startup.cost_s if startup else None,
        default_startup_cost_s=default_startup.cost_s if default_startup else None,
        departure_cost_s=departure.cost_s if departure else None,
        default_departure_cost_s=default_departure.cost_s if default_departure else None,
        notes=tuple(notes),
    )


def _batch_and_startup(
    group: GroupScores, delay: float | None, notes: list[str]
) -> tuple[ScoreRow | None, int | None, ScoreRow | None]:
    """The start-up row in force, the batch size to recommend and the rolling-update row."""
    if delay is None:
        return None, None, None
    choice = group.best_batch(delay)
    if choice is not None:
        if choice.batch_size is None:
            notes.append(DEFAULTS_NOTE)
        return choice.startup, choice.batch_size, choice.rolling
    notes.append(START_UPS_NOTE)
    return group.planned_startup(delay), None, None


def _by_unowned(row: ScoreRow | None, per_day: float) -> ScoreRow | None:
    """A start-up row costed in partition-seconds without an owner (over the partitions)."""
    if row is None:
        return None
    return replace(row, cost_s=row.unowned_s, per_day_s=row.unowned_s * per_day)


def _per_day(row: ScoreRow | None, fallback: ScoreRow | None) -> float:
    for candidate in (row, fallback):
        if candidate is not None:
            return candidate.per_day_s
    return 0.0
