"""Scoring candidate settings for one group on the coordinator simulator.

Pure (stdlib and the simulator), so the Spark job, the bench's exhaustive search and the tests
score with the same code. A group is summarised by a `GroupProfile` (what the history says about
it); a candidate is an initial delay, a batch size and a session timeout.

The objective is seconds, per event, of "time to Stable" plus "stop-the-world time", the latter
being the simulator's partition-seconds divided by the group's partitions (the time the whole
group would have stood still for the same loss). Two kinds of events cost something:

- a start-up (rollout from zero, cold start): pods are released `batch_size` at a time, the next
  batch when the group is Stable again (the stagger's rule), each pod joining after its start-up
  latency. Only the first batch meets an Empty group, so only it depends on the initial delay;
- a departure (a pod crashes or leaves, and usually comes back): the session timeout decides
  whether a static member's restart costs rebalances and how long a crashed member's partitions
  stall; the initial delay plays no part (the group is not Empty).

A streams group (KIP-1071) has no join barrier: its start-ups are scored on the streams group
model (simulation.streams_groups), whose objective is the same sum with the stop-the-world part
counted in tasks: time to Stable plus the task-seconds a moved task went unprocessed (its
revocation, hand-over and restoration) over the group's tasks. Its start-ups are scored for the
whole group at once (the arrival plan releases a streams group that way).

So the expected daily cost of a group separates: rollouts/day x startup(delay, batch) +
sum over departure kinds of rate/day x departure(session). The per-cluster delay is the one that
minimises the sum over the cluster's groups of their best start-up cost at that delay.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from rebalancer.learning.rolling_updates import (
    RollingGroup,
    default_batch,
    gap_samples,
    mean_update,
    quantile_at,
)
from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    DepartureKind,
    FixedOffsets,
    MemberPlan,
    Scenario,
    SimulationResult,
    simulate,
    simulate_stagger,
)
from rebalancer.simulation.streams_groups import StreamsStartup, run_streams_startup

DEFAULT_DELAY_MS = 3000.0
DEFAULT_SESSION_MS = 45000.0
# Candidates the job scores. Finer grids only move the optimum by a few percent (the bench
# measures it against an exhaustive search).
DELAY_CANDIDATES_MS: tuple[float, ...] = (
    0.0,
    250.0,
    500.0,
    1000.0,
    1500.0,
    2000.0,
    3000.0,
    4000.0,
    5000.0,
    6000.0,
    8000.0,
    10000.0,
    15000.0,
    20000.0,
    30000.0,
)
SESSION_CANDIDATES_MS: tuple[float, ...] = (
    6000.0,
    10000.0,
    15000.0,
    20000.0,
    30000.0,
    45000.0,
    60000.0,
    90000.0,
    120000.0,
    180000.0,
    300000.0,
)
# Kafka's group.min.session.timeout.ms default: brokers refuse a shorter session.
MIN_SESSION_MS = 6000.0
# A start-up that never settles still has to rank below every one that does.
UNSETTLED_PENALTY_S = 3600.0
# When a departed member comes back after its restart: the departure happens here, after the
# group has formed.
DEPARTURE_AT_MS = 20000.0
# Shares at which latency quantiles are kept: the ends are 0.5 % and 99.5 % rather than the
# sample's extremes, which grow with the sample and would make the estimate depend on its size.
QUANTILE_SHARES: tuple[float, ...] = (0.005, *(index / 20 for index in range(1, 20)), 0.995)
# Where the median and the 90th percentile stand among them: derived, so that a change to the
# shares that drops either fails at import instead of reporting another quantile under its name.
P50_INDEX = QUANTILE_SHARES.index(0.5)
P90_INDEX = QUANTILE_SHARES.index(0.9)
# Ten points: with fewer, the cost of a session timeout jumps as it passes each quantile.
DOWNTIME_POINTS = tuple(0.05 + index / 10 for index in range(10))
STREAMS_PROTOCOL = "streams"
# A moved task's time from its new owner's heartbeat until it is processed again, when the
# history says nothing about it (it records no hand-overs): restoring its store, and what Kafka
# Streams does around that (the stream thread's callbacks, the task's creation, the instance's
# return to RUNNING). The restoration alone is short: 0.16 to 0.47 s a store on the live 8-pod
# fleet (bench/streams*-results.jsonl). The whole hand-over is fitted on that fleet's cold
# starts (bench/streams_closed_loop.py, BENCHMARKS.md): 14 tasks moved at a 0 ms delay cost as
# many unowned task-seconds as 1 or 2 at 3000 ms, which the model matches with 5 to 6 s a move.
DEFAULT_TASK_RESTORE_MS = 6000.0
# group.streams.heartbeat.interval.ms's default (and its default minimum).
STREAMS_HEARTBEAT_MS = 5000.0


@dataclass(frozen=True)
class DepartureProfile:
    """How often members of a group stop one way, and how long they stay away."""

    kind: str  # "crash" or "leave"
    per_day: float
    # Quantiles (DOWNTIME_POINTS) of the time from the stop to the member's next join, in ms,
    # among members that came back; empty when none did.
    downtime_quantiles_ms: tuple[float, ...] = ()
    # Share of stops after which the member never came back (a scale-down, a lost node).
    no_return_share: float = 0.0


@dataclass(frozen=True)
class GroupProfile:
    """What the history says about one group, enough to simulate it."""

    cluster: str
    namespace: str
    name: str
    group_id: str
    members: int
    partitions: int
    # Pod start to first JoinGroup, ms, at QUANTILE_SHARES.
    latency_quantiles_ms: tuple[float, ...]
    # The model's processing_ms fitted to the rebalances' observed durations (the rebalance cost).
    processing_ms: float = 500.0
    static: bool = False
    assignor: str = "round-robin"
    heartbeat_interval_ms: float = 3000.0
    max_poll_interval_ms: float = 300000.0
    rollouts_per_day: float = 1.0
    departures: tuple[DepartureProfile, ...] = field(default_factory=tuple)
    # Of rollouts_per_day, those that replaced a running group's members (the rest started the
    # group from zero).
    rolling_updates_per_day: float = 0.0
    # The protocol the history last recorded (classic, consumer, streams; None: unknown). A
    # streams group's start-ups are scored on the streams group model, its partitions its tasks.
    protocol: str | None = None
    # A streams group's restoration of a moved task's store, ms.
    task_restore_ms: float = DEFAULT_TASK_RESTORE_MS

    @property
    def startups_per_day(self) -> float:
        return max(self.rollouts_per_day - self.rolling_updates_per_day, 0.0)

    @property
    def streams(self) -> bool:
        return self.protocol == STREAMS_PROTOCOL


@dataclass(frozen=True)
class Choice:
    delay_ms: float
    batch_size: int
    session_timeout_ms: float


def batch_candidates(members: int) -> tuple[int, ...]:
    """Everyone at once, halves, thirds, quarters: more batches cost a rebalance each."""
    sizes = {max(1, math.ceil(members / parts)) for parts in (1, 2, 3, 4)}
    return tuple(sorted(sizes, reverse=True))


def session_candidates(
    heartbeat_interval_ms: float, grid: Sequence[float] = SESSION_CANDIDATES_MS
) -> tuple[float, ...]:
    """Sessions the broker accepts that leave room for three heartbeats."""
    floor = max(MIN_SESSION_MS, 3 * heartbeat_interval_ms)
    allowed = tuple(value for value in grid if value >= floor)
    return allowed or (floor,)


def latency_at(quantiles_ms: Sequence[float], share: float) -> float:
    """The latency at cumulative share `share` (0..1), interpolating between the quantiles kept
    at QUANTILE_SHARES (or evenly spaced ones, for any other count)."""
    if len(quantiles_ms) == len(QUANTILE_SHARES):
        shares: Sequence[float] = QUANTILE_SHARES
    else:
        shares = [index / max(len(quantiles_ms) - 1, 1) for index in range(len(quantiles_ms))]
    return quantile_at(quantiles_ms, shares, share)


def objective_s(result: SimulationResult, partitions: int) -> float:
    stable = result.time_to_stable_s
    if stable is None:
        return UNSETTLED_PENALTY_S
    return stable + result.stop_the_world_partition_s / partitions


def _consumer(profile: GroupProfile, session_ms: float = DEFAULT_SESSION_MS) -> ConsumerSettings:
    assignor = profile.assignor
    if assignor not in ("round-robin", "sticky", "cooperative-sticky"):
        assignor = "round-robin"
    return ConsumerSettings(
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=min(profile.heartbeat_interval_ms, session_ms / 3),
        max_poll_interval_ms=profile.max_poll_interval_ms,
        assignor=assignor,  # type: ignore[arg-type]
        processing_ms=profile.processing_ms,
    )


def _members(
    count: int, static: bool, departures: dict[int, Departure] | None = None
) -> tuple[MemberPlan, ...]:
    departures = departures or {}
    return tuple(
        MemberPlan(
            name=f"member-{index}",
            instance_id=f"member-{index}" if static else None,
            departures=(departures[index],) if index in departures else (),
        )
        for index in range(count)
    )


def startup_latencies(profile: GroupProfile, samples: int, seed: int) -> list[list[float]]:
    """Each sample's pod start-up latencies, in member order (the same for every candidate)."""
    drawn: list[list[float]] = []
    for sample in range(samples):
        # Common random numbers: every candidate sees the same pods with the same latencies.
        rng = random.Random(hash((seed, sample, profile.members)) & 0xFFFFFFFF)
        drawn.append(
            [latency_at(profile.latency_quantiles_ms, rng.random()) for _ in range(profile.members)]
        )
    return drawn


