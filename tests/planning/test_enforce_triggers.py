"""planning.triggers: when the operator enforces a rebalance, with which cause and request id."""

from __future__ import annotations

import pytest

from rebalancer.planning.triggers import (
    EnforceCause,
    EnforcePolicy,
    TriggerInputs,
    TriggerMemory,
    Verdict,
    decide_enforcement,
    memory_from_status,
    memory_to_status,
    new_matching_topics,
    policy_from_spec,
)
from rebalancer.structs.enforce_policy import enforcement_asked, parse_enforce_policy
from rebalancer.structs.problems import SpecInvalid

G = "orders"
SEEN = TriggerMemory(token="a", token_seen=True)
ALL = EnforcePolicy(
    request_token="a", schedule_seconds=600, after_rollout=True, on_topic_creation=True
)
T = frozenset({"orders.eu", "orders.us"})

# (name, policy, memory, inputs, verdict, causes)
CASES = [
    (
        "first look takes the token as a baseline",
        EnforcePolicy(request_token="a"),
        TriggerMemory(),
        TriggerInputs(0),
        Verdict.NOTHING,
        (),
    ),
    (
        "unchanged token",
        EnforcePolicy(request_token="a"),
        SEEN,
        TriggerInputs(0),
        Verdict.NOTHING,
        (),
    ),
    (
        "changed token",
        EnforcePolicy(request_token="b"),
        SEEN,
        TriggerInputs(0),
        Verdict.ENFORCE,
        (EnforceCause.ON_DEMAND,),
    ),
    ("token removed is no request", EnforcePolicy(), SEEN, TriggerInputs(0), Verdict.NOTHING, ()),
    (
        "token while rebalancing, no retry: skipped",
        EnforcePolicy(request_token="b"),
        SEEN,
        TriggerInputs(0, group_state="PreparingRebalance"),
        Verdict.SKIP_IN_PROGRESS,
        (EnforceCause.ON_DEMAND,),
    ),
    (
        "token while rebalancing, retry: enforce when stable",
        EnforcePolicy(request_token="b", retry_when_stable=True),
        SEEN,
        TriggerInputs(0, group_state="CompletingRebalance"),
        Verdict.ENFORCE,
        (EnforceCause.ON_DEMAND,),
    ),
    (
        "first topic list is a baseline",
        EnforcePolicy(on_topic_creation=True),
        SEEN,
        TriggerInputs(0, matching_topics=T),
        Verdict.NOTHING,
        (),
    ),
    (
        "new matching topic",
        EnforcePolicy(on_topic_creation=True),
        TriggerMemory(token_seen=True, topics=frozenset({"orders.eu"})),
        TriggerInputs(0, matching_topics=T),
        Verdict.ENFORCE,
        (EnforceCause.TOPIC_CREATED,),
    ),
    (
        "same topic set again: once only",
        EnforcePolicy(on_topic_creation=True),
        TriggerMemory(token_seen=True, topics=T),
        TriggerInputs(0, matching_topics=T),
        Verdict.NOTHING,
        (),
    ),
    (
        "topic deleted: nothing",
        EnforcePolicy(on_topic_creation=True),
        TriggerMemory(token_seen=True, topics=T),
        TriggerInputs(0, matching_topics=frozenset({"orders.eu"})),
        Verdict.NOTHING,
        (),
    ),
    (
        "new topic, policy off",
        EnforcePolicy(),
        TriggerMemory(token_seen=True, topics=frozenset({"orders.eu"})),
        TriggerInputs(0, matching_topics=T),
        Verdict.NOTHING,
        (),
    ),
    (
        "rollout finished",
        EnforcePolicy(after_rollout=True),
        TriggerMemory(token_seen=True, rollout="rev-1"),
        TriggerInputs(0, finished_rollout="rev-2"),
        Verdict.ENFORCE,
        (EnforceCause.AFTER_ROLLOUT,),
    ),
    (
        "first rollout seen is a baseline",
        EnforcePolicy(after_rollout=True),
        SEEN,
        TriggerInputs(0, finished_rollout="rev-1"),
        Verdict.NOTHING,
        (),
    ),
    (
        "rollout, policy off",
        EnforcePolicy(),
        TriggerMemory(token_seen=True, rollout="rev-1"),
        TriggerInputs(0, finished_rollout="rev-2"),
        Verdict.NOTHING,
        (),
    ),
    (
        "schedule starts counting",
        EnforcePolicy(schedule_seconds=600),
        SEEN,
        TriggerInputs(100),
        Verdict.NOTHING,
        (),
    ),
    (
        "schedule not due",
        EnforcePolicy(schedule_seconds=600),
        TriggerMemory(token_seen=True, last_scheduled_at=100),
        TriggerInputs(699),
        Verdict.NOTHING,
        (),
    ),
    (
        "schedule due",
        EnforcePolicy(schedule_seconds=600),
        TriggerMemory(token_seen=True, last_scheduled_at=100),
        TriggerInputs(700),
        Verdict.ENFORCE,
        (EnforceCause.SCHEDULE,),
    ),
    (
        "schedule below the floor waits 60 s",
        EnforcePolicy(schedule_seconds=5),
        TriggerMemory(token_seen=True, last_scheduled_at=100),
        TriggerInputs(130),
        Verdict.NOTHING,
        (),
    ),
    (
        "everything at once: one enforcement, strongest cause first",
        ALL,
        TriggerMemory(
            token="old",
            token_seen=True,
            topics=frozenset({"orders.eu"}),
            rollout="rev-1",
            last_scheduled_at=0,
        ),
        TriggerInputs(1000, matching_topics=T, finished_rollout="rev-2"),
        Verdict.ENFORCE,
        (
            EnforceCause.ON_DEMAND,
            EnforceCause.TOPIC_CREATED,
            EnforceCause.AFTER_ROLLOUT,
            EnforceCause.SCHEDULE,
        ),
    ),
]


