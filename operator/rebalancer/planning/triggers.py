"""When the operator asks a group's sidecar for an enforced rebalance, and why.

Pure rules over `spec.policy.enforce` and what the operator last saw. Each trigger yields a cause
(recorded in history, status and Events) and a request id that is the same however often the
rule is evaluated, so an operator restart or a retried POST never enforces twice for one
trigger: the sidecars de-duplicate by request id (docs/enforcing.md).

Causes, strongest first when several are due at once (one enforcement serves them all):
on-demand (the user changed `requestToken`), topic-created (a new topic matches the group's
pattern), after-rollout (a managed rollout finished), schedule (the interval elapsed).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from rebalancer.structs.enforce_policy import EnforceSpec
from rebalancer.structs.enforcement import SERVING_REBALANCE_STATES

MIN_SCHEDULE_SECONDS = 60


class EnforceCause(StrEnum):
    ON_DEMAND = "on-demand"
    TOPIC_CREATED = "topic-created"
    AFTER_ROLLOUT = "after-rollout"
    SCHEDULE = "schedule"


class Verdict(StrEnum):
    NOTHING = "nothing"
    ENFORCE = "enforce"
    # A rebalance is already under way and the policy does not retry: KIP-568's no-op. The
    # trigger is used up; the running rebalance does the job (new topics included).
    SKIP_IN_PROGRESS = "skip-in-progress"


@dataclass(frozen=True)
class EnforcePolicy:
    """`spec.policy.enforce` (the CRD snippet is in docs/enforcing.md)."""

    request_token: str | None = None
    schedule_seconds: int | None = None
    after_rollout: bool = False
    on_topic_creation: bool = False
    retry_when_stable: bool = False


def policy_from_spec(spec: EnforceSpec) -> EnforcePolicy:
    return EnforcePolicy(
        request_token=spec.request_token,
        schedule_seconds=spec.schedule_seconds,
        after_rollout=spec.after_rollout,
        on_topic_creation=spec.on_topic_creation,
        retry_when_stable=spec.retry_when_stable,
    )


@dataclass(frozen=True)
class TriggerMemory:
    """What the operator keeps between evaluations (in status.enforcement)."""

    # The requestToken last acted on; None before the first evaluation.
    token: str | None = None
    token_seen: bool = False
    # Topics matching the pattern when last looked; None before the first look, which only
    # takes the baseline (topics there at start are not "new").
    topics: frozenset[str] | None = None
    rollout: str | None = None
    last_scheduled_at: float | None = None


@dataclass(frozen=True)
class TriggerInputs:
    now: float
    group_state: str | None = None
    # Topics matching the group's pattern now; None when not pattern-subscribed or not listed.
    matching_topics: frozenset[str] | None = None
    # Identifies the last finished managed rollout (for example the workload's revision).
    finished_rollout: str | None = None


@dataclass(frozen=True)
class TriggerDecision:
    verdict: Verdict
    cause: EnforceCause | None = None
    # Every cause that was due, strongest first; history records them all.
    causes: tuple[EnforceCause, ...] = ()
    request_id: str | None = None
    retry_when_stable: bool = False
    message: str = ""
    new_topics: tuple[str, ...] = ()
    memory: TriggerMemory = field(default_factory=TriggerMemory)

    @property
    def cause_text(self) -> str:
        return ",".join(cause.value for cause in self.causes)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def new_matching_topics(
    pattern: str, topics: Iterable[str], known: Iterable[str] | None
) -> tuple[str, ...]:
    """Topics matching `pattern` (anchored at the start, like librdkafka's "^" subscriptions)
    that are not in `known`, sorted; internal `__` topics never count."""
    compiled = re.compile(pattern[1:] if pattern.startswith("^") else pattern)
    seen = set(known or ())
    return tuple(
        sorted(
            topic
            for topic in topics
            if not topic.startswith("__") and topic not in seen and compiled.match(topic)
        )
    )


def decide_enforcement(
    policy: EnforcePolicy, memory: TriggerMemory, inputs: TriggerInputs, group_id: str
) -> TriggerDecision:
    due: list[EnforceCause] = []
    remembered = memory
    ids: dict[EnforceCause, str] = {}
    new_topics: tuple[str, ...] = ()

    token = policy.request_token or None
    if not memory.token_seen:
        # The token the resource was created with is a starting point, not a request.
        remembered = replace(remembered, token=token, token_seen=True)
    elif token is not None and token != memory.token:
        due.append(EnforceCause.ON_DEMAND)
        ids[EnforceCause.ON_DEMAND] = f"token-{_digest(group_id, token)}"
        remembered = replace(remembered, token=token)
    elif token != memory.token:
        remembered = replace(remembered, token=token)

    if inputs.matching_topics is not None:
        if memory.topics is None or not policy.on_topic_creation:
            remembered = replace(remembered, topics=inputs.matching_topics)
        else:
            new_topics = tuple(sorted(inputs.matching_topics - memory.topics))
            if new_topics:
                due.append(EnforceCause.TOPIC_CREATED)
                ids[EnforceCause.TOPIC_CREATED] = f"topics-{_digest(group_id, *new_topics)}"
            # Deleted topics leave the set too: a re-created topic counts as new again.
            remembered = replace(remembered, topics=inputs.matching_topics)

    if inputs.finished_rollout is not None and inputs.finished_rollout != memory.rollout:
        if policy.after_rollout and memory.rollout is not None:
            due.append(EnforceCause.AFTER_ROLLOUT)
            ids[EnforceCause.AFTER_ROLLOUT] = (
                f"rollout-{_digest(group_id, inputs.finished_rollout)}"
            )
        remembered = replace(remembered, rollout=inputs.finished_rollout)

    if policy.schedule_seconds:
        interval = max(policy.schedule_seconds, MIN_SCHEDULE_SECONDS)
        if memory.last_scheduled_at is None:
            remembered = replace(remembered, last_scheduled_at=inputs.now)
        elif inputs.now - memory.last_scheduled_at >= interval:
            due.append(EnforceCause.SCHEDULE)
            slot = int(inputs.now // interval)
            ids[EnforceCause.SCHEDULE] = f"schedule-{_digest(group_id, str(interval), str(slot))}"

    return _decision(policy, inputs, due, ids, new_topics, remembered)


def _decision(
    policy: EnforcePolicy,
    inputs: TriggerInputs,
    due: list[EnforceCause],
    ids: dict[EnforceCause, str],
    new_topics: tuple[str, ...],
    remembered: TriggerMemory,
) -> TriggerDecision:
    """The verdict on the causes due: nothing, skipped while the group already rebalances, or
    enforce under the first cause's request id."""
    if not due:
        return TriggerDecision(Verdict.NOTHING, memory=remembered)
    # Any enforcement also serves the schedule: the next one is an interval after this.
    if policy.schedule_seconds:
        remembered = replace(remembered, last_scheduled_at=inputs.now)
    cause = due[0]
    described = ", ".join(c.value for c in due)
    if inputs.group_state in SERVING_REBALANCE_STATES and not policy.retry_when_stable:
        return TriggerDecision(
            Verdict.SKIP_IN_PROGRESS,
            cause,
            tuple(due),
            ids[cause],
            message=f"{described}: a rebalance is already in progress ({inputs.group_state}); "
            "it serves this request",
            new_topics=new_topics,
            memory=remembered,
        )
    topics_note = f" (new topics: {', '.join(new_topics[:5])})" if new_topics else ""
    return TriggerDecision(
        Verdict.ENFORCE,
        cause,
        tuple(due),
        ids[cause],
        retry_when_stable=policy.retry_when_stable,
        message=f"enforcing a rebalance: {described}{topics_note}",
        new_topics=new_topics,
        memory=remembered,
    )


def memory_to_status(memory: TriggerMemory) -> dict[str, object]:
    """TriggerMemory as `status.enforcement.memory` (JSON), so a restarted operator resumes."""
    return {
        "token": memory.token,
        "tokenSeen": memory.token_seen,
        "topics": None if memory.topics is None else sorted(memory.topics),
        "rollout": memory.rollout,
        "lastScheduledAt": memory.last_scheduled_at,
    }


def memory_from_status(raw: object) -> TriggerMemory:
    """The inverse of memory_to_status; anything unreadable starts from a fresh baseline,
    which never enforces by itself."""
    if not isinstance(raw, dict):
        return TriggerMemory()
    token = raw.get("token")
    topics = raw.get("topics")
    rollout = raw.get("rollout")
    scheduled = raw.get("lastScheduledAt")
    return TriggerMemory(
        token=token if isinstance(token, str) else None,
        token_seen=raw.get("tokenSeen") is True,
        topics=frozenset(t for t in topics if isinstance(t, str))
        if isinstance(topics, list)
        else None,
        rollout=rollout if isinstance(rollout, str) else None,
        last_scheduled_at=float(scheduled)
        if isinstance(scheduled, int | float) and not isinstance(scheduled, bool)
        else None,
    )
