"""The Deployment controller, after kube's pkg/controller/deployment.

A Deployment owns ReplicaSets named `<deployment>-<pod-template-hash>`; the one whose template
equals the Deployment's is the new one, the others are old. A reconcile:

- when `spec.paused`: no rollout step and no new ReplicaSet; only scaling (proportional across
  the active ReplicaSets) and status, with `Progressing` Unknown / DeploymentPaused;
- on a scaling event (`replicas` differs from the `desired-replicas` annotation of an active
  ReplicaSet): scales the active ReplicaSets proportionally, as kube does mid-rollout;
- `RollingUpdate`: scales the new ReplicaSet up while the total of all ReplicaSets' replicas
  stays within `replicas + maxSurge`, and the old ones down while the available pods stay at
  or above `replicas - maxUnavailable` (unhealthy old pods go first); `maxSurge` rounds
  percentages up, `maxUnavailable` down, both 25% by default, and both 0 means 1 unavailable;
- `Recreate`: scales every old ReplicaSet to 0, waits until their pods are gone, then scales
  the new one up;
- keeps `revisionHistoryLimit` (default 10) old ReplicaSets with no pods, deleting the oldest;
- writes status (replicas, updated, ready, available, unavailable, observedGeneration,
  collisionCount) and the `Progressing` and `Available` conditions, with
  ProgressDeadlineExceeded after `progressDeadlineSeconds` (default 600) without progress.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from typing import Any

from ..kube import objects
from ..kube.informing import Change, Informer
from .base import Controller, owned
from .templates import TEMPLATE_HASH_LABEL, without_hash

Body = dict[str, Any]
logger = logging.getLogger(__name__)

REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def _replicas(rs: Body) -> int:
    return int((rs.get("spec") or {}).get("replicas") or 0)


def _status(rs: Body, key: str) -> int:
    return int((rs.get("status") or {}).get(key) or 0)


def _revision(rs: Body) -> int:
    value = (rs["metadata"].get("annotations") or {}).get(REVISION, "0")
    return int(value) if str(value).isdigit() else 0


def _created(rs: Body) -> tuple[float, str]:
    stamp = objects.parse_time(rs["metadata"].get("creationTimestamp")) or 0.0
    return stamp, rs["metadata"]["name"]


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.informers.deployments.add_handler(self.enqueue_object)
        self.informers.replicasets.add_handler(self.enqueue_owner("Deployment"))
        self.informers.pods.add_handler(self._on_pod)

    @property
    def primary(self) -> Informer:
        return self.informers.deployments

    def _on_pod(self, change: Change) -> None:
        """A pod change wakes its ReplicaSet's Deployment: rollouts step on pod readiness."""
        namespace = str(change.object["metadata"].get("namespace") or "")
        for ref in change.object["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "ReplicaSet":
                rs = self.informers.replicasets.get(namespace, str(ref.get("name")))
                if rs is not None:
                    for owner in rs["metadata"].get("ownerReferences") or ():
                        if owner.get("controller") and owner.get("kind") == "Deployment":
                            self.queue.add((namespace, str(owner.get("name"))))

    # The reconcile ----------------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> float | None:
        deployment = self.informers.deployments.get(namespace, name)
        if deployment is None or objects.is_terminating(deployment):
            return None
        spec = deployment.get("spec") or {}
        all_sets = sorted(owned(self.informers.replicasets, deployment), key=_created)
        new_rs = self._find_new(deployment, all_sets)
        old_sets = [rs for rs in all_sets if rs is not new_rs]
        paused = bool(spec.get("paused"))
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"

        if paused:
            self._scale_proportionally(deployment, new_rs, old_sets)
            self._cleanup(deployment, new_rs, old_sets)
            return self._sync_status(deployment, new_rs, old_sets, paused=True)

        if not recreate and self._is_scaling_event(deployment, new_rs, old_sets):
            self._scale_proportionally(deployment, new_rs, old_sets)
            return self._sync_status(deployment, new_rs, old_sets)

        if new_rs is None:
            new_rs = self._create_new(deployment, old_sets, recreate)
            if new_rs is None:
                return 0.1  # a name collision: the next pass uses the new collisionCount
        else:
            new_rs = self._sync_revision(deployment, new_rs, old_sets)

        if recreate:
            self._recreate(deployment, new_rs, old_sets)
        else:
            self._roll(deployment, new_rs, old_sets)
        self._cleanup(deployment, new_rs, old_sets)
        return self._sync_status(deployment, new_rs, old_sets)

    # ReplicaSets ------------------------------------------------------------------------------

    def _template_hash(self, deployment: Body) -> str:
        collisions = int((deployment.get("status") or {}).get("collisionCount") or 0)
        return objects.template_hash(deployment["spec"].get("template") or {}, collisions)

    def _find_new(self, deployment: Body, sets: list[Body]) -> Body | None:
        wanted = without_hash(deployment["spec"].get("template") or {})
        for rs in sets:
            if without_hash((rs.get("spec") or {}).get("template") or {}) == wanted:
                return rs
        return None

    def _max_surge_and_unavailable(self, deployment: Body) -> tuple[int, int]:
        spec = deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        surge = objects.scaled_value(
            rolling.get("maxSurge"), replicas, round_up=True, default="25%"
        )
        unavailable = objects.scaled_value(
            rolling.get("maxUnavailable"), replicas, round_up=False, default="25%"
        )
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, min(unavailable, replicas)

    def _create_new(self, deployment: Body, old_sets: list[Body], recreate: bool) -> Body | None:
        spec = deployment["spec"]
        meta = deployment["metadata"]
        replicas = int(spec.get("replicas", 1))
        pod_hash = self._template_hash(deployment)
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_HASH_LABEL] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[TEMPLATE_HASH_LABEL] = pod_hash
        revision = max([_revision(rs) for rs in old_sets] + [0]) + 1
        surge, _ = self._max_surge_and_unavailable(deployment)
        if recreate:
            start = 0
        else:
            total = sum(_replicas(rs) for rs in old_sets)
            start = max(0, min(replicas, replicas + surge - total))
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if not k.startswith("deployment.kubernetes.io/")
            and k != "kubectl.kubernetes.io/last-applied-configuration"
        }
        annotations.update(
            {REVISION: str(revision), DESIRED: str(replicas), MAX_REPLICAS: str(replicas + surge)}
        )
        body: Body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta.get("namespace"),
                "labels": dict(template["metadata"]["labels"]),
                "annotations": annotations,
                "ownerReferences": [objects.owner_reference(deployment)],
            },
            "spec": {
                "replicas": start,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        path = f"/apis/apps/v1/namespaces/{meta.get('namespace')}/replicasets"
        created = self.create(self.informers.replicasets, path, body)
        if created is None:
            existing = self.api.get(f"{path}/{body['metadata']['name']}")
            if existing is not None and self._find_new(deployment, [existing]) is not None:
                self.informers.replicasets.observe(existing)
                return existing
            status = dict(deployment.get("status") or {})
            status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
            self.write_status(self.informers.deployments, deployment, status)
            return None
        if start:
            self.record(
                deployment,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled up replica set {created['metadata']['name']} from 0 to {start}",
            )
        self._set_condition(
            deployment,
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            f'Created new replica set "{created["metadata"]["name"]}"',
        )
        self._annotate_revision(deployment, revision)
        return created

    def _sync_revision(self, deployment: Body, new_rs: Body, old_sets: list[Body]) -> Body:
        """The new ReplicaSet carries the highest revision (it moves up on a rollback)."""
        highest = max([_revision(rs) for rs in old_sets] + [0])
        revision = _revision(new_rs)
        if revision <= highest:
            revision = highest + 1
            new_rs = self.merge(
                self.informers.replicasets,
                new_rs,
                {"metadata": {"annotations": {REVISION: str(revision)}}},
            )
        self._annotate_revision(deployment, revision)
        return new_rs

    def _annotate_revision(self, deployment: Body, revision: int) -> None:
        current = (deployment["metadata"].get("annotations") or {}).get(REVISION)
        if current != str(revision):
            self.merge(
                self.informers.deployments,
                deployment,
                {"metadata": {"annotations": {REVISION: str(revision)}}},
            )

    def _scale(self, deployment: Body, rs: Body, replicas: int) -> Body:
        surge, _ = self._max_surge_and_unavailable(deployment)
        wanted = int(deployment["spec"].get("replicas", 1))
        annotations = rs["metadata"].get("annotations") or {}
        if (
            _replicas(rs) == replicas
            and annotations.get(DESIRED) == str(wanted)
            and annotations.get(MAX_REPLICAS) == str(wanted + surge)
        ):
            return rs
        patch = {
            "metadata": {"annotations": {DESIRED: str(wanted), MAX_REPLICAS: str(wanted + surge)}},
            "spec": {"replicas": replicas},
        }
        scaled = self.merge(self.informers.replicasets, rs, patch)
        if _replicas(rs) != replicas:
            direction = "up" if replicas > _replicas(rs) else "down"
            self.record(
                deployment,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {direction} replica set {rs['metadata']['name']} "
                f"from {_replicas(rs)} to {replicas}",
            )
        return scaled

    # Strategies -------------------------------------------------------------------------------

    def _pods(self, rs: Body) -> tuple[int, int]:
        """(active, available) pods of a ReplicaSet, from the pod cache.

        The pod cache is shared with the ReplicaSet controller and holds its deletions at
        once, while ReplicaSet status lags; counting the larger of spec and pods towards the
        surge, and the smaller towards availability, keeps maxSurge and maxUnavailable true
        of the pods anyone can watch, not just of specs.
        """
        now = time.time()
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        pods = [p for p in owned(self.informers.pods, rs) if objects.is_active(p)]
        return len(pods), sum(1 for p in pods if objects.is_pod_available(p, min_ready, now))

    def _roll(self, deployment: Body, new_rs: Body, old_sets: list[Body]) -> None:
        replicas = int(deployment["spec"].get("replicas", 1))
        surge, max_unavailable = self._max_surge_and_unavailable(deployment)
        pods = {rs["metadata"]["uid"]: self._pods(rs) for rs in [new_rs, *old_sets]}

        def size(rs: Body) -> int:
            return max(_replicas(rs), pods[rs["metadata"]["uid"]][0])

        def available(rs: Body) -> int:
            # Pods above spec are about to go, the unavailable ones first.
            return min(pods[rs["metadata"]["uid"]][1], _replicas(rs))

        # Scale the new ReplicaSet up, within replicas + maxSurge in total.
        current_total = size(new_rs) + sum(size(rs) for rs in old_sets)
        if _replicas(new_rs) > replicas:
            new_rs = self._scale(deployment, new_rs, replicas)
        elif _replicas(new_rs) < replicas and current_total < replicas + surge:
            step = min(replicas + surge - current_total, replicas - _replicas(new_rs))
            new_rs = self._scale(deployment, new_rs, _replicas(new_rs) + step)
        else:
            new_rs = self._scale(deployment, new_rs, _replicas(new_rs))
        # Scale old ones down, keeping replicas - maxUnavailable available.
        if sum(_replicas(rs) for rs in old_sets) == 0:
            return
        all_total = size(new_rs) + sum(size(rs) for rs in old_sets)
        min_available = replicas - max_unavailable
        new_unavailable = size(new_rs) - available(new_rs)
        budget = all_total - min_available - new_unavailable
        if budget <= 0:
            return
        # Unhealthy old pods first: removing them costs no availability.
        for index, rs in enumerate(old_sets):
            if budget <= 0:
                break
            cut = min(max(0, _replicas(rs) - available(rs)), budget)
            if cut > 0:
                old_sets[index] = self._scale(deployment, rs, _replicas(rs) - cut)
                budget -= cut
        remaining = available(new_rs) + sum(available(rs) for rs in old_sets) - min_available
        for index, rs in enumerate(old_sets):
            if remaining <= 0:
                break
            cut = min(_replicas(rs), remaining)
            if cut > 0:
                old_sets[index] = self._scale(deployment, rs, _replicas(rs) - cut)
                remaining -= cut

    def _recreate(self, deployment: Body, new_rs: Body, old_sets: list[Body]) -> None:
        for index, rs in enumerate(old_sets):
            if _replicas(rs):
                old_sets[index] = self._scale(deployment, rs, 0)
        old_uids = {rs["metadata"]["uid"] for rs in old_sets}
        for pod in self.informers.pods.items(deployment["metadata"].get("namespace")):
            owner = next(
                (
                    r.get("uid")
                    for r in pod["metadata"].get("ownerReferences") or ()
                    if r.get("controller")
                ),
                None,
            )
            if owner in old_uids and objects.pod_phase(pod) not in ("Succeeded", "Failed"):
                return  # old pods still running or terminating: not yet
        self._scale(deployment, new_rs, int(deployment["spec"].get("replicas", 1)))

    def _is_scaling_event(
        self, deployment: Body, new_rs: Body | None, old_sets: list[Body]
    ) -> bool:
        wanted = str(int(deployment["spec"].get("replicas", 1)))
        active = [rs for rs in [*old_sets, *([new_rs] if new_rs else [])] if _replicas(rs) > 0]
        for rs in active:
            desired = (rs["metadata"].get("annotations") or {}).get(DESIRED)
            if desired is not None and desired != wanted:
                return True
        return False

    def _scale_proportionally(
        self, deployment: Body, new_rs: Body | None, old_sets: list[Body]
    ) -> None:
        replicas = int(deployment["spec"].get("replicas", 1))
        sets = [*old_sets, *([new_rs] if new_rs else [])]
        active = [rs for rs in sets if _replicas(rs) > 0]
        if not sets:
            return
        if len(active) <= 1:
            target = active[0] if active else (new_rs or sets[-1])
            self._scale(deployment, target, replicas)
            return
        if (
            new_rs is not None
            and _replicas(new_rs) == replicas
            and _status(new_rs, "availableReplicas") >= replicas
        ):
            for rs in old_sets:
                self._scale(deployment, rs, 0)
            return
        if not self._is_scaling_event(deployment, new_rs, old_sets):
            return  # the ReplicaSets' shares only move when the Deployment's size does
        surge, _ = self._max_surge_and_unavailable(deployment)
        allowed = replicas + surge if replicas > 0 else 0
        total = sum(_replicas(rs) for rs in active)
        to_add = allowed - total
        if to_add == 0:
            for rs in active:
                self._scale(deployment, rs, _replicas(rs))  # refresh the annotations
            return
        # Larger ReplicaSets take a larger share; rounding leftovers go to the newest on
        # the way up and come from the oldest on the way down, as kube does.
        order = sorted(active, key=_created, reverse=to_add > 0)
        shares = {
            rs["metadata"]["name"]: math.floor(to_add * _replicas(rs) / total)
            if to_add > 0
            else -math.floor(-to_add * _replicas(rs) / total)
            for rs in active
        }
        leftover = to_add - sum(shares.values())
        first = order[0]["metadata"]["name"]
        shares[first] += leftover
        for rs in active:
            self._scale(deployment, rs, max(0, _replicas(rs) + shares[rs["metadata"]["name"]]))

    def _cleanup(self, deployment: Body, new_rs: Body | None, old_sets: list[Body]) -> None:
        limit = deployment["spec"].get("revisionHistoryLimit")
        limit = 10 if limit is None else int(limit)
        idle = [
            rs
            for rs in old_sets
            if _replicas(rs) == 0
            and _status(rs, "replicas") == 0
            and not objects.is_terminating(rs)
            and rs is not new_rs
        ]
        idle.sort(key=lambda rs: (_revision(rs), _created(rs)))
        for rs in idle[: max(0, len(idle) - limit)]:
            self.delete(self.informers.replicasets, rs)

    # Status -----------------------------------------------------------------------------------

    def _set_condition(
        self, deployment: Body, kind: str, status: str, reason: str, message: str
    ) -> None:
        fresh = (
            self.informers.deployments.get(
                deployment["metadata"].get("namespace", ""), deployment["metadata"]["name"]
            )
            or deployment
        )
        body = dict(fresh.get("status") or {})
        body["conditions"] = objects.set_condition(
            list(body.get("conditions") or []), kind, status, reason, message, update_time=True
        )
        self.write_status(self.informers.deployments, fresh, body)

    def _sync_status(
        self, deployment: Body, new_rs: Body | None, old_sets: list[Body], paused: bool = False
    ) -> float | None:
        namespace = deployment["metadata"].get("namespace", "")
        deployment = (
            self.informers.deployments.get(namespace, deployment["metadata"]["name"]) or deployment
        )
        # Re-read the ReplicaSets: this pass may have scaled them.
        uids = {rs["metadata"]["uid"] for rs in [*old_sets, *([new_rs] if new_rs else [])]}
        sets = [
            rs
            for rs in owned(self.informers.replicasets, deployment)
            if rs["metadata"]["uid"] in uids
        ]
        new = next(
            (rs for rs in sets if new_rs and rs["metadata"]["uid"] == new_rs["metadata"]["uid"]),
            None,
        )
        spec = deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        _, max_unavailable = self._max_surge_and_unavailable(deployment)
        old = deployment.get("status") or {}
        counts = {
            "replicas": sum(_status(rs, "replicas") for rs in sets),
            "updatedReplicas": _status(new, "replicas") if new else 0,
            "readyReplicas": sum(_status(rs, "readyReplicas") for rs in sets),
            "availableReplicas": sum(_status(rs, "availableReplicas") for rs in sets),
        }
        counts["unavailableReplicas"] = max(0, replicas - counts["availableReplicas"])
        status: Body = {"observedGeneration": deployment["metadata"].get("generation", 0)}
        for key, value in counts.items():
            if value:
                status[key] = value
        if old.get("collisionCount"):
            status["collisionCount"] = old["collisionCount"]
        conditions = list(old.get("conditions") or [])
        if counts["availableReplicas"] >= replicas - max_unavailable:
            conditions = objects.set_condition(
                conditions,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                update_time=True,
            )
        else:
            conditions = objects.set_condition(
                conditions,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                update_time=True,
            )
        again: float | None = None
        progressing = objects.condition(deployment, "Progressing")
        new_name = new["metadata"]["name"] if new else ""
        complete = (
            new is not None
            and counts["updatedReplicas"] == replicas
            and counts["replicas"] == replicas
            and counts["availableReplicas"] == replicas
        )
        deadline = spec.get("progressDeadlineSeconds", 600)
        if paused:
            if progressing is None or progressing.get("reason") != "DeploymentPaused":
                conditions = objects.set_condition(
                    conditions,
                    "Progressing",
                    "Unknown",
                    "DeploymentPaused",
                    "Deployment is paused",
                    update_time=True,
                )
        elif progressing is not None and progressing.get("reason") == "DeploymentPaused":
            conditions = objects.set_condition(
                conditions,
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed",
                update_time=True,
            )
        elif complete:
            conditions = objects.set_condition(
                conditions,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                f'ReplicaSet "{new_name}" has successfully progressed.',
                update_time=True,
            )
        elif new is not None:
            moved = (
                counts["updatedReplicas"] > int(old.get("updatedReplicas") or 0)
                or counts["readyReplicas"] > int(old.get("readyReplicas") or 0)
                or counts["availableReplicas"] > int(old.get("availableReplicas") or 0)
                or (counts["replicas"] - counts["updatedReplicas"])
                < (int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0))
            )
            reason = progressing.get("reason") if progressing else None
            if (
                moved
                or progressing is None
                or reason in ("NewReplicaSetAvailable", "DeploymentResumed")
            ):
                conditions = objects.set_condition(
                    conditions,
                    "Progressing",
                    "True",
                    "ReplicaSetUpdated",
                    f'ReplicaSet "{new_name}" is progressing.',
                    update_time=True,
                )
                conditions = _touch(conditions, "Progressing")
                again = float(deadline) + 0.1 if deadline is not None else None
            elif reason != "ProgressDeadlineExceeded" and deadline is not None:
                updated = objects.parse_time((progressing or {}).get("lastUpdateTime")) or 0.0
                left = updated + float(deadline) - time.time()
                if left <= 0:
                    conditions = objects.set_condition(
                        conditions,
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        f'ReplicaSet "{new_name}" has timed out progressing.',
                        update_time=True,
                    )
                else:
                    again = left + 0.1
        status["conditions"] = conditions
        if status != old:
            self.write_status(self.informers.deployments, deployment, status)
        return again


def _touch(conditions: list[Body], kind: str) -> list[Body]:
    now = objects.now_text()
    return [{**c, "lastUpdateTime": now} if c.get("type") == kind else c for c in conditions]
