# mypy: disable-error-code="import-untyped"
"""Synthetic consumer fleets with known behaviour, and the history they would leave (seeded).

The bench and the tests need histories whose truth is known: each `Fleet` has a start-up latency
distribution (log-normal), a rebalance cost, and departure rates, so the settings the job learns
from its history can be checked against the best ones for the fleet itself. Timings follow the
simulator's model (join and sync latency of 100 ms each, members rejoining at their next poll),
so a fleet's `true_profile` and the profile the job estimates describe the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
import pyarrow as pa

from rebalancer.clients.recording import write_records
from rebalancer.learning.history_table import FILE_SCHEMA, write_table
from rebalancer.learning.scoring import (
    DOWNTIME_POINTS,
    QUANTILE_SHARES,
    DepartureProfile,
    GroupProfile,
)
from rebalancer.structs.history import HISTORY_SCHEMA_VERSION

DAY_S = 86400.0
# The model's JoinGroup and SyncGroup round trips (CoordinatorSettings defaults).
PROTOCOL_MS = 200.0
EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: generated histories start here


@dataclass(frozen=True)
class Fleet:
    cluster: str
    namespace: str
    name: str
    members: int
    partitions: int
    latency_median_ms: float
    latency_sigma: float
    processing_ms: float
    static: bool = False
    assignor: str = "round-robin"
    rollouts_per_day: float = 2.0
    crash_per_day: float = 0.5
    leave_per_day: float = 1.0
    downtime_median_ms: float = 20000.0
    downtime_sigma: float = 0.6
    no_return_share: float = 0.1
    # Settings in force while the history was recorded.
    delay_ms: float = 3000.0
    session_timeout_ms: float = 45000.0
    batch_size: int | None = None

    @property
    def group_id(self) -> str:
        return f"{self.name}-group"


def lognormal_quantiles(median: float, sigma: float, shares: Sequence[float]) -> tuple[float, ...]:
    normal = NormalDist()
    return tuple(median * math.exp(sigma * normal.inv_cdf(share)) for share in shares)


def true_profile(fleet: Fleet) -> GroupProfile:
    """The profile the job would estimate from an endless history of this fleet."""
    returning = lognormal_quantiles(fleet.downtime_median_ms, fleet.downtime_sigma, DOWNTIME_POINTS)
    return GroupProfile(
        cluster=fleet.cluster,
        namespace=fleet.namespace,
        name=fleet.name,
        group_id=fleet.group_id,
        members=fleet.members,
        partitions=fleet.partitions,
        latency_quantiles_ms=lognormal_quantiles(
            fleet.latency_median_ms, fleet.latency_sigma, QUANTILE_SHARES
        ),
        processing_ms=fleet.processing_ms,
        static=fleet.static,
        assignor=fleet.assignor,
        rollouts_per_day=fleet.rollouts_per_day,
        departures=(
            DepartureProfile("crash", fleet.crash_per_day, returning, fleet.no_return_share),
            DepartureProfile("leave", fleet.leave_per_day, returning, fleet.no_return_share),
        ),
    )


def make_fleets(count: int, seed: int = 0, clusters: int = 3) -> list[Fleet]:
    """`count` fleets of varied size, start-up spread and rebalance cost, over `clusters`."""
    rng = np.random.default_rng(seed)
    fleets: list[Fleet] = []
    for index in range(count):
        cluster_index = index % max(clusters, 1)
        # Each cluster has its own character (image sizes, node pools), groups vary around it.
        base_latency = (400.0, 2500.0, 6000.0, 1200.0)[cluster_index % 4]
        fleets.append(
            Fleet(
                cluster=f"kafka-{cluster_index}.example:9092",
                namespace=f"team-{index % 7}",
                name=f"fleet-{index:05d}",
                members=int(rng.integers(3, 17)),
                partitions=int(rng.choice([6, 12, 24, 48])),
                latency_median_ms=float(base_latency * rng.uniform(0.6, 1.6)),
                latency_sigma=float(rng.uniform(0.2, 0.9)),
                processing_ms=float(rng.choice([300.0, 2000.0, 8000.0, 20000.0])),
                static=bool(rng.random() < 0.4),
                assignor=str(rng.choice(["round-robin", "cooperative-sticky"])),
                rollouts_per_day=float(rng.uniform(0.5, 4.0)),
                crash_per_day=float(rng.uniform(0.1, 2.0)),
                leave_per_day=float(rng.uniform(0.2, 4.0)),
                downtime_median_ms=float(rng.uniform(5000.0, 60000.0)),
                downtime_sigma=float(rng.uniform(0.3, 0.9)),
                no_return_share=float(rng.uniform(0.0, 0.3)),
            )
        )
    return fleets


def events_per_day(fleet: Fleet) -> float:
    """Records one day of this fleet writes, on average (to size a history)."""
    batches = math.ceil(fleet.members / (fleet.batch_size or fleet.members))
    per_rollout = 2 * fleet.members + batches
    per_departure = 3.0 + 1.0
    return (
        fleet.rollouts_per_day * per_rollout
        + (fleet.crash_per_day + fleet.leave_per_day) * per_departure
    )


def days_for(fleets: Sequence[Fleet], events: int) -> float:
    return events / max(sum(events_per_day(fleet) for fleet in fleets), 1e-9)


class _Columns:
    """Column buffers for one fleet's records (every other column is filled in per fleet)."""

    def __init__(self) -> None:
        self.record_type: list[str] = []
        self.at: list[float] = []
        self.member: list[str | None] = []
        self.departure: list[str | None] = []
        self.generation: list[int | None] = []
        self.previous: list[int | None] = []
        self.cause: list[str] = []
        self.members: list[int] = []
        self.offsets: list[list[float]] = []
        self.stable_ms: list[float | None] = []
        self.stw: list[float | None] = []
        self.batch_id: list[str | None] = []
        self.rollout_id: list[str | None] = []

    def add(
        self,
        record_type: str,
        at: float,
        members: int,
        member: str | None = None,
        departure: str | None = None,
        generation: int | None = None,
        previous: int | None = None,
        cause: str = "unknown",
        offsets: list[float] | None = None,
        stable_ms: float | None = None,
        stw: float | None = None,
        batch_id: str | None = None,
        rollout_id: str | None = None,
    ) -> None:
        self.record_type.append(record_type)
        self.at.append(at)
        self.members.append(members)
        self.member.append(member)
        self.departure.append(departure)
        self.generation.append(generation)
        self.previous.append(previous)
        self.cause.append(cause)
        self.offsets.append(offsets or [])
        self.stable_ms.append(stable_ms)
        self.stw.append(stw)
        self.batch_id.append(batch_id)
        self.rollout_id.append(rollout_id)


