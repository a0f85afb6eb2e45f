"""The simulator's clock: a queue of future events, earliest first, ties in a fixed order."""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count

from rebalancer.simulation.events import Event


class Agenda:
    """Events by (time, event order, insertion); insertion order keeps equal events FIFO."""

    def __init__(self) -> None:
        # A heap of (time, event order, insertion, event); the run loop pops it directly.
        self.entries: list[tuple[float, int, int, Event]] = []
        self._insertions = count(1)

    def schedule(self, at_ms: float, event: Event) -> None:
        heappush(self.entries, (at_ms, event.order, next(self._insertions), event))

    def pop(self) -> tuple[float, Event] | None:
        if not self.entries:
            return None
        at_ms, _, _, event = heappop(self.entries)
        return at_ms, event

    def __len__(self) -> int:
        return len(self.entries)
