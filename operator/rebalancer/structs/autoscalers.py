"""The autoscalers that target a managed workload, as the rollout planner sees them (pure data).

Filled in from the Kubernetes API by rebalancer.clients.autoscaling through
rebalancer.planning.autoscalers: a KEDA ScaledObject (keda.sh/v1alpha1) and an autoscaling/v2
HorizontalPodAutoscaler whose spec.scaleTargetRef names the workload.
"""

from __future__ import annotations

from dataclasses import dataclass

# KEDA's pause: autoscaling stops at the current replica count until the annotation is removed
# (or set to "false"). KEDA's other pause, PAUSED_REPLICAS_ANNOTATION, first scales the workload
# to the given count; the operator never writes it, it only respects it.
KEDA_PAUSED_ANNOTATION = "autoscaling.keda.sh/paused"
KEDA_PAUSED_REPLICAS_ANNOTATION = "autoscaling.keda.sh/paused-replicas"
# The operator's mark beside its KEDA pause (the rollout's id): a pause without it is the
# user's and is left alone; a pause with it is the operator's to remove, even after a restart.
PAUSED_FOR_ROLLOUT_ANNOTATION = "rebalancer.dev/paused-for-rollout"


@dataclass(frozen=True)
class ScaledObjectView:
    name: str
    resource_version: str
    # The operator's mark (PAUSED_FOR_ROLLOUT_ANNOTATION): the rollout it paused KEDA for.
    paused_for: str | None
    # Paused (either KEDA annotation, other than `paused: "false"`) without the operator's mark.
    paused_by_owner: bool


@dataclass(frozen=True)
class HpaView:
    name: str
    # "ScaledObject/<name>" when KEDA made it (its owner), else None.
    owner: str | None
    # status.lastScaleTime (epoch seconds): when the HPA last changed the replicas.
    last_scale_time: float | None


@dataclass(frozen=True)
class Autoscalers:
    """What targets the workload; both None when nothing does (or KEDA is not installed)."""

    scaled_object: ScaledObjectView | None = None
    hpa: HpaView | None = None

    @property
    def any(self) -> bool:
        return self.scaled_object is not None or self.hpa is not None
