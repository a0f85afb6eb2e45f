"""Which replica leads, read from kopf's peering object (docs/high-availability.md).

kopf pauses a replica while another live one in the same peering object has a higher priority
(and pauses all of them on a tie). This module applies the same rule to the object's status, so
the operator can tell the Services which pod is the active one; kopf itself decides what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.structs.times import parse_rfc3339

# Start times are counted in milliseconds and scaled so that a random tail (0..999) breaks a
# tie between replicas started in the same millisecond: kopf would pause both on a tie.
_TAIL = 1000


@dataclass(frozen=True)
class PeerEntry:
    identity: str
    priority: int
    deadline: float  # epoch seconds after which the entry is dead (lastseen + lifetime)


def priority_for_start(started_at: float, tail: int) -> int:
    """A priority that is higher the earlier the replica started: the oldest live replica leads,
    and one that starts (or restarts) later joins as a standby without preempting it."""
    if not 0 <= tail < _TAIL:
        raise ValueError(f"tail must be in 0..{_TAIL - 1}, not {tail}")
    return -(int(started_at * 1000) * _TAIL + tail)


def peer_entries(status: Mapping[str, Any] | None) -> list[PeerEntry]:
    """The entries kopf keeps in the peering object's status, one per replica. Entries that
    are not kopf's shape are skipped."""
    entries: list[PeerEntry] = []
    for identity, info in (status or {}).items():
        if not isinstance(info, Mapping):
            continue
        try:
            seen = parse_rfc3339(str(info["lastseen"]))
            entries.append(
                PeerEntry(
                    identity=str(identity),
                    priority=int(info.get("priority", 0)),
                    deadline=seen + int(info.get("lifetime", 60)),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return entries


def leads(entries: list[PeerEntry], identity: str, now: float) -> bool:
    """Whether `identity` is the replica kopf lets run: its own entry is live and every other
    live entry has a lower priority."""
    live = [entry for entry in entries if entry.deadline > now]
    own = [entry for entry in live if entry.identity == identity]
    if not own:
        return False
    return all(entry.priority < own[0].priority for entry in live if entry.identity != identity)
