"""A streams group (KIP-1071) as status and metrics show it (pure).

librdkafka cannot describe a streams group: it answers for a live one with a Dead classic group
and no members (docs/streams.md). Such a view is the one worth a ListGroups by type; when the
broker lists the group as `streams`, StreamsGroupDescribe (clients/streams_groups.py) is what
the observation is made of instead. A streams group has epochs, not generations, and tasks, not
partitions: the group epoch stands as the generation, and each member's active, standby and
warm-up tasks are counted (a task is one partition of one sub-topology's sources, so their
count is not the partitions').
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalancer.structs.brokers import BrokerGroupView, GroupProtocol, GroupState
from rebalancer.structs.reports import MemberJoin
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.streams_groups import StreamsAssignment, StreamsGroupView, StreamsMember

STREAMS_PROTOCOL = "streams"
# What Kafka Streams appends to group.instance.id for each stream thread's member.
_THREAD_SUFFIX = re.compile(r"-[0-9]+$")
# Member ids remembered for the joins they were (a streams group of a few hundred threads).
REMEMBERED_MEMBER_IDS = 4096
# The kinds of task a member holds, as structs.streams_groups.StreamsAssignment names them.
TASK_KINDS = ("active", "standby", "warmup")
MAX_MEMBER_DETAILS = 50


def may_be_a_streams_group(view: BrokerGroupView) -> bool:
    """Whether librdkafka's view could be a streams group it cannot see: Dead with no members.
    Anything else it described is a classic or KIP-848 group, not worth a ListGroups."""
    return (
        view.state is GroupState.DEAD
        and not view.members
        and view.protocol is not GroupProtocol.CONSUMER
    )


@dataclass(frozen=True)
class TaskCounts:
    active: int = 0
    standby: int = 0
    warmup: int = 0

    @classmethod
    def of(cls, assignment: StreamsAssignment) -> TaskCounts:
        return cls(*(len(assignment.tasks(kind)) for kind in TASK_KINDS))

    def __add__(self, other: TaskCounts) -> TaskCounts:
        return TaskCounts(
            self.active + other.active,
            self.standby + other.standby,
            self.warmup + other.warmup,
        )

    def by_kind(self) -> dict[str, int]:
        return {"active": self.active, "standby": self.standby, "warmup": self.warmup}


def group_tasks(view: StreamsGroupView) -> TaskCounts:
    """The tasks the members hold now, by kind, summed over the members."""
    total = TaskCounts()
    for member in view.members:
        total = total + TaskCounts.of(member.assignment)
    return total


def _host(member: StreamsMember) -> str:
    # The coordinator names the client's address as "/10.0.0.7".
    return member.client_host.lstrip("/") or member.client_id


def streams_snapshot(view: StreamsGroupView, total_partitions: int, now: float) -> GroupSnapshot:
    """The observation a streams group's describe makes: every figure from the broker."""
    members = tuple(
        MemberSummary(
            host=_host(member),
            member_id=member.member_id,
            instance_id=member.instance_id,
            generation=member.member_epoch,
            # Active tasks stand for the partitions a classic member owns.
            partitions=TaskCounts.of(member.assignment).active,
            source=Source.BROKER,
            target_partitions=TaskCounts.of(member.target).active,
        )
        for member in view.members
    )
    return GroupSnapshot(
        state=GroupState.named(view.state),
        protocol=STREAMS_PROTOCOL,
        assignor=None,
        generation=view.group_epoch,
        members=len(view.members),
        member_details=members,
        # Tasks are not partitions: the partition figures stay unknown rather than wrong.
        assigned_partitions=None,
        total_partitions=total_partitions,
        lag=None,
        observed_at=now,
        sources={key: Source.BROKER for key in ("state", "members", "generation")},
        members_reconciling=sum(1 for member in view.members if member.reconciling),
    )