def startup_cost_s(
    profile: GroupProfile,
    delay_ms: float,
    batch_size: int,
    samples: int = 4,
    seed: int = 0,
    latencies: Sequence[Sequence[float]] | None = None,
) -> float:
    """Mean objective of a start-up of the whole group in batches of `batch_size`.

    `latencies` are `startup_latencies(profile, samples, seed)`, drawn here if not given (a caller
    scoring many candidates draws them once).
    """
    if latencies is None:
        latencies = startup_latencies(profile, samples, seed)
    if profile.streams:
        return _streams_startup_costs(profile, delay_ms, latencies, samples).cost_s
    return _startup_costs(
        profile,
        _consumer(profile),
        _members(profile.members, profile.static),
        CoordinatorSettings(initial_rebalance_delay_ms=delay_ms),
        batch_size,
        latencies,
        samples,
        seed,
    ).cost_s


@dataclass(frozen=True)
class _Costs:
    cost_s: float  # the start-up objective
    unowned_s: float  # partition-seconds without an owner, over the group's partitions
    rebalances: float
    tasks_moved: float = 0.0  # a streams group's


def streams_objective_s(run: StreamsStartup, tasks: int) -> float:
    """A streams start-up's objective: the task-seconds no member processed, from the first join,
    over the tasks (the time the whole group would have stood still for it). The tasks waiting
    for the delay count as the moved ones do: time to Stable alone would take a long delay,
    which moves nothing, for free (on the live fleet 8000 ms left 1.21x the task-seconds of
    3000 ms unprocessed, for 0.94x the time to Stable)."""
    if run.time_to_stable_s is None:
        return UNSETTLED_PENALTY_S
    return run.unowned_task_s / tasks


