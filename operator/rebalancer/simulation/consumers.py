"""The client side of each member during a run: its process, partitions and view of the group."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from rebalancer.simulation.scenarios import ConsumerSettings, Departure


class Phase(Enum):
    OFFLINE = "offline"  # no process running
    JOINING = "joining"  # a JoinGroup is on its way or held by the coordinator
    AWAITING_SYNC = "awaiting-sync"  # joined a generation, waiting for its assignment
    STABLE = "stable"  # holds an assignment and heartbeats


class Phases:
    """Phase's members as plain class attributes, for the simulator's hot paths: Python 3.11
    resolves an Enum member through a descriptor on every access, several times the cost."""

    OFFLINE: Final = Phase.OFFLINE
    JOINING: Final = Phase.JOINING
    AWAITING_SYNC: Final = Phase.AWAITING_SYNC
    STABLE: Final = Phase.STABLE


@dataclass(slots=True)
class Consumer:
    """Mutable run state of one member slot; a restart is a new incarnation of the same slot."""

    index: int
    name: str
    settings: ConsumerSettings
    instance_id: str | None
    start_ms: float
    departures: tuple[Departure, ...]
    # Where in its metadata.max.age.ms cycle this member refreshes (KAFKA-7126: each member
    # refreshes at its own time).
    metadata_phase_ms: float
    alive: bool = False
    incarnation: int = 0
    member_id: str | None = None
    phase: Phase = Phase.OFFLINE
    owned: frozenset[int] = field(default_factory=frozenset)
    generation: int = -1
    # The heartbeat thread restarts its interval when a join or sync completes.
    heartbeat_anchor_ms: float = 0.0
    notice_pending: bool = False
    knows_topic: bool = False  # its subscription includes the new topic
    joined_with_topic: bool = False  # ... and so did the subscription of its last JoinGroup

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def next_heartbeat_ms(self, now_ms: float) -> float:
        """The first heartbeat strictly after `now_ms`."""
        interval = self.settings.heartbeat_interval_ms
        beats = math.floor((now_ms - self.heartbeat_anchor_ms) / interval) + 1
        return self.heartbeat_anchor_ms + max(beats, 1) * interval

    def last_heartbeat_ms(self, now_ms: float) -> float:
        """The last heartbeat at or before `now_ms` (the anchor counts as one)."""
        interval = self.settings.heartbeat_interval_ms
        beats = max(math.floor((now_ms - self.heartbeat_anchor_ms) / interval), 0)
        return self.heartbeat_anchor_ms + beats * interval

    def first_refresh_at_or_after(self, at_ms: float) -> float:
        age = self.settings.metadata_max_age_ms
        cycles = math.ceil((at_ms - self.metadata_phase_ms) / age)
        return self.metadata_phase_ms + max(cycles, 0) * age
