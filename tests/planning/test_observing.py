"""Merging broker views and member reports, and detecting rebalances from them."""

from __future__ import annotations

from rebalancer.planning.observing import (
    combine_observation,
    coordinator_from_status,
    coordinator_move_message,
    coordinator_moved,
)
from rebalancer.planning.rebalances import EventContext, GroupTracking, detect_rebalances
from rebalancer.planning.statuses import observed_conditions, render_group
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.history import RebalanceCause
from rebalancer.structs.reports import MemberReport, ReportBook, ReportEvent
from rebalancer.structs.snapshots import Source

CONTEXT = EventContext("default", "orders", "orders", "k:9092")


def member_report(
    host: str,
    generation: int,
    partitions: list[int],
    at: float,
    event: ReportEvent = ReportEvent.ASSIGNED,
) -> MemberReport:
    return MemberReport(
        group_id="orders",
        host=host,
        client_id=host,
        member_id=f"{host}-id",
        instance_id=None,
        event=event,
        generation=generation,
        protocol="classic",
        assignment_strategy="cooperative-sticky",
        partitions=tuple(TopicPartition("orders", p) for p in partitions),
        lag=3,
        timestamp=at,
        received_at=at,
    )


def view(
    state: GroupState,
    members: tuple[BrokerMember, ...] = (),
    known: bool = False,
    coordinator: int | None = 1,
) -> BrokerGroupView:
    return BrokerGroupView(
        "orders", state, GroupProtocol.CLASSIC, None, members, coordinator, known
    )


def test_reports_fill_in_what_the_broker_does_not_say() -> None:
    reports = [member_report("a", 2, [0, 1], 1.0), member_report("b", 2, [2, 3], 1.0)]
    snapshot = combine_observation(view(GroupState.STABLE), reports, 4, now=2.0)
    assert snapshot.state == "Stable"
    assert snapshot.members == 2
    assert snapshot.generation == 2
    assert snapshot.assigned_partitions == 4
    assert snapshot.lag == 6
    assert snapshot.sources["state"] is Source.BROKER
    assert snapshot.sources["members"] is Source.MEMBER_REPORTS
    assert snapshot.settled


def test_broker_members_win_when_the_broker_lists_them() -> None:
    members = (BrokerMember("m1", "c1", "a", None, (TopicPartition("orders", 0),)),)
    snapshot = combine_observation(view(GroupState.STABLE, members, True), [], 2, now=1.0)
    assert snapshot.members == 1
    assert snapshot.sources["members"] is Source.BROKER
    assert snapshot.assigned_partitions == 1
    assert not snapshot.settled  # one of two partitions unowned
    ready = observed_conditions(snapshot)[0]
    assert ready.status.value == "False" and ready.reason == "PartitionsUnassigned"


def test_without_broker_state_reports_decide_it() -> None:
    reports = [member_report("a", 2, [0], 1.0), member_report("b", 3, [1], 1.0)]
    snapshot = combine_observation(None, reports, 2, now=2.0)
    assert snapshot.state == "PreparingRebalance"
    assert snapshot.sources["state"] is Source.MEMBER_REPORTS
    empty = combine_observation(None, [], 2, now=2.0)
    assert empty.state == "Unknown" and empty.sources["members"] is Source.NONE


def test_each_reported_generation_is_one_rebalance_even_between_polls() -> None:
    book = ReportBook()
    tracking = GroupTracking(since=0.0)
    for generation, hosts in ((1, ["a"]), (2, ["a", "b"]), (3, ["a", "b", "c"])):
        for host in hosts:
            book.add(member_report(host, generation, [0], at=float(generation)))
    reports = book.live_members(now=5.0, ttl=60.0)
    snapshot = combine_observation(view(GroupState.STABLE), reports, 1, now=5.0)
    events, tracking = detect_rebalances(tracking, snapshot, book.generations_after(-1), CONTEXT)
    assert [event.generation for event in events] == [1, 2, 3]
    assert tracking.rebalances == 3 and tracking.generation == 3
    assert events[-1].cause is RebalanceCause.MEMBER_JOINED
    assert [event.joined for event in events] == [("a",), ("b",), ("c",)]
    assert events[0].detected_at == 1.0
    again, tracking = detect_rebalances(tracking, snapshot, book.generations_after(2), CONTEXT)
    assert again == [] and tracking.rebalances == 3


