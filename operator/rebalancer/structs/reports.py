"""Member reports: what consumers say about their own rebalances (docs/member-reports.md).

Brokers can hide what the operator needs (classic groups expose no generation through
DescribeGroups, the embedded broker returns no members, and polling misses short rebalances),
so consumers tell the operator themselves. This module parses and keeps those reports.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.history_stalls import PartitionStalls
from rebalancer.structs.problems import FieldProblem, SpecInvalid

REPORT_VERSION = 1
MAX_PARTITIONS_PER_REPORT = 100_000
MAX_TEXT = 512


class ReportEvent(StrEnum):
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
    HEARTBEAT = "heartbeat"
    STOPPED = "stopped"


@dataclass(frozen=True)
class MemberReport:
    group_id: str
    host: str
    client_id: str
    member_id: str
    instance_id: str | None
    event: ReportEvent
    generation: int
    protocol: str | None
    assignment_strategy: str | None
    partitions: tuple[TopicPartition, ...]
    lag: int | None
    timestamp: float
    namespace: str | None = None
    consumer_group: str | None = None
    received_at: float = 0.0

    @property
    def identity(self) -> str:
        """One member across restarts when static, else per client instance."""
        return self.instance_id or self.host or self.member_id or self.client_id


class ReportInvalid(SpecInvalid):
    """A member report that cannot be accepted."""


def _text(
    raw: Mapping[str, object], key: str, path: str, problems: list[FieldProblem], required: bool
) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            problems.append(FieldProblem(f"{path}{key}", "is required", f"send {path}{key}"))
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        problems.append(
            FieldProblem(f"{path}{key}", "must be a string", f"send at most {MAX_TEXT} characters")
        )
        return None
    return value


def _integer(raw: Mapping[str, object], key: str, problems: list[FieldProblem]) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**63:
        problems.append(FieldProblem(key, "must be an integer >= -1", f"send {key} as a number"))
        return None
    return value


def parse_report(raw: object, received_at: float) -> MemberReport:
    """Validate one JSON report body; raise ReportInvalid naming every bad field."""
    problems: list[FieldProblem] = []
    if not isinstance(raw, Mapping):
        raise ReportInvalid((FieldProblem("body", "must be a JSON object", "send an object"),))
    _check_version(raw, problems)
    group_id = _text(raw, "groupId", "", problems, required=True)
    host, client_id, member_id, instance_id = _member_names(raw, problems)
    event_raw = _event(raw, problems)
    generation = _integer(raw, "generation", problems)
    lag = _integer(raw, "lag", problems)
    partitions = _partitions(raw, problems)
    timestamp = _timestamp(raw, received_at, problems)
    protocol = _text(raw, "protocol", "", problems, required=False)
    strategy = _text(raw, "assignmentStrategy", "", problems, required=False)
    namespace = _text(raw, "namespace", "", problems, required=False)
    consumer_group = _text(raw, "consumerGroup", "", problems, required=False)
    if problems or group_id is None:
        raise ReportInvalid(tuple(problems))
    return MemberReport(
        group_id=group_id,
        host=host,
        client_id=client_id,
        member_id=member_id,
        instance_id=instance_id,
        event=ReportEvent(str(event_raw)),
        generation=-1 if generation is None else generation,
        protocol=protocol,
        assignment_strategy=strategy,
        partitions=tuple(partitions),
        lag=lag,
        timestamp=timestamp,
        namespace=namespace,
        consumer_group=consumer_group,
        received_at=received_at,
    )


def _check_version(raw: Mapping[str, object], problems: list[FieldProblem]) -> None:
    version = raw.get("version", REPORT_VERSION)
    if version != REPORT_VERSION:
        problems.append(
            FieldProblem("version", f"{version!r} is not supported", f"send {REPORT_VERSION}")
        )


def _member_names(
    raw: Mapping[str, object], problems: list[FieldProblem]
) -> tuple[str, str, str, str | None]:
    """member.host, clientId, memberId ("" when absent) and instanceId: one at least."""
    member_raw = raw.get("member")
    if not isinstance(member_raw, Mapping):
        problems.append(FieldProblem("member", "must be an object", "send member.host at least"))
        member_raw = {}
    host = _text(member_raw, "host", "member.", problems, required=False) or ""
    client_id = _text(member_raw, "clientId", "member.", problems, required=False) or ""
    member_id = _text(member_raw, "memberId", "member.", problems, required=False) or ""
    instance_id = _text(member_raw, "instanceId", "member.", problems, required=False)
    if not (host or client_id or member_id or instance_id):
        problems.append(
            FieldProblem("member.host", "is required", "send member.host (the pod name)")
        )
    return host, client_id, member_id, instance_id


def _event(raw: Mapping[str, object], problems: list[FieldProblem]) -> object:
    event_raw = raw.get("event")
    allowed = [event.value for event in ReportEvent]
    if event_raw not in allowed:
        problems.append(
            FieldProblem("event", f"unsupported value {event_raw!r}", "use " + ", ".join(allowed))
        )
    return event_raw


def _partitions(raw: Mapping[str, object], problems: list[FieldProblem]) -> list[TopicPartition]:
    """The member's assignment; each malformed entry is a problem of its own."""
    partitions: list[TopicPartition] = []
    parts_raw = raw.get("partitions", [])
    if not isinstance(parts_raw, Sequence) or isinstance(parts_raw, str | bytes):
        problems.append(FieldProblem("partitions", "must be a list", "send a list"))
        parts_raw = []
    if len(parts_raw) > MAX_PARTITIONS_PER_REPORT:
        problems.append(
            FieldProblem("partitions", "has too many entries", "send the member's assignment")
        )
        parts_raw = []
    for index, part in enumerate(parts_raw):
        if (
            not isinstance(part, Mapping)
            or not isinstance(part.get("topic"), str)
            or isinstance(part.get("partition"), bool)
            or not isinstance(part.get("partition"), int)
        ):
            problems.append(
                FieldProblem(
                    f"partitions[{index}]",
                    "must be {topic: string, partition: integer}",
                    "send topic and partition",
                )
            )
            continue
        partitions.append(TopicPartition(str(part["topic"]), int(str(part["partition"]))))
    return partitions


