"""How long a group took to be Stable again, from the operator's own observations. Pure.

A spell starts at the first observation that sees the group rebalancing (PreparingRebalance,
CompletingRebalance, or Assigning and Reconciling under KIP-848) or Stable with partitions
unassigned, and ends at the first observation that sees it Stable with every partition
assigned: that span is the rebalance's time to Stable as the operator saw it, for every group
and every cause, with or without member reports. Both ends are as late as the observation that
saw them, so the figure is exact to about one observation interval (the observer looks again
within a second while members report a new generation). An Empty or Dead group ends a spell
without a figure: nobody was waiting for partitions. The rebalance records of docs/history.md
time joins more finely where member reports allow.
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.planning.rebalances import REBALANCING_STATES
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.snapshots import GroupSnapshot


@dataclass(frozen=True)
class StableSpell:
    """When the current spell without Stable began (None while the group is settled)."""

    since: float | None = None


def _unsettled(snapshot: GroupSnapshot) -> bool:
    if snapshot.state in REBALANCING_STATES:
        return True
    return snapshot.state == GroupState.STABLE and not snapshot.settled


def track_stable(spell: StableSpell, snapshot: GroupSnapshot) -> tuple[float | None, StableSpell]:
    """(the seconds the group took to be Stable again if this observation ends a spell, the
    spell to keep)."""
    if snapshot.settled:
        if spell.since is None:
            return None, spell
        return max(snapshot.observed_at - spell.since, 0.0), StableSpell()
    if not _unsettled(snapshot):
        return None, StableSpell()  # Empty, Dead, Unknown: no one waits for a Stable group
    if spell.since is None:
        return None, StableSpell(since=snapshot.observed_at)
    return None, spell