def _rebalance_ms(rng: np.random.Generator, fleet: Fleet, members: int) -> float:
    """A Stable group's rebalance as the model times it: the slowest member's next poll."""
    return float(PROTOCOL_MS + fleet.processing_ms * float(rng.random()) ** (1.0 / max(members, 1)))


def fleet_history(fleet: Fleet, days: float, seed: int, start: float = EPOCH) -> pa.Table:
    """The records one fleet leaves over `days` (with date and namespace columns)."""
    rng = np.random.default_rng(seed)
    columns = _Columns()
    generation = 0
    span = days * DAY_S
    rollouts = np.sort(rng.uniform(0, span, rng.poisson(fleet.rollouts_per_day * days)))
    for number, began in enumerate(rollouts):
        rollout = f"{fleet.name}-r{number}"
        generation = _add_rollout(columns, rng, fleet, rollout, start + float(began), generation)
    for kind, rate in (("crash", fleet.crash_per_day), ("leave", fleet.leave_per_day)):
        for stopped in rng.uniform(0, span, rng.poisson(rate * days)):
            generation = _add_departure(
                columns, rng, fleet, kind, start + float(stopped), generation
            )
    return _table(fleet, columns)


def _add_rollout(
    columns: _Columns,
    rng: np.random.Generator,
    fleet: Fleet,
    rollout: str,
    release: float,
    generation: int,
) -> int:
    """One rollout's records, batch by batch: a batch is released once the previous one's
    rebalance is over. The generation after it."""
    batch = fleet.batch_size or fleet.members
    for first in range(0, fleet.members, batch):
        size = min(batch, fleet.members - first)
        batch_id = f"{rollout}-b{first // batch}"
        joins = _add_batch_joins(columns, rng, fleet, rollout, batch_id, first, size, release)
        offsets = sorted(float(value) for value in (joins - joins.min()) * 1000.0)
        if first == 0:
            took = offsets[-1] + fleet.delay_ms + PROTOCOL_MS
            previous = None
        else:
            took = offsets[-1] + _rebalance_ms(rng, fleet, first + size)
            previous = generation
        generation += 1
        stable_at = float(joins.min()) + took / 1000.0
        columns.add(
            "rebalance",
            stable_at,
            first + size,
            generation=generation,
            previous=previous,
            cause="member-joined",
            offsets=offsets,
            stable_ms=took,
            stw=fleet.partitions * took / 1000.0,
            batch_id=batch_id,
            rollout_id=rollout,
        )
        release = stable_at
    return generation