@pytest.mark.parametrize(
    ("policy", "memory", "inputs", "verdict", "causes"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decide_enforcement(policy, memory, inputs, verdict, causes) -> None:
    decision = decide_enforcement(policy, memory, inputs, G)
    assert decision.verdict is verdict
    assert decision.causes == causes
    if causes:
        assert decision.cause is causes[0]
        assert decision.request_id is not None
        assert decision.cause_text == ",".join(c.value for c in causes)


def test_request_ids_are_stable_so_a_restart_never_enforces_twice() -> None:
    memory = TriggerMemory(token="a", token_seen=True)
    first = decide_enforcement(EnforcePolicy(request_token="b"), memory, TriggerInputs(1), G)
    again = decide_enforcement(EnforcePolicy(request_token="b"), memory, TriggerInputs(99), G)
    other = decide_enforcement(EnforcePolicy(request_token="b"), memory, TriggerInputs(1), "x")
    assert first.request_id == again.request_id != other.request_id
    assert first.memory.token == "b"
    # Evaluated again with what it remembered: nothing more to do.
    assert (
        decide_enforcement(
            EnforcePolicy(request_token="b"), first.memory, TriggerInputs(2), G
        ).verdict
        is Verdict.NOTHING
    )


def test_topic_creation_fires_once_per_new_topic_set() -> None:
    policy = EnforcePolicy(on_topic_creation=True)
    memory = TriggerMemory(token_seen=True, topics=frozenset({"orders.eu"}))
    first = decide_enforcement(policy, memory, TriggerInputs(0, matching_topics=T), G)
    assert first.new_topics == ("orders.us",)
    second = decide_enforcement(policy, first.memory, TriggerInputs(5, matching_topics=T), G)
    assert second.verdict is Verdict.NOTHING
    grown = T | {"orders.jp"}
    third = decide_enforcement(policy, second.memory, TriggerInputs(9, matching_topics=grown), G)
    assert third.new_topics == ("orders.jp",)
    assert third.request_id != first.request_id


def test_skipped_trigger_is_used_up() -> None:
    decision = decide_enforcement(
        EnforcePolicy(request_token="b"), SEEN, TriggerInputs(0, group_state="Assigning"), G
    )
    assert decision.verdict is Verdict.SKIP_IN_PROGRESS
    assert "in progress" in decision.message
    assert decision.memory.token == "b"


def test_a_reconciling_kip848_group_is_enforced_its_target_predates_the_request() -> None:
    decision = decide_enforcement(
        EnforcePolicy(request_token="b"), SEEN, TriggerInputs(0, group_state="Reconciling"), G
    )
    assert decision.verdict is Verdict.ENFORCE


# (pattern, topics, known, new)
TOPIC_CASES = [
    ("orders\\..*", ["orders.eu", "orders.us", "payments"], ["orders.eu"], ("orders.us",)),
    ("^orders\\..*", ["orders.eu", "xorders.eu"], None, ("orders.eu",)),
    (".*", ["__rebalancer.g", "__consumer_offsets", "a"], [], ("a",)),
    ("orders", ["orders", "orders-2"], ["orders"], ("orders-2",)),
]


@pytest.mark.parametrize(("pattern", "topics", "known", "new"), TOPIC_CASES)
def test_new_matching_topics(pattern, topics, known, new) -> None:
    assert new_matching_topics(pattern, topics, known) == new


# (raw spec.policy.enforce, problem paths or None when valid)
POLICIES = [
    (None, None),
    ({"requestToken": "2024-06-01T10:00", "scheduleSeconds": 3600, "afterRollout": True}, None),
    (
        {"sidecar": {"inject": True, "port": 8091, "tokenSecretRef": {"name": "s", "key": "t"}}},
        None,
    ),
    ({"requestToken": ""}, ["spec.policy.enforce.requestToken"]),
    ({"scheduleSeconds": 5}, ["spec.policy.enforce.scheduleSeconds"]),
    ({"onTopicCreation": "yes"}, ["spec.policy.enforce.onTopicCreation"]),
    ({"sidecar": {"inject": True}}, ["spec.policy.enforce.sidecar.tokenSecretRef"]),
    (
        {"sidecar": {"port": 80, "tokenSecretRef": {"name": "s"}}},
        ["spec.policy.enforce.sidecar.port"],
    ),
    ("on", ["spec.policy.enforce"]),
]


@pytest.mark.parametrize(("raw", "problems"), POLICIES)
def test_parse_enforce_policy(raw, problems) -> None:
    if problems is None:
        spec = parse_enforce_policy(raw)
        policy = policy_from_spec(spec)
        assert policy.request_token == spec.request_token
        assert policy.schedule_seconds == spec.schedule_seconds
        if raw and "sidecar" in raw:
            assert spec.sidecar.token_secret == "s" and spec.sidecar.token_key == "t"
        return
    with pytest.raises(SpecInvalid) as invalid:
        parse_enforce_policy(raw)
    assert [problem.path for problem in invalid.value.problems] == problems


@pytest.mark.parametrize(
    "memory",
    [
        TriggerMemory(),
        TriggerMemory(token="a", token_seen=True, topics=T, rollout="rev-3", last_scheduled_at=5.5),
        TriggerMemory(token=None, token_seen=True, topics=frozenset()),
    ],
)
def test_memory_survives_status(memory) -> None:
    assert memory_from_status(memory_to_status(memory)) == memory


@pytest.mark.parametrize("raw", [None, "x", {"token": 5, "topics": "a", "lastScheduledAt": True}])
def test_unreadable_memory_is_a_fresh_baseline(raw) -> None:
    assert memory_from_status(raw) == TriggerMemory()


def test_only_a_spec_with_an_enforce_block_asks_for_enforcement_looks() -> None:
    assert not enforcement_asked({"groupId": "g"})
    assert not enforcement_asked({"policy": {"rollout": {"enabled": True}}})
    assert not enforcement_asked({"policy": {"enforce": {}}})
    assert enforcement_asked({"policy": {"enforce": {"requestToken": "t1"}}})
    assert enforcement_asked({"policy": {"enforce": {"scheduleSeconds": 600}}})
