"""What one look at a group's enforcement writes, decided from what was read: status.enforcement,
the Events, the outcome counted, and whether to try again (reconcilers.enforcing applies it).

status.enforcement is merge-patched: a key set to None removes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.enforce_conditions import REASON as UNSUPPORTED_REASON
from rebalancer.planning.enforce_conditions import UNSUPPORTED
from rebalancer.planning.group_levers import STREAMS_GROUP_REFUSAL
from rebalancer.planning.notices import Notice, Retry
from rebalancer.planning.triggers import TriggerDecision, memory_to_status
from rebalancer.structs.times import format_rfc3339

Record = dict[str, Any]
# Answers a sidecar gives while the rebalance is still under way; the final one comes later.
UNSETTLED = frozenset({"accepted", "enforcing"})


@dataclass(frozen=True)
class SidecarAnswer:
    """A sidecar's answer to a request (clients.enforcing.EnforceResult, as far as status
    needs it)."""

    status: str
    message: str
    generation: int | None
    final: bool


@dataclass(frozen=True)
class EnforceWrite:
    """The writes of one look, in the order the reconciler makes them."""

    enforcement: Record | None = None  # the new status.enforcement; None leaves it as it is
    notices: tuple[Notice, ...] = ()
    counted: str | None = None  # the outcome rebalancer_enforcements counts, if any
    # The cause the observer was told to expect is dropped (no rebalance is coming of it).
    expectation_dropped: bool = False
    wake_observer: bool = False  # the observer writes the condition this status implies
    retry: Retry | None = None


def refused_pattern(previous: Mapping[str, Any], pattern: str) -> EnforceWrite:
    """A subscription pattern that takes the sidecars' control topics: said once, refused."""
    if previous.get("lastStatus") == "refused":
        return EnforceWrite()
    warning = Notice(
        "PatternTakesControlTopics",
        f"spec.subscription.pattern {pattern!r} matches the sidecars' "
        "__rebalancer.* control topics; narrow the pattern",
        warning=True,
    )
    return EnforceWrite(enforcement={**previous, "lastStatus": "refused"}, notices=(warning,))


# No sidecar is asked: the sidecar's own refusal of a streams group, made from the spec alone.
DECLARED_STREAMS_REFUSAL = f"spec.policy.protocol declares {STREAMS_GROUP_REFUSAL}"


def declared_streams(previous: Mapping[str, Any]) -> EnforceWrite:
    """spec.policy.protocol is streams: no sidecar can join a streams group (KIP-1071 has no
    JoinGroup, and a visitor must never enter a Kafka Streams application's group), so none is
    asked. Said once; Degraded EnforceUnsupported says why until the spec changes."""
    if (
        previous.get("lastStatus") == UNSUPPORTED
        and previous.get("message") == DECLARED_STREAMS_REFUSAL
    ):
        return EnforceWrite()
    return EnforceWrite(
        enforcement={**previous, "lastStatus": UNSUPPORTED, "message": DECLARED_STREAMS_REFUSAL},
        notices=(Notice(UNSUPPORTED_REASON, DECLARED_STREAMS_REFUSAL, warning=True),),
        counted="unsupported",
        wake_observer=True,
    )


def awaiting_follow_up(previous: Mapping[str, Any]) -> str | None:
    """The id of the last request if its answer was not final yet (the POST's wait ran out
    while the sidecar was enforcing): status said "enforcing" forever without asking again."""
    request_id = previous.get("lastRequestId")
    if previous.get("lastStatus") not in UNSETTLED or not request_id:
        return None
    return str(request_id)