def _add_batch_joins(
    columns: _Columns,
    rng: np.random.Generator,
    fleet: Fleet,
    rollout: str,
    batch_id: str,
    first: int,
    size: int,
    release: float,
) -> np.ndarray:
    """A pod-start at the release and a member-join per pod of the batch; the join times."""
    latencies = rng.lognormal(math.log(fleet.latency_median_ms), fleet.latency_sigma, size)
    joins = release + latencies / 1000.0
    for slot in range(size):
        pod = f"{fleet.name}-{first + slot}"
        columns.add("pod-start", release, first, pod, batch_id=batch_id, rollout_id=rollout)
        columns.add(
            "member-join",
            float(joins[slot]),
            first,
            pod,
            batch_id=batch_id,
            rollout_id=rollout,
        )
    return joins


def _add_departure(
    columns: _Columns,
    rng: np.random.Generator,
    fleet: Fleet,
    kind: str,
    at: float,
    generation: int,
) -> int:
    """A pod stopping at `at` (a crash or a leave), its return unless it stays away, and the
    rebalance unless a static member came back within its session. The generation after it."""
    pod = f"{fleet.name}-{int(rng.integers(0, fleet.members))}"
    columns.add("pod-stop", at, fleet.members, pod, departure=kind)
    back = rng.random() >= fleet.no_return_share
    downtime = float(rng.lognormal(math.log(fleet.downtime_median_ms), fleet.downtime_sigma))
    if back:
        latency = float(rng.lognormal(math.log(fleet.latency_median_ms), fleet.latency_sigma))
        columns.add("pod-start", at + max(downtime - latency, 0.0) / 1000.0, fleet.members - 1, pod)
        columns.add("member-join", at + downtime / 1000.0, fleet.members - 1, pod)
    quiet = fleet.static and back and downtime < fleet.session_timeout_ms
    if quiet:
        return generation
    took = _rebalance_ms(rng, fleet, fleet.members)
    columns.add(
        "rebalance",
        at + took / 1000.0,
        fleet.members - 1,
        generation=generation + 1,
        previous=generation,
        cause="member-left",
        stable_ms=took,
        stw=fleet.partitions * took / 1000.0,
    )
    return generation + 1


