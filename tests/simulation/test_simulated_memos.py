"""What the simulator remembers between runs and within one must never change a result: the
assignment memo, and the coordinator's member order and rebalance timeout kept until the members
change. Each is checked against a recomputation over varied scenarios."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from rebalancer.simulation import (
    ASSIGNORS,
    TOPIC_NOTICES,
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    Exponential,
    MemberPlan,
    Scenario,
    Staggered,
    StartTimes,
    TopicCreation,
    Uniform,
    assignors,
    simulate,
)
from rebalancer.simulation.assignors import Assignment, assign_partitions
from rebalancer.simulation.kafka_groups import KafkaGroupModel
from rebalancer.simulation.runs import seeded_random


def varied_scenarios(count: int, seed: int = 11) -> Iterator[Scenario]:
    """Members that join, leave, crash and come back (static or not), on every assignor, some
    with a new topic: every path that adds, removes or replaces a coordinator record."""
    rng = random.Random(seed)
    for index in range(count):
        session = rng.choice([6000.0, 10000.0, 45000.0])
        consumer = ConsumerSettings(
            session_timeout_ms=session,
            heartbeat_interval_ms=min(3000.0, session / 3),
            assignor=rng.choice(ASSIGNORS),
            processing_ms=rng.choice([0.0, 300.0, 8000.0]),
        )
        static = rng.random() < 0.4
        plans = []
        for member in range(rng.randint(1, 9)):
            departures: tuple[Departure, ...] = ()
            if rng.random() < 0.4:
                departures = (
                    Departure(
                        at_ms=rng.uniform(0.0, 40000.0),
                        kind=rng.choice(["leave", "crash"]),
                        restart_after_ms=rng.choice([None, rng.uniform(0.0, 60000.0)]),
                    ),
                )
            plans.append(
                MemberPlan(
                    name=f"m{member}",
                    instance_id=f"m{member}" if static else None,
                    departures=departures,
                    consumer=ConsumerSettings(max_poll_interval_ms=60000.0)
                    if rng.random() < 0.1
                    else None,
                )
            )
        topic = None
        if rng.random() < 0.2:
            topic = TopicCreation(at_ms=rng.uniform(0.0, 60000.0), notice=rng.choice(TOPIC_NOTICES))
        starts: list[StartTimes] = [
            Uniform(rng.uniform(0.0, 10000.0)),
            Exponential(800.0),
            Staggered(),
        ]
        yield Scenario(
            members=tuple(plans),
            starts=rng.choice(starts),
            coordinator=CoordinatorSettings(initial_rebalance_delay_ms=rng.choice([0.0, 3000.0])),
            consumer=consumer,
            partitions=rng.choice([1, 6, 12]),
            topic_creation=topic,
            seed=index,
        )


class _Forgetful(dict[tuple[object, ...], Assignment]):
    """A memo that never remembers: every assignment is computed afresh."""

    def get(self, key: Any, default: Any = None) -> Any:
        return default

    def __setitem__(self, key: tuple[object, ...], value: Assignment) -> None:
        pass


def test_the_assignment_memo_changes_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios = list(varied_scenarios(150))
    remembered = [simulate(scenario) for scenario in scenarios]
    again = [simulate(scenario) for scenario in scenarios]  # now mostly from the memo
    monkeypatch.setattr(assignors, "_MEMO", _Forgetful())
    fresh = [simulate(scenario) for scenario in scenarios]
    assert remembered == again == fresh


def test_remembered_assignments_equal_computed_ones() -> None:
    rng = random.Random(5)
    for _ in range(300):
        members = [rng.choice("abcdef") for _ in range(rng.randint(0, 5))]  # repeats too
        partitions = list(range(rng.randint(1, 12)))
        previous = {
            name: frozenset(p for p in partitions if rng.random() < 0.3) for name in "abcdefg"
        }
        assignor = rng.choice(ASSIGNORS)
        expected = assignors._assign(tuple(sorted(members)), partitions, assignor, previous)
        for _ in range(2):  # the first computes (or finds), the second finds
            got = assign_partitions(members, partitions, assignor, previous)
            assert dict(got.granted) == dict(expected.granted)
            assert got.withheld == expected.withheld


def test_remembered_assignments_are_read_only() -> None:
    granted = assign_partitions(["a", "b"], [0, 1, 2], "round-robin", {}).granted
    with pytest.raises(TypeError):
        granted["a"] = frozenset()  # type: ignore[index]


def test_the_coordinator_order_and_timeout_are_those_of_its_members(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each use of the kept member order and rebalance timeout equals a fresh computation from
    the members at that moment (a missed forget_order would show here)."""
    checked = {"order": 0, "timeout": 0}
    by_name = KafkaGroupModel.by_name
    rebalance_timeout_ms = KafkaGroupModel.rebalance_timeout_ms

    def checked_by_name(model: KafkaGroupModel) -> tuple[Any, ...]:
        kept = by_name(model)
        records = sorted(model.members.values(), key=model.name_of)
        assert kept[0] == records
        assert kept[1] == tuple(sorted(model.name_of(record) for record in records))
        assert kept[2] == (len(set(kept[1])) == len(kept[1]))
        checked["order"] += 1
        return kept

    def checked_timeout(model: KafkaGroupModel) -> float:
        kept = rebalance_timeout_ms(model)
        timeouts = [record.rebalance_timeout_ms for record in model.members.values()]
        assert kept == max(timeouts, default=0.0)
        checked["timeout"] += 1
        return kept

    monkeypatch.setattr(KafkaGroupModel, "by_name", checked_by_name)
    monkeypatch.setattr(KafkaGroupModel, "rebalance_timeout_ms", checked_timeout)
    for scenario in varied_scenarios(150, seed=12):
        simulate(scenario)
    assert checked["order"] > 500
    assert checked["timeout"] > 500


@pytest.mark.parametrize("seed", [0, 7, 7919 * 3 + 15, 2**40 + 1, -3, True])
def test_a_remembered_seed_gives_the_freshly_seeded_generator(seed: int) -> None:
    for _ in range(3):  # the first seeds and remembers, the others restore
        rng = seeded_random(seed)
        fresh = random.Random(seed)
        assert [rng.random() for _ in range(5)] == [fresh.random() for _ in range(5)]
        assert rng.gauss(0.0, 1.0) == fresh.gauss(0.0, 1.0)
        assert rng.gauss(0.0, 1.0) == fresh.gauss(0.0, 1.0)  # the cached second normal too
