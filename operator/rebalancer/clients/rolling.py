"""The rollout actuator: reads a workload for the planner and carries out the planner's actions.

I/O only: what to do is decided in rebalancer.planning.rollouts, what objects mean in
rebalancer.planning.workload_views, the gate's template in rebalancer.planning.gate_templates.
Every action sets an end state (an annotation, a partition, a replica count), so doing one again
changes nothing; a pod that is already gone is no error. Condition, Event and Wait actions are
the handler's (it owns status and Events) and are passed over here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from rebalancer.clients.autoscaling import pause_scaled_object, resume_scaled_object
from rebalancer.clients.kubernetes_api import KubernetesApi, PermissionDenied
from rebalancer.clients.workload_patching import stored_workload
from rebalancer.planning.gate_templates import GateOptions, render_gate_patch
from rebalancer.planning.rollout_actions import (
    Action,
    DeletePods,
    HoldGates,
    InstallGate,
    NoteBypassedGates,
    OpenGate,
    PauseDeployment,
    PauseScaledObject,
    ResumeDeployment,
    ResumeScaledObject,
    ScaleWorkload,
    SetStatefulSetPartition,
    release_moment,
)
from rebalancer.planning.rollout_holds import HELD as HOLD_MARK
from rebalancer.planning.workload_views import selector_string, view_workload
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.gates import (
    GATE_ANNOTATION,
    GATE_BATCH_ANNOTATION,
    GATE_BYPASSED_ANNOTATION,
    GATE_CONTAINER,
    GATE_HELD_ANNOTATION,
    GATE_OPEN,
    GATE_OPEN_AT_ANNOTATION,
    INSTANCE_ID_ANNOTATION,
)
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.times import format_rfc3339, parse_rfc3339
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION, WorkloadView

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
Body = dict[str, Any]


class ActuationFailed(RebalancerError):
    """An action could not be carried out; the message says which and why."""

    def __init__(self, action: Action, message: str) -> None:
        super().__init__(f"{type(action).__name__}: {message}")
        self.action = action


def _json(response: Any) -> Body:
    data = response.data if hasattr(response, "data") else response
    parsed = json.loads(data)
    return parsed if isinstance(parsed, dict) else {}


async def _called_for_json(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Body:
    """One Kubernetes API call, in a thread, its answer parsed as plain JSON (not models)."""
    return _json(await asyncio.to_thread(call, *args, _preload_content=False, **kwargs))


async def _listed(list_call: Callable[..., Any], namespace: str, selector: str) -> list[Body]:
    """The items of one namespaced list call, filtered by `selector` when it is not empty."""
    listing = await _called_for_json(list_call, namespace, label_selector=selector or None)
    items: list[Body] = listing.get("items", [])
    return items


async def read_workload(
    api: KubernetesApi, namespace: str, kind: WorkloadKind, name: str
) -> WorkloadView | None:
    """The workload with its pods (and a Deployment's ReplicaSets), or None if it is absent."""
    body = await stored_workload(api, namespace, kind, name)
    if body is None:
        return None
    selector = selector_string((body.get("spec") or {}).get("selector"))
    pods = await _listed(api.core.list_namespaced_pod, namespace, selector)
    replica_sets: list[Body] = []
    if kind is WorkloadKind.DEPLOYMENT:
        replica_sets = await _listed(api.apps.list_namespaced_replica_set, namespace, selector)
    return view_workload(body, pods, replica_sets)


@dataclass
class Actuator:
    """Carries out rollout actions on one workload."""

    api: KubernetesApi
    namespace: str
    kind: WorkloadKind
    name: str
    gate: GateOptions = field(default_factory=GateOptions)
    clock: Callable[[], float] = time.time

    async def apply(self, actions: Sequence[Action]) -> list[Action]:
        """Carry out `actions` in order; returns those carried out (the rest are not ours)."""
        done: list[Action] = []
        for action in actions:
            try:
                handled = await self._apply(action)
            except PermissionDenied:
                raise  # a missing grant, reported as such by the handler
            except ApiException as error:
                raise ActuationFailed(action, _reason(error)) from None
            if handled:
                done.append(action)
        return done

    async def _apply(self, action: Action) -> bool:
        match action:
            case OpenGate(batch=batch, pods=pods, slots=slots, together=together):
                await self.open_gates(batch, pods, dict(slots), together)
            case HoldGates(pods=pods):
                await self.hold_gates(pods)
            case NoteBypassedGates(pods=pods):
                await self.note_bypasses(pods)
            case SetStatefulSetPartition(partition=partition, resource_version=version):
                return await self.set_partition(partition, version)
            case DeletePods(pods=pods, uids=uids):
                await self.delete_pods(pods, uids)
            case ScaleWorkload(replicas=replicas):
                await self.scale(replicas)
            case PauseDeployment():
                await self.set_paused(True)
            case ResumeDeployment():
                await self.set_paused(False)
            case InstallGate():
                await self.install_gate()
            case PauseScaledObject(name=name, rollout_id=rollout_id, resource_version=version):
                # Not carried out when the object changed since it was read: not posted either.
                return await pause_scaled_object(
                    self.api, self.namespace, name, rollout_id, version
                )
            case ResumeScaledObject(name=name, resource_version=version):
                return await resume_scaled_object(self.api, self.namespace, name, version)
            case _:
                return False
        return True

    # -- pods -------------------------------------------------------------------------------

    async def open_gates(
        self,
        batch: str,
        pods: Sequence[str],
        slots: Mapping[str, str] | None = None,
        together: bool = True,
    ) -> None:
        """Open every pod's gate at once, for one common release moment (unless not
        `together`: pods released on arrival go as soon as their gates see the patch).

        The moment (rollout_actions.release_moment) lies a little past the patches, and past
        the warm-up of a gate that started only just now, so that pods whose patch arrives
        late or whose gate is still starting let go together with the rest. A single pod has
        nobody to let go with and goes at once (a static member released on arrival, a late
        batch mate). A pod's identity slot goes in the same patch as its `open`, so its
        consumer, which starts only after the gate, finds it.
        """
        if not pods:
            return
        with self._pool(len(pods)) as run:
            at: str | None = None
            given = slots or {}
            # A pod given a slot goes a little after the patch too, even alone: its consumer's
            # environment comes from the kubelet's copy of the pod, which the patch must have
            # reached by the time the gate exits.
            if (len(pods) > 1 and together) or given:
                started = await asyncio.gather(*(run(self._gate_started, pod) for pod in pods))
                at = f"{release_moment(self.clock(), started):.3f}"
            annotations = {
                GATE_ANNOTATION: GATE_OPEN,
                GATE_BATCH_ANNOTATION: batch,
                GATE_OPEN_AT_ANNOTATION: at,
            }
            patches = {
                pod: {"metadata": {"annotations": {**annotations, **_slot(given.get(pod))}}}
                for pod in pods
            }
            await asyncio.gather(*(run(self._patch_pod_now, pod, patches[pod]) for pod in pods))

    async def hold_gates(self, pods: Sequence[str]) -> None:
        if not pods:
            return
        moment = format_rfc3339(self.clock(), milliseconds=True)
        patch = {"metadata": {"annotations": {GATE_HELD_ANNOTATION: moment}}}
        with self._pool(len(pods)) as run:
            await asyncio.gather(*(run(self._patch_pod_now, pod, patch) for pod in pods))

    async def note_bypasses(self, pods: Sequence[str]) -> None:
        """Mark pods whose gates were bypassed, so a restarted operator does not tell it again."""
        moment = format_rfc3339(self.clock(), milliseconds=True)
        patch = {"metadata": {"annotations": {GATE_BYPASSED_ANNOTATION: moment}}}
        with self._pool(len(pods)) as run:
            await asyncio.gather(*(run(self._patch_pod_now, pod, patch) for pod in pods))

    @contextlib.contextmanager
    def _pool(self, size: int) -> Iterator[Callable[..., Awaitable[Any]]]:
        """Runs blocking calls on threads of their own, all in flight at once.

        asyncio.to_thread's default executor has a handful of threads shared with every
        other handler, so a batch's requests would go out a few at a time and its pods would
        open in waves.
        """
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=max(1, min(size, 64)), thread_name_prefix="gates")

        def run(call: Callable[..., Any], *args: Any) -> Awaitable[Any]:
            return loop.run_in_executor(pool, functools.partial(call, *args))

        try:
            yield run
        finally:
            pool.shutdown(wait=False)

    def _gate_started(self, pod: str) -> float | None:
        """When the pod's gate container started running, if it is running.

        Listed by name rather than read: the operator lists pods anyway, and a get would be
        one more grant (the chart grants list, patch and delete on pods)."""
        listed = _json(
            self.api.core.list_namespaced_pod(
                self.namespace, field_selector=f"metadata.name={pod}", _preload_content=False
            )
        )
        items = listed.get("items") or []
        if not items:
            return None
        body = items[0]
        for entry in (body.get("status") or {}).get("initContainerStatuses") or ():
            if entry.get("name") != GATE_CONTAINER:
                continue
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            with contextlib.suppress(ValueError, TypeError):
                return parse_rfc3339(str(started)) if started else None
        return None

    async def delete_pods(self, pods: Sequence[str], uids: Sequence[str] = ()) -> None:
        await asyncio.gather(
            *(
                self._delete_pod(pod, uids[index] if index < len(uids) else None)
                for index, pod in enumerate(pods)
            )
        )

    def _patch_pod_now(self, pod: str, patch: Body) -> None:
        try:
            self.api.core.patch_namespaced_pod(
                pod,
                self.namespace,
                patch,
                _content_type=MERGE_PATCH,
                _preload_content=False,
            )
        except ApiException as error:
            if error.status != 404:
                raise

    async def _delete_pod(self, pod: str, uid: str | None) -> None:
        body: Body = {"preconditions": {"uid": uid}} if uid else {}
        try:
            await asyncio.to_thread(
                self.api.core.delete_namespaced_pod,
                pod,
                self.namespace,
                body=body,
                _preload_content=False,
            )
        except ApiException as error:
            # 409: the uid precondition failed, the pod was already replaced.
            if error.status not in (404, 409):
                raise

    # -- the workload -----------------------------------------------------------------------

    async def set_partition(self, partition: int, resource_version: str | None = None) -> bool:
        """Whether the partition was written: with `resource_version`, only if the StatefulSet
        is still at it (the API server answers 409 Conflict otherwise)."""
        patch: Body = {"spec": {"updateStrategy": {"rollingUpdate": {"partition": partition}}}}
        if resource_version is not None:
            patch["metadata"] = {"resourceVersion": resource_version}
        try:
            await self._patch_workload(patch)
        except ApiException as error:
            if error.status == 409 and resource_version is not None:
                return False
            raise
        return True

    async def scale(self, replicas: int) -> None:
        await self._patch_workload({"spec": {"replicas": replicas}})

    async def set_paused(self, paused: bool) -> None:
        """Pause or resume a Deployment, with the mark that says the pause is the operator's
        (ROLLOUT_HOLD_ANNOTATION), so that it is taken over or handed back, never left."""
        if self.kind is not WorkloadKind.DEPLOYMENT:
            return
        mark = HOLD_MARK if paused else None
        patch = {"metadata": {"annotations": {ROLLOUT_HOLD_ANNOTATION: mark}}}
        await self._patch_workload({**patch, "spec": {"paused": paused}})

    async def install_gate(self) -> None:
        """Add the gate init container unless the template has it; a lost race is no error."""
        body = await self._read_workload()
        ops = render_gate_patch(body, self.gate)
        if not ops:
            return
        try:
            await self._patch_workload(ops, JSON_PATCH)
        except ApiException as error:
            # 409/422: someone changed the workload since it was read; the planner asks again.
            if error.status not in (409, 422):
                raise

    async def _read_workload(self) -> Body:
        reader = (
            self.api.apps.read_namespaced_stateful_set
            if self.kind is WorkloadKind.STATEFULSET
            else self.api.apps.read_namespaced_deployment
        )
        return _json(
            await asyncio.to_thread(reader, self.name, self.namespace, _preload_content=False)
        )

    async def _patch_workload(
        self, patch: Body | list[Body], content_type: str = MERGE_PATCH
    ) -> None:
        patcher = (
            self.api.apps.patch_namespaced_stateful_set
            if self.kind is WorkloadKind.STATEFULSET
            else self.api.apps.patch_namespaced_deployment
        )
        await asyncio.to_thread(
            patcher,
            self.name,
            self.namespace,
            patch,
            _content_type=content_type,
            _preload_content=False,
        )


def _reason(error: ApiException) -> str:
    detail = ""
    try:
        detail = json.loads(error.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        detail = str(error.body or "")[:300]
    return f"HTTP {error.status}: {detail or error.reason}"


def _slot(slot: str | None) -> dict[str, str]:
    return {INSTANCE_ID_ANNOTATION: slot} if slot else {}
