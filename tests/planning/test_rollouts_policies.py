"""spec.policy.rollout parsing and the checks that need the workload and the broker."""

from __future__ import annotations

from typing import Any

import pytest
from tests.planning.rollout_world import T0, World, setup_for, with_pods

from rebalancer.planning.rollout_plans import (
    Change,
    RolloutSetup,
    check_rollout,
    classify,
    expected_batch_seconds,
    plan_rollout,
    split_batches,
    static_budget_s,
)
from rebalancer.planning.rollout_states import Mechanism, RolloutKind
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import (
    ConsumerTimings,
    RolloutPolicy,
    StaticMembership,
    parse_rollout_policy,
)


def test_defaults() -> None:
    assert parse_rollout_policy(None) == RolloutPolicy()
    assert parse_rollout_policy({}) == RolloutPolicy()


def test_every_field() -> None:
    policy = parse_rollout_policy(
        {
            "enabled": True,
            "maxBatchSize": 4,
            "updateBatchSize": 6,
            "batchDeadlineSeconds": 120,
            "gatherSeconds": 30,
            "settleSeconds": 5,
            "gateJoins": True,
            "injectGate": True,
            "gateImage": "registry.example/rebalancer:1.2",
            "gateTimeoutSeconds": 600,
            "bypassGateAfterSeconds": 300,
            "staticMembership": "enabled",
            "staticRestartBudgetSeconds": 20,
            "scaleSteps": False,
            "parkStatefulSets": False,
            "paused": False,
            "initialRebalanceDelayMs": 5000,
            "consumers": {
                "sessionTimeoutMs": 30000,
                "heartbeatIntervalMs": 3000,
                "maxPollIntervalMs": 60000,
            },
        }
    )
    assert policy == RolloutPolicy(
        max_batch_size=4,
        update_batch_size=6,
        batch_deadline_seconds=120,
        gather_seconds=30,
        settle_seconds=5,
        inject_gate=True,
        gate_image="registry.example/rebalancer:1.2",
        gate_timeout_seconds=600,
        bypass_gate_after_seconds=300,
        static_membership=StaticMembership.ENABLED,
        static_restart_budget_seconds=20,
        park_statefulsets=False,
        initial_rebalance_delay_ms=5000,
        consumers=ConsumerTimings(30000, 3000, 60000),
    )