def _table(fleet: Fleet, columns: _Columns) -> pa.Table:
    rows = len(columns.at)
    at = np.asarray(columns.at, dtype=np.float64)

    def constant(value: object, kind: pa.DataType) -> pa.Array:
        return pa.array([value] * rows, kind)

    data = {
        "schema_version": constant(HISTORY_SCHEMA_VERSION, pa.int32()),
        "record_type": pa.array(columns.record_type, pa.string()),
        "name": constant(fleet.name, pa.string()),
        "group_id": constant(fleet.group_id, pa.string()),
        "cluster": constant(fleet.cluster, pa.string()),
        "generation": pa.array(columns.generation, pa.int64()),
        "previous_generation": pa.array(columns.previous, pa.int64()),
        "cause": pa.array(columns.cause, pa.string()),
        "detected_at": pa.array(at, pa.float64()),
        "started_at": constant(None, pa.float64()),
        "members": pa.array(columns.members, pa.int32()),
        "joined": constant([], pa.list_(pa.string())),
        "left": constant([], pa.list_(pa.string())),
        "source": constant("operator", pa.string()),
        "state": constant("Stable", pa.string()),
        "member": pa.array(columns.member, pa.string()),
        "departure": pa.array(columns.departure, pa.string()),
        "join_offsets_ms": pa.array(columns.offsets, pa.list_(pa.float64())),
        "time_to_stable_ms": pa.array(columns.stable_ms, pa.float64()),
        "stop_the_world_partition_s": pa.array(columns.stw, pa.float64()),
        "partitions": constant(fleet.partitions, pa.int32()),
        "batch_id": pa.array(columns.batch_id, pa.string()),
        "rollout_id": pa.array(columns.rollout_id, pa.string()),
        "initial_rebalance_delay_ms": constant(fleet.delay_ms, pa.float64()),
        "session_timeout_ms": constant(fleet.session_timeout_ms, pa.float64()),
        "heartbeat_interval_ms": constant(3000.0, pa.float64()),
        "max_poll_interval_ms": constant(300000.0, pa.float64()),
        "assignor": constant(fleet.assignor, pa.string()),
        "static_membership": constant(fleet.static, pa.bool_()),
        "batch_size": constant(fleet.batch_size or fleet.members, pa.int32()),
        "record_key": constant(None, pa.string()),
        # Synthetic fleets are classic groups: they share their cluster's broker delay.
        "group_protocol": constant("classic", pa.string()),
    }
    table = pa.table(data, schema=FILE_SCHEMA)
    days = (at // DAY_S).astype(np.int64).astype("datetime64[D]").astype(str)
    table = table.append_column("date", pa.array(days, pa.string()))
    return table.append_column("namespace", constant(fleet.namespace, pa.string()))


def iter_history(
    fleets: Sequence[Fleet], days: float, seed: int = 0
) -> Iterator[tuple[Fleet, pa.Table]]:
    for index, fleet in enumerate(fleets):
        yield fleet, fleet_history(fleet, days, seed * 1_000_003 + index)


def write_history(
    root: str,
    fleets: Sequence[Fleet],
    days: float,
    seed: int = 0,
    chunk_rows: int = 2_000_000,
    *,
    as_written: bool = False,
) -> int:
    """Write the fleets' history under `root`; return how many records were written.

    Tables are gathered into chunks so a big history makes files of useful size. By default
    they are Parquet, as a compaction leaves them; `as_written` writes JSON lines instead, as
    the operator does (the same rows, slower to write: a first `rebalancer learn` compacts them).
    """
    written = 0
    pending: list[pa.Table] = []
    pending_rows = 0
    if as_written:
        # A chunk's lines are held until written: files come one per fleet and day either way.
        chunk_rows = min(chunk_rows, 200_000)

    def flush() -> None:
        table = pa.concat_tables(pending)
        if as_written:
            write_records(root, table.to_pylist())
        else:
            write_table(root, table)

    for _, table in iter_history(fleets, days, seed):
        pending.append(table)
        pending_rows += table.num_rows
        if pending_rows >= chunk_rows:
            flush()
            written += pending_rows
            pending, pending_rows = [], 0
    if pending:
        flush()
        written += pending_rows
    return written


def with_settings(fleet: Fleet, **changes: object) -> Fleet:
    return replace(fleet, **changes)  # type: ignore[arg-type]