def test_generations_from_before_tracking_began_are_not_counted() -> None:
    book = ReportBook()
    book.add(member_report("a", 7, [0], at=1.0))
    snapshot = combine_observation(view(GroupState.STABLE), book.live_members(2.0, 60), 1, 2.0)
    events, tracking = detect_rebalances(
        GroupTracking(since=1.5), snapshot, book.generations_after(-1), CONTEXT
    )
    assert events == []
    assert tracking.generation == 7


def test_member_leaving_is_the_cause() -> None:
    book = ReportBook()
    for host in ("a", "b"):
        book.add(member_report(host, 1, [0], at=1.0))
    first = combine_observation(view(GroupState.STABLE), book.live_members(1.0, 60), 1, 1.0)
    _, tracking = detect_rebalances(GroupTracking(0.0), first, book.generations_after(-1), CONTEXT)
    book.add(member_report("b", 1, [], at=2.0, event=ReportEvent.STOPPED))
    book.add(member_report("a", 2, [0], at=3.0))
    second = combine_observation(view(GroupState.STABLE), book.live_members(3.0, 60), 1, 3.0)
    events, tracking = detect_rebalances(tracking, second, book.generations_after(1), CONTEXT)
    assert [(e.generation, e.cause, e.left) for e in events] == [
        (2, RebalanceCause.MEMBER_LEFT, ("b",))
    ]


def test_without_reports_broker_state_transitions_count() -> None:
    tracking = GroupTracking(since=0.0)
    stable = combine_observation(view(GroupState.STABLE), [], 1, 1.0)
    events, tracking = detect_rebalances(tracking, stable, [], CONTEXT)
    assert events == []  # first look is a baseline, not a rebalance
    moving = combine_observation(view(GroupState.PREPARING_REBALANCE), [], 1, 2.0)
    events, tracking = detect_rebalances(tracking, moving, [], CONTEXT)
    assert events == [] and tracking.pending  # held back: members may still report it
    still = combine_observation(view(GroupState.COMPLETING_REBALANCE), [], 1, 3.0)
    events, tracking = detect_rebalances(tracking, still, [], CONTEXT)
    assert events == []  # the same rebalance, not a new one
    over = combine_observation(view(GroupState.STABLE), [], 1, 9.0)
    events, tracking = detect_rebalances(tracking, over, [], CONTEXT)
    assert [(e.cause, e.source, e.generation, e.detected_at) for e in events] == [
        (RebalanceCause.STATE_CHANGE, "broker", None, 2.0)
    ]
    assert tracking.rebalances == 1 and not tracking.pending


def test_a_rebalance_seen_on_the_broker_first_is_counted_once_when_members_report_it() -> None:
    # Apache Kafka shows a forming group as PreparingRebalance before anyone can report.
    tracking = GroupTracking(since=0.0)
    empty = combine_observation(view(GroupState.EMPTY, (), True), [], 2, 1.0)
    _, tracking = detect_rebalances(tracking, empty, [], CONTEXT)
    forming = combine_observation(view(GroupState.PREPARING_REBALANCE), [], 2, 2.0)
    events, tracking = detect_rebalances(tracking, forming, [], CONTEXT)
    assert events == []
    book = ReportBook()
    for index, host in enumerate(("a", "b")):
        book.add(member_report(host, 1, [index], at=5.0))
    reports = book.live_members(now=5.5, ttl=60.0)
    formed = combine_observation(view(GroupState.STABLE), reports, 2, 5.5)
    events, tracking = detect_rebalances(tracking, formed, book.generations_after(-1), CONTEXT)
    assert [(e.generation, e.source) for e in events] == [(1, "member-reports")]
    later = combine_observation(view(GroupState.STABLE), reports, 2, 20.0)
    events, tracking = detect_rebalances(tracking, later, book.generations_after(1), CONTEXT)
    assert events == [] and tracking.rebalances == 1


def test_render_group_names_sources_and_counts() -> None:
    reports = [member_report("a", 2, [0, 1], 1.0)]
    snapshot = combine_observation(view(GroupState.STABLE), reports, 2, now=1.0)
    tracking = GroupTracking(
        since=0.0, generation=2, rebalances=4, last_rebalance_at=1.0, last_cause="member-joined"
    )
    group = render_group(snapshot, tracking, "redpanda")
    assert group["rebalances"] == 4
    assert group["generation"] == 2
    assert group["brokerProfile"] == "redpanda"
    assert group["sources"] == {
        "assignment": "member-reports",
        "generation": "member-reports",
        "lag": "member-reports",
        "members": "member-reports",
        "state": "broker",
    }
    assert group["lastRebalanceTime"] == "1970-01-01T00:00:01Z"