@pytest.mark.parametrize(
    ("raw", "path", "fix"),
    [
        ({"maxBatchSize": 0}, "spec.policy.rollout.maxBatchSize", "from 1 to 10000"),
        ({"maxBatchSize": "3"}, "spec.policy.rollout.maxBatchSize", "use a number"),
        ({"updateBatchSize": 0}, "spec.policy.rollout.updateBatchSize", "from 1 to 10000"),
        ({"batchDeadlineSeconds": 1}, "spec.policy.rollout.batchDeadlineSeconds", "from 5"),
        ({"gateJoins": "yes"}, "spec.policy.rollout.gateJoins", "use a bool"),
        ({"staticMembership": "maybe"}, "spec.policy.rollout.staticMembership", "auto, enabled"),
        ({"gateImage": ""}, "spec.policy.rollout.gateImage", "name an image"),
        (
            {"consumers": {"sessionTimeoutMs": 3000, "heartbeatIntervalMs": 3000}},
            "spec.policy.rollout.consumers.heartbeatIntervalMs",
            "a third is usual",
        ),
        (
            {"gatherSeconds": 300, "gateTimeoutSeconds": 200},
            "spec.policy.rollout.gateTimeoutSeconds",
            "above 300",
        ),
        ({"bypassGateAfterSeconds": 10}, "spec.policy.rollout.bypassGateAfterSeconds", "30"),
        ("fast", "spec.policy.rollout", "as a mapping"),
    ],
)
def test_problems_name_the_field_and_the_fix(raw: Any, path: str, fix: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_rollout_policy(raw)
    problem = caught.value.problems[0]
    assert problem.path == path
    assert fix in problem.fix


@pytest.mark.parametrize(
    ("total", "limit", "sizes"),
    [
        (0, 3, ()),
        (1, 3, (1,)),
        (6, 6, (6,)),
        (7, 3, (3, 2, 2)),
        (10, 4, (4, 3, 3)),
        (12, 5, (4, 4, 4)),
        (5, 0, (1, 1, 1, 1, 1)),
    ],
)
def test_split_batches(total: int, limit: int, sizes: tuple[int, ...]) -> None:
    assert split_batches(total, limit) == sizes


KAFKA = setup_for()
# A broker with a 10 s initial delay and consumers with a 20 s poll interval: the slide is cut
# at the rebalance timeout.
SLOW = RolloutSetup(
    RolloutPolicy(consumers=ConsumerTimings(max_poll_interval_ms=15000)),
    BrokerProfile.APACHE_KAFKA,
    10.0,
)


@pytest.mark.parametrize(
    ("setup", "empty", "size", "static", "seconds"),
    [
        (KAFKA, True, 1, False, 3.2),  # one initial delay
        (KAFKA, True, 6, False, 6.2),  # ... which slides once for the joins during it
        (KAFKA, False, 6, False, 4.2),  # members rejoin at a heartbeat and a poll
        (SLOW, True, 6, False, 15.2),  # the slide stops at the rebalance timeout
        (SLOW, True, 1, True, 10.2),
    ],
)
def test_expected_batch_seconds(
    setup: RolloutSetup, empty: bool, size: int, static: bool, seconds: float
) -> None:
    assert expected_batch_seconds(setup, empty, size, static) == pytest.approx(seconds)


def test_static_budget_follows_the_broker() -> None:
    assert static_budget_s(KAFKA) == 42.0  # 45 s session less one heartbeat


def statefulset(replicas: int = 6, **fields: Any) -> World:
    world = World(replicas=replicas, **fields)
    world.scale_to(replicas, T0)
    return world


@pytest.mark.parametrize(
    ("policy", "profile", "window", "path", "words"),
    [
        (
            RolloutPolicy(batch_deadline_seconds=5),
            BrokerProfile.APACHE_KAFKA,
            3.0,
            "spec.policy.rollout.batchDeadlineSeconds",
            "join window of 3.0 s (group.initial.rebalance.delay.ms of an Empty group)",
        ),
        (
            RolloutPolicy(batch_deadline_seconds=20),
            BrokerProfile.APACHE_KAFKA,
            22.5,
            "spec.policy.rollout.batchDeadlineSeconds",
            "45.2 s in all; fix: set batchDeadlineSeconds to at least 91",
        ),
    ],
)
def test_policies_that_cannot_be_met(
    policy: RolloutPolicy, profile: BrokerProfile, window: float, path: str, words: str
) -> None:
    world = statefulset()
    setup = setup_for(policy, profile, window)
    workload = world.workload(T0)
    change = classify(setup, workload, None, None)
    assert change == Change(RolloutKind.COLD_START, Mechanism.GATE_QUEUE, False)
    plan = plan_rollout(setup, workload, None, change)
    assert [problem.path for problem in plan.problems] == [path]
    assert words in str(plan.problems[0])


@pytest.mark.parametrize("replicas", [1, 2, 6])
def test_a_max_batch_size_above_the_replicas_is_capped_not_refused(replicas: int) -> None:
    """An autoscaler may run the workload at fewer replicas than maxBatchSize (KEDA activates
    a workload from zero at 1): the batch takes the pods there are."""
    world = statefulset(replicas)
    setup = setup_for(RolloutPolicy(max_batch_size=8))
    workload = world.workload(T0)
    change = classify(setup, workload, None, None)
    assert change is not None
    plan = plan_rollout(setup, workload, None, change)
    assert plan.problems == ()
    assert plan.sizes == (replicas,)


def test_an_update_batch_size_batches_rolling_updates_only() -> None:
    """updateBatchSize (what `rebalancer learn` recommends) replaces maxBatchSize for rolling
    updates; a scale-up keeps maxBatchSize, here unset: every new pod at once."""
    setup = setup_for(RolloutPolicy(update_batch_size=4))
    rolling = with_pods(World(replicas=12, partition=12), T0)
    rolling.revision = "r2"
    workload = rolling.workload(T0)
    change = classify(setup, workload, rolling.group(T0), None)
    assert change is not None and change.kind is RolloutKind.ROLLING_UPDATE
    assert plan_rollout(setup, workload, rolling.group(T0), change).sizes == (4, 4, 4)
    growing = with_pods(World(replicas=6), T0)
    growing.scale_to(12, T0)
    workload = growing.workload(T0 + 1)
    change = classify(setup, workload, growing.group(T0 + 1), None)
    assert change is not None and change.kind is RolloutKind.SCALE_UP
    assert plan_rollout(setup, workload, growing.group(T0 + 1), change).sizes == (6,)
    capped = setup_for(RolloutPolicy(max_batch_size=3, update_batch_size=4))
    assert plan_rollout(capped, workload, growing.group(T0 + 1), change).sizes == (3, 3)


def test_static_budget_longer_than_the_session_allows() -> None:
    world = with_pods(World(replicas=4, partition=4), T0)
    world.revision = "r2"
    policy = RolloutPolicy(
        static_membership=StaticMembership.ENABLED, static_restart_budget_seconds=60
    )
    setup = setup_for(policy)
    workload = world.workload(T0)
    change = classify(setup, workload, world.group(T0), None)
    assert change is not None and change.static
    problems = check_rollout(setup, workload, world.group(T0), change, (1,))
    assert [p.path for p in problems] == ["spec.policy.rollout.staticRestartBudgetSeconds"]
    assert "at most 42" in problems[0].fix


def test_plan_gives_each_batch_its_window_and_earliest_start() -> None:
    world = with_pods(World(replicas=6), T0)
    world.scale_to(12, T0)
    world.start_delay = lambda _n, _i: 0.0
    setup = setup_for(RolloutPolicy(max_batch_size=3, settle_seconds=10))
    workload = world.workload(T0 + 1)
    change = classify(setup, workload, world.group(T0 + 1), None)
    assert change is not None and change.kind is RolloutKind.SCALE_UP
    plan = plan_rollout(setup, workload, world.group(T0 + 1), change)
    assert plan.sizes == (3, 3)
    first, second = plan.batches
    assert first.pods == ("orders-6", "orders-7", "orders-8")
    assert first.window_s == 3.0  # a group with members: one heartbeat interval
    assert second.earliest_start_s == pytest.approx(first.expected_s + 10)
    assert not plan.problems


def test_plan_notes_a_missing_gate() -> None:
    world = statefulset(gate_installed=False)
    world.revision = "r2"
    setup = setup_for()
    workload = replace_revision(world)
    change = classify(setup, workload, None, None)
    assert change is not None
    plan = plan_rollout(setup, workload, None, change)
    assert "has no rebalancer-gate init container" in plan.notes[0]


def replace_revision(world: World) -> Any:
    for pod in world.pods.values():
        pod.revision = "r1"
    return world.workload(T0)
