"""Which change to a workload cannot wait for the rollout planner's next look (pure).

At rest the planner looks at its workload every few seconds. A Deployment's controller starts
replacing pods the moment a new template is stored, and either controller starts pods the
moment the replica count grows; a change seen only at the next look may have gone past the
first batch by then. A change to the spec is one its controller has not observed yet: the
stored generation is ahead of status.observedGeneration.

During a rollout the planner also waits on pods: the next batch goes when the last one is Ready.
Its controller counts them in the workload's status as they change, so a change of those counts
wakes the planner too, instead of its next look a second later (a StatefulSet replaced a pod at a
time pays that second once per pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def spec_unobserved(body: Mapping[str, Any]) -> bool:
    """Whether the workload's spec changed since its controller last observed it (a new
    template, replica count or pause, the operator's own writes included)."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    generation = metadata.get("generation")
    observed = status.get("observedGeneration")
    if not isinstance(generation, int):
        return False
    return not isinstance(observed, int) or observed < generation


# The status counts the controllers keep for both kinds (StatefulSet and Deployment), and the
# revisions a StatefulSet rolls between.
_PROGRESS_FIELDS = (
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "currentReplicas",
    "unavailableReplicas",
    "currentRevision",
    "updateRevision",
)


def pod_progress(body: Mapping[str, Any]) -> tuple[object, ...]:
    """What the workload's status says of its pods: equal between two events when no pod was
    added, removed, replaced or became (un)ready in between."""
    status = body.get("status") or {}
    return tuple(status.get(name) for name in _PROGRESS_FIELDS)
