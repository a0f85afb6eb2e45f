"""`enforce`, `pause` and `resume`: merge patches onto the fields the operator already reads.

- enforce: a new `spec.policy.enforce.requestToken` (reconcilers.enforcing, planning.triggers:
  a changed token is one on-demand request). The first token the operator sees is only its
  baseline (`status.enforcement.memory.tokenSeen` false): the plugin then writes one, waits for
  the operator to take it, and writes a second, which is the request.
- pause: `spec.policy.rollout.paused: true` (planning.rollout_phases.stopped: any active
  phase -> Paused; Idle and Completed -> Paused, so the next rollout waits too).
- resume: `spec.policy.rollout.paused: false` for a paused rollout (back to the phase it paused,
  its timers moved on by the pause), and a new `rebalancer.dev/resume-rollout` annotation for a
  failed one (Failed -> Idle, then planned again).

Each function looks at the object as read and returns the patch and what to tell the user, or
a refusal when the operator would not act on the write.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.triggers import memory_from_status
from rebalancer.structs.consumer_group import read_consumer_group
from rebalancer.structs.gates import RESUME_ANNOTATION
from rebalancer.structs.problems import SpecInvalid

TOKEN_PREFIX = "kubectl-"
TOKEN_FIELD = "spec.policy.enforce.requestToken"
PAUSED_FIELD = "spec.policy.rollout.paused"


@dataclass(frozen=True)
class Change:
    """What to write (a JSON merge patch of the ConsumerGroup, None: nothing) and what to say.

    `refused`: the operator would not act on a write, and `message` says why and what to do.
    `baseline`: the token written is one the operator will take as its starting point, not as
    a request; a second token must follow once it has (baseline_taken).
    """

    patch: Mapping[str, Any] | None
    message: str
    refused: bool = False
    baseline: str | None = None
    notes: tuple[str, ...] = field(default=())


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(body: Mapping[str, Any]) -> str:
    metadata = _mapping(body.get("metadata"))
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def new_token(now: float, previous: str | None) -> str:
    """A request token naming the moment it was asked (a new value is all the operator
    needs), never equal to `previous`."""
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    token = TOKEN_PREFIX + moment.strftime("%Y%m%dT%H%M%S.") + f"{moment.microsecond:06d}Z"
    return token if token != previous else f"{token}-1"


def _invalid(body: Mapping[str, Any], error: SpecInvalid) -> Change:
    return Change(
        None,
        f"consumergroup {_name(body)} has an invalid spec, which the operator does not act "
        f"on: {error.summary()}",
        refused=True,
    )


def enforce_change(body: Mapping[str, Any], now: float) -> Change:
    try:
        group = read_consumer_group(body)
    except SpecInvalid as error:
        return _invalid(body, error)
    enforce = group.spec.policy.enforce
    if enforce.sidecar.token_secret is None:
        return Change(
            None,
            f"consumergroup {_name(body)}: spec.policy.enforce.sidecar.tokenSecretRef is not "
            "set, so the operator cannot call the sidecars that enforce a rebalance "
            "(EnforceNotConfigured); set it and run the sidecar (docs/enforcing.md)",
            refused=True,
        )
    memory = memory_from_status(group.status_part("enforcement").get("memory"))
    token = new_token(now, enforce.request_token)
    patch = {"spec": {"policy": {"enforce": {"requestToken": token}}}}
    if not memory.token_seen:
        return Change(
            patch,
            f"consumergroup {_name(body)}: wrote {TOKEN_FIELD}={token} as the operator's "
            "baseline (the first token it sees is not a request)",
            baseline=token,
        )
    return Change(
        patch,
        f"consumergroup {_name(body)}: requested an enforced rebalance ({TOKEN_FIELD}={token}); "
        f"the operator asks a sidecar within seconds: status.enforcement tells the outcome and "
        f"`kubectl rebalancer why {group.name}` the rebalance",
    )


def baseline_taken(body: Mapping[str, Any], token: str) -> bool:
    """Whether the operator has seen `token` as its baseline, so that a new one is a request."""
    status = _mapping(body.get("status"))
    memory = memory_from_status(_mapping(status.get("enforcement")).get("memory"))
    return memory.token_seen and memory.token == token


def _rollout(body: Mapping[str, Any]) -> RolloutState:
    return RolloutState.from_status(_mapping(body.get("status")).get("rollout"))


def pause_change(body: Mapping[str, Any]) -> Change:
    try:
        group = read_consumer_group(body)
    except SpecInvalid as error:
        return _invalid(body, error)
    policy = group.spec.policy.rollout
    if not policy.enabled:
        return Change(
            None,
            f"consumergroup {_name(body)}: rollouts are not managed "
            "(spec.policy.rollout.enabled is false), so there is no rollout to pause",
            refused=True,
        )
    if policy.paused:
        return Change(None, f"consumergroup {_name(body)}: the rollout is already paused")
    rollout = _rollout(body)
    notes: list[str] = []
    if rollout.phase is RolloutPhase.FAILED:
        notes.append(
            "the rollout had failed: a spec change clears a failed rollout, so it is now paused "
            "from Idle and planned again on resume"
        )
    elif not rollout.phase.active:
        notes.append(
            f"no rollout is running ({rollout.phase.value}): the next one waits until resumed"
        )
    return Change(
        {"spec": {"policy": {"rollout": {"paused": True}}}},
        f"consumergroup {_name(body)}: rollout paused ({PAUSED_FIELD}: true); no further batch "
        f"is released until `kubectl rebalancer resume {group.name}`",
        notes=tuple(notes),
    )


def resume_change(body: Mapping[str, Any], now: float) -> Change:
    try:
        group = read_consumer_group(body)
    except SpecInvalid as error:
        return _invalid(body, error)
    rollout = _rollout(body)
    policy = group.spec.policy.rollout
    patch: dict[str, Any] = {}
    done: list[str] = []
    if policy.paused:
        patch["spec"] = {"policy": {"rollout": {"paused": False}}}
        back = rollout.paused_from.value if rollout.paused_from is not None else "where it was"
        done.append(f"unpaused ({PAUSED_FIELD}: false; it goes back to {back})")
    if rollout.phase is RolloutPhase.FAILED:
        annotations = _mapping(_mapping(body.get("metadata")).get("annotations"))
        previous = annotations.get(RESUME_ANNOTATION)
        value = new_token(now, previous if isinstance(previous, str) else None)
        patch["metadata"] = {"annotations": {RESUME_ANNOTATION: value}}
        why = f" ({rollout.reason})" if rollout.reason else ""
        done.append(f"the failed rollout{why} resumed ({RESUME_ANNOTATION}={value})")
    if not patch:
        return Change(
            None,
            f"consumergroup {_name(body)}: nothing to resume: the rollout is "
            f"{rollout.phase.value} and {PAUSED_FIELD} is false",
        )
    notes: tuple[str, ...] = ()
    if not policy.enabled:
        notes = ("rollouts are not managed (spec.policy.rollout.enabled is false)",)
    return Change(patch, f"consumergroup {_name(body)}: " + "; ".join(done), notes=notes)
