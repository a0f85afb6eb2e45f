"""Holding a Deployment for the rollout planner in the write that changes its template.

A StatefulSet is held through its partition in the same write
(consumer_settings_templates.park_ops). A Deployment has no partition: left running, its
controller replaces every pod on its own the moment the template changes (maxSurge and
maxUnavailable at a time, whatever the group does). Paused in the same write, the new template
waits for the planner, which steps the Deployment batch by batch and resumes it at the end.
ROLLOUT_HOLD_ANNOTATION marks the pause as the operator's, so a planner that finds it (also
after losing its status) knows to take it over or hand it back, and a user's own pause is never
undone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.planning.workload_views import has_gate
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION

Body = dict[str, Any]
HELD = "true"


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def hold_ops(workload: Mapping[str, Any]) -> list[Body]:
    """JSON-patch operations that pause `workload` (a Deployment, as it will be after the
    template write) for the rollout planner; none when there is nothing to hold.

    Not held: a template with the join gate (its new pods wait at their gates, which the
    planner opens batch by batch, and a paused Deployment would create none of them), and a
    Deployment the user paused (theirs to resume; the planner leaves it alone).
    """
    spec = workload.get("spec") or {}
    template_spec = (spec.get("template") or {}).get("spec")
    if has_gate(template_spec):
        return []
    annotations = (workload.get("metadata") or {}).get("annotations")
    ours = isinstance(annotations, Mapping) and ROLLOUT_HOLD_ANNOTATION in annotations
    if spec.get("paused") and not ours:
        return []
    ops: list[Body] = []
    if not spec.get("paused"):
        ops.append({"op": "add", "path": "/spec/paused", "value": True})
    if not ours:
        if isinstance(annotations, Mapping):
            path = f"/metadata/annotations/{_pointer(ROLLOUT_HOLD_ANNOTATION)}"
            ops.append({"op": "add", "path": path, "value": HELD})
        else:
            value = {ROLLOUT_HOLD_ANNOTATION: HELD}
            ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
    return ops