def streams_startup(
    profile: GroupProfile, delay_ms: float, latencies: Sequence[float]
) -> StreamsStartup:
    """One start-up of the whole streams group, its members joining at these latencies."""
    return run_streams_startup(
        joins_ms=latencies,
        tasks=profile.partitions,
        initial_delay_ms=delay_ms,
        heartbeat_ms=profile.heartbeat_interval_ms,
        restore_ms=profile.task_restore_ms,
    )


def _streams_startup_costs(
    profile: GroupProfile, delay_ms: float, drawn: Sequence[Sequence[float]], samples: int
) -> _Costs:
    total = unowned = assignments = moved = 0.0
    for sample in range(samples):
        run = streams_startup(profile, delay_ms, drawn[sample])
        total += streams_objective_s(run, profile.partitions)
        unowned += run.unowned_task_s / profile.partitions
        assignments += run.assignments
        moved += run.tasks_moved
    return _Costs(total / samples, unowned / samples, assignments / samples, moved / samples)


def _startup_costs(
    profile: GroupProfile,
    consumer: ConsumerSettings,
    members: tuple[MemberPlan, ...],
    coordinator: CoordinatorSettings,
    batch_size: int,
    drawn: Sequence[Sequence[float]],
    samples: int,
    seed: int,
) -> _Costs:
    batch = max(1, min(batch_size, profile.members))
    total = unowned = rebalances = 0.0
    for sample in range(samples):
        latencies = drawn[sample]
        # The first batch meets an Empty group: time counts from its fastest pod's join.
        origin = min(latencies[:batch])
        offsets = [latency - origin for latency in latencies[:batch]]
        offsets.extend(latencies[batch:])  # each after its own batch's release
        result = simulate_stagger(
            Scenario(
                members=members,
                starts=FixedOffsets(tuple(offsets)),
                coordinator=coordinator,
                consumer=consumer,
                partitions=profile.partitions,
                seed=seed * 7919 + sample,
            ),
            batch,
        )
        total += objective_s(result, profile.partitions)
        unowned += result.stop_the_world_partition_s / profile.partitions
        rebalances += result.rebalance_count
    return _Costs(total / samples, unowned / samples, rebalances / samples)


