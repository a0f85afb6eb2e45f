"""Autoscalers of a managed workload: what they are, and what a rollout does with them (pure).

rebalancer.clients.autoscaling lists KEDA ScaledObjects and HorizontalPodAutoscalers in the
workload's namespace; view_autoscalers keeps the ones whose scaleTargetRef names the workload.

- KEDA: a ScaledObject is paused (KEDA_PAUSED_ANNOTATION "true", which stops autoscaling at the
  current replica count) while a rollout is active, and resumed as soon as none is: when it
  completes, fails, is paused by its spec, or the planner is turned off or the ConsumerGroup
  deleted. A ScaledObject its owner paused is left alone, and so is its pause.
- HPA: it cannot be paused. A scale-up of gated pods (cold start or scale-up) waits, before it
  opens its batch, until the HPA has not scaled for `autoscalerWindowSeconds` (at most until
  gatherSeconds run out): steps the HPA makes in quick succession (one per sync, 15 s apart by
  default) then join as one wave instead of one rebalance each. The planner never steps
  spec.replicas itself (scaleSteps) on a workload an HPA scales: that is the HPA's field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.planning.raw_fields import field_at
from rebalancer.planning.rollout_actions import Action, PauseScaledObject, ResumeScaledObject
from rebalancer.planning.workload_views import parse_timestamp
from rebalancer.structs.autoscalers import (
    KEDA_PAUSED_ANNOTATION,
    KEDA_PAUSED_REPLICAS_ANNOTATION,
    PAUSED_FOR_ROLLOUT_ANNOTATION,
    Autoscalers,
    HpaView,
    ScaledObjectView,
)
from rebalancer.structs.specs import WorkloadKind

Raw = Mapping[str, Any]


def _targets(body: Raw, kind: WorkloadKind, name: str, default_kind: str | None) -> bool:
    ref = field_at(body, "spec", "scaleTargetRef")
    if not isinstance(ref, Mapping) or ref.get("name") != name:
        return False
    api_version = ref.get("apiVersion") or "apps/v1"
    target_kind = ref.get("kind") or default_kind
    return api_version in ("apps/v1", "apps") and target_kind == kind.value


def _oldest(bodies: Sequence[Raw]) -> Raw | None:
    """Of several autoscalers on one workload (a misconfiguration the autoscalers themselves
    complain about), the oldest, which is the one they let act."""
    if not bodies:
        return None
    return min(
        bodies,
        key=lambda b: (
            str(field_at(b, "metadata", "creationTimestamp") or ""),
            str(field_at(b, "metadata", "name") or ""),
        ),
    )


def view_scaled_object(body: Raw) -> ScaledObjectView:
    annotations = field_at(body, "metadata", "annotations") or {}
    mark = annotations.get(PAUSED_FOR_ROLLOUT_ANNOTATION)
    paused = str(annotations.get(KEDA_PAUSED_ANNOTATION, "")).lower()
    pinned = annotations.get(KEDA_PAUSED_REPLICAS_ANNOTATION) is not None
    # KEDA takes `paused` other than "false" (and any paused-replicas) as a pause.
    owner_paused = mark is None and (
        pinned or (KEDA_PAUSED_ANNOTATION in annotations and paused != "false")
    )
    return ScaledObjectView(
        name=str(field_at(body, "metadata", "name") or ""),
        resource_version=str(field_at(body, "metadata", "resourceVersion") or ""),
        paused_for=str(mark) if mark is not None else None,
        paused_by_owner=owner_paused,
    )


def view_hpa(body: Raw) -> HpaView:
    owner = None
    for reference in field_at(body, "metadata", "ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("kind") == "ScaledObject":
            owner = f"ScaledObject/{reference.get('name')}"
    return HpaView(
        name=str(field_at(body, "metadata", "name") or ""),
        owner=owner,
        last_scale_time=parse_timestamp(field_at(body, "status", "lastScaleTime")),
    )


def view_autoscalers(
    scaled_objects: Sequence[Raw], hpas: Sequence[Raw], kind: WorkloadKind, name: str
) -> Autoscalers:
    """The ScaledObject and the HPA (KEDA's own, or one of the user's) targeting the workload.
    KEDA's scaleTargetRef.kind defaults to Deployment; an HPA's kind is required."""
    scaled = _oldest([b for b in scaled_objects if _targets(b, kind, name, "Deployment")])
    hpa = _oldest([b for b in hpas if _targets(b, kind, name, None)])
    return Autoscalers(
        scaled_object=view_scaled_object(scaled) if scaled is not None else None,
        hpa=view_hpa(hpa) if hpa is not None else None,
    )


def autoscaler_actions(active: bool, rollout_id: str | None, found: Autoscalers) -> list[Action]:
    """KEDA paused while a rollout is `active` and resumed as soon as none is; an owner's pause
    is never touched (level-based: the object's annotations say what is the operator's)."""
    scaled = found.scaled_object
    if scaled is None:
        return []
    if active and scaled.paused_for is None and not scaled.paused_by_owner:
        return [PauseScaledObject(scaled.name, rollout_id or "-", scaled.resource_version)]
    if not active and scaled.paused_for is not None:
        return [ResumeScaledObject(scaled.name, scaled.paused_for, scaled.resource_version)]
    return []


def hpa_quiet_at(found: Autoscalers, window_s: int) -> float | None:
    """When the HPA will have left the replicas alone for `window_s` (epoch seconds); None when
    no HPA scales the workload, it never scaled, or the window is 0."""
    hpa = found.hpa
    if hpa is None or hpa.last_scale_time is None or window_s <= 0:
        return None
    scaled = found.scaled_object
    if (
        scaled is not None
        and scaled.paused_for is not None
        and hpa.owner == f"ScaledObject/{scaled.name}"
    ):
        # KEDA's own HPA, with KEDA paused for this rollout: it takes no further step.
        return None
    return hpa.last_scale_time + window_s


def describe_autoscalers(found: Autoscalers, window_s: int) -> str | None:
    """status.rollout.autoscaler: what targets the workload and what rollouts do about it."""
    parts: list[str] = []
    scaled = found.scaled_object
    if scaled is not None:
        if scaled.paused_by_owner:
            parts.append(
                f"KEDA ScaledObject {scaled.name} is paused by its owner: the operator leaves "
                "it and its pause alone"
            )
        elif scaled.paused_for is not None:
            parts.append(
                f"KEDA ScaledObject {scaled.name} is paused by the operator for rollout "
                f"{scaled.paused_for}, until it ends"
            )
        else:
            parts.append(
                f"KEDA ScaledObject {scaled.name}: paused by the operator during each rollout, "
                "resumed when it ends"
            )
    hpa = found.hpa
    if hpa is not None and (scaled is None or hpa.owner != f"ScaledObject/{scaled.name}"):
        wait = (
            f"scale-ups of gated pods open once it has not scaled for {window_s} s (at most "
            "gatherSeconds), so that its quick steps join as one wave"
            if window_s > 0
            else "scale-ups are not held for its steps (autoscalerWindowSeconds is 0)"
        )
        parts.append(
            f"HorizontalPodAutoscaler {hpa.name} scales the workload (not paused: an HPA has "
            f"no pause); {wait}; scaleSteps is not used"
        )
    return "; ".join(parts) or None
