"""The ReplicaSet controller: keep `spec.replicas` active pods, owned and labelled.

Missing pods are created at once (`<rs>-<random>` names); surplus pods are deleted in kube's
order of least value: unscheduled before scheduled, pending before running, not ready before
ready, ready for less time before longer, more restarts before fewer, newer before older.
Finished (Succeeded or Failed) and terminating pods do not count and are replaced.
"""

from __future__ import annotations

import time
from typing import Any

from ..kube import objects
from ..kube.informing import Informer
from .base import Controller, owned
from .templates import pod_from_template

Body = dict[str, Any]


class ReplicaSetController(Controller):
    name = "replicaset-controller"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.informers.replicasets.add_handler(self.enqueue_object)
        self.informers.pods.add_handler(self.enqueue_owner("ReplicaSet"))

    @property
    def primary(self) -> Informer:
        return self.informers.replicasets

    def reconcile(self, namespace: str, name: str) -> float | None:
        rs = self.informers.replicasets.get(namespace, name)
        if rs is None or objects.is_terminating(rs):
            return None
        spec = rs.get("spec") or {}
        wanted = int(spec.get("replicas", 1))
        pods = owned(self.informers.pods, rs)
        active = [p for p in pods if objects.is_active(p)]
        if len(active) < wanted:
            path = f"/api/v1/namespaces/{namespace}/pods"
            for _ in range(wanted - len(active)):
                pod = pod_from_template(spec.get("template") or {}, rs, generate_name=f"{name}-")
                self.create(self.informers.pods, path, pod, rs)
        elif len(active) > wanted:
            for pod in sorted(active, key=_deletion_rank)[: len(active) - wanted]:
                self.delete(self.informers.pods, pod, rs)
        return self._update_status(rs)

    def _update_status(self, rs: Body) -> float | None:
        now = time.time()
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        selector = (rs.get("spec") or {}).get("selector")
        pods = [p for p in owned(self.informers.pods, rs) if objects.is_active(p)]
        ready = [p for p in pods if objects.is_pod_ready(p)]
        available = [p for p in ready if objects.is_pod_available(p, min_ready, now)]
        labelled = [
            p for p in pods if objects.labels_match(selector, p["metadata"].get("labels") or {})
        ]
        old = rs.get("status") or {}
        status: Body = {"replicas": len(pods)}
        for key, value in (
            ("fullyLabeledReplicas", len(labelled)),
            ("readyReplicas", len(ready)),
            ("availableReplicas", len(available)),
            ("observedGeneration", rs["metadata"].get("generation", 0)),
        ):
            if value:
                status[key] = value
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if status != old:
            self.write_status(self.informers.replicasets, rs, status)
        waits = [
            w for p in ready if (w := objects.available_in(p, min_ready, now)) is not None and w > 0
        ]
        return min(waits) + 0.05 if waits else None


def _deletion_rank(pod: Body) -> tuple[int, int, int, float, int, float]:
    """Sort key: the pod to delete first comes first (kube's ActivePodsWithRanks)."""
    phase = objects.pod_phase(pod)
    ready_since = objects.ready_since(pod)
    restarts = sum(
        int(s.get("restartCount") or 0)
        for s in (pod.get("status") or {}).get("containerStatuses") or ()
    )
    created = objects.parse_time(pod["metadata"].get("creationTimestamp")) or 0.0
    return (
        0 if not (pod.get("spec") or {}).get("nodeName") else 1,
        {"Pending": 0, "Unknown": 1, "Running": 2}.get(phase, 0),
        0 if ready_since is None else 1,
        -(ready_since or 0.0),
        -restarts,
        -created,
    )
