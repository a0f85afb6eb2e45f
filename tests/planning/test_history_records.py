"""Join records: the report book notices joins, the planner groups them into start-ups and
fills the rebalance records' joins, time to Stable and settings in force."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.planning.report_samples import member_report

from rebalancer.planning.history_records import (
    BURST_GAP_SECONDS,
    JoinContext,
    JoinTracking,
    enrich_rebalances,
    history_settings,
    rollout_batch,
    settle_rebalances,
    track_joins,
)
from rebalancer.planning.rebalances import EventContext, GroupTracking, detect_rebalances
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.history import RecordType, SettingsInForce
from rebalancer.structs.reports import MemberJoin, MemberReport, ReportBook, ReportEvent
from rebalancer.structs.snapshots import GroupSnapshot, Source

CONTEXT = JoinContext("shop", "orders", "orders", "k:9092")
CONTEXT_EVENTS = EventContext("shop", "orders", "orders", "k:9092")
IDLE = RolloutState()


def report(
    host: str,
    generation: int,
    at: float,
    event: ReportEvent = ReportEvent.ASSIGNED,
    member_id: str | None = None,
    instance_id: str | None = None,
) -> MemberReport:
    return member_report(
        host, generation, at, event,
        member_id=member_id, instance_id=instance_id, received_after=0.01,
    )  # fmt: skip


def joins_of(book: ReportBook) -> list[tuple[str, int, float]]:
    return [(join.identity, join.generation, join.at) for join in book.joins_after(0)]


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        # A cold start: each member's first assignment is its join, heartbeats are not.
        (
            [report("a", 1, 10.0), report("b", 2, 12.5), report("a", 2, 12.6),
             report("a", 2, 15.0, ReportEvent.HEARTBEAT)],
            [("a", 1, 10.0), ("b", 2, 12.5)],
        ),
        # A member first met on a heartbeat was there before the operator: no join.
        ([report("a", 4, 10.0, ReportEvent.HEARTBEAT), report("a", 5, 11.0)], []),
        # A restart under the same pod name: a new member id is a new join.
        (
            [report("a", 1, 10.0), report("a", 1, 20.0, ReportEvent.STOPPED),
             report("a", 3, 30.0, member_id="a-2")],
            [("a", 1, 10.0), ("a", 3, 30.0)],
        ),
        # A crash (no stopped report) followed by a rejoin under a new member id.
        (
            [report("a", 1, 10.0), report("a", 4, 40.0, member_id="a-2")],
            [("a", 1, 10.0), ("a", 4, 40.0)],
        ),
        # No generation yet: not in the group.
        ([report("a", -1, 10.0)], []),
    ],
)  # fmt: skip
def test_the_book_notes_joins(
    reports: list[MemberReport], expected: list[tuple[str, int, float]]
) -> None:
    book = ReportBook()
    for item in reports:
        book.add(item)
    assert joins_of(book) == expected


def test_a_generation_remembers_when_its_first_and_last_member_took_it_up() -> None:
    book = ReportBook()
    for item in [report("a", 2, 10.0), report("b", 2, 10.4), report("a", 2, 12.0)]:
        book.add(item)
    (sighting,) = book.generations_after(1)
    assert (sighting.first_at, sighting.last_at) == (10.0, 10.4)
    assert book.joins_after(1) == book.joins_after(0)[1:]


def join(sequence: int, identity: str, generation: int, at: float) -> MemberJoin:
    return MemberJoin(sequence, identity, f"{identity}-id", generation, at, at)


def track(
    joins: list[MemberJoin],
    tracking: JoinTracking | None = None,
    rollout: RolloutState = IDLE,
    settings: SettingsInForce | None = None,
) -> tuple[list[tuple[str, str | None, float, int | None]], JoinTracking]:
    events, after = track_joins(
        tracking or JoinTracking(),
        joins,
        context=CONTEXT,
        rollout=rollout,
        members=3,
        state="Stable",
        partitions=12,
        settings=settings or SettingsInForce(session_timeout_ms=6000.0),
    )
    assert all(event.record_type is RecordType.MEMBER_JOIN for event in events)
    rows = [
        (str(event.member), event.batch_id, event.join_offsets_ms[0], event.generation)
        for event in events
    ]
    return rows, after


@pytest.mark.parametrize(
    ("joins", "expected"),
    [
        # One start-up: offsets from its first join.
        (
            [join(1, "a", 1, 100.0), join(2, "b", 2, 101.5), join(3, "c", 2, 102.25)],
            [("a", "start-100000", 0.0, 1), ("b", "start-100000", 1500.0, 2),
             ("c", "start-100000", 2250.0, 2)],
        ),
        # A join long after the previous one is another start-up.
        (
            [join(1, "a", 1, 100.0), join(2, "b", 3, 100.0 + BURST_GAP_SECONDS + 1)],
            [("a", "start-100000", 0.0, 1), ("b", "start-131000", 0.0, 3)],
        ),
        # The gap counts from the latest join, not the first: a slow, steady start-up is one.
        (
            [join(1, "a", 1, 100.0), join(2, "b", 2, 120.0), join(3, "c", 3, 140.0)],
            [("a", "start-100000", 0.0, 1), ("b", "start-100000", 20000.0, 2),
             ("c", "start-100000", 40000.0, 3)],
        ),
        # Reports that arrive out of the order the members stamped them (by milliseconds on
        # a busy machine): the offsets count from the earliest stamp all the same.
        (
            [join(1, "a", 1, 100.002), join(2, "b", 1, 100.0), join(3, "c", 1, 100.007)],
            [("b", "start-100000", 0.0, 1), ("a", "start-100000", 2.0, 1),
             ("c", "start-100000", 7.0, 1)],
        ),
    ],
)  # fmt: skip
def test_joins_outside_rollouts_are_grouped_by_start_up(
    joins: list[MemberJoin], expected: list[tuple[str, str | None, float, int | None]]
) -> None:
    rows, _ = track(joins)
    assert rows == expected


def test_a_member_whose_clock_runs_behind_never_gets_a_negative_offset() -> None:
    # Its join, stamped before the start-up's first, reaches a later pass: it is at 0.
    first, tracking = track([join(1, "a", 1, 100.0)])
    later, tracking = track([join(2, "b", 1, 99.9)], tracking)
    assert first == [("a", "start-100000", 0.0, 1)]
    assert later == [("b", "start-100000", 0.0, 1)]
    assert tracking.sequence == 2


def test_recorded_joins_are_not_recorded_again() -> None:
    first, tracking = track([join(1, "a", 1, 100.0), join(2, "b", 2, 101.0)])
    again, tracking = track([join(1, "a", 1, 100.0), join(2, "b", 2, 101.0)], tracking)
    assert len(first) == 2 and again == []
    later, _ = track([join(3, "c", 2, 102.0)], tracking)
    assert later == [("c", "start-100000", 2000.0, 2)]


ROLLING = RolloutState(
    phase=RolloutPhase.BATCH_JOINING,
    rollout_id="r7",
    batch=2,
    sizes=(2, 2, 1),
    opened=("orders-2", "orders-3"),
)


@pytest.mark.parametrize(
    ("rollout", "member", "expected"),
    [
        (ROLLING, "orders-2", ("r7-b2", "r7", 2)),
        (ROLLING, "orders-0", (None, "r7", None)),
        (IDLE, "orders-2", (None, None, None)),
        (replace(ROLLING, phase=RolloutPhase.COMPLETED), "orders-2", (None, None, None)),
    ],
)
def test_a_join_belongs_to_the_batch_that_released_its_pod(
    rollout: RolloutState, member: str, expected: tuple[str | None, str | None, int | None]
) -> None:
    assert rollout_batch(rollout, member) == expected


def test_joins_of_a_stagger_batch_carry_its_ids_and_size() -> None:
    events, _ = track_joins(
        JoinTracking(),
        [join(1, "orders-2", 5, 200.0), join(2, "orders-3", 6, 200.8)],
        context=CONTEXT,
        rollout=ROLLING,
        members=4,
        state="PreparingRebalance",
        partitions=12,
        settings=SettingsInForce(),
    )
    assert [(e.batch_id, e.rollout_id, e.settings.batch_size) for e in events] == [
        ("r7-b2", "r7", 2),
        ("r7-b2", "r7", 2),
    ]
    assert [e.join_offsets_ms for e in events] == [(0.0,), (800.0,)]
    assert {e.record_type for e in events} == {RecordType.MEMBER_JOIN}, "no release time known"


def test_a_released_batch_gives_pod_starts_its_latencies_count_from() -> None:
    rollout = replace(ROLLING, opened_at=198.5)
    events, tracking = track_joins(
        JoinTracking(),
        [join(1, "orders-2", 5, 200.0), join(2, "orders-3", 6, 200.8)],
        context=CONTEXT,
        rollout=rollout,
        members=4,
        state="PreparingRebalance",
        partitions=12,
        settings=SettingsInForce(),
    )
    rows = [(e.record_type.value, e.member, e.detected_at, e.batch_id, e.source) for e in events]
    assert rows == [
        ("pod-start", "orders-2", 198.5, "r7-b2", "operator"),
        ("member-join", "orders-2", 200.0, "r7-b2", "member-reports"),
        ("pod-start", "orders-3", 198.5, "r7-b2", "operator"),
        ("member-join", "orders-3", 200.8, "r7-b2", "member-reports"),
    ]
    # The rebalances these joins caused count their time to Stable from the release.
    assert {join.first_at for join in tracking.recent} == {198.5}


def snapshot(members: set[str], at: float) -> GroupSnapshot:
    return GroupSnapshot(
        state="Stable",
        protocol="classic",
        assignor="cooperative-sticky",
        generation=None,
        members=len(members),
        member_details=(),
        assigned_partitions=12,
        total_partitions=12,
        lag=None,
        observed_at=at,
        sources={"generation": Source.MEMBER_REPORTS, "members": Source.MEMBER_REPORTS},
    )


def test_a_cold_start_gives_rebalances_with_joins_and_time_to_stable() -> None:
    # Three pods: a joins alone (generation 1), b and c a second and a half later (2).
    book = ReportBook()
    for item in [
        report("a", 1, 100.0),
        report("b", 2, 101.5),
        report("c", 2, 101.6),
        report("a", 2, 101.7),
    ]:
        book.add(item)
    sightings = book.generations_after(-1)
    events, _ = detect_rebalances(
        GroupTracking(since=0.0),
        snapshot({"a", "b", "c"}, 110.0),
        sightings,
        EventContext("shop", "orders", "orders", "k:9092"),
    )
    settings = SettingsInForce(session_timeout_ms=6000.0, assignor="cooperative-sticky")
    _, tracking = track(book.joins_after(0), settings=settings)
    enriched = enrich_rebalances(events, sightings, tracking, settings, 12)
    rows = [
        (e.generation, e.joined, e.join_offsets_ms, e.started_at, e.time_to_stable_ms)
        for e in enriched
    ]
    assert rows == [
        (1, ("a",), (0.0,), 100.0, 0.0),
        (2, ("b", "c"), (0.0, 100.0), 100.0, 1700.0),
    ]
    # Only the start-up from an empty group has a known stop-the-world: all 12 partitions
    # waited its time to Stable (0 s here); generation 2 stopped what a's revocations stopped.
    assert [e.stop_the_world_partition_s for e in enriched] == [0.0, None]
    assert all(e.settings == settings and e.partitions == 12 for e in enriched)


def test_rebalances_without_joins_keep_start_and_time_to_stable_unknown() -> None:
    book = ReportBook()
    for item in [report("a", 1, 100.0), report("b", 1, 100.1), report("a", 2, 200.0)]:
        book.add(item)
    sightings = book.generations_after(-1)
    events, _ = detect_rebalances(
        GroupTracking(since=0.0, generation=1, members=frozenset({"a", "b"})),
        snapshot({"a"}, 210.0),
        sightings,
        EventContext("shop", "orders", "orders", "k:9092"),
    )
    _, tracking = track(book.joins_after(0))
    (left,) = enrich_rebalances(events, sightings, tracking, SettingsInForce(), 12)
    assert left.left == ("b",)
    assert (left.started_at, left.time_to_stable_ms, left.join_offsets_ms) == (None, None, ())


@pytest.mark.parametrize(
    ("status", "reports", "rollout", "expected"),
    [
        ({}, [], IDLE, SettingsInForce(assignor="range")),
        (
            {"settings": {"applied": True, "sessionTimeoutMs": 20000, "heartbeatIntervalMs": 3000,
                          "maxPollIntervalMs": 300000, "brokerDelay": {"clusterMs": 0}}},
            [report("a", 1, 1.0, instance_id="a")],
            IDLE,
            SettingsInForce(0.0, 20000.0, 3000.0, 300000.0, "range", True, None),
        ),
        # Settings planned but not in the template yet: the consumers still run the old ones.
        (
            {"settings": {"applied": False, "sessionTimeoutMs": 20000}},
            [report("a", 1, 1.0)],
            ROLLING,
            SettingsInForce(assignor="range", static_membership=False, batch_size=2),
        ),
    ],
)  # fmt: skip
def test_settings_in_force_for_history(
    status: dict[str, object],
    reports: list[MemberReport],
    rollout: RolloutState,
    expected: SettingsInForce,
) -> None:
    assert history_settings(status, reports, "range", rollout) == expected


def test_a_rebalance_record_waits_for_the_members_that_report_late() -> None:
    # The observer wakes on the first report of a cold start and detects the rebalance then;
    # the two other members report generation 0 a moment later.
    book = ReportBook()
    book.add(report("b", 0, 100.0))
    tracking = GroupTracking(since=0.0)
    events, tracking = detect_rebalances(
        tracking, snapshot({"b"}, 100.1), book.generations_after(-1), CONTEXT_EVENTS
    )
    assert [e.joined for e in events] == [("b",)]
    _, joins = track(book.joins_after(0))

    ready, waiting = settle_rebalances(events, book.generations_after(-1), joins, now=100.2)
    assert (ready, waiting) == ([], events)

    book.add(report("a", 0, 100.05))
    book.add(report("c", 0, 100.15))
    _, joins = track(book.joins_after(1), joins)
    ready, waiting = settle_rebalances(waiting, book.generations_after(-1), joins, now=103.5)
    (settled,) = ready
    assert waiting == []
    assert (settled.joined, settled.members) == (("a", "b", "c"), 3)
    (written,) = enrich_rebalances(ready, book.generations_after(-1), joins, SettingsInForce(), 6)
    assert written.join_offsets_ms == (0.0, 50.0, 150.0)
    assert written.started_at == 100.0
    assert written.time_to_stable_ms == 150.0
    assert written.stop_the_world_partition_s == pytest.approx(6 * 0.15)


def test_a_newer_generation_releases_a_waiting_record_at_once() -> None:
    book = ReportBook()
    book.add(report("a", 1, 100.0))
    events, _ = detect_rebalances(
        GroupTracking(since=0.0), snapshot({"a"}, 100.1), book.generations_after(-1), CONTEXT_EVENTS
    )
    book.add(report("a", 2, 100.5))
    ready, waiting = settle_rebalances(events, book.generations_after(-1), JoinTracking(), 100.6)
    assert [e.generation for e in ready] == [1] and waiting == []


STREAMS_STATUS = {
    "settings": {
        "brokerDelay": {"clusterMs": 3000},
        "perGroupConfigs": {
            "state": "applied",
            "configs": {
                "streams.initial.rebalance.delay.ms": {"value": "10000", "source": "group-config"}
            },
        },
    }
}


@pytest.mark.parametrize(
    ("protocol", "status", "delay"),
    [
        # A streams group's start-ups wait its own delay, not the broker's classic one.
        ("streams", STREAMS_STATUS, 10000.0),
        # Without the group config set by the operator its delay is unknown.
        ("streams", {"settings": {"brokerDelay": {"clusterMs": 3000}}}, None),
        # A classic group keeps the broker-delay decision's.
        ("classic", STREAMS_STATUS, 3000.0),
        (None, STREAMS_STATUS, 3000.0),
    ],
)
def test_the_delay_in_force_is_the_streams_groups_own(
    protocol: str | None, status: dict[str, object], delay: float | None
) -> None:
    settings = history_settings(status, [], None, IDLE, protocol=protocol)
    assert settings.initial_rebalance_delay_ms == delay
    assert settings.group_protocol == protocol


def test_a_streams_groups_static_members_are_recorded_from_its_describe() -> None:
    assert history_settings({}, [], None, IDLE, protocol="streams", static=True).static_membership
    # Reports, where there are any, say it.
    reported = history_settings({}, [report("a", 1, 1.0)], None, IDLE, static=True)
    assert reported.static_membership is False
