"""A streams group's describe as status.group and the task metric show it
(planning/streams_observing.py)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel

from rebalancer.planning.history_records import JoinContext, JoinTracking, track_joins
from rebalancer.planning.rebalances import EventContext, GroupTracking, detect_rebalances
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.planning.statuses import observed_conditions, render_group
from rebalancer.planning.streams_observing import (
    StreamsMemberWatch,
    group_tasks,
    may_be_a_streams_group,
    render_streams_group,
    streams_joins,
    streams_snapshot,
)
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.consumer_group_status import MemberDetailStatus, ObservedGroupStatus
from rebalancer.structs.history import RebalanceCause, RebalanceEvent, SettingsInForce
from rebalancer.structs.streams_groups import (
    StreamsAssignment,
    StreamsGroupView,
    StreamsMember,
    TaskSet,
)


def member(
    name: str,
    active: tuple[int, ...],
    standby: tuple[int, ...] = (),
    warmup: tuple[int, ...] = (),
    target: tuple[int, ...] | None = None,
    epoch: int = 7,
) -> StreamsMember:
    held = StreamsAssignment(
        active=(TaskSet("0", active),),
        standby=(TaskSet("0", standby),) if standby else (),
        warmup=(TaskSet("0", warmup),) if warmup else (),
    )
    goal = held if target is None else StreamsAssignment(active=(TaskSet("0", target),))
    return StreamsMember(
        member_id=f"{name}-id",
        member_epoch=epoch,
        # Kafka Streams: the application's group.instance.id and the stream thread's index.
        instance_id=name,
        process_id=f"{name}-process",
        client_id=f"{name}-StreamThread-1-consumer",
        client_host=f"/10.0.0.{len(name)}",
        assignment=held,
        target=goal,
    )


def group(state: str, *members: StreamsMember, epoch: int = 7) -> StreamsGroupView:
    return StreamsGroupView("uppercase", state, epoch, epoch, None, members)


def aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_the_group_epoch_is_the_generation_and_every_figure_is_the_brokers() -> None:
    view = group("Stable", member("a", (0, 1), standby=(2,)), member("b", (2, 3), warmup=(0,)))
    snapshot = streams_snapshot(view, total_partitions=4, now=10.0)
    assert (snapshot.state, snapshot.protocol, snapshot.generation) == (
        GroupState.STABLE,
        "streams",
        7,
    )
    assert snapshot.members == 2 and snapshot.members_reconciling == 0
    assert snapshot.assigned_partitions is None  # tasks are not partitions
    assert {source.value for source in snapshot.sources.values()} == {"broker"}
    assert snapshot.member_keys == {"a", "b"}
    assert observed_conditions(snapshot)[0].reason == "GroupStable"


def test_status_counts_each_members_tasks_by_kind() -> None:
    view = group("Stable", member("a", (0, 1), standby=(2,)), member("b", (2, 3), warmup=(0,)))
    snapshot = streams_snapshot(view, 4, 10.0)
    rendered = render_streams_group(render_group(snapshot, GroupTracking(0.0), None), view)
    assert (rendered["state"], rendered["members"], rendered["generation"]) == ("Stable", 2, 7)
    assert (rendered["protocol"], rendered["assignmentEpoch"]) == ("streams", 7)
    assert (rendered["activeTasks"], rendered["standbyTasks"], rendered["warmupTasks"]) == (4, 1, 1)
    details = rendered["memberDetails"]
    assert isinstance(details, list)
    assert [
        (d["instanceId"], d["activeTasks"], d["standbyTasks"], d["warmupTasks"]) for d in details
    ] == [("a", 2, 1, 0), ("b", 2, 0, 1)]
    assert details[0]["host"] == "10.0.0.1" and details[0]["processId"] == "a-process"
    # Every field is one the CRD's status schema declares (the API server prunes the others).
    assert set(rendered) <= aliases(ObservedGroupStatus)
    assert all(set(detail) <= aliases(MemberDetailStatus) for detail in details)
    assert "partitions" not in details[0]


def test_a_member_moving_to_its_target_is_reconciling() -> None:
    view = group(
        "Reconciling", member("a", (0, 1, 2, 3), target=(0, 1)), member("b", (), target=(2, 3))
    )
    snapshot = streams_snapshot(view, 4, 10.0)
    assert snapshot.state is GroupState.RECONCILING and snapshot.members_reconciling == 2
    rendered = render_streams_group(render_group(snapshot, GroupTracking(0.0), None), view)
    details = rendered["memberDetails"]
    assert isinstance(details, list)
    assert [(d["activeTasks"], d["targetActiveTasks"]) for d in details] == [(4, 2), (0, 2)]


def test_a_streams_state_classic_groups_lack_is_kept() -> None:
    snapshot = streams_snapshot(group("NotReady", member("a", ())), 4, 10.0)
    assert snapshot.state is GroupState.NOT_READY
    assert not snapshot.settled


def test_the_task_metric_sums_the_members() -> None:
    view = group("Stable", member("a", (0,), standby=(1, 2)), member("b", (1, 2), warmup=(0,)))
    assert group_tasks(view).by_kind() == {"active": 3, "standby": 2, "warmup": 1}
    assert group_tasks(group("Empty")).by_kind() == {"active": 0, "standby": 0, "warmup": 0}


def test_only_a_dead_memberless_view_is_asked_about_as_a_streams_group() -> None:
    def view(state: GroupState, protocol: GroupProtocol, members: int) -> BrokerGroupView:
        listed = tuple(
            BrokerMember(f"m{i}", "c", "h", None, (TopicPartition("t", i),)) for i in range(members)
        )
        return BrokerGroupView("uppercase", state, protocol, None, listed, 1, bool(members))

    assert may_be_a_streams_group(view(GroupState.DEAD, GroupProtocol.CLASSIC, 0))
    assert may_be_a_streams_group(view(GroupState.DEAD, GroupProtocol.UNKNOWN, 0))
    assert not may_be_a_streams_group(view(GroupState.STABLE, GroupProtocol.CLASSIC, 2))
    assert not may_be_a_streams_group(view(GroupState.EMPTY, GroupProtocol.CLASSIC, 0))
    assert not may_be_a_streams_group(view(GroupState.DEAD, GroupProtocol.CONSUMER, 0))


CONTEXT = EventContext("apps", "counts", "counts", "k:9092")


def looks(*views: StreamsGroupView) -> tuple[list[RebalanceEvent], GroupTracking]:
    """The rebalances counted from these looks at the group, ten seconds apart (what the broker
    shows for longer than the settle time is counted, however it was seen)."""
    tracking = GroupTracking(since=0.0)
    events: list[RebalanceEvent] = []
    for at, view in enumerate(views, start=1):
        found, tracking = detect_rebalances(
            tracking, streams_snapshot(view, 6, 10.0 * at), [], CONTEXT
        )
        events.extend(found)
    return events, tracking


def test_a_static_member_back_under_a_new_member_id_is_no_rebalance() -> None:
    # Measured on Kafka 4.4 (docs/streams.md): a replaced pod's member rejoins under its
    # instance id with a new member id and reconciles to its old tasks; the epoch stays.
    a, b = member("a", (0, 1, 2), epoch=5), member("b", (3, 4, 5), epoch=5)
    back = replace(b, member_id="b-new-id", member_epoch=0, assignment=StreamsAssignment())
    events, tracking = looks(
        group("Stable", a, b, epoch=5),
        group("Reconciling", a, back, epoch=5),
        group("Stable", a, replace(back, member_epoch=5, assignment=b.assignment), epoch=5),
    )
    assert events == []
    assert (tracking.rebalances, tracking.generation) == (0, 5)


def test_a_rising_group_epoch_is_a_rebalance_named_by_its_epochs() -> None:
    alone = member("a", (0, 1, 2, 3, 4, 5), epoch=5)
    moving = replace(
        alone, member_epoch=6, target=StreamsAssignment(active=(TaskSet("0", (0, 1, 2)),))
    )
    joining = member("b", (), target=(3, 4, 5), epoch=6)
    events, tracking = looks(
        group("Stable", alone, epoch=5),
        group("Reconciling", moving, joining, epoch=6),
        group("Stable", member("a", (0, 1, 2), epoch=6), member("b", (3, 4, 5), epoch=6), epoch=6),
    )
    assert [(e.generation, e.previous_generation, e.cause, e.joined) for e in events] == [
        (6, 5, RebalanceCause.MEMBER_JOINED, ("b",))
    ]
    assert tracking.rebalances == 1


def thread(name: str, active: tuple[int, ...]) -> StreamsMember:
    """An application instance's first stream thread: Kafka Streams names its member
    `<group.instance.id>-<thread index>`."""
    return replace(member(name, active), instance_id=f"{name}-1")


def described(*members: StreamsMember, epoch: int = 7) -> StreamsGroupView:
    return StreamsGroupView("counts", "Stable", epoch, epoch, None, members)


def test_a_new_member_id_in_the_describe_is_a_join() -> None:
    first_look, watch = streams_joins(StreamsMemberWatch(), None, 100.0, 0)
    assert first_look == [] and watch.looked
    joins, watch = streams_joins(watch, described(thread("counts-0", (0,)), epoch=1), 104.0, 0)
    assert [(j.sequence, j.identity, j.member_id, j.generation, j.at) for j in joins] == [
        (1, "counts-0", "counts-0-id", 1, 104.0)
    ]
    both = described(thread("counts-0", (0,)), thread("counts-1", (1,)), epoch=2)
    joins, watch = streams_joins(watch, both, 105.0, 1)
    assert [(j.sequence, j.identity, j.generation) for j in joins] == [(2, "counts-1", 2)]
    # The same members at a later look: nobody joined.
    assert streams_joins(watch, both, 110.0, 2)[0] == []
    # A restarted instance comes back under a new member id: a join.
    restarted = replace(thread("counts-1", (1,)), member_id="counts-1-id-2")
    joins, _ = streams_joins(watch, described(thread("counts-0", (0,)), restarted), 120.0, 2)
    assert [(j.identity, j.member_id) for j in joins] == [("counts-1", "counts-1-id-2")]


def test_an_instance_s_stream_threads_are_one_join_named_after_its_instance() -> None:
    watch = StreamsMemberWatch(looked=True)
    threads = [
        replace(thread("counts-0", (0,)), member_id=f"t{n}", instance_id=f"counts-0-{n}")
        for n in (1, 2)
    ]
    joins, watch = streams_joins(watch, described(*threads, thread("counts-1", (1,))), 5.0, 0)
    assert [(j.identity, j.member_id) for j in joins] == [
        ("counts-0", "t1"),
        ("counts-1", "counts-1-id"),
    ]
    # Both threads are remembered: neither is a join at the next look.
    assert streams_joins(watch, described(*threads), 6.0, 2)[0] == []


def test_members_found_at_the_first_look_were_there_before_the_operator() -> None:
    joins, watch = streams_joins(StreamsMemberWatch(), described(thread("a", (0,))), 1.0, 0)
    assert joins == [] and watch.member_ids == {"a-id"}
    # A dynamic member (no instance id) is named by its host, as a member report would be.
    dynamic = replace(thread("bb", (1,)), instance_id=None)
    joins, _ = streams_joins(watch, described(thread("a", (0,)), dynamic), 2.0, 0)
    assert [join.identity for join in joins] == ["10.0.0.2"]


def test_a_streams_joins_records_carry_its_protocol_and_burst() -> None:
    watch = StreamsMemberWatch(looked=True)
    joins, _ = streams_joins(watch, described(thread("a", (0,)), thread("b", (1,))), 50.0, 0)
    events, _ = track_joins(
        JoinTracking(),
        joins,
        context=JoinContext("shop", "counts", "counts", "k:9092"),
        rollout=RolloutState(),
        members=2,
        state="Stable",
        partitions=4,
        settings=SettingsInForce(initial_rebalance_delay_ms=10000.0, group_protocol="streams"),
    )
    records = [event.to_record() for event in events]
    assert [(r["record_type"], r["member"], r["batch_id"]) for r in records] == [
        ("member-join", "a", "start-50000"),
        ("member-join", "b", "start-50000"),
    ]
    assert {(r["group_protocol"], r["initial_rebalance_delay_ms"]) for r in records} == {
        ("streams", 10000.0)
    }