def departure_cost_s(
    profile: GroupProfile, session_ms: float, departure: DepartureProfile, seed: int = 0
) -> float:
    """Mean extra objective one departure of this kind costs under `session_ms`."""
    return _departure_cost_s(profile, _DepartureRuns(profile, session_ms, seed), departure)


class _DepartureRuns:
    """What every departure kind's runs under one session timeout share, the undisturbed run
    (`base`) included: it depends on the session, not on the departure."""

    def __init__(self, profile: GroupProfile, session_ms: float, seed: int) -> None:
        self.consumer = _consumer(profile, session_ms)
        self.coordinator = CoordinatorSettings(initial_rebalance_delay_ms=0.0)
        self.starts = FixedOffsets(tuple(0.0 for _ in range(profile.members)))
        self.seed = seed
        base_scenario = Scenario(
            members=_members(profile.members, profile.static),
            starts=self.starts,
            coordinator=self.coordinator,
            consumer=self.consumer,
            partitions=profile.partitions,
            seed=seed,
        )
        self.base = simulate(base_scenario)


def _departure_cost_s(
    profile: GroupProfile, runs: _DepartureRuns, departure: DepartureProfile
) -> float:
    consumer, coordinator, starts, seed = runs.consumer, runs.coordinator, runs.starts, runs.seed
    base = runs.base
    outcomes: list[tuple[float, float | None]] = []
    returning = 1.0 - departure.no_return_share
    if departure.downtime_quantiles_ms and returning > 0:
        share = returning / len(departure.downtime_quantiles_ms)
        outcomes += [(share, downtime) for downtime in departure.downtime_quantiles_ms]
    if departure.no_return_share > 0 or not outcomes:
        outcomes.append((departure.no_return_share if outcomes else 1.0, None))
    kind: DepartureKind = "leave" if departure.kind == "leave" else "crash"
    total = 0.0
    for weight, downtime in outcomes:
        leaving = Departure(at_ms=DEPARTURE_AT_MS, kind=kind, restart_after_ms=downtime)
        scenario = Scenario(
            members=_members(profile.members, profile.static, {0: leaving}),
            starts=starts,
            coordinator=coordinator,
            consumer=consumer,
            partitions=profile.partitions,
            seed=seed,
        )
        result = simulate(scenario)
        stable = result.time_to_stable_s
        recovery = (
            UNSETTLED_PENALTY_S if stable is None else max(0.0, stable - DEPARTURE_AT_MS / 1000.0)
        )
        stalled = (
            result.stop_the_world_partition_s - base.stop_the_world_partition_s
        ) / profile.partitions
        total += weight * (recovery + max(0.0, stalled))
    return total


def departures_cost_per_day_s(profile: GroupProfile, session_ms: float, seed: int = 0) -> float:
    if not any(departure.per_day > 0 for departure in profile.departures):
        return 0
    runs = _DepartureRuns(profile, session_ms, seed)
    return sum(
        departure.per_day * _departure_cost_s(profile, runs, departure)
        for departure in profile.departures
        if departure.per_day > 0
    )


@dataclass(frozen=True)
class ScoreRow:
    """One scored candidate: kind "startup" (delay, batch), "rolling" (batch) or "departure"
    (session)."""

    kind: str
    delay_ms: float
    batch_size: int
    session_timeout_ms: float
    cost_s: float  # per event
    per_day_s: float  # cost x events per day
    # Per event: partition-seconds without an owner over the group's partitions (the planner's
    # cost, in seconds of the whole group standing still), and rebalances.
    unowned_s: float = 0.0
    rebalances: float = 0.0
    # A streams group's start-up: tasks moved from one owner to another, per event.
    tasks_moved: float = 0.0