def _member_fields(member: StreamsMember) -> dict[str, object]:
    held, target = TaskCounts.of(member.assignment), TaskCounts.of(member.target)
    fields: dict[str, object | None] = {
        "host": _host(member),
        "memberId": member.member_id,
        "instanceId": member.instance_id,
        "processId": member.process_id or None,
        "generation": member.member_epoch,
        "activeTasks": held.active,
        "standbyTasks": held.standby,
        "warmupTasks": held.warmup,
        "targetActiveTasks": target.active,
        "source": Source.BROKER.value,
    }
    return {key: value for key, value in fields.items() if value is not None}


def streams_group_fields(view: StreamsGroupView) -> dict[str, object]:
    """What status.group says of a streams group beyond a classic group's figures: its
    assignment epoch, its tasks by kind, and each member's tasks (replacing memberDetails)."""
    tasks = group_tasks(view)
    return {
        "assignmentEpoch": view.assignment_epoch,
        "activeTasks": tasks.active,
        "standbyTasks": tasks.standby,
        "warmupTasks": tasks.warmup,
        "memberDetails": [_member_fields(member) for member in view.members[:MAX_MEMBER_DETAILS]],
    }


def render_streams_group(group: Mapping[str, object], view: StreamsGroupView) -> dict[str, object]:
    """status.group as render_group wrote it from streams_snapshot, with the streams fields.
    A streams group has no partition counts: targetPartitions and partitions go."""
    rendered = {key: value for key, value in group.items() if key != "memberDetails"}
    rendered.update(streams_group_fields(view))
    return rendered


@dataclass(frozen=True)
class StreamsMemberWatch:
    """The member ids of a streams group the observer has seen, so a new one is a join."""

    member_ids: frozenset[str] = frozenset()
    # Whether this process has looked at the group before: members it finds at its first look
    # were in the group already (the operator started after them), not joining now.
    looked: bool = False
    # The order member ids were first seen in, to forget the oldest first.
    order: tuple[str, ...] = field(default=())


def member_identity(member: StreamsMember) -> str:
    """The member as history names it: the application's group.instance.id (a static member's,
    the pod's name where the application sets it so), else its host, as a member report's
    identity is. Kafka Streams gives each stream thread the instance id
    `<group.instance.id>-<thread index>`, so the thread's suffix is dropped: the join is the
    application instance's, the one its pod's start pairs with."""
    if member.instance_id:
        return _THREAD_SUFFIX.sub("", member.instance_id)
    return _host(member)


def streams_static(view: StreamsGroupView) -> bool | None:
    """Whether the members are static (have instance ids); None with no member to say."""
    return any(member.instance_id for member in view.members) if view.members else None


def streams_joins(
    watch: StreamsMemberWatch, view: StreamsGroupView | None, now: float, sequence: int
) -> tuple[list[MemberJoin], StreamsMemberWatch]:
    """A join per member the describe shows under a member id not seen before, numbered after
    `sequence` (the join records written so far), and the watch to keep.

    A streams application sends no member reports, so its joins are the describe's: a member
    is in the describe from its first heartbeat, before the coordinator assigns it anything
    (the group's initial delay holds that first assignment), which is the moment a classic
    member's JoinGroup stands for; `at` is this look, so a join is known to within the
    observer's cadence. `view` None (no streams group at this look) only marks the look.
    """
    if view is None:
        return [], StreamsMemberWatch(watch.member_ids, looked=True, order=watch.order)
    new = [member for member in view.members if member.member_id not in watch.member_ids]
    # One join per application instance: its stream threads join together.
    fresh = list({member_identity(member): member for member in reversed(new)}.values())[::-1]
    joins = [
        MemberJoin(
            sequence=sequence + index,
            identity=member_identity(member),
            member_id=member.member_id,
            generation=view.group_epoch,
            at=now,
            received_at=now,
        )
        for index, member in enumerate(fresh, start=1)
    ]
    order = (*watch.order, *(member.member_id for member in new))[-REMEMBERED_MEMBER_IDS:]
    kept = StreamsMemberWatch(frozenset(order), looked=True, order=order)
    return (joins if watch.looked else []), kept
