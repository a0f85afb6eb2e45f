"""The observer's latest look at each group, which the rollout planner steps on.

One writer, one reader: the observer records each snapshot it takes (and forgets a group it no
longer manages, or whose resource is gone); the rollout planner reads the latest between its own
looks at the broker, so a batch that has joined lets the next one go without a second describe.
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.structs.snapshots import GroupSnapshot


@dataclass(frozen=True)
class Sighting:
    snapshot: GroupSnapshot
    rebalances: int  # the rebalances the observer had counted for the group by then


class GroupSightings:
    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Sighting] = {}

    def record(
        self, namespace: str, name: str, snapshot: GroupSnapshot, rebalances: int
    ) -> Sighting | None:
        """Keep this look as the group's latest; return the one it replaces."""
        key = (namespace, name)
        before = self._latest.get(key)
        self._latest[key] = Sighting(snapshot, rebalances)
        return before

    def latest(self, namespace: str, name: str) -> Sighting | None:
        return self._latest.get((namespace, name))

    def forget(self, namespace: str, name: str) -> None:
        self._latest.pop((namespace, name), None)
