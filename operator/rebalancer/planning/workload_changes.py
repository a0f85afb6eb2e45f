"""Which change to a workload cannot wait for the rollout planner's next look (pure).

At rest the planner looks at its workload every few seconds. A Deployment's controller starts
replacing pods the moment a new template is stored, and either controller starts pods the
moment the replica count grows; a change seen only at the next look may have gone past the
first batch by then. A change to the spec is one its controller has not observed yet: the
stored generation is ahead of status.observedGeneration.
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