def test_member_gone_before_its_rebalance_is_reported_is_still_the_cause() -> None:
    book = ReportBook()
    for host in ("a", "b"):
        book.add(member_report(host, 1, [0], at=1.0))
    first = combine_observation(view(GroupState.STABLE), book.live_members(1.0, 60), 1, 1.0)
    _, tracking = detect_rebalances(GroupTracking(0.0), first, book.generations_after(-1), CONTEXT)
    book.add(member_report("b", 1, [], at=2.0, event=ReportEvent.STOPPED))
    between = combine_observation(view(GroupState.STABLE), book.live_members(2.0, 60), 1, 2.0)
    events, tracking = detect_rebalances(tracking, between, book.generations_after(1), CONTEXT)
    assert events == []
    book.add(member_report("a", 2, [0], at=3.0))
    after = combine_observation(view(GroupState.STABLE), book.live_members(3.0, 60), 1, 3.0)
    events, tracking = detect_rebalances(tracking, after, book.generations_after(1), CONTEXT)
    assert [(e.cause, e.left) for e in events] == [(RebalanceCause.MEMBER_LEFT, ("b",))]


def test_a_generation_is_reported_once_all_members_have_reported_it() -> None:
    book = ReportBook()
    for host in ("a", "b", "c"):
        book.add(member_report(host, 1, [0], at=1.0))
    first = combine_observation(view(GroupState.STABLE), book.live_members(1.0, 60), 1, 1.0)
    _, tracking = detect_rebalances(GroupTracking(0.0), first, book.generations_after(-1), CONTEXT)
    book.add(member_report("a", 2, [0], at=5.0))
    early = combine_observation(view(GroupState.STABLE), book.live_members(5.5, 60), 1, 5.5)
    events, tracking = detect_rebalances(tracking, early, book.generations_after(0), CONTEXT)
    assert events == [] and tracking.pending
    for host in ("b", "c"):
        book.add(member_report(host, 2, [0], at=5.6))
    done = combine_observation(view(GroupState.STABLE), book.live_members(5.7, 60), 1, 5.7)
    events, tracking = detect_rebalances(tracking, done, book.generations_after(0), CONTEXT)
    assert [(e.generation, e.members, e.cause, e.joined, e.left) for e in events] == [
        (2, 3, RebalanceCause.REJOIN, (), ())
    ]
    assert not tracking.pending


def test_a_member_that_never_reports_does_not_hold_a_generation_forever() -> None:
    book = ReportBook()
    for host in ("a", "b"):
        book.add(member_report(host, 1, [0], at=1.0))
    first = combine_observation(view(GroupState.STABLE), book.live_members(1.0, 60), 1, 1.0)
    _, tracking = detect_rebalances(GroupTracking(0.0), first, book.generations_after(-1), CONTEXT)
    book.add(member_report("a", 2, [0], at=5.0))
    later = combine_observation(view(GroupState.STABLE), book.live_members(9.0, 60), 1, 9.0)
    events, tracking = detect_rebalances(tracking, later, book.generations_after(0), CONTEXT)
    assert [(e.generation, e.left) for e in events] == [(2, ("b",))]


def test_broker_listed_members_are_named_by_their_reports_and_never_blamed_for_leaving() -> None:
    # Apache Kafka lists members by their client's address, which pods behind one address share;
    # their reports carry the same member id and the pod's name.
    members = tuple(
        BrokerMember(f"{pod}-id", pod, "10.0.0.9", None, (TopicPartition("orders", index),))
        for index, pod in enumerate(("pod-0", "pod-1"))
    )
    listed = combine_observation(view(GroupState.STABLE, members, True), [], 2, now=1.0)
    _, tracking = detect_rebalances(GroupTracking(0.0), listed, [], CONTEXT)
    assert tracking.generation is None and tracking.members  # the broker's view, by address
    book = ReportBook()
    for index, pod in enumerate(("pod-0", "pod-1")):
        book.add(member_report(pod, 1, [index], at=2.0))
    reports = book.live_members(now=3.0, ttl=60.0)
    snapshot = combine_observation(view(GroupState.STABLE, members, True), reports, 2, now=3.0)
    assert [m.host for m in snapshot.member_details] == ["pod-0", "pod-1"]
    events, tracking = detect_rebalances(tracking, snapshot, book.generations_after(-1), CONTEXT)
    assert [(e.generation, e.joined, e.left) for e in events] == [(1, ("pod-0", "pod-1"), ())]


