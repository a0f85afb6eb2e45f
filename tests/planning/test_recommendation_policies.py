"""A learning decision against the ConsumerGroup: settings in force, the policy patch, the
last apply, and an apply with nothing to change."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.planning.recommendation_policies import (
    applied_at,
    as_applied,
    nothing_to_apply,
    policy_patch,
    settings_in_force,
)
from rebalancer.planning.recommendations import CurrentSettings, LearningAction, LearningDecision
from rebalancer.structs.specs import ConsumerGroupSpec, parse_spec

MANAGED: dict[str, Any] = {
    "rollout": {"enabled": True, "maxBatchSize": 4},
    "settings": {"sessionTimeoutMs": 45000},
    "brokerDelay": {"delayMs": 3000},
}


def spec_with(policy: dict[str, Any]) -> ConsumerGroupSpec:
    return parse_spec(
        {
            "groupId": "orders",
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": ["orders"]},
            "workload": {"kind": "StatefulSet", "name": "orders"},
            "policy": policy,
        }
    )


@pytest.mark.parametrize(
    ("policy", "status", "expected"),
    [
        ({}, {}, CurrentSettings()),
        (MANAGED, {}, CurrentSettings(3000.0, 4, 45000.0)),
        # What was delivered wins over what the spec asks for.
        (
            MANAGED,
            {"settings": {"sessionTimeoutMs": 30000, "brokerDelay": {"clusterMs": 0}}},
            CurrentSettings(0.0, 4, 30000.0),
        ),
        # A block turned on without the value: the default it delivers is in force.
        ({"settings": {}, "brokerDelay": {}}, {}, CurrentSettings(3000.0, None, 45000.0)),
        # The learned batch is a rolling update's: updateBatchSize wins over maxBatchSize.
        (
            {"rollout": {"enabled": True, "maxBatchSize": 4, "updateBatchSize": 12}},
            {},
            CurrentSettings(None, 12, None),
        ),
        # Nonsense in status reads as unknown, not as a number (the spec's is refused before).
        (
            {"settings": {"sessionTimeoutMs": 30000}},
            {"settings": {"sessionTimeoutMs": "x", "brokerDelay": {"clusterMs": True}}},
            CurrentSettings(None, None, 30000.0),
        ),
    ],
)
def test_settings_in_force(
    policy: dict[str, Any], status: dict[str, Any], expected: CurrentSettings
) -> None:
    assert settings_in_force(spec_with(policy), status) == expected


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2027-01-15T08:00:00Z", 1_800_000_000.0),
        ("2027-01-15T08:00:00+00:00", 1_800_000_000.0),
        ("2027-01-15T08:00:00", 1_800_000_000.0),
        ("yesterday", None),
        (None, None),
    ],
)
def test_the_last_apply_reads_back(stamp: object, expected: float | None) -> None:
    assert applied_at({"learning": {"lastAppliedTime": stamp}}) == expected


def decision(settings: CurrentSettings) -> LearningDecision:
    return LearningDecision(
        LearningAction.APPLY, settings, "Applying", "run r1: applying session timeout 20000 ms"
    )


@pytest.mark.parametrize(
    ("policy", "wanted", "patch"),
    [
        (
            MANAGED,
            CurrentSettings(1000.0, 2, 20000.0),
            {"rollout": {"updateBatchSize": 2}, "settings": {"sessionTimeoutMs": 20000},
             "brokerDelay": {"delayMs": 1000}},
        ),
        # Only the changes: a None is left alone.
        (MANAGED, CurrentSettings(None, None, 20000.5), {"settings": {"sessionTimeoutMs": 20000}}),
        # Blocks the user did not turn on are never turned on by learning: rollouts are
        # managed only when enabled (the CRD's default is off).
        ({}, CurrentSettings(1000.0, 2, 20000.0), {}),
        (
            {"rollout": {"enabled": False}},
            CurrentSettings(1000.0, 2, 20000.0),
            {},
        ),
        (
            {"rollout": {"enabled": False}, "settings": {}},
            CurrentSettings(None, 2, 20000.0),
            {"settings": {"sessionTimeoutMs": 20000}},
        ),
    ],
)  # fmt: skip
def test_the_policy_patch(
    policy: dict[str, Any], wanted: CurrentSettings, patch: dict[str, Any]
) -> None:
    assert policy_patch(decision(wanted), spec_with(policy)) == patch


def test_an_apply_with_nothing_to_patch_says_so() -> None:
    shown = nothing_to_apply(decision(CurrentSettings(None, 2, None)))
    assert (shown.action, shown.reason) == (LearningAction.SHOW, "NothingToApply")
    assert shown.message.startswith("run r1: nothing applied")
    assert "spec.policy.rollout.enabled" in shown.message


STREAMS: dict[str, Any] = {
    **MANAGED,
    "groupConfigs": {"streams": {"initialRebalanceDelayMs": 8000, "numStandbyReplicas": 1}},
}
READ_BACK = {
    "settings": {
        "brokerDelay": {"clusterMs": 3000},
        "perGroupConfigs": {
            "state": "applied",
            "configs": {
                "streams.initial.rebalance.delay.ms": {"value": "10000", "source": "group-config"}
            },
        },
    }
}


@pytest.mark.parametrize(
    ("policy", "status", "delay"),
    [
        # What the broker read back of the group's own delay wins over the spec's.
        (STREAMS, READ_BACK, 10000.0),
        (STREAMS, {"settings": {"brokerDelay": {"clusterMs": 3000}}}, 8000.0),
        # A refused block has no read-back: the spec's value stands.
        (STREAMS, {"settings": {"perGroupConfigs": {"state": "refused"}}}, 8000.0),
        # Without the block nobody set the group's delay: the broker's does not count.
        (MANAGED, {"settings": {"brokerDelay": {"clusterMs": 3000}}}, None),
        ({"groupConfigs": {"streams": {"numStandbyReplicas": 1}}}, {}, None),
    ],
)
def test_a_streams_groups_delay_in_force_is_its_own(
    policy: dict[str, Any], status: dict[str, Any], delay: float | None
) -> None:
    current = settings_in_force(spec_with(policy), status, own_delay=True)
    assert current.initial_rebalance_delay_ms == delay
    # A classic group's stays the broker's.
    classic = settings_in_force(spec_with(policy), status).initial_rebalance_delay_ms
    assert classic in (3000.0, None)


@pytest.mark.parametrize(
    ("policy", "patch"),
    [
        # Its learned delay goes to its own group config, never to the broker-wide delay.
        (
            STREAMS,
            {"settings": {"sessionTimeoutMs": 20000},
             "groupConfigs": {"streams": {"initialRebalanceDelayMs": 1000}}},
        ),
        # The block turned on without the delay: it is added to it.
        (
            {"groupConfigs": {"streams": {"numStandbyReplicas": 1}}},
            {"groupConfigs": {"streams": {"initialRebalanceDelayMs": 1000}}},
        ),
        # Without the streams block the delay is not applied, even with brokerDelay on.
        ({"brokerDelay": {"delayMs": 3000}}, {}),
        ({"groupConfigs": {"consumer": {"assignmentIntervalMs": 1000}}}, {}),
    ],
)  # fmt: skip
def test_a_streams_groups_decision_patches_its_group_configs(
    policy: dict[str, Any], patch: dict[str, Any]
) -> None:
    wanted = decision(CurrentSettings(1000.0, None, 20000.0))
    assert policy_patch(wanted, spec_with(policy), own_delay=True) == patch


def test_nothing_to_apply_names_the_streams_block_for_a_streams_group() -> None:
    wanted = decision(CurrentSettings(1000.0, None, None))
    shown = nothing_to_apply(wanted, own_delay=True)
    assert shown.reason == "NothingToApply"
    assert "a delay spec.policy.groupConfigs.streams" in shown.message
    assert "brokerDelay" not in shown.message
    # A classic group's names the broker delay, as it always did.
    assert nothing_to_apply(wanted).message.endswith("a delay spec.policy.brokerDelay")


def test_an_apply_names_only_what_its_patch_carries() -> None:
    """A streams group has no settings block: its learned session timeout is not applied, and
    the status message and Event must not say it is."""
    wanted = CurrentSettings(0.0, None, 10000.0)
    said = LearningDecision(
        LearningAction.APPLY,
        wanted,
        "Applying",
        "run r1: applying initial delay 0 ms, session timeout 10000 ms; expected 10% lower cost",
    )
    patch = policy_patch(said, spec_with({"groupConfigs": {"streams": {}}}), own_delay=True)
    assert patch == {"groupConfigs": {"streams": {"initialRebalanceDelayMs": 0}}}
    shown = as_applied(said, patch)
    assert shown.message == (
        "run r1: applying initial delay 0 ms (not session timeout 10000 ms: its block in "
        "spec.policy is not turned on); expected 10% lower cost"
    )
    assert shown.settings == wanted  # status still shows the whole recommendation
    # A patch that carries everything leaves the decision as it was.
    whole = {"groupConfigs": {"streams": {}}, "settings": {"sessionTimeoutMs": 10000}}
    assert as_applied(said, whole) == said
