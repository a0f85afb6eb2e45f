"""planning.enforcement_writes: what one look at enforcement writes, from what it read."""

from __future__ import annotations

from rebalancer.planning.enforce_conditions import UNSUPPORTED, enforcement_conditions
from rebalancer.planning.enforcement_writes import (
    DECLARED_STREAMS_REFUSAL,
    EnforceWrite,
    SidecarAnswer,
    answered,
    awaiting_follow_up,
    declared_streams,
    nothing_due,
    refused_pattern,
    requested,
    skipped,
    unreachable,
    unsupported,
)
from rebalancer.planning.notices import Retry
from rebalancer.planning.triggers import (
    EnforceCause,
    TriggerDecision,
    TriggerMemory,
    Verdict,
    memory_to_status,
)

MEMORY = TriggerMemory(token="b", token_seen=True)
DUE = TriggerDecision(
    Verdict.ENFORCE,
    EnforceCause.ON_DEMAND,
    (EnforceCause.ON_DEMAND,),
    request_id="r2",
    message="asked",
    memory=MEMORY,
)
QUIET = TriggerDecision(Verdict.NOTHING, memory=MEMORY)
BEFORE = {
    "memory": {"token": "a"},
    "lastRequestId": "r1",
    "lastCause": "schedule",
    "lastStatus": "enforcing",
    "lastGeneration": 4,
    "message": "earlier",
}


def test_a_pattern_over_the_control_topics_is_refused_once() -> None:
    first = refused_pattern({}, "__rebalancer.*")
    assert first.enforcement == {"lastStatus": "refused"}
    assert [n.reason for n in first.notices] == ["PatternTakesControlTopics"]
    assert first.notices[0].warning
    again = refused_pattern({"lastStatus": "refused"}, "__rebalancer.*")
    assert again.enforcement is None and not again.notices


def test_only_an_unsettled_request_is_followed_up() -> None:
    assert awaiting_follow_up(BEFORE) == "r1"
    assert awaiting_follow_up({**BEFORE, "lastStatus": "enforced"}) is None
    assert awaiting_follow_up({**BEFORE, "lastRequestId": None}) is None


def test_nothing_due_keeps_the_last_explanation_and_writes_only_a_change() -> None:
    write = nothing_due(BEFORE, QUIET, None)
    assert write.enforcement == {**BEFORE, "memory": memory_to_status(MEMORY)}
    assert not write.notices and write.counted is None
    unchanged = {**BEFORE, "memory": memory_to_status(MEMORY)}
    assert nothing_due(unchanged, QUIET, None).enforcement is None
    without = {key: value for key, value in BEFORE.items() if key != "message"}
    written = nothing_due(without, QUIET, None).enforcement
    assert written is not None and "message" not in written


def test_a_follow_up_records_the_final_answer_and_counts_it() -> None:
    answer = SidecarAnswer("enforced", "generation 5", 5, final=True)
    write = nothing_due(BEFORE, QUIET, answer)
    assert write.enforcement is not None
    assert write.enforcement["lastStatus"] == "enforced"
    assert write.enforcement["lastGeneration"] == 5
    assert write.counted == "enforced"
    assert [(n.reason, n.message) for n in write.notices] == [
        ("RebalanceEnforced", "schedule: enforced generation 5")
    ]
    same = nothing_due(BEFORE, QUIET, SidecarAnswer("enforcing", "", None, final=False))
    assert not same.notices and same.counted is None


def test_a_request_replaces_the_last_explanation() -> None:
    record = requested(BEFORE, DUE, 0.0)
    assert record["message"] is None
    assert record["lastRequestId"] == "r2"
    assert record["lastCause"] == "on-demand"
    assert record["lastTime"] == "1970-01-01T00:00:00Z"
    write = skipped(record, DUE)
    assert write.enforcement == {**record, "lastStatus": "skipped-in-progress"}
    assert write.counted == "skipped"


def test_an_answer_still_under_way_is_not_counted_yet() -> None:
    record = requested(BEFORE, DUE, 0.0)
    write = answered(record, DUE, SidecarAnswer("enforcing", "", None, final=False))
    assert write.enforcement is not None and write.enforcement["lastStatus"] == "enforcing"
    assert write.counted is None
    assert write.notices[0].reason == "EnforceRequested"


def test_an_unsupported_protocol_uses_the_trigger_up_and_wakes_the_observer() -> None:
    record = requested(BEFORE, DUE, 0.0)
    write = unsupported(BEFORE, record, "cannot join")
    assert write.enforcement is not None
    assert write.enforcement["lastStatus"] == UNSUPPORTED
    assert write.enforcement["memory"] == memory_to_status(MEMORY)
    assert write.expectation_dropped and write.wake_observer and write.retry is None
    assert [n.reason for n in write.notices] == ["EnforceUnsupported"]
    assert not unsupported({"lastStatus": UNSUPPORTED}, record, "cannot join").notices


def test_a_declared_streams_group_is_refused_once_without_asking_a_sidecar() -> None:
    write = declared_streams(BEFORE)
    assert write.enforcement is not None
    assert write.enforcement["lastStatus"] == UNSUPPORTED
    assert write.enforcement["message"] == DECLARED_STREAMS_REFUSAL
    assert write.enforcement["memory"] == BEFORE["memory"]
    assert write.counted == "unsupported" and write.wake_observer and write.retry is None
    [notice] = write.notices
    assert (notice.reason, notice.warning) == ("EnforceUnsupported", True)
    # In the sidecar's own words, naming the field and the fix.
    assert notice.message.startswith("spec.policy.protocol declares a streams group (KIP-1071")
    assert "Fix: remove spec.policy.enforce from its ConsumerGroup" in notice.message
    [degraded] = enforcement_conditions(write.enforcement)
    assert degraded.message == DECLARED_STREAMS_REFUSAL
    # Said once: the next look writes nothing.
    assert declared_streams(write.enforcement) == EnforceWrite()
    # A sidecar's earlier refusal of another kind is replaced by this one.
    assert declared_streams({"lastStatus": UNSUPPORTED, "message": "other"}).enforcement


def test_an_unreachable_sidecar_keeps_the_memory_and_retries() -> None:
    record = requested(BEFORE, DUE, 0.0)
    write = unreachable(BEFORE, record, DUE, "no sidecar")
    assert write.enforcement is not None
    assert write.enforcement["memory"] == BEFORE["memory"]
    assert write.enforcement["lastStatus"] == "failed"
    assert "lastGeneration" not in write.enforcement
    assert None not in write.enforcement.values()
    assert write.retry == Retry("no sidecar", 15)
    assert write.counted == "unreachable"
    retried = {**BEFORE, "lastRequestId": "r2", "lastStatus": "failed"}
    assert unreachable(retried, record, DUE, "no sidecar").counted is None