def test_status_names_the_coordinator_the_broker_named() -> None:
    tracking = GroupTracking(since=0.0)
    snapshot = combine_observation(view(GroupState.STABLE, coordinator=3), [], 2, now=1.0)
    assert snapshot.coordinator == 3
    assert render_group(snapshot, tracking, None)["coordinator"] == 3
    # Node ids start at 0 on many clusters: 0 is a coordinator, not "unknown".
    first = combine_observation(view(GroupState.STABLE, coordinator=0), [], 2, now=1.0)
    assert render_group(first, tracking, None)["coordinator"] == 0
    # A broker that did not say, or no answer at all: no coordinator in status, none guessed.
    unsaid = combine_observation(view(GroupState.STABLE, coordinator=None), [], 2, now=1.0)
    assert "coordinator" not in render_group(unsaid, tracking, None)
    assert combine_observation(None, [], 2, now=1.0).coordinator is None


def test_a_coordinator_move_is_another_known_node_than_the_last_one_seen() -> None:
    assert coordinator_moved(3, 2)
    assert coordinator_moved(0, 1)
    assert not coordinator_moved(2, 2)
    # The first look, and a look at which the broker did not name one, are no move: a
    # restarted operator or a failed describe would otherwise report moves that never were.
    assert not coordinator_moved(None, 2)
    assert not coordinator_moved(3, None)


def test_the_move_message_names_both_nodes_and_the_brokers_left() -> None:
    assert coordinator_move_message(3, 2, 2) == (
        "group coordinator moved from node 3 to node 2; 2 brokers in the cluster"
    )
    assert coordinator_move_message(1, 0, 1).endswith("; 1 broker in the cluster")
    # The cluster could not be described: the move alone, no count made up.
    assert coordinator_move_message(3, 2, None) == "group coordinator moved from node 3 to node 2"


def test_a_restarted_observer_resumes_from_the_coordinator_in_status() -> None:
    assert coordinator_from_status({"group": {"coordinator": 2, "state": "Stable"}}) == 2
    assert coordinator_from_status({"group": {"coordinator": 0}}) == 0
    # Nothing there, or something that is no node id (status edited by hand): not known.
    assert coordinator_from_status({}) is None
    assert coordinator_from_status({"group": None}) is None
    assert coordinator_from_status({"group": {"coordinator": "2"}}) is None
    assert coordinator_from_status({"group": {"coordinator": True}}) is None


def test_a_kip_848_group_counts_the_members_still_reconciling_to_their_target() -> None:
    t = TopicPartition
    moving = BrokerMember("m1", "a", "a", None, (t("orders", 0), t("orders", 1)), (t("orders", 0),))
    settled = BrokerMember(
        "m2", "b", "b", None, (t("orders", 2),), (t("orders", 1), t("orders", 2))
    )
    done = BrokerMember("m3", "c", "c", None, (t("orders", 3),), (t("orders", 3),))
    described = BrokerGroupView(
        "orders", GroupState.RECONCILING, GroupProtocol.CONSUMER, "uniform",
        (moving, settled, done), 1, True,
    )  # fmt: skip
    snapshot = combine_observation(described, [], 4, now=10.0)
    assert snapshot.members_reconciling == 2
    group = render_group(snapshot, GroupTracking(since=0.0), None)
    assert group["protocol"] == "consumer" and group["membersReconciling"] == 2
    assert [m["targetPartitions"] for m in group["memberDetails"]] == [1, 2, 1]
    ready, progressing, _ = observed_conditions(snapshot)
    assert ready.reason == "Rebalancing" and progressing.status.value == "True"


def test_a_classic_group_says_nothing_of_reconciling() -> None:
    member = BrokerMember("m1", "a", "a", None, (TopicPartition("orders", 0),))
    snapshot = combine_observation(view(GroupState.STABLE, (member,), True), [], 1, now=1.0)
    assert snapshot.members_reconciling is None
    group = render_group(snapshot, GroupTracking(since=0.0), None)
    assert "membersReconciling" not in group
    assert "targetPartitions" not in group["memberDetails"][0]
