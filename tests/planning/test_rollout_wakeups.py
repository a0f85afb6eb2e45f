"""When an observation wakes the rollout planner (structs.snapshots.moved_for_rollouts): on what
a batch waits for (a generation, a state, members coming or going, partitions owned), never on
an observation that only repeats the last one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancer.planning.sightings import GroupSightings, Sighting
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source, moved_for_rollouts


def member(host: str) -> MemberSummary:
    return MemberSummary(host, f"{host}-id", None, 4, 3, Source.BROKER)


SEEN = GroupSnapshot(
    state="Stable",
    protocol="consumer",
    assignor="cooperative-sticky",
    generation=4,
    members=2,
    member_details=(member("a-0"), member("a-1")),
    assigned_partitions=6,
    total_partitions=6,
    lag=10,
    observed_at=100.0,
)


@pytest.mark.parametrize(
    ("after", "moved"),
    [
        # The same group seen again, later and with another lag: nothing for the planner.
        (replace(SEEN, observed_at=102.0, lag=3), False),
        (replace(SEEN, state="PreparingRebalance"), True),
        (replace(SEEN, generation=5), True),
        # A batch's new pod took its predecessor's place: same count, another member.
        (replace(SEEN, member_details=(member("a-0"), member("a-2"))), True),
        (replace(SEEN, members=1, member_details=(member("a-0"),)), True),
        (replace(SEEN, assigned_partitions=3), True),
        (replace(SEEN, members_reconciling=1), True),
    ],
)
def test_an_observation_wakes_the_planner_only_when_the_group_moved(
    after: GroupSnapshot, moved: bool
) -> None:
    assert moved_for_rollouts(SEEN, after) is moved


def test_the_first_observation_wakes_the_planner() -> None:
    assert moved_for_rollouts(None, SEEN)


def test_sightings_hand_the_observer_s_last_look_to_the_planner_per_group() -> None:
    sightings = GroupSightings()
    assert sightings.record("shop", "orders", SEEN, 3) is None
    later = replace(SEEN, generation=5)

    before = sightings.record("shop", "orders", later, 4)

    assert before == Sighting(SEEN, 3)
    assert sightings.latest("shop", "orders") == Sighting(later, 4)
    assert sightings.latest("shop", "billing") is None
    sightings.forget("shop", "orders")
    assert sightings.latest("shop", "orders") is None
