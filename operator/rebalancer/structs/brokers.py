"""What the operator knows about a Kafka cluster and a group, as the broker describes them.

Pure data: the Kafka gateway (rebalancer.clients.kafka_admin) fills these in, the planners read
them. Fields the broker could not tell are None or flagged, never guessed, because brokers and
the permissions they grant differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class GroupState(StrEnum):
    """Group states as Kafka names them on the wire (classic, KIP-848 and streams groups)."""

    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    # KIP-848 (group.protocol=consumer) groups only.
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    # Streams groups (KIP-1071) only: the topology's internal topics are missing.
    NOT_READY = "NotReady"

    @property
    def has_members(self) -> bool:
        """Whether a group in this state has live members (so an empty member list is a gap)."""
        return self not in (GroupState.EMPTY, GroupState.DEAD, GroupState.UNKNOWN)

    @property
    def rebalancing(self) -> bool:
        """Classic groups rebalance in the first two; KIP-848 groups compute and then reconcile
        a target assignment in the last two."""
        return self in (
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.ASSIGNING,
            GroupState.RECONCILING,
        )

    @classmethod
    def named(cls, value: object) -> GroupState:
        """The state a status field names by its value, Unknown for anything else."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.UNKNOWN


class GroupProtocol(StrEnum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    UNKNOWN = "unknown"


class BrokerProfile(StrEnum):
    """Broker implementations whose group coordination differs in ways the operator must know."""

    APACHE_KAFKA = "apache-kafka"
    REDPANDA = "redpanda"


def resolve_profile(declared: BrokerProfile | None, detected: object) -> BrokerProfile | None:
    """The profile the spec declares, else the one detected (the gateway's guess from the
    cluster id, or status.group.brokerProfile as the observer wrote it); None when neither
    names one."""
    if declared is not None:
        return declared
    try:
        return BrokerProfile(str(detected))
    except ValueError:
        return None


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True)
class BrokerMember:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    partitions: tuple[TopicPartition, ...]
    # KIP-848 only: what the coordinator's target assignment gives the member; None where the
    # protocol has no such thing (classic groups). Differs from `partitions` while it reconciles.
    target_partitions: tuple[TopicPartition, ...] | None = None
    # Classic groups: the generation the member was in when it last joined, from its
    # subscription (KIP-792; -1 when it joined afresh); None when the broker's answer or the
    # client does not carry it.
    joined_generation: int | None = None

    @property
    def reconciling(self) -> bool:
        return self.target_partitions is not None and self.target_partitions != self.partitions


@dataclass(frozen=True)
class BrokerGroupView:
    group_id: str
    state: GroupState
    protocol: GroupProtocol
    # None when the broker did not say or said something that cannot be an assignor name.
    assignor: str | None
    members: tuple[BrokerMember, ...]
    coordinator_id: int | None
    # False when the group is live but the broker listed no member (a Kafka-protocol broker
    # may answer so): the empty `members` then means "not told", not "no members".
    members_known: bool
    # KIP-848 groups: the group epoch, when the describe carried it.
    group_epoch: int | None = None


@dataclass(frozen=True)
class PartitionOffset:
    partition: TopicPartition
    offset: int


@dataclass(frozen=True)
class CommittedOffsets:
    """A group's committed offsets, one per partition it ever committed (sorted)."""

    group_id: str
    offsets: tuple[PartitionOffset, ...]

    @classmethod
    def of(cls, group_id: str, offsets: Mapping[TopicPartition, int]) -> CommittedOffsets:
        return cls(
            group_id,
            tuple(PartitionOffset(tp, offset) for tp, offset in sorted(offsets.items())),
        )

    def by_partition(self) -> dict[TopicPartition, int]:
        return {entry.partition: entry.offset for entry in self.offsets}

    def total(self) -> int:
        return sum(entry.offset for entry in self.offsets if entry.offset >= 0)


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str | None
    broker_count: int
    controller_id: int | None


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


_HIDDEN = "<hidden>"


@dataclass(frozen=True, repr=False)
class SecuritySettings:
    """How to authenticate to a Kafka cluster. Holds secrets: its repr never shows them."""

    protocol: str = SecurityProtocol.PLAINTEXT
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    skip_verify: bool = False

    @property
    def uses_tls(self) -> bool:
        return self.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    def fingerprint(self) -> str:
        """A digest of every setting, secrets included, to tell two settings apart safely."""
        digest = hashlib.sha256()
        for value in (
            self.protocol,
            self.sasl_mechanism,
            self.username,
            self.password,
            self.ca_pem,
            self.cert_pem,
            self.key_pem,
            str(self.skip_verify),
        ):
            digest.update(b"\x00" if value is None else b"\x01" + value.encode())
            digest.update(b"\x1f")
        return digest.hexdigest()[:16]

    def __repr__(self) -> str:
        shown = (
            f"protocol={str(self.protocol)!r}",
            f"sasl_mechanism={self.sasl_mechanism!r}",
            f"username={self.username!r}",
            f"password={_HIDDEN if self.password is not None else None}",
            f"ca_pem={'<pem>' if self.ca_pem is not None else None}",
            f"cert_pem={'<pem>' if self.cert_pem is not None else None}",
            f"key_pem={_HIDDEN if self.key_pem is not None else None}",
            f"skip_verify={self.skip_verify!r}",
        )
        return f"SecuritySettings({', '.join(shown)})"

    __str__ = __repr__


def cluster_key(bootstrap_servers: Iterable[str], security: SecuritySettings | None) -> str:
    """One key per (cluster, identity): clients with equal keys can share one connection.

    Secrets enter only through a digest, so the key is safe to log and to show.
    """
    servers = ",".join(sorted({server.strip() for server in bootstrap_servers if server.strip()}))
    settings = security or SecuritySettings()
    return f"{servers}|{settings.protocol}|{settings.fingerprint()}"
