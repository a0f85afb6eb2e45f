"""The simulator's events: what happens at one instant to a member or to the coordinator.

`order` breaks ties between events at the same instant. The coordinator's timers and held
responses go first, then assignment completions, then departures, then arrivals, then the
members' own reactions. That order is a modelling choice where real brokers race.

Events are slotted dataclasses, not frozen ones: a run creates and dispatches tens of them per
member, and a frozen dataclass's __init__ costs several times a plain one. Nothing changes an
event once it is scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rebalancer.simulation.results import Cause
from rebalancer.simulation.scenarios import Departure


@dataclass(slots=True)
class JoinDeadline:
    """A delayed join (InitialDelayedJoin or DelayedJoin) expires, unless `token` is stale."""

    order: ClassVar[int] = 0
    token: int


@dataclass(slots=True)
class SyncDone:
    """The leader's SyncGroup for `generation` is stored: the group becomes Stable."""

    order: ClassVar[int] = 1
    generation: int


@dataclass(slots=True)
class ToIncarnation:
    """An event for one process of a member: it is stale once the member has restarted."""

    consumer: int
    incarnation: int


@dataclass(slots=True)
class Resync(ToIncarnation):
    """A member that rejoined without a rebalance receives its stored assignment."""

    order: ClassVar[int] = 1


@dataclass(slots=True)
class SessionCheck:
    """The coordinator's heartbeat deadline for a member that may have stopped heartbeating."""

    order: ClassVar[int] = 1
    member_id: str


@dataclass(slots=True)
class Depart:
    order: ClassVar[int] = 2
    consumer: int
    departure: Departure


@dataclass(slots=True)
class TopicCreated:
    order: ClassVar[int] = 2


@dataclass(slots=True)
class Start:
    """A (new) process of a member starts and sends its first JoinGroup."""

    order: ClassVar[int] = 3
    consumer: int


@dataclass(slots=True)
class JoinArrive(ToIncarnation):
    """A JoinGroup reaches the coordinator; `with_topic` is the subscription it carries."""

    order: ClassVar[int] = 3
    reason: Cause
    with_topic: bool


@dataclass(slots=True)
class HeartbeatNotice(ToIncarnation):
    """A member's heartbeat after the group moved on: it learns it must rejoin."""

    order: ClassVar[int] = 4


@dataclass(slots=True)
class Rejoin(ToIncarnation):
    """A member decides to rejoin on its own (after revoking, or on a changed subscription)."""

    order: ClassVar[int] = 4
    reason: Cause


@dataclass(slots=True)
class MetadataRefresh(ToIncarnation):
    """A member's periodic metadata refresh (metadata.max.age.ms) that can reveal a new topic."""

    order: ClassVar[int] = 4


@dataclass(slots=True)
class Enforce:
    """The operator makes one member rejoin to force a rebalance."""

    order: ClassVar[int] = 4


Event = (
    JoinDeadline
    | SyncDone
    | Resync
    | SessionCheck
    | Depart
    | TopicCreated
    | Start
    | JoinArrive
    | HeartbeatNotice
    | Rejoin
    | MetadataRefresh
    | Enforce
)
