"""`spec.policy.enforce` as the planner reads it (the block is described in docs/enforcing.md).

The block is defined, validated and described once, by the model
(consumer_group_spec.EnforcementSpec, from which the CRD is rendered); this module turns a
validated block into the frozen EnforceSpec the triggers and the sidecar templates read. Every
problem names its field path and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.structs.consumer_group_spec import EnforcementSpec
from rebalancer.structs.spec_models import read_spec

DEFAULT_SIDECAR_PORT = 8091


@dataclass(frozen=True)
class SidecarPolicy:
    inject: bool = False
    port: int = DEFAULT_SIDECAR_PORT
    # The Secret (name, key) holding the bearer token the sidecar requires.
    token_secret: str | None = None
    token_key: str = "token"
    # Where to reach the sidecars when not through the workload's pods (a Service, the lab).
    url: str | None = None


@dataclass(frozen=True)
class EnforceSpec:
    request_token: str | None = None
    schedule_seconds: int | None = None
    after_rollout: bool = False
    on_topic_creation: bool = False
    retry_when_stable: bool = False
    sidecar: SidecarPolicy = field(default_factory=SidecarPolicy)

    @property
    def enabled(self) -> bool:
        return bool(
            self.request_token is not None
            or self.schedule_seconds
            or self.after_rollout
            or self.on_topic_creation
        )


def enforcement_asked(raw_spec: Mapping[str, Any]) -> bool:
    """Whether a ConsumerGroup's raw spec has an enforce block at all: without one nothing is
    ever enforced, so its triggers need no look (a look every few seconds per group is what
    the operator's event loop spends most on at a thousand groups)."""
    policy = raw_spec.get("policy")
    return isinstance(policy, Mapping) and bool(policy.get("enforce"))


def parse_enforce_policy(raw: object, path: str = "spec.policy.enforce") -> EnforceSpec:
    """`spec.policy.enforce` (None for the defaults), or SpecInvalid listing every problem."""
    return enforce_policy_of(read_spec(EnforcementSpec, raw, path))


def enforce_policy_of(spec: EnforcementSpec) -> EnforceSpec:
    """The planner's EnforceSpec of a validated block."""
    sidecar = SidecarPolicy()
    if spec.sidecar is not None:
        ref = spec.sidecar.token_secret_ref
        sidecar = SidecarPolicy(
            inject=spec.sidecar.inject,
            port=spec.sidecar.port,
            token_secret=None if ref is None else ref.name,
            # An empty key reads as the default, as it always has.
            token_key=ref.key if ref is not None and ref.key else "token",
            url=spec.sidecar.url,
        )
    return EnforceSpec(
        request_token=spec.request_token,
        schedule_seconds=spec.schedule_seconds,
        after_rollout=spec.after_rollout,
        on_topic_creation=spec.on_topic_creation,
        retry_when_stable=spec.retry_when_stable,
        sidecar=sidecar,
    )