def _timestamp(
    raw: Mapping[str, object], received_at: float, problems: list[FieldProblem]
) -> float:
    """The member's own clock, or the time of receipt when it sent none."""
    timestamp_raw = raw.get("timestamp", received_at)
    if isinstance(timestamp_raw, bool) or not isinstance(timestamp_raw, int | float):
        problems.append(FieldProblem("timestamp", "must be a number", "send unix seconds"))
        timestamp_raw = received_at
    return float(timestamp_raw)


@dataclass(frozen=True)
class GenerationSighting:
    """The first time a generation was reported, and by how many members so far."""

    generation: int
    first_seen: float
    members: frozenset[str]
    # The members' own timestamps of the first and of the latest first report of this
    # generation: the last member to take it up marks when the rebalance was over for everyone.
    first_at: float = 0.0
    last_at: float = 0.0


@dataclass(frozen=True)
class MemberJoin:
    """A member's first assignment under a member id the book had not seen for it: a join."""

    sequence: int
    identity: str
    member_id: str
    generation: int
    at: float  # the member's timestamp of its first `assigned` report
    received_at: float


class ReportBook:
    """Latest report per member and a bounded log of generations, for one Kafka group."""

    def __init__(self, max_generations: int = 256, max_joins: int = 4096) -> None:
        self.latest: dict[str, MemberReport] = {}
        self._generations: deque[GenerationSighting] = deque(maxlen=max_generations)
        # The member id each member reported last: a new one means it joined again.
        self._member_ids: dict[str, str] = {}
        self._joins: deque[MemberJoin] = deque(maxlen=max_joins)
        self._join_sequence = 0
        # Partition owners and how long partitions waited in each rebalance (history records).
        self.stalls = PartitionStalls(max_generations)
        # Each member's last `stopped` report, kept after its next start reports (its pod's
        # stop record may be written only then).
        self.stopped_at: dict[str, float] = {}

    def add(self, report: MemberReport) -> None:
        self.latest[report.identity] = report
        self.stalls.note(
            report.identity,
            incarnation=report.member_id,
            assigned=report.event is ReportEvent.ASSIGNED,
            generation=report.generation,
            partitions=report.partitions,
            at=report.timestamp,
        )
        if report.event is ReportEvent.STOPPED:
            self._member_ids.pop(report.identity, None)
            self.stopped_at[report.identity] = report.timestamp
            return
        if report.generation < 0:
            return
        self._note_join(report)
        for index, sighting in enumerate(self._generations):
            if sighting.generation == report.generation:
                if report.identity in sighting.members:
                    return
                self._generations[index] = GenerationSighting(
                    sighting.generation,
                    sighting.first_seen,
                    sighting.members | {report.identity},
                    min(sighting.first_at, report.timestamp),
                    max(sighting.last_at, report.timestamp),
                )
                return
        self._generations.append(
            GenerationSighting(
                report.generation,
                report.received_at,
                frozenset({report.identity}),
                report.timestamp,
                report.timestamp,
            )
        )

    def _note_join(self, report: MemberReport) -> None:
        if self._member_ids.get(report.identity) == report.member_id:
            return
        self._member_ids[report.identity] = report.member_id
        # A member first met on a heartbeat was in the group before this book existed (the
        # operator restarted): it did not join now.
        if report.event is not ReportEvent.ASSIGNED:
            return
        self._join_sequence += 1
        self._joins.append(
            MemberJoin(
                self._join_sequence,
                report.identity,
                report.member_id,
                report.generation,
                report.timestamp,
                report.received_at,
            )
        )

    def joins_after(self, sequence: int) -> list[MemberJoin]:
        """Joins with a sequence number above `sequence`, oldest first."""
        return [join for join in self._joins if join.sequence > sequence]

    def live_members(self, now: float, ttl: float) -> list[MemberReport]:
        """Members whose latest report is fresh and who have not said they stopped."""
        self.latest = {
            key: report for key, report in self.latest.items() if now - report.received_at <= ttl
        }
        self._member_ids = {
            key: member for key, member in self._member_ids.items() if key in self.latest
        }
        self.stalls.forget(self.latest)
        self.stopped_at = {key: at for key, at in self.stopped_at.items() if key in self.latest}
        return sorted(
            (r for r in self.latest.values() if r.event is not ReportEvent.STOPPED),
            key=lambda report: report.identity,
        )

    def generations_after(self, generation: int) -> list[GenerationSighting]:
        return sorted(
            (s for s in self._generations if s.generation > generation),
            key=lambda sighting: sighting.generation,
        )
