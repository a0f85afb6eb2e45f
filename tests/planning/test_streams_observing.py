"""A streams group's describe as status.group and the task metric show it
(planning/streams_observing.py)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel

from rebalancer.planning.rebalances import EventContext, GroupTracking, detect_rebalances
from rebalancer.planning.statuses import observed_conditions, render_group
from rebalancer.planning.streams_observing import (
    group_tasks,
    may_be_a_streams_group,
    render_streams_group,
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
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
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
