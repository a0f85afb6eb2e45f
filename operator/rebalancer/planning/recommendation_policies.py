"""How a learning decision meets the ConsumerGroup: the settings in force it is compared with,
the spec.policy patch that carries it out, and when the last one was applied. Pure.

The recommendation is never applied by a side door: the patch changes the same spec.policy
blocks a user would, so the settings, rollout, broker-delay and group-config machinery carry it
out (with their own validation, stagger and status) exactly as they carry out a user's change.
A streams group's learned delay is its own (the recommendation's delayScope "group"): it goes
to spec.policy.groupConfigs.streams, never to the broker-wide spec.policy.brokerDelay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rebalancer.planning.history_records import group_config_value
from rebalancer.planning.recommendations import (
    CurrentSettings,
    LearningAction,
    LearningDecision,
    describe_settings,
)
from rebalancer.structs.group_configs_spec import (
    STREAMS_CONFIGS_PATH,
    STREAMS_DELAY_CONFIG,
    StreamsGroupConfigsSpec,
)
from rebalancer.structs.specs import ConsumerGroupSpec
from rebalancer.structs.times import read_rfc3339


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def settings_in_force(
    spec: ConsumerGroupSpec, status: Mapping[str, Any], own_delay: bool = False
) -> CurrentSettings:
    """What is in force as far as spec and status tell; None where nobody set it (a block of
    spec.policy the user did not turn on leaves the value to the application or the broker).

    The delay the broker-delay decision settled on wins over the one the spec asks for (other
    groups of the cluster may have asked for another); the session timeout the settings
    delivered wins over the spec's, which may still be on its way. `own_delay`: the group's
    delay is its own (a streams group's streams.initial.rebalance.delay.ms), as the broker read
    it back, else as spec.policy.groupConfigs.streams asks.
    """
    policy = spec.policy
    delivered = status.get("settings") or {}
    delay = _own_delay(spec, status) if own_delay else _broker_delay(spec, delivered)
    session = _number(delivered.get("sessionTimeoutMs"))
    if session is None and policy.settings is not None:
        session = float(policy.settings.session_timeout_ms)
    return CurrentSettings(
        initial_rebalance_delay_ms=delay,
        # The learned batch is a rolling update's: updateBatchSize, else maxBatchSize.
        batch_size=(
            policy.rollout.update_batch_size
            if policy.rollout.update_batch_size is not None
            else policy.rollout.max_batch_size
        ),
        session_timeout_ms=session,
    )


def _broker_delay(spec: ConsumerGroupSpec, delivered: Mapping[str, Any]) -> float | None:
    delay = _number((delivered.get("brokerDelay") or {}).get("clusterMs"))
    if delay is None and spec.policy.broker_delay is not None:
        delay = float(spec.policy.broker_delay.delay_ms)
    return delay


def _own_delay(spec: ConsumerGroupSpec, status: Mapping[str, Any]) -> float | None:
    delay = group_config_value(status, STREAMS_DELAY_CONFIG)
    streams = _streams_configs(spec)
    if delay is None and streams is not None and streams.initial_rebalance_delay_ms is not None:
        delay = float(streams.initial_rebalance_delay_ms)
    return delay


def _streams_configs(spec: ConsumerGroupSpec) -> StreamsGroupConfigsSpec | None:
    configs = spec.policy.group_configs
    return None if configs is None else configs.streams


def applied_at(status: Mapping[str, Any]) -> float | None:
    """When a recommendation was last applied (status.learning.lastAppliedTime), unix seconds."""
    return read_rfc3339((status.get("learning") or {}).get("lastAppliedTime"))


def policy_patch(
    decision: LearningDecision, spec: ConsumerGroupSpec, own_delay: bool = False
) -> dict[str, Any]:
    """The spec.policy changes that carry a decision out through the existing machinery.

    Only the blocks the user turned on are touched: a learned rolling-update batch size needs
    managed rollouts (spec.policy.rollout.enabled), a session timeout managed settings, a delay
    a broker-delay policy, or, when the delay is the group's own (`own_delay`: a streams
    group's), spec.policy.groupConfigs.streams, which sets it on the group alone.
    """
    policy = spec.policy
    wanted = decision.settings
    patch: dict[str, Any] = {}
    if wanted.batch_size is not None and policy.rollout.enabled:
        # updateBatchSize, not maxBatchSize: the batch was learned from rolling updates, and
        # cold starts and scale-ups keep the arrival plan the planner chooses per change.
        patch["rollout"] = {"updateBatchSize": int(wanted.batch_size)}
    if wanted.session_timeout_ms is not None and policy.settings is not None:
        patch["settings"] = {"sessionTimeoutMs": int(wanted.session_timeout_ms)}
    delay = wanted.initial_rebalance_delay_ms
    if delay is not None and own_delay:
        if _streams_configs(spec) is not None:
            # A merge patch: the block's other configs stay as the user set them.
            patch["groupConfigs"] = {"streams": {"initialRebalanceDelayMs": int(delay)}}
    elif delay is not None and policy.broker_delay is not None:
        patch["brokerDelay"] = {"delayMs": int(delay)}
    return patch


def as_applied(decision: LearningDecision, patch: Mapping[str, Any]) -> LearningDecision:
    """The decision as `patch` carries it out: status and the Event name what is applied, and
    what of the recommendation is left out because its block in spec.policy is not turned on
    (a streams group has no `settings` block, so its session timeout is never applied)."""
    wanted = decision.settings
    delay_in = "groupConfigs" in patch or "brokerDelay" in patch
    applied = CurrentSettings(
        initial_rebalance_delay_ms=wanted.initial_rebalance_delay_ms if delay_in else None,
        batch_size=wanted.batch_size if "rollout" in patch else None,
        session_timeout_ms=wanted.session_timeout_ms if "settings" in patch else None,
    )
    if applied == wanted:
        return decision
    left = CurrentSettings(
        initial_rebalance_delay_ms=None if delay_in else wanted.initial_rebalance_delay_ms,
        batch_size=None if "rollout" in patch else wanted.batch_size,
        session_timeout_ms=None if "settings" in patch else wanted.session_timeout_ms,
    )
    said = f"applying {describe_settings(wanted)}"
    instead = (
        f"applying {describe_settings(applied)} (not {describe_settings(left)}: "
        "its block in spec.policy is not turned on)"
    )
    return replace(decision, message=decision.message.replace(said, instead))


def nothing_to_apply(decision: LearningDecision, own_delay: bool = False) -> LearningDecision:
    """The decision to show when an apply finds none of its blocks turned on in spec.policy:
    status must not say "Applying" while nothing changes."""
    delay_block = (
        f"{STREAMS_CONFIGS_PATH} (a streams group's delay is its own)"
        if own_delay
        else "spec.policy.brokerDelay"
    )
    return replace(
        decision,
        action=LearningAction.SHOW,
        reason="NothingToApply",
        message=(
            f"{decision.message.split(':', 1)[0]}: nothing applied: a batch size needs "
            f"spec.policy.rollout.enabled, a session timeout spec.policy.settings, a delay "
            f"{delay_block}"
        ),
    )
