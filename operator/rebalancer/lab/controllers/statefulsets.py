"""The StatefulSet controller, after kube's stateful_set_control.go.

Pods are `<name>-<ordinal>`, ordinals from `spec.ordinals.start` (default 0). A reconcile:

1. replaces failed or succeeded pods and creates missing ones in ordinal order; with
   `podManagementPolicy: OrderedReady` (the default) it creates one pod and waits until it is
   Running, Ready and available before the next, and waits on any terminating pod; `Parallel`
   creates them all at once;
2. deletes pods beyond `replicas`, highest ordinal first: one at a time, and only while every
   other pod is healthy, when OrderedReady; all at once when Parallel;
3. with `updateStrategy: RollingUpdate`, deletes the highest-ordinal pod at or above
   `rollingUpdate.partition` that is not at the update revision, one at a time, waiting for
   every higher pod to be healthy again (`rollingUpdate.maxUnavailable`, when set, lets up to
   that many pods be unavailable at once); recreated pods below the partition keep the current
   revision. `OnDelete` updates a pod only when someone deletes it.

Revisions are `<name>-<hash of spec.template>`, stamped on pods as `controller-revision-hash`.
The API emulator has no ControllerRevision objects, so templates of past revisions are kept in
memory (and recovered from a pod of that revision after a restart).
"""

from __future__ import annotations

import copy
import logging
import re
import time
from typing import Any

from ..kube import objects
from ..kube.informing import Informer
from .base import Controller, owned
from .templates import POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL, pod_from_template

Body = dict[str, Any]
logger = logging.getLogger(__name__)


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    match = re.fullmatch(re.escape(set_name) + r"-(\d+)", pod_name)
    return int(match.group(1)) if match else None


