"""Pods and ReplicaSets made from templates, labelled and owned as kube's controllers do."""

from __future__ import annotations

import copy
from typing import Any

from ..kube.objects import owner_reference

Body = dict[str, Any]

REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
TEMPLATE_HASH_LABEL = "pod-template-hash"


def pod_from_template(
    template: Body,
    owner: Body,
    *,
    name: str | None = None,
    generate_name: str | None = None,
    labels: dict[str, str] | None = None,
) -> Body:
    source = copy.deepcopy(template)
    meta = source.get("metadata") or {}
    metadata: Body = {
        "namespace": owner["metadata"].get("namespace"),
        "labels": {**(meta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if meta.get("annotations"):
        metadata["annotations"] = meta["annotations"]
    if meta.get("finalizers"):
        metadata["finalizers"] = meta["finalizers"]
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = generate_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": source.get("spec") or {},
    }


def without_hash(template: Body) -> Body:
    """A pod template minus the pod-template-hash label, to compare ReplicaSets' templates."""
    clean = copy.deepcopy(template)
    labels = (clean.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(TEMPLATE_HASH_LABEL, None)
    return clean
