"""Bookkeeping of a run: the rebalances, who consumes what over time, and the final result."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.simulation.consumers import Consumer
from rebalancer.simulation.results import Cause, Rebalance, SimulationResult

_NOTHING: frozenset[int] = frozenset()


@dataclass
class _OpenRebalance:
    cause: Cause
    start_ms: float
    generation: int | None = None
    members: tuple[str, ...] = ()


class Ledger:
    """Records rebalances and integrates unconsumed partitions over time.

    The run ends at its last activity (a change of ownership or of a rebalance), not at its last
    event: timers that fire for nothing (a join deadline already met, a session still alive) do
    not stretch the run or its unconsumed partition-seconds.
    """

    def __init__(self, partitions: int, names: list[str]) -> None:
        self._rebalances: list[Rebalance] = []
        self._open: _OpenRebalance | None = None
        self._total = partitions
        self._served = 0
        self._clock_ms: float | None = None
        self._unserved_partition_ms = 0.0
        self._revocations = dict.fromkeys(names, 0)
        self._first_start_ms: float | None = None
        self._last_full_stable_ms: float | None = None
        self._last_activity_ms = 0.0
        self._unserved_at_activity = 0.0

    # -- time ------------------------------------------------------------------------------

    def advance(self, now_ms: float) -> None:
        """Account for the time since the last event; nothing counts before the first start."""
        if self._clock_ms is not None:
            self._unserved_partition_ms += (self._total - self._served) * (now_ms - self._clock_ms)
        if self._first_start_ms is not None:
            self._clock_ms = now_ms

    def resume_at(self, now_ms: float) -> None:
        """Go on from `now_ms`, the run's last activity, as if the events after it (timers that
        changed nothing) had not been handled yet."""
        if self._clock_ms is not None:
            self._clock_ms = now_ms
            self._unserved_partition_ms = self._unserved_at_activity

    def note_start(self, now_ms: float) -> None:
        if self._first_start_ms is None:
            self._first_start_ms = now_ms
            self._clock_ms = now_ms
        self._touch()

    def _touch(self) -> None:
        if self._clock_ms is not None:
            self._last_activity_ms = self._clock_ms
            self._unserved_at_activity = self._unserved_partition_ms

    # -- partitions ------------------------------------------------------------------------

    def add_partitions(self, count: int) -> None:
        self._total += count
        self._touch()

    def hand_over(self, consumer: Consumer, partitions: frozenset[int]) -> None:
        """Set what a running member consumes."""
        if partitions != consumer.owned:
            self._served += len(partitions) - len(consumer.owned)
            consumer.owned = partitions
            self._touch()

    def revoke(self, consumer: Consumer, partitions: frozenset[int]) -> None:
        """A member gives partitions up to a rebalance (onPartitionsRevoked)."""
        if partitions is consumer.owned:  # all of them (an eager rejoin): no set arithmetic
            self._revocations[consumer.name] += len(partitions)
            self.hand_over(consumer, _NOTHING)
            return
        self._revocations[consumer.name] += len(partitions & consumer.owned)
        self.hand_over(consumer, consumer.owned - partitions)

    def lose_all(self, consumer: Consumer) -> None:
        """A member stops consuming without revoking (crash, shutdown, fenced)."""
        self.hand_over(consumer, frozenset())

    # -- rebalances ------------------------------------------------------------------------

    @property
    def rebalancing(self) -> bool:
        return self._open is not None

    def open_rebalance(self, cause: Cause, now_ms: float) -> None:
        if self._open is None:
            self._open = _OpenRebalance(cause, now_ms)
            self._touch()

    def form_generation(self, generation: int, members: tuple[str, ...]) -> None:
        if self._open is not None:
            self._open.generation = generation
            self._open.members = members

    def close_rebalance(self, now_ms: float, *, completed: bool) -> None:
        opened, self._open = self._open, None
        if opened is None or opened.generation is None:
            return
        self._touch()
        self._rebalances.append(
            Rebalance(
                generation=opened.generation,
                cause=opened.cause,
                start_s=opened.start_ms / 1000.0,
                end_s=now_ms / 1000.0,
                completed=completed,
                members=opened.members,
            )
        )

    def note_stable(self, now_ms: float, *, everyone_assigned: bool) -> None:
        if everyone_assigned:
            self._last_full_stable_ms = now_ms
            self._touch()

    @property
    def settled_at_ms(self) -> float | None:
        """When every running member last held its assignment, if nothing happened since."""
        stable = self._last_full_stable_ms
        if stable is None or self._last_activity_ms > stable:
            return None
        return stable

    # -- result ----------------------------------------------------------------------------

    def result(self) -> SimulationResult:
        time_to_stable = None
        if self._first_start_ms is not None and self._last_full_stable_ms is not None:
            time_to_stable = (self._last_full_stable_ms - self._first_start_ms) / 1000.0
        return SimulationResult(
            rebalances=tuple(self._rebalances),
            time_to_stable_s=time_to_stable,
            stop_the_world_partition_s=self._unserved_at_activity / 1000.0,
            revocations=dict(self._revocations),
            end_s=self._last_activity_ms / 1000.0,
        )
