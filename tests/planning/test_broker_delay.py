"""One initial rebalance delay per cluster, by the documented rule, and what each group does."""

from __future__ import annotations

import pytest

from rebalancer.planning.broker_delay import (
    RULE,
    DelayAction,
    DelayWant,
    cluster_key_for,
    decide_cluster_delay,
    delay_status,
    plan_delay,
    strimzi_config_patch,
)
from rebalancer.structs.broker_configs import DELAY_KEY, limits_from_configs
from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy, DelayMode, StrimziRef
from rebalancer.structs.brokers import BrokerProfile as P

CLUSTER = cluster_key_for(["kafka-0:9092"])


def want(
    name: str, delay: int, cap: int = 30000, mode: DelayMode = DelayMode.RECOMMEND
) -> DelayWant:
    return DelayWant("shop", name, CLUSTER, delay, cap, mode)


# (case, wants, value, decided by, capped by)
DECISIONS = [
    ("one group", [want("orders", 3000)], 3000, "shop/orders", None),
    ("the largest wish wins", [want("orders", 3000), want("billing", 8000)], 8000,
     "shop/billing", None),
    ("a small cap vetoes a long delay", [want("orders", 3000, cap=5000), want("billing", 8000)],
     5000, "shop/billing", "shop/orders"),
    ("a cap above every wish changes nothing", [want("orders", 3000, cap=10000),
     want("billing", 8000)], 8000, "shop/billing", None),
    ("ties go to the first by name", [want("b", 4000), want("a", 4000)], 4000, "shop/a", None),
    ("zero is a wish too", [want("orders", 0)], 0, "shop/orders", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("wants", "value", "decided_by", "capped_by"),
    [case[1:] for case in DECISIONS],
    ids=[case[0] for case in DECISIONS],
)
def test_cluster_value_by_the_rule(
    wants: list[DelayWant], value: int, decided_by: str, capped_by: str | None
) -> None:
    decision = decide_cluster_delay(wants)
    assert decision is not None
    assert (decision.value_ms, decision.wanted_by, decision.capped_by) == (
        value,
        decided_by,
        capped_by,
    )
    # The same answer whatever order the index lists the groups in.
    assert decide_cluster_delay(list(reversed(wants))) == decision


def test_no_wants_no_decision() -> None:
    assert decide_cluster_delay([]) is None


def test_cluster_keys() -> None:
    assert cluster_key_for(["B:9092", "a:9092", "a:9092 "]) == "bootstrap:a:9092,b:9092"
    assert cluster_key_for(["a:9092"], "MkU3OEVBNTcwNTJENDM2Qk") == "id:MkU3OEVBNTcwNTJENDM2Qk"


def test_every_group_is_told_who_decided() -> None:
    orders, billing = want("orders", 3000, cap=5000), want("billing", 8000)
    decision = decide_cluster_delay([orders, billing])
    assert decision is not None
    plan = plan_delay(BrokerDelayPolicy(), decision, orders, P.APACHE_KAFKA)
    status = delay_status(decision, orders, plan)
    assert status["rule"] == RULE
    assert (status["wantedMs"], status["clusterMs"], status["cappedBy"]) == (
        3000,
        5000,
        "shop/orders",
    )
    assert "2 ConsumerGroups share this cluster" in status["message"]
    assert "shop/billing wants 8000" in status["message"]
    assert "capped at 5000 by the maxDelayMs of this group" in status["message"]
    billing_plan = plan_delay(BrokerDelayPolicy(), decision, billing, P.APACHE_KAFKA)
    assert "this group's delayMs (8000) is the largest" in billing_plan.message
    assert "capped at 5000 by the maxDelayMs of shop/orders" in billing_plan.message
    assert "inForceMs" not in status  # not known: not said


def test_status_says_what_the_broker_has_in_force_and_where_it_comes_from() -> None:
    limits = limits_from_configs(
        {DELAY_KEY: "3000", "group.min.session.timeout.ms": "6000"},
        {DELAY_KEY: "static-broker-config"},
    )
    assert (limits.initial_rebalance_delay_ms, limits.initial_rebalance_delay_source) == (
        3000,
        "static-broker-config",
    )
    orders = want("orders", 8000)
    decision = decide_cluster_delay([orders])
    assert decision is not None
    plan = plan_delay(BrokerDelayPolicy(), decision, orders, P.APACHE_KAFKA, 3000)
    in_force = (limits.initial_rebalance_delay_ms, limits.initial_rebalance_delay_source)
    status = delay_status(decision, orders, plan, in_force=in_force)
    assert (status["inForceMs"], status["inForceSource"]) == (3000, "static-broker-config")
    assert status["reason"] == "DelayRecommended"


STRIMZI = BrokerDelayPolicy(DelayMode.STRIMZI, 8000, 30000, StrimziRef("my-cluster", "kafka"))
ALTER = BrokerDelayPolicy(DelayMode.ALTER_CONFIGS, 8000)
RECOMMEND = BrokerDelayPolicy(DelayMode.RECOMMEND, 8000)

# (case, policy, profile, current) -> (action, config key, reason)
PLANS = [
    ("recommend on Kafka", RECOMMEND, P.APACHE_KAFKA, None, DelayAction.RECOMMEND,
     "group.initial.rebalance.delay.ms", "DelayRecommended"),
    ("strimzi on Kafka", STRIMZI, P.APACHE_KAFKA, None, DelayAction.PATCH_STRIMZI,
     "group.initial.rebalance.delay.ms", "DelayPatched"),
    ("strimzi with the profile not known yet", STRIMZI, None, None, DelayAction.PATCH_STRIMZI,
     "group.initial.rebalance.delay.ms", "DelayPatched"),
    ("strimzi on Redpanda is refused", STRIMZI, P.REDPANDA, None, DelayAction.NONE, None,
     "DelayRefused"),
    ("alter-configs on Redpanda: live", ALTER, P.REDPANDA, None, DelayAction.ALTER_BROKER,
     "group_initial_rebalance_delay", "DelayAltered"),
    ("alter-configs on Kafka is refused (read-only)", ALTER, P.APACHE_KAFKA, None,
     DelayAction.NONE, None, "DelayRefused"),
    ("alter-configs before the profile is known waits", ALTER, None, None, DelayAction.NONE,
     None, "ProfileUnknown"),
    ("already in force", ALTER, P.REDPANDA, 8000, DelayAction.NONE, None, "InForce"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "profile", "current", "action", "key", "reason"),
    [case[1:] for case in PLANS],
    ids=[case[0] for case in PLANS],
)
def test_what_each_mode_does_on_each_broker(
    policy: BrokerDelayPolicy,
    profile: P | None,
    current: int | None,
    action: DelayAction,
    key: str | None,
    reason: str,
) -> None:
    me = DelayWant("shop", "orders", CLUSTER, policy.delay_ms, policy.max_delay_ms, policy.mode)
    decision = decide_cluster_delay([me])
    assert decision is not None
    plan = plan_delay(policy, decision, me, profile, current)
    assert (plan.action, plan.config_key, plan.reason) == (action, key, reason)
    assert plan.value_ms == 8000
    if reason == "DelayRefused":
        assert plan.problem is not None and plan.problem.path == "spec.policy.brokerDelay.mode"


def test_the_strimzi_patch_sets_only_the_delay() -> None:
    assert strimzi_config_patch(8000) == {
        "spec": {"kafka": {"config": {"group.initial.rebalance.delay.ms": 8000}}}
    }