def score_group(
    profile: GroupProfile,
    delays_ms: Sequence[float] = DELAY_CANDIDATES_MS,
    batches: Sequence[int] | None = None,
    sessions_ms: Sequence[float] | None = None,
    samples: int = 4,
    seed: int = 0,
) -> list[ScoreRow]:
    """Every candidate's cost for this group (the table the job chooses from)."""
    rows: list[ScoreRow] = []
    batch_grid = tuple(batches) if batches is not None else batch_candidates(profile.members)
    # What no candidate changes is built once: the pods' latencies, the members, the client.
    latencies = startup_latencies(profile, samples, seed) if delays_ms else []
    consumer = _consumer(profile)
    members = _members(profile.members, profile.static)
    for delay in delays_ms:
        coordinator = CoordinatorSettings(initial_rebalance_delay_ms=delay)
        for batch in (profile.members,) if profile.streams else batch_grid:
            if profile.streams:
                costs = _streams_startup_costs(profile, delay, latencies, samples)
            else:
                costs = _startup_costs(
                    profile, consumer, members, coordinator, batch, latencies, samples, seed
                )
            rows.append(_startup_row(profile, delay, batch, costs))
    if profile.rolling_updates_per_day > 0:
        rows.extend(rolling_rows(profile, batch_grid, samples, seed))
    session_grid = (
        tuple(sessions_ms)
        if sessions_ms is not None
        else session_candidates(profile.heartbeat_interval_ms)
    )
    if any(departure.per_day > 0 for departure in profile.departures):
        for session in session_grid:
            per_day = departures_cost_per_day_s(profile, session, seed)
            events = sum(departure.per_day for departure in profile.departures)
            rows.append(
                ScoreRow("departure", 0.0, 0, session, per_day / max(events, 1e-9), per_day)
            )
    return rows


def _startup_row(profile: GroupProfile, delay: float, batch: int, costs: _Costs) -> ScoreRow:
    return ScoreRow(
        "startup",
        delay,
        batch,
        0.0,
        costs.cost_s,
        costs.cost_s * profile.startups_per_day,
        costs.unowned_s,
        costs.rebalances,
        costs.tasks_moved,
    )


def rolling_rows(
    profile: GroupProfile, batches: Sequence[int], samples: int = 4, seed: int = 0
) -> list[ScoreRow]:
    """A rolling update of the running group per batch size, the operator's default batch (a
    quarter) always among them; its cost is the planner's (unowned partition-seconds)."""
    group = RollingGroup(
        members=profile.members,
        partitions=profile.partitions,
        consumer=_consumer(profile),
        static=profile.static,
        initial_delay_ms=DEFAULT_DELAY_MS,
    )
    gaps = gap_samples(*_restart_gaps(profile), profile.members, max(1, samples // 2), seed)
    rows: list[ScoreRow] = []
    for batch in sorted({*batches, default_batch(profile.members)}, reverse=True):
        update = mean_update(group, batch, gaps, seed)
        unowned_s = update.unowned_ps / profile.partitions
        if update.time_to_stable_s is None:
            unowned_s += UNSETTLED_PENALTY_S
        rows.append(
            ScoreRow(
                "rolling",
                0.0,
                batch,
                0.0,
                unowned_s,
                unowned_s * profile.rolling_updates_per_day,
                unowned_s,
                update.rebalances,
            )
        )
    return rows


def _restart_gaps(profile: GroupProfile) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """From a member's stop to its replacement's join: what the history measured for members
    that left and came back, else the pods' start-up latency (a replacement that is a new pod
    under a new name is not paired with the one it replaced)."""
    for departure in profile.departures:
        if departure.kind == "leave" and departure.downtime_quantiles_ms:
            return departure.downtime_quantiles_ms, DOWNTIME_POINTS
    quantiles = profile.latency_quantiles_ms or (0.0,)
    if len(quantiles) == len(QUANTILE_SHARES):
        return quantiles, QUANTILE_SHARES
    return quantiles, tuple(index / max(len(quantiles) - 1, 1) for index in range(len(quantiles)))