def nothing_due(
    previous: Mapping[str, Any], decision: TriggerDecision, answer: SidecarAnswer | None
) -> EnforceWrite:
    """No request is due: the trigger memory kept, and the last request's final answer
    recorded if a follow-up brought one."""
    record: Record = {**previous, "memory": memory_to_status(decision.memory)}
    notices: tuple[Notice, ...] = ()
    counted = None
    if answer is not None and answer.status != previous.get("lastStatus"):
        counted = answer.status if answer.final else None
        notices = (_told(str(previous.get("lastCause")), answer),)
        record.update(lastStatus=answer.status, lastGeneration=answer.generation)
    # Nothing new was asked: the last request's explanation stands.
    record.pop("message", None)
    if "message" in previous:
        record["message"] = previous["message"]
    changed = record if record != previous else None
    return EnforceWrite(enforcement=changed, notices=notices, counted=counted)


def requested(previous: Mapping[str, Any], decision: TriggerDecision, now: float) -> Record:
    """status.enforcement for a request made now; "message" belongs to the request it explains,
    so an earlier one's goes (None removes it)."""
    return {
        **previous,
        "memory": memory_to_status(decision.memory),
        "message": None,
        "lastRequestId": decision.request_id,
        "lastCause": decision.cause_text,
        "lastTime": format_rfc3339(now),
    }


def skipped(record: Record, decision: TriggerDecision) -> EnforceWrite:
    """A rebalance is already under way and the policy does not retry: the trigger is used up."""
    return EnforceWrite(
        enforcement={**record, "lastStatus": "skipped-in-progress"},
        notices=(Notice("EnforceSkipped", decision.message),),
        counted="skipped",
    )


def no_sidecar(inject: bool) -> str:
    """Why a request was not sent, before any sidecar was asked."""
    if inject:
        return (
            "no ready pod's sidecar to ask yet (with sidecar.inject, "
            "status.settings.sidecar.rolledOut says when every pod has one)"
        )
    return (
        "no sidecar to ask: set spec.policy.enforce.sidecar.url, run the sidecar in the pods "
        "or set spec.policy.enforce.sidecar.inject: true"
    )


def answered(record: Record, decision: TriggerDecision, answer: SidecarAnswer) -> EnforceWrite:
    """A sidecar took the request; an answer still under way is counted by the follow-up that
    sees its end."""
    return EnforceWrite(
        enforcement={**record, "lastStatus": answer.status, "lastGeneration": answer.generation},
        notices=(_told(decision.cause_text, answer),),
        counted=answer.status if answer.final else None,
    )


def unsupported(previous: Mapping[str, Any], record: Record, failure: str) -> EnforceWrite:
    """The sidecar cannot join the group's protocol: asking again changes nothing, so the
    trigger is used up (memory advances) and Degraded says why until a request succeeds."""
    said = previous.get("lastStatus") == UNSUPPORTED
    return EnforceWrite(
        enforcement={**record, "lastStatus": UNSUPPORTED, "message": failure},
        notices=() if said else (Notice(UNSUPPORTED_REASON, failure, warning=True),),
        counted="unsupported",
        expectation_dropped=True,
        wake_observer=True,
    )


def unreachable(
    previous: Mapping[str, Any], record: Record, decision: TriggerDecision, failure: str
) -> EnforceWrite:
    """No sidecar answered. Memory is not advanced: the same request id is sent again and
    sidecars de-duplicate it. Status says the request failed: left as it was, it showed the
    previous request's outcome as if it were this one's."""
    # Counted once per request: its retries (same id, status already failed) are not new.
    retried = previous.get("lastRequestId") == decision.request_id
    again = retried and previous.get("lastStatus") == "failed"
    failed = {
        **record,
        "memory": previous.get("memory"),
        "lastStatus": "failed",
        "message": failure,
    }
    failed.pop("lastGeneration", None)
    return EnforceWrite(
        enforcement={key: value for key, value in failed.items() if value is not None},
        notices=(Notice("EnforceFailed", failure, warning=True),),
        counted=None if again else "unreachable",
        expectation_dropped=True,
        retry=Retry(failure, 15),
    )


def _told(cause: str, answer: SidecarAnswer) -> Notice:
    reason = "RebalanceEnforced" if answer.status == "enforced" else "EnforceRequested"
    return Notice(reason, f"{cause}: {answer.status} {answer.message}".strip())
