"""kopf daemon per ConsumerGroup: step the rollout planner and carry out its actions."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import kopf

from rebalancer import metrics
from rebalancer.clients.autoscaling import read_autoscalers
from rebalancer.clients.events import post_event
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.clients.recording import day_of
from rebalancer.clients.rolling import ActuationFailed, Actuator, read_workload
from rebalancer.planning.consumer_settings_plans import timings_from_status
from rebalancer.planning.gate_templates import DEFAULT_IMAGE, GateOptions
from rebalancer.planning.rollout_actions import (
    ClearDegraded,
    ForeignWrite,
    MarkDegraded,
    NoteBypassedGates,
    PauseScaledObject,
    RecordProgress,
    ResumeScaledObject,
    refused,
)
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_progress import gate_waits
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollout_statuses import (
    RolloutWrite,
    pace,
    rebalances_from_status,
    rollout_write,
    snapshot_from_status,
)
from rebalancer.planning.rollouts import Observation, step
from rebalancer.planning.startup_history import StartupHistory, startup_history
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex, conflicts_of, refusal_of
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    estimate_arrival_plans,
    join_window,
)
from rebalancer.sleeping import Stopping, sleep_or_wake
from rebalancer.structs.autoscalers import Autoscalers
from rebalancer.structs.brokers import BrokerProfile, resolve_profile
from rebalancer.structs.conditions import merge_conditions
from rebalancer.structs.consumer_group import (
    declared_group_id,
    read_consumer_group,
    written_status,
)
from rebalancer.structs.gates import RESUME_ANNOTATION
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import ConsumerGroupSpec, ProtocolChoice, WorkloadKind
from rebalancer.structs.times import format_rfc3339

# How often an active rollout looks at its workload: each phase waits on pods the controllers
# replace, so every look saved is a batch released sooner (four or more looks per batch).
ACTIVE_POLL_SECONDS = 1.0
# After a step that could not read or act (the API briefly away, a refusal reported).
RETRY_SECONDS = 2.0
# The days of history the arrival plans' start-ups are measured on (a week holds a workload's
# deploys and scale-ups; older ones may have run another image), and how long one reading
# serves (a Planning step waiting for its workload's controller reads it once).
STARTUP_HISTORY_DAYS = 7
STARTUP_HISTORY_SECONDS = 300.0
DAY_SECONDS = 86_400.0
logger = logging.getLogger(__name__)


def broker_profile(spec: ConsumerGroupSpec, status: dict[str, Any]) -> BrokerProfile:
    """The spec's profile, else the one the observer detected, else Apache Kafka's timing."""
    detected = (status.get("group") or {}).get("brokerProfile")
    return resolve_profile(spec.kafka.profile.declared, detected) or BrokerProfile.APACHE_KAFKA


def rollout_setup(
    policy: RolloutPolicy,
    profile: BrokerProfile,
    protocol: ProtocolChoice = ProtocolChoice.AUTO,
    startups: StartupHistory | None = None,
) -> RolloutSetup:
    consumers = policy.consumers
    window = join_window(
        CoordinatorSettings(initial_rebalance_delay_ms=policy.initial_rebalance_delay_ms),
        profile,
        ConsumerSettings(
            session_timeout_ms=consumers.session_timeout_ms,
            heartbeat_interval_ms=consumers.heartbeat_interval_ms,
            max_poll_interval_ms=consumers.max_poll_interval_ms,
        ),
    )
    return RolloutSetup(policy, profile, window, estimate_arrival_plans, protocol, startups)


async def read_startups(
    deps: Dependencies, namespace: str, name: str, spec: ConsumerGroupSpec, now: float
) -> StartupHistory | None:
    """The group's measured start-ups over the last STARTUP_HISTORY_DAYS (None: no store, or
    it could not be read; the planner then assumes, and says so)."""
    if deps.recorder.root is None or not spec.policy.history_enabled:
        return None
    days = {day_of(now - back * DAY_SECONDS) for back in range(STARTUP_HISTORY_DAYS)}
    try:
        rows = await deps.recorder.recorded_rows(namespace, days)
    except Exception as error:  # the store may be away: the plan falls back to the assumption
        logger.warning("%s/%s: reading the start-up history failed: %s", namespace, name, error)
        return None
    return startup_history(rows, name=name, group_id=spec.group_id)


async def _post(deps: Dependencies, body: kopf.Body, actions: list[Any]) -> None:
    """The step's Events; a transition's is in the API before the status that records it."""
    for action in actions:
        if isinstance(action, RecordProgress):
            warning = action.reason == "RolloutFailed"
            await post_event(
                deps.kube, body, warning=warning, reason=action.reason, message=action.message
            )
        elif isinstance(action, MarkDegraded):
            kopf.warn(body, reason=action.reason, message=action.message)
        elif isinstance(action, ClearDegraded):
            kopf.info(body, reason=action.reason, message=action.message)
        elif isinstance(action, ForeignWrite):
            post = kopf.warn if action.warning else kopf.info
            post(body, reason=action.reason, message=action.message)
        elif isinstance(action, NoteBypassedGates):
            kopf.warn(body, reason="GateBypassed", message=action.message)
            namespace = body.metadata.namespace or "default"
            group_id = declared_group_id(body)
            name = body.metadata.name or ""
            metrics.record_gate_bypasses(namespace, name, group_id, len(action.pods))


def _post_autoscalers(body: kopf.Body, actions: list[Any], done: list[Any]) -> None:
    """An Event for each KEDA pause or resume carried out (one skipped because the object
    changed since it was read is asked for again by the next step, and told then)."""
    for action in actions:
        if isinstance(action, PauseScaledObject) and action in done:
            kopf.info(body, reason="AutoscalerPaused", message=action.message)
        elif isinstance(action, ResumeScaledObject) and action in done:
            kopf.info(body, reason="AutoscalerResumed", message=action.message)


async def _step_once(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    state: RolloutState,
    policy: RolloutPolicy,
    spec: ConsumerGroupSpec,
    startups: StartupHistory | None = None,
) -> tuple[RolloutState, list[Any]] | None:
    """Read, step the planner, act; None when a read or an action failed (the state keeps,
    and the next step asks for the same end state again)."""
    observation = await _observe(deps, body, namespace, name, policy, spec, startups)
    if observation is None:
        return None
    after, actions = step(state, observation, time.time())
    if not await _act(deps, body, namespace, name, policy, spec, actions):
        return None
    if observation.workload is not None:
        waits = gate_waits(observation.workload, actions, time.time())
        metrics.record_gate_waits(namespace, name, spec.group_id, waits)
    return after, list(actions)


async def _observe(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    policy: RolloutPolicy,
    spec: ConsumerGroupSpec,
    startups: StartupHistory | None,
) -> Observation | None:
    """What the planner steps on: the workload, its autoscalers, the group's latest snapshot;
    None when the workload could not be read."""
    status = written_status(body)
    # Consumers whose settings the operator delivers are timed by what it delivered.
    consumers = timings_from_status(status.get("settings"), policy.consumers)
    setup = rollout_setup(
        replace(policy, consumers=consumers),
        broker_profile(spec, status),
        spec.policy.protocol,
        startups,
    )
    kind, workload_name = spec.workload.kind, spec.workload.name
    try:
        workload = await read_workload(deps.kube, namespace, kind, workload_name)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "rollouts", error, spec.group_id)
        return None
    except Exception as error:  # the API may be briefly away; the state keeps
        logger.warning("%s/%s: reading %s failed: %s", namespace, name, workload_name, error)
        return None
    autoscalers = await _autoscalers(deps, body, namespace, name, spec)
    sighting = deps.sightings.latest(namespace, name)
    return Observation(
        setup=setup,
        workload=workload,
        group=sighting.snapshot if sighting else snapshot_from_status(status),
        rebalances=sighting.rebalances if sighting else rebalances_from_status(status),
        spec_generation=body.metadata.get("generation"),
        resume_token=body.metadata.annotations.get(RESUME_ANNOTATION),
        autoscalers=autoscalers,
    )


async def _act(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    policy: RolloutPolicy,
    spec: ConsumerGroupSpec,
    actions: Sequence[Any],
) -> bool:
    """Carry out the step's actions and post their Events; False when they could not be (the
    workload changed since it was read, a refusal, a failed write)."""
    gate = GateOptions(
        image=policy.gate_image or deps.settings.gate_image or DEFAULT_IMAGE,
        timeout_seconds=policy.gate_timeout_seconds,
        bypass_after_seconds=policy.bypass_gate_after_seconds,
        hold=policy.gate_holds,
    )
    workload_name = spec.workload.name
    actuator = Actuator(deps.kube, namespace, spec.workload.kind, workload_name, gate)
    pauses = [a for a in actions if isinstance(a, PauseScaledObject)]
    resumes = [a for a in actions if isinstance(a, ResumeScaledObject)]
    moves = [a for a in actions if not isinstance(a, PauseScaledObject | ResumeScaledObject)]
    # KEDA is paused before anything moves the workload and resumed after.
    done = await _apply_autoscaling(deps, body, namespace, name, spec, actuator, pauses)
    try:
        done += await actuator.apply(moves)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "rollouts", error, spec.group_id)
        return False
    except ActuationFailed as error:
        # The state does not advance: the next step asks for the same end state again.
        kopf.warn(body, reason="RolloutActionFailed", message=str(error))
        return False
    if refused(moves, done):
        # The workload changed since it was read: the step is taken again on what it is now.
        logger.info("%s/%s: %s changed since it was read", namespace, name, workload_name)
        return False
    if deps.denials.clear(namespace, name, "rollouts"):
        deps.hub.wakeup(spec.group_id).set()  # the observer takes the condition back
    done += await _apply_autoscaling(deps, body, namespace, name, spec, actuator, resumes)
    await _post(deps, body, list(actions))
    _post_autoscalers(body, list(actions), done)
    return True


async def _apply_autoscaling(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    spec: ConsumerGroupSpec,
    actuator: Actuator,
    actions: list[Any],
) -> list[Any]:
    """Pause or resume KEDA; a failure holds no rollout back (it is level-based: the next step
    asks again), and a refusal is reported as its own kind of work."""
    if not actions:
        return []
    try:
        done = await actuator.apply(actions)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "autoscaler-pause", error, spec.group_id)
        return []
    except ActuationFailed as error:
        kopf.warn(body, reason="AutoscalerActionFailed", message=str(error))
        return []
    if deps.denials.clear(namespace, name, "autoscaler-pause"):
        deps.hub.wakeup(spec.group_id).set()
    return done


async def _autoscalers(
    deps: Dependencies, body: kopf.Body, namespace: str, name: str, spec: ConsumerGroupSpec
) -> Autoscalers:
    """The workload's autoscalers; none when they cannot be read. A refusal is reported (the
    rollout goes on: it only cannot keep KEDA from scaling meanwhile); the API being briefly
    away is only logged, and the next step reads again."""
    try:
        found = await read_autoscalers(deps.kube, namespace, spec.workload.kind, spec.workload.name)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "autoscalers", error, spec.group_id)
        return Autoscalers()
    except Exception as error:  # the API may be briefly away
        logger.warning("%s/%s: reading autoscalers failed: %s", namespace, name, error)
        return Autoscalers()
    if deps.denials.clear(namespace, name, "autoscalers"):
        deps.hub.wakeup(spec.group_id).set()  # the observer takes the condition back
    return found


async def roll_out(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    stopped: Stopping,
    claims: ClaimIndex | None = None,
) -> None:
    """Step the group's rollout planner until the resource goes (the daemon's whole life)."""
    try:
        await _roll_out_forever(deps, body, namespace, name, stopped, claims)
    finally:
        deps.rollout_wakeups.pop((namespace, name), None)


@dataclass
class _StartupReadings:
    """The arrival plans' start-up history, read for a Planning step (only it asks the model
    about arrivals) and read again once older than STARTUP_HISTORY_SECONDS."""

    history: StartupHistory | None = None
    read_at: float | None = None  # time.monotonic() of the last reading

    async def for_step(
        self,
        deps: Dependencies,
        namespace: str,
        name: str,
        spec: ConsumerGroupSpec,
        phase: RolloutPhase,
    ) -> StartupHistory | None:
        stale = self.read_at is None or time.monotonic() - self.read_at >= STARTUP_HISTORY_SECONDS
        if phase is RolloutPhase.PLANNING and stale:
            self.history = await read_startups(deps, namespace, name, spec, time.time())
            self.read_at = time.monotonic()
        return self.history


async def _roll_out_forever(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    stopped: Stopping,
    claims: ClaimIndex | None = None,
) -> None:
    state = RolloutState.from_status(written_status(body).get("rollout"))
    written: dict[str, Any] | None = None
    managed = False
    hold_checked = False
    wakeup = deps.rollout_wakeup(namespace, name)
    resting_poll = deps.settings.rollout_resting_poll_seconds
    followed_at_once = False
    startups = _StartupReadings()
    while not stopped:
        wakeup.clear()
        spec = _valid_spec(deps, body, namespace)
        if spec is None:
            await stopped.wait(5)  # validate() reports it; look again for the user's fix
            continue
        policy = spec.policy.rollout
        if refusal_of(body, namespace, claims, deps.hub) is not None:
            # An older resource owns the workload, or its consumers are another group's: no
            # parking, no gate, not even a hand-back (what is parked or held is not this
            # resource's). The observer says so.
            await sleep_or_wake(resting_poll, wakeup.wait, stopped)
            continue
        resting = state.phase.value == "Idle" and not state.parked and not state.holding_deployment
        if not policy.enabled and not managed and resting:
            if hold_checked or not await _held_for_rollout(deps, namespace, spec):
                # Never managed: nothing to hand back, and the workload stays the user's alone.
                hold_checked = True
                await sleep_or_wake(resting_poll, wakeup.wait, stopped)
                continue
            # Paused by a settings write for a planner turned off before it took the hold
            # over (with the operator restarted meanwhile): this step hands it back.
            hold_checked = True
        managed = policy.enabled
        history = await startups.for_step(deps, namespace, name, spec, state.phase)
        stepped = await _step_once(deps, body, namespace, name, state, policy, spec, history)
        if stepped is None:
            await stopped.wait(RETRY_SECONDS)
            continue
        after, actions = stepped
        write = rollout_write(state, after, actions, written)
        if write is not None:
            if not await _write_rollout(deps, body, namespace, name, write):
                return
            written = write.rollout
        followed_at_once = await _pace_and_wait(
            deps, spec, state, stepped, followed_at_once, wakeup, stopped
        )
        state = after


def _valid_spec(deps: Dependencies, body: kopf.Body, namespace: str) -> ConsumerGroupSpec | None:
    try:
        return read_consumer_group(
            body, namespace=namespace, bypass_default=deps.settings.gate_bypass_after_seconds
        ).spec
    except SpecInvalid:
        return None


async def _pace_and_wait(
    deps: Dependencies,
    spec: ConsumerGroupSpec,
    before: RolloutState,
    stepped: tuple[RolloutState, list[Any]],
    followed_at_once: bool,
    wakeup: asyncio.Event,
    stopped: Stopping,
) -> bool:
    """Wake the observer when the step from `before` asks for it, then sleep until the next
    step (or a wake-up); whether the next step follows this one at once."""
    after, actions = stepped
    paced = pace(
        before,
        after,
        actions,
        time.time(),
        active_poll=ACTIVE_POLL_SECONDS,
        resting_poll=deps.settings.rollout_resting_poll_seconds,
        followed_at_once=followed_at_once,
    )
    if paced.wake_observer:
        deps.hub.wakeup(spec.group_id).set()
    await sleep_or_wake(paced.delay, wakeup.wait, stopped)
    return paced.at_once


async def _write_rollout(
    deps: Dependencies, body: kopf.Body, namespace: str, name: str, write: RolloutWrite
) -> bool:
    """status.rollout and its conditions, merged by type; False when the resource is gone."""
    status = written_status(body)
    fields: dict[str, Any] = {"rollout": write.rollout}
    if write.conditions:
        fields["conditions"] = merge_conditions(
            status.get("conditions") or [],
            write.conditions,
            now=format_rfc3339(time.time()),
            generation=body.metadata.get("generation"),
        )
    try:
        await patch_status(deps.kube, namespace, name, status, fields)
    except ResourceGone:
        return False
    return True


async def _held_for_rollout(deps: Dependencies, namespace: str, spec: ConsumerGroupSpec) -> bool:
    """Whether the workload is a Deployment paused by the operator for the rollout planner."""
    if spec.workload.kind is not WorkloadKind.DEPLOYMENT:
        return False
    try:
        workload = await read_workload(deps.kube, namespace, spec.workload.kind, spec.workload.name)
    except Exception:  # the API may be briefly away; the hand-back waits for a managed step
        return False
    return workload is not None and workload.paused and workload.held_for_rollout


async def hand_back(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    claims: ClaimIndex | None = None,
) -> None:
    """Deleting a ConsumerGroup gives the workload back: no gate left shut, nothing parked."""
    if conflicts_of(body, namespace, claims)[1]:
        # A newer duplicate goes: the workload stays with the older resource that owns it.
        return
    state = RolloutState.from_status(written_status(body).get("rollout"))
    try:
        spec = read_consumer_group(body, namespace=namespace).spec
    except SpecInvalid:
        return
    policy = spec.policy.rollout
    resting = state.phase.value == "Idle" and not state.parked and not state.holding_deployment
    # A Deployment may be paused for a rollout the planner has not taken over yet (the
    # settings write pauses it): only the workload itself tells.
    if resting and spec.workload.kind is not WorkloadKind.DEPLOYMENT:
        return
    await _step_once(deps, body, namespace, name, state, replace(policy, enabled=False), spec)
