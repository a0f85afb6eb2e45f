"""Streams groups (KIP-1071, `group.protocol=streams`) as the broker describes them.

A streams group's coordinator assigns tasks, not partitions: a task is a sub-topology and one
partition of its source topics, and a member may hold it active, as a standby (a warm copy of its
state) or as a warm-up (a standby catching up before it takes the task over, KIP-441).
StreamsGroupDescribe reports each member's current assignment and its target; a member whose
two differ is still moving to the group's newest assignment, which is what a rebalance of a
streams group looks like from outside (there is no join barrier).
"""

from __future__ import annotations

from dataclasses import dataclass

STREAMS_GROUP_TYPE = "streams"


@dataclass(frozen=True)
class TaskSet:
    """The tasks of one sub-topology a member holds: one per partition of its sources."""

    subtopology: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class StreamsAssignment:
    active: tuple[TaskSet, ...] = ()
    standby: tuple[TaskSet, ...] = ()
    warmup: tuple[TaskSet, ...] = ()

    def tasks(self, kind: str) -> set[tuple[str, int]]:
        """(sub-topology, partition) of every task of one kind: active, standby or warmup."""
        sets: tuple[TaskSet, ...] = getattr(self, kind)
        return {(task.subtopology, partition) for task in sets for partition in task.partitions}


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int
    instance_id: str | None  # group.instance.id: static membership (streams groups, 4.4+)
    process_id: str  # one Kafka Streams client; its stream threads share it
    client_id: str
    client_host: str
    assignment: StreamsAssignment
    target: StreamsAssignment

    @property
    def reconciling(self) -> bool:
        """Still moving to its target: the group's latest assignment is not in force here."""
        return self.assignment != self.target


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]


@dataclass(frozen=True)
class StreamsGroupView:
    group_id: str
    state: str  # as the broker spells it: Empty, NotReady, Assigning, Reconciling, Stable, Dead
    group_epoch: int
    assignment_epoch: int
    # None until the first member has told the coordinator its topology.
    topology: tuple[Subtopology, ...] | None
    members: tuple[StreamsMember, ...]

    @property
    def settled(self) -> bool:
        """Every member holds its target and the target is of the latest group epoch."""
        return self.assignment_epoch == self.group_epoch and not any(
            member.reconciling for member in self.members
        )

    def active_tasks(self) -> dict[str, set[tuple[str, int]]]:
        """Each member's active tasks now, by member id."""
        return {member.member_id: member.assignment.tasks("active") for member in self.members}


@dataclass(frozen=True)
class ListedGroup:
    """One row of ListGroups v5: a group of any type the broker coordinates."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str  # classic, consumer, streams, share
