"""History events: one record per observed rebalance (schema version 1).

Fields are documented in docs/history.md; new fields are only ever added, and the
schema version is bumped when a field changes meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

HISTORY_SCHEMA_VERSION = 1


class RebalanceCause(StrEnum):
    MEMBER_JOINED = "member-joined"
    MEMBER_LEFT = "member-left"
    MEMBERS_CHANGED = "members-changed"
    REJOIN = "rejoin"
    STATE_CHANGE = "state-change"
    UNKNOWN = "unknown"


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

    def describe(self) -> str:
        generation = "?" if self.generation is None else str(self.generation)
        parts = [f"generation {generation}", f"{self.members} members", f"cause {self.cause}"]
        if self.joined:
            parts.append("joined: " + ", ".join(self.joined[:5]))
        if self.left:
            parts.append("left: " + ", ".join(self.left[:5]))
        return "; ".join(parts) + f" (source: {self.source})"

    def to_record(self) -> dict[str, object]:
        record = asdict(self)
        record["cause"] = self.cause.value
        record["joined"] = list(self.joined)
        record["left"] = list(self.left)
        record["schema_version"] = HISTORY_SCHEMA_VERSION
        return record
