"""History events: one record per observed rebalance, pod start, pod stop and member join.

Schema version 3 (docs/history.md). Fields are only ever added within a version, and the version
is bumped when a field changes meaning; readers refuse versions newer than the one they know and
read the older Parquet versions as they are. Version 3 gave member-join records their
generation, and joins outside rollouts a batch id (their start-up burst); version 2 files have
neither, which readers take as unknown. `group_protocol` was added within version 3: files
without it read it as unknown. Version 1 records (rebalances only, JSON lines) map onto
version 2 with the new fields unset.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

HISTORY_SCHEMA_VERSION = 3

# The columns of a history file, in order, with their types ("list<T>" for lists): the operator
# writes them as JSON lines, the learning job as Parquet (learning.history_table), from this one
# list. `date` and `namespace` are not among them: they are the partition directories.
HISTORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("schema_version", "int32"),
    ("record_type", "string"),
    ("name", "string"),
    ("group_id", "string"),
    ("cluster", "string"),
    ("generation", "int64"),
    ("previous_generation", "int64"),
    ("cause", "string"),
    ("detected_at", "float64"),
    ("started_at", "float64"),
    ("members", "int32"),
    ("joined", "list<string>"),
    ("left", "list<string>"),
    ("source", "string"),
    ("state", "string"),
    ("member", "string"),
    ("departure", "string"),
    ("join_offsets_ms", "list<float64>"),
    ("time_to_stable_ms", "float64"),
    ("stop_the_world_partition_s", "float64"),
    ("partitions", "int32"),
    ("batch_id", "string"),
    ("rollout_id", "string"),
    ("initial_rebalance_delay_ms", "float64"),
    ("session_timeout_ms", "float64"),
    ("heartbeat_interval_ms", "float64"),
    ("max_poll_interval_ms", "float64"),
    ("assignor", "string"),
    ("static_membership", "bool"),
    ("batch_size", "int32"),
    ("record_key", "string"),
    ("group_protocol", "string"),
)
HISTORY_COLUMN_NAMES = tuple(name for name, _ in HISTORY_COLUMNS)
PARTITION_COLUMNS = ("date", "namespace")
# Without these a file is not a history file at all (another tool's file).
REQUIRED_COLUMNS = frozenset(
    {"schema_version", "record_type", "group_id", "cluster", "detected_at"}
)


class RebalanceCause(StrEnum):
    MEMBER_JOINED = "member-joined"
    MEMBER_LEFT = "member-left"
    MEMBERS_CHANGED = "members-changed"
    REJOIN = "rejoin"
    STATE_CHANGE = "state-change"
    # Asked for through the sidecar (on demand, schedule, topic creation, after a rollout).
    ENFORCED = "enforced"
    # A classic Kafka Streams group (protocol `stream`) rebalancing with the same members: the
    # application's own follow-up rebalances, KIP-441 probing rebalances every
    # probing.rebalance.interval.ms while warm-up replicas catch up, and the second round of a
    # cooperative (KIP-429) task move. Explained, not unknown.
    STREAMS_FOLLOW_UP = "streams-follow-up"
    UNKNOWN = "unknown"


class RecordType(StrEnum):
    """What a history record stands for; every type shares the one table schema."""

    REBALANCE = "rebalance"
    # A consumer pod's container started: the stagger released it (source "operator", at the
    # release), or Kubernetes says it started (source "kubernetes", at its startedAt).
    POD_START = "pod-start"
    # A pod's consumer stopped: `departure` says whether it was told to ("leave": the pod was
    # deleted, or the container exited 0) or crashed ("crash": any other exit), or None when
    # unknown; the learning job pairs it with the member's next join.
    POD_STOP = "pod-stop"
    # A member's first assignment under a new member id: the end of its first JoinGroup and
    # SyncGroup after a start (structs.reports.MemberJoin).
    MEMBER_JOIN = "member-join"


@dataclass(frozen=True)
class SettingsInForce:
    """The timing settings that governed the group when the record was written (None: unknown)."""

    initial_rebalance_delay_ms: float | None = None
    session_timeout_ms: float | None = None
    heartbeat_interval_ms: float | None = None
    max_poll_interval_ms: float | None = None
    assignor: str | None = None
    static_membership: bool | None = None
    # The stagger's batch size when a rollout was running; None outside rollouts.
    batch_size: int | None = None
    # The group's protocol as observed (classic, consumer, streams): it decides whose initial
    # delay governed its start-ups, the broker's (classic) or the group's own (streams, whose
    # initial_rebalance_delay_ms is then its streams.initial.rebalance.delay.ms).
    group_protocol: str | None = None


@dataclass(frozen=True)
class RebalanceEvent:
    namespace: str
    name: str
    group_id: str
    cluster: str
    generation: int | None
    previous_generation: int | None
    cause: RebalanceCause
    detected_at: float
    started_at: float | None
    members: int
    joined: tuple[str, ...]
    left: tuple[str, ...]
    source: str
    state: str
    record_type: RecordType = RecordType.REBALANCE
    # The pod or member a pod-start, pod-stop or member-join record is about.
    member: str | None = None
    # For a pod-stop record: "leave" (LeaveGroup sent) or "crash" (heartbeats just stopped).
    departure: str | None = None
    # Joins of this rebalance, in ms after its first join (a rebalance record), or this member's
    # join in ms after the first join of its batch or start-up burst (a member-join record).
    join_offsets_ms: tuple[float, ...] = ()
    # From the rebalance's start (its first join) until the group was Stable with every member
    # assigned, in ms.
    time_to_stable_ms: float | None = None
    # Partition-seconds no member consumed because of this rebalance (the simulator's measure).
    stop_the_world_partition_s: float | None = None
    partitions: int | None = None
    # Ties the records of one stagger batch together (outside rollouts, the joins of one
    # start-up burst: "start-<unix ms of its first join>"), and the batches of one rollout.
    batch_id: str | None = None
    rollout_id: str | None = None
    settings: SettingsInForce = field(default_factory=SettingsInForce)
    # The same fact always gets the same key (pod records: "pod-start/<pod uid>/<run>",
    # "pod-stop/<pod uid>/<run>"), so a repeat can be dropped; None where no key is kept.
    record_key: str | None = None

    def describe(self) -> str:
        if self.record_type is not RecordType.REBALANCE:
            return f"{self.record_type.value} {self.member or '?'} (source: {self.source})"
        generation = "?" if self.generation is None else str(self.generation)
        parts = [f"generation {generation}", f"{self.members} members", f"cause {self.cause}"]
        if self.joined:
            parts.append("joined: " + ", ".join(self.joined[:5]))
        if self.left:
            parts.append("left: " + ", ".join(self.left[:5]))
        return "; ".join(parts) + f" (source: {self.source})"

    def to_record(self) -> dict[str, object]:
        """A flat row of the history table (nested settings spread into their own columns)."""
        record = asdict(self)
        settings = record.pop("settings")
        record.update(settings)
        record["cause"] = self.cause.value
        record["record_type"] = self.record_type.value
        record["joined"] = list(self.joined)
        record["left"] = list(self.left)
        record["join_offsets_ms"] = list(self.join_offsets_ms)
        record["schema_version"] = HISTORY_SCHEMA_VERSION
        return record


def member_event(
    record_type: RecordType,
    *,
    namespace: str,
    name: str,
    group_id: str,
    cluster: str,
    member: str,
    at: float,
    members: int,
    state: str = "",
    source: str = "operator",
    departure: str | None = None,
    batch_id: str | None = None,
    rollout_id: str | None = None,
    partitions: int | None = None,
    settings: SettingsInForce | None = None,
    record_key: str | None = None,
) -> RebalanceEvent:
    """A pod-start, pod-stop or member-join record (the rebalance-only fields left empty)."""
    if record_type is RecordType.REBALANCE:
        raise ValueError("member_event is for pod and member records, not rebalances")
    return RebalanceEvent(
        namespace=namespace,
        name=name,
        group_id=group_id,
        cluster=cluster,
        generation=None,
        previous_generation=None,
        cause=RebalanceCause.UNKNOWN,
        detected_at=at,
        started_at=None,
        members=members,
        joined=(),
        left=(),
        source=source,
        state=state,
        record_type=record_type,
        member=member,
        departure=departure,
        batch_id=batch_id,
        rollout_id=rollout_id,
        partitions=partitions,
        settings=settings or SettingsInForce(),
        record_key=record_key,
    )