class StatefulSetController(Controller):
    name = "statefulset-controller"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._templates: dict[tuple[str, str], Body] = {}
        self.informers.statefulsets.add_handler(self.enqueue_object)
        self.informers.pods.add_handler(self.enqueue_owner("StatefulSet"))

    @property
    def primary(self) -> Informer:
        return self.informers.statefulsets

    def created_message(self, owner: Body, obj: Body) -> str:
        return (
            f"create Pod {obj['metadata']['name']} in StatefulSet "
            f"{owner['metadata']['name']} successful"
        )

    def deleted_message(self, owner: Body, obj: Body) -> str:
        return (
            f"delete Pod {obj['metadata']['name']} in StatefulSet "
            f"{owner['metadata']['name']} successful"
        )

    def reconcile(self, namespace: str, name: str) -> float | None:
        sts = self.informers.statefulsets.get(namespace, name)
        if sts is None or objects.is_terminating(sts):
            return None
        spec = sts.get("spec") or {}
        uid = sts["metadata"]["uid"]
        now = time.time()
        replicas = int(spec.get("replicas", 1))
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        min_ready = int(spec.get("minReadySeconds") or 0)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        rolling_spec = strategy.get("rollingUpdate") or {}
        partition = int(rolling_spec.get("partition") or 0)
        template = spec.get("template") or {}
        update_revision = f"{name}-{objects.template_hash(template)}"
        self._templates[(uid, update_revision)] = template
        current_revision = (sts.get("status") or {}).get("currentRevision") or update_revision

        pods = owned(self.informers.pods, sts)
        slots: dict[int, Body | None] = dict.fromkeys(range(start, start + replicas))
        condemned: list[Body] = []
        for candidate in pods:
            ordinal = ordinal_of(name, candidate["metadata"]["name"])
            if ordinal is not None and ordinal in slots:
                slots[ordinal] = candidate
            else:
                condemned.append(candidate)
        condemned.sort(key=lambda p: ordinal_of(name, p["metadata"]["name"]) or -1)
        ordered = [slots[o] for o in sorted(slots)]

        def healthy(pod: Body | None) -> bool:
            return (
                pod is not None
                and not objects.is_terminating(pod)
                and objects.is_pod_available(pod, min_ready, now)
            )

        wait = self._wait_for_available(pods, min_ready, now)
        first_unhealthy = next((p for p in [*ordered, *condemned] if not healthy(p)), None)
        stop = False
        for ordinal in sorted(slots):
            pod: Body | None = slots[ordinal]
            if (
                pod is not None
                and objects.pod_phase(pod) in ("Failed", "Succeeded")
                and not objects.is_terminating(pod)
            ):
                logger.info(
                    "%s/%s: pod %s %s, recreating it",
                    namespace,
                    name,
                    pod["metadata"]["name"],
                    objects.pod_phase(pod),
                )
                self.delete(self.informers.pods, pod, sts)
                pod = slots[ordinal] = None
                if monotonic:
                    stop = True
                    break
                continue
            if pod is None:
                revision = (
                    current_revision if rolling and ordinal < start + partition else update_revision
                )
                self._create_pod(sts, ordinal, revision, template)
                if monotonic:
                    stop = True
                    break
                continue
            if monotonic and (objects.is_terminating(pod) or not healthy(pod)):
                stop = True
                break

        if not stop:
            for pod in reversed(condemned):
                if objects.is_terminating(pod):
                    if monotonic:
                        stop = True
                        break
                    continue
                if monotonic and not healthy(pod) and pod is not first_unhealthy:
                    stop = True
                    break
                self.delete(self.informers.pods, pod, sts)
                if monotonic:
                    stop = True
                    break

        if not stop and rolling:
            self._roll(sts, ordered, start, partition, update_revision, healthy, replicas)

        self._update_status(sts, current_revision, update_revision, min_ready, rolling)
        return wait

    def _wait_for_available(self, pods: list[Body], min_ready: int, now: float) -> float | None:
        """When a ready pod will become available, so that progress resumes on time."""
        waits = [
            w for p in pods if (w := objects.available_in(p, min_ready, now)) is not None and w > 0
        ]
        return min(waits) + 0.05 if waits else None

    def _roll(
        self,
        sts: Body,
        ordered: list[Body | None],
        start: int,
        partition: int,
        update_revision: str,
        healthy: Any,
        replicas: int,
    ) -> None:
        rolling_spec = (sts["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}
        stale = [
            (index, pod)
            for index, pod in enumerate(ordered)
            if pod is not None
            and index >= partition
            and _revision(pod) != update_revision
            and not objects.is_terminating(pod)
        ]
        if "maxUnavailable" in rolling_spec:
            allowed = max(
                1,
                objects.scaled_value(
                    rolling_spec["maxUnavailable"], replicas, round_up=True, default="1"
                ),
            )
            unavailable = sum(1 for pod in ordered if not healthy(pod))
            for _, doomed in sorted(stale, key=lambda item: -item[0])[
                : max(0, allowed - unavailable)
            ]:
                self.delete(self.informers.pods, doomed, sts)
            return
        for index in range(len(ordered) - 1, partition - 1, -1):
            target = ordered[index]
            if (
                target is not None
                and _revision(target) != update_revision
                and not objects.is_terminating(target)
            ):
                self.delete(self.informers.pods, target, sts)
                return
            if not healthy(target):
                return

    def _create_pod(self, sts: Body, ordinal: int, revision: str, update_template: Body) -> None:
        name = sts["metadata"]["name"]
        template = self._template_for(sts, revision) or update_template
        pod_name = f"{name}-{ordinal}"
        pod = pod_from_template(
            template,
            sts,
            name=pod_name,
            labels={
                REVISION_LABEL: revision,
                POD_NAME_LABEL: pod_name,
                POD_INDEX_LABEL: str(ordinal),
            },
        )
        spec = pod["spec"]
        spec["hostname"] = pod_name
        if sts["spec"].get("serviceName"):
            spec["subdomain"] = sts["spec"]["serviceName"]
        volumes = spec.setdefault("volumes", [])
        taken = {v.get("name") for v in volumes}
        for claim in sts["spec"].get("volumeClaimTemplates") or ():
            claim_name = claim.get("metadata", {}).get("name")
            if claim_name and claim_name not in taken:
                volumes.append(
                    {
                        "name": claim_name,
                        "persistentVolumeClaim": {"claimName": f"{claim_name}-{pod_name}"},
                    }
                )
        if not volumes:
            del spec["volumes"]
        path = f"/api/v1/namespaces/{sts['metadata']['namespace']}/pods"
        self.create(self.informers.pods, path, pod, sts)

    def _template_for(self, sts: Body, revision: str) -> Body | None:
        uid = sts["metadata"]["uid"]
        known = self._templates.get((uid, revision))
        if known is not None:
            return known
        for pod in owned(self.informers.pods, sts):
            if _revision(pod) == revision:
                recovered = _template_of(pod)
                self._templates[(uid, revision)] = recovered
                return recovered
        logger.warning(
            "%s: the template of revision %s is not known any more; using the update revision's",
            sts["metadata"]["name"],
            revision,
        )
        return None

    def _update_status(
        self, sts: Body, current: str, update: str, min_ready: int, rolling: bool
    ) -> None:
        now = time.time()
        pods = owned(self.informers.pods, sts)
        counts = {
            "replicas": 0,
            "readyReplicas": 0,
            "availableReplicas": 0,
            "currentReplicas": 0,
            "updatedReplicas": 0,
        }
        for pod in pods:
            counts["replicas"] += 1
            if objects.is_pod_ready(pod):
                counts["readyReplicas"] += 1
                if objects.is_pod_available(pod, min_ready, now):
                    counts["availableReplicas"] += 1
            if not objects.is_terminating(pod):
                revision = _revision(pod)
                counts["currentReplicas"] += revision == current
                counts["updatedReplicas"] += revision == update
        if rolling and counts["updatedReplicas"] == counts["replicas"] == counts["readyReplicas"]:
            current = update
            counts["currentReplicas"] = counts["updatedReplicas"]
        old = sts.get("status") or {}
        status: Body = {
            "observedGeneration": sts["metadata"].get("generation", 0),
            "replicas": counts["replicas"],
            "availableReplicas": counts["availableReplicas"],
            "currentRevision": current,
            "updateRevision": update,
            "collisionCount": old.get("collisionCount", 0),
        }
        # kube omits these when zero (omitempty); clients read a missing one as 0.
        for key in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if counts[key]:
                status[key] = counts[key]
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if status != old:
            self.write_status(self.informers.statefulsets, sts, status)


def _revision(pod: Body) -> str:
    return str((pod["metadata"].get("labels") or {}).get(REVISION_LABEL) or "")


def _template_of(pod: Body) -> Body:
    """The pod template a pod was made from, near enough to make its twin."""
    meta = pod["metadata"]
    labels = {
        k: v
        for k, v in (meta.get("labels") or {}).items()
        if k not in (REVISION_LABEL, POD_NAME_LABEL, POD_INDEX_LABEL)
    }
    spec = copy.deepcopy(pod.get("spec") or {})
    for key in ("nodeName", "hostname", "subdomain"):
        spec.pop(key, None)
    template: Body = {"metadata": {"labels": labels}, "spec": spec}
    if meta.get("annotations"):
        template["metadata"]["annotations"] = dict(meta["annotations"])
    return template
