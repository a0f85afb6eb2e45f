"""The control log as every sidecar reads it, and what the actor does next for each request.

Pure: the reader thread feeds records in log order, so every sidecar of a group builds the same
ledger, and an actor that takes over knows what the previous one finished.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import StrEnum

from rebalancer.structs.enforcement import (
    SERVING_REBALANCE_STATES,
    ActorClaim,
    ControlRecord,
    EnforceOutcome,
    EnforceRequest,
    EnforceStatus,
)


@dataclass(frozen=True)
class RequestEntry:
    request: EnforceRequest
    offset: int
    outcome: EnforceOutcome | None = None
    # The same request id written again (several sidecars received it, or a client retried).
    duplicates: int = 0

    @property
    def status(self) -> EnforceStatus:
        return EnforceStatus.ACCEPTED if self.outcome is None else self.outcome.status

    @property
    def final(self) -> bool:
        if self.outcome is None:
            return False
        if self.outcome.status is EnforceStatus.IN_PROGRESS:
            return not self.outcome.will_retry
        return self.outcome.status.final


class Ledger:
    """Requests by id in log order; the oldest finished ones are forgotten past `capacity`."""

    def __init__(self, capacity: int = 2000) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, RequestEntry] = OrderedDict()
        self._claims: dict[str, ActorClaim] = {}
        self.position = -1

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, record: ControlRecord, offset: int) -> str | None:
        """Take one record; returns the request id whose entry changed, if any."""
        self.position = max(self.position, offset)
        if isinstance(record, ActorClaim):
            self._claims[record.nonce] = record
            if len(self._claims) > 64:
                self._claims.pop(next(iter(self._claims)))
            return None
        entry = self._entries.get(record.request_id)
        if isinstance(record, EnforceRequest):
            if entry is not None:
                self._entries[record.request_id] = replace(entry, duplicates=entry.duplicates + 1)
                return record.request_id
            self._entries[record.request_id] = RequestEntry(record, offset)
            self._trim()
            return record.request_id
        if entry is None:
            # An outcome whose request was forgotten or written before this reader's start.
            return None
        self._entries[record.request_id] = replace(entry, outcome=record)
        return record.request_id

    def _trim(self) -> None:
        while len(self._entries) > self.capacity:
            oldest = next((key for key, entry in self._entries.items() if entry.final), None)
            if oldest is None:
                return
            del self._entries[oldest]

    def get(self, request_id: str) -> RequestEntry | None:
        return self._entries.get(request_id)

    def claim_seen(self, nonce: str) -> bool:
        return nonce in self._claims

    def unfinished(self) -> list[RequestEntry]:
        return [entry for entry in self._entries.values() if not entry.final]


class Action(StrEnum):
    ENFORCE = "enforce"
    REPORT_IN_PROGRESS = "report-in-progress"
    CONFIRM = "confirm"
    EXPIRE = "expire"
    FAIL = "fail"
    WAIT = "wait"


@dataclass(frozen=True)
class ActorView:
    """What the actor knows when it decides: the clock, the group and its own enforcement."""

    now: float
    # The group's state as the broker describes it; None when the broker cannot tell.
    group_state: str | None
    # The actor's own generation (member epoch under KIP-848); -1 before it joined.
    generation: int
    # The request the actor has rejoined for and whose new generation it has not seen yet.
    in_flight: str | None = None
    request_ttl: float = 120.0
    enforce_timeout: float = 120.0


def next_action(entry: RequestEntry, view: ActorView) -> Action:
    """KIP-568's semantics: a request met by a rebalance in progress is answered "in-progress";
    it is retried once the group is Stable only if it asked to be."""
    outcome = entry.outcome
    rebalancing = view.group_state in SERVING_REBALANCE_STATES or (
        view.in_flight is not None and view.in_flight != entry.request.request_id
    )
    age = view.now - entry.request.at
    if outcome is None or (outcome.status is EnforceStatus.IN_PROGRESS and outcome.will_retry):
        if age > view.request_ttl:
            return Action.EXPIRE
        if rebalancing:
            if outcome is None:
                return Action.REPORT_IN_PROGRESS
            return Action.WAIT
        return Action.ENFORCE
    if outcome.status is EnforceStatus.ENFORCING:
        if (
            outcome.from_generation is not None
            and view.generation >= 0
            and view.generation > outcome.from_generation
        ):
            return Action.CONFIRM
        if view.in_flight == entry.request.request_id:
            if view.now - outcome.at > view.enforce_timeout:
                return Action.FAIL
            return Action.WAIT
        # Written by an actor that is gone before it saw the new generation: do it again.
        if age > view.request_ttl + view.enforce_timeout:
            return Action.FAIL
        return Action.ENFORCE if not rebalancing else Action.WAIT
    return Action.WAIT
