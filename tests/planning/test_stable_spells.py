"""Time to Stable from observations (planning.stable_spells): a table of observation runs."""

from __future__ import annotations

import pytest

from rebalancer.planning.stable_spells import StableSpell, track_stable
from rebalancer.structs.snapshots import GroupSnapshot


def seen(state: str, at: float, assigned: int | None = 6, members: int = 2) -> GroupSnapshot:
    return GroupSnapshot(
        state=state,
        protocol="classic",
        assignor="range",
        generation=1,
        members=members,
        member_details=(),
        assigned_partitions=assigned,
        total_partitions=6,
        lag=0,
        observed_at=at,
    )


def spells(observations: list[GroupSnapshot]) -> list[float]:
    spell = StableSpell()
    ended = []
    for snapshot in observations:
        seconds, spell = track_stable(spell, snapshot)
        if seconds is not None:
            ended.append(seconds)
    return ended


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        # A cold start: Empty, the broker's initial delay, assignment, Stable.
        (
            [
                seen("Empty", 0, None, 0),
                seen("PreparingRebalance", 2, 0),
                seen("PreparingRebalance", 4, 0),
                seen("CompletingRebalance", 5, 0),
                seen("Stable", 6.5),
                seen("Stable", 8.5),
            ],
            [4.5],
        ),
        # Stable all along: nothing to measure.
        ([seen("Stable", 0), seen("Stable", 2)], []),
        # Stable with two partitions unassigned counts until every one is.
        ([seen("Stable", 0), seen("Stable", 2, 4), seen("Stable", 5)], [3.0]),
        # Two rebalances, each measured from its own start.
        (
            [
                seen("PreparingRebalance", 0, 0),
                seen("Stable", 3),
                seen("PreparingRebalance", 10, 0),
                seen("CompletingRebalance", 11, 0),
                seen("Stable", 17),
            ],
            [3.0, 7.0],
        ),
        # The group emptied mid-rebalance: nobody waited for it, no figure.
        (
            [
                seen("PreparingRebalance", 0, 0),
                seen("Empty", 4, None, 0),
                seen("Stable", 60),
            ],
            [],
        ),
        # KIP-848: Assigning and Reconciling are rebalancing too.
        ([seen("Assigning", 0, 0), seen("Reconciling", 1, 3), seen("Stable", 2.5)], [2.5]),
    ],
)
def test_time_to_stable(observations: list[GroupSnapshot], expected: list[float]) -> None:
    assert spells(observations) == expected
