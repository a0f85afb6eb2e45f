"""Read a StatefulSet or Deployment and its pods (raw API objects) into a WorkloadView.

Pure: rebalancer.clients.rolling fetches the objects, this decides what they mean. Missing
fields take the API server's defaults, so objects that leave them out (a manifest, a test's
fixture) read the same as what a cluster stores.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rebalancer.planning.history_pods import pod_lifecycle
from rebalancer.planning.raw_fields import field_at as _get
from rebalancer.structs.gates import (
    GATE_ANNOTATION,
    GATE_BATCH_ANNOTATION,
    GATE_BYPASSED_ANNOTATION,
    GATE_CONTAINER,
    GATE_HELD_ANNOTATION,
    GATE_OPEN,
    INSTANCE_ID_ANNOTATION,
    INSTANCE_ID_FIELD_PATH,
    GateHold,
    GateState,
)
from rebalancer.structs.kafka_properties import env_properties
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.times import read_rfc3339
from rebalancer.structs.workloads import (
    FIELD_MANAGER,
    ROLLOUT_HOLD_ANNOTATION,
    PodView,
    WorkloadView,
)

Raw = Mapping[str, Any]

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
STATEFULSET_REVISION_LABEL = "controller-revision-hash"
DEPLOYMENT_REVISION_LABEL = "pod-template-hash"


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def parse_timestamp(value: object) -> float | None:
    """RFC 3339 (as the API writes) or epoch seconds (as a number or a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    with contextlib.suppress(ValueError):
        return float(value)
    return read_rfc3339(value)


def resolve_int_or_percent(value: object, replicas: int, default: str, *, round_up: bool) -> int:
    """maxSurge rounds up and maxUnavailable down, as the Deployment controller does."""
    if value is None:
        value = default
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    if isinstance(value, str) and value.endswith("%"):
        with contextlib.suppress(ValueError):
            share = float(value[:-1]) * replicas / 100
            return max(math.ceil(share) if round_up else math.floor(share), 0)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return max(int(value), 0)
    return 0


def has_gate(template_spec: object) -> bool:
    containers = _get(template_spec, "initContainers") or []
    return any(_get(item, "name") == GATE_CONTAINER for item in containers)


def gate_hold(template_spec: object) -> GateHold | None:
    """What the template's gate holds (None: it has no gate). A gate run as a native sidecar
    (restartPolicy Always) lets the containers start and holds only the join."""
    containers = _get(template_spec, "initContainers") or []
    gate = next((item for item in containers if _get(item, "name") == GATE_CONTAINER), None)
    if gate is None:
        return None
    return GateHold.JOIN if _get(gate, "restartPolicy") == "Always" else GateHold.POD


def gate_state(pod: Raw) -> GateState:
    """Where `pod` stands with its gate (see GateState)."""
    hold = gate_hold(_get(pod, "spec"))
    if hold is None:
        return GateState.NONE
    annotations = _get(pod, "metadata", "annotations") or {}
    opened = annotations.get(GATE_ANNOTATION) == GATE_OPEN
    statuses = _get(pod, "status", "initContainerStatuses") or []
    status = next((item for item in statuses if _get(item, "name") == GATE_CONTAINER), None)
    started = bool(_get(pod, "status", "containerStatuses")) and any(
        _get(item, "state", "running") is not None or _get(item, "state", "terminated")
        for item in _get(pod, "status", "containerStatuses") or []
    )
    if hold is GateHold.JOIN:
        # The consumer runs while its gate holds the join: only the open tells them apart.
        if opened:
            return GateState.PASSED if started else GateState.OPEN
        holding = _get(status, "state", "running") is not None
        return GateState.WAITING if holding else GateState.PENDING
    terminated = _get(status, "state", "terminated")
    if started or (terminated is not None and _int(_get(terminated, "exitCode"), -1) == 0):
        return GateState.PASSED
    if opened:
        return GateState.OPEN
    if _get(status, "state", "running") is not None:
        return GateState.WAITING
    return GateState.PENDING


def _ready(pod: Raw) -> bool:
    conditions = _get(pod, "status", "conditions") or []
    return any(
        _get(item, "type") == "Ready" and _get(item, "status") == "True" for item in conditions
    )


def _unnoticed(pod: Raw) -> bool:
    """Not bound to a node and never judged by a scheduler (no PodScheduled condition)."""
    if _get(pod, "spec", "nodeName"):
        return False
    conditions = _get(pod, "status", "conditions") or []
    return not any(_get(item, "type") == "PodScheduled" for item in conditions)


def _ordinal(name: str, workload: str) -> int | None:
    prefix = f"{workload}-"
    if name.startswith(prefix) and name[len(prefix) :].isdigit():
        return int(name[len(prefix) :])
    return None


def view_pod(pod: Raw, workload: str, kind: WorkloadKind, revision: str) -> PodView:
    metadata = _get(pod, "metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    name = str(metadata.get("name") or "")
    label = STATEFULSET_REVISION_LABEL
    if kind is WorkloadKind.DEPLOYMENT:
        label = DEPLOYMENT_REVISION_LABEL
    pod_revision = labels.get(label)
    phase = _get(pod, "status", "phase")
    return PodView(
        name=name,
        uid=str(metadata.get("uid") or ""),
        ordinal=_ordinal(name, workload) if kind is WorkloadKind.STATEFULSET else None,
        # Without revisions on either side (a bare pod, or a controller yet to label it)
        # nothing is stale.
        updated=not revision or pod_revision is None or pod_revision == revision,
        gate=gate_state(pod),
        gate_batch=annotations.get(GATE_BATCH_ANNOTATION),
        held_at=parse_timestamp(annotations.get(GATE_HELD_ANNOTATION)),
        ready=_ready(pod),
        terminating=metadata.get("deletionTimestamp") is not None
        or phase in ("Succeeded", "Failed"),
        created_at=parse_timestamp(metadata.get("creationTimestamp")) or 0.0,
        lifecycle=pod_lifecycle(pod),
        unnoticed=_unnoticed(pod),
        bypassed=_bypassed(pod, annotations),
        instance_id=annotations.get(INSTANCE_ID_ANNOTATION) or None,
    )


def takes_identity_slots(template_spec: object) -> bool:
    """Whether a container of the template reads INSTANCE_ID_ANNOTATION into its environment."""
    containers = _get(template_spec, "containers") or []
    for container in containers if isinstance(containers, list) else []:
        for variable in _get(container, "env") or []:
            if _get(variable, "valueFrom", "fieldRef", "fieldPath") == INSTANCE_ID_FIELD_PATH:
                return True
    return False


def template_property(template_spec: object, name: str) -> str | None:
    """The value a container of the template gives Kafka client property `name` through its
    KAFKA_* variable (literal values only; the first container that sets it)."""
    containers = _get(template_spec, "containers") or []
    for container in containers if isinstance(containers, list) else []:
        literal = {
            str(_get(variable, "name")): str(_get(variable, "value"))
            for variable in _get(container, "env") or []
            if isinstance(_get(variable, "value"), str)
        }
        value = env_properties(literal).get(name)
        if value:
            return value
    return None


def _bypassed(pod: Raw, annotations: Mapping[str, Any]) -> bool:
    """Through its gate without the operator's `open`: only a bypass lets a gate exit 0 so."""
    return (
        gate_state(pod) is GateState.PASSED
        and annotations.get(GATE_ANNOTATION) != GATE_OPEN
        and GATE_BYPASSED_ANNOTATION not in annotations
    )


def _owned_by(item: Raw, uid: object) -> bool:
    owners = _get(item, "metadata", "ownerReferences") or []
    if not owners or not uid:
        return True
    return any(_get(owner, "uid") == uid for owner in owners)


class _Rolling(NamedTuple):
    """How the workload's controller rolls its pods out (what its kind has of it)."""

    update_revision: str
    current_revision: str
    partition: int | None = None
    pod_management: str | None = None
    max_surge: int | None = None
    max_unavailable: int | None = None
    template_pending: bool = False


def _statefulset_rolling(spec: Raw, status: Raw, strategy: Raw, strategy_type: str) -> _Rolling:
    update_revision = str(status.get("updateRevision") or "")
    partition = None
    if strategy_type == "RollingUpdate":
        partition = _int(_get(strategy, "rollingUpdate", "partition"), 0)
    return _Rolling(
        update_revision=update_revision,
        current_revision=str(status.get("currentRevision") or update_revision),
        partition=partition,
        pod_management=str(spec.get("podManagementPolicy") or "OrderedReady"),
    )


def _deployment_rolling(
    spec: Raw, strategy: Raw, replicas: int, replica_sets: Sequence[Raw], uid: object
) -> _Rolling:
    """Revisions from the Deployment's ReplicaSets: the newest is the update, the one with
    the most pods the current."""
    owned = sorted((rs for rs in replica_sets if _owned_by(rs, uid)), key=_revision_number)
    update_revision = current_revision = ""
    if owned:
        update_revision = _template_hash(owned[-1])
        busiest = max(owned, key=lambda rs: _int(_get(rs, "status", "replicas")))
        current_revision = _template_hash(busiest) or update_revision
    rolling = _get(strategy, "rollingUpdate") or {}
    template = spec.get("template") or {}
    return _Rolling(
        update_revision=update_revision,
        current_revision=current_revision,
        max_surge=resolve_int_or_percent(rolling.get("maxSurge"), replicas, "25%", round_up=True),
        max_unavailable=resolve_int_or_percent(
            rolling.get("maxUnavailable"), replicas, "25%", round_up=False
        ),
        template_pending=not any(_same_template(rs, template) for rs in owned),
    )


def view_workload(body: Raw, pods: Sequence[Raw], replica_sets: Sequence[Raw] = ()) -> WorkloadView:
    """`body` a StatefulSet or Deployment; `pods` its pods; `replica_sets` a Deployment's."""
    kind = WorkloadKind(str(body.get("kind")))
    metadata = _get(body, "metadata") or {}
    spec = _get(body, "spec") or {}
    status = _get(body, "status") or {}
    name = str(metadata.get("name") or "")
    replicas = _int(spec.get("replicas"), 1)
    strategy_key = "updateStrategy" if kind is WorkloadKind.STATEFULSET else "strategy"
    strategy = spec.get(strategy_key) or {}
    strategy_type = str(strategy.get("type") or "RollingUpdate")
    uid = metadata.get("uid")
    if kind is WorkloadKind.STATEFULSET:
        rolling = _statefulset_rolling(spec, status, strategy, strategy_type)
    else:
        rolling = _deployment_rolling(spec, strategy, replicas, replica_sets, uid)
    rs_uids = owned_rs_uids(replica_sets, uid)
    views = tuple(
        view_pod(pod, name, kind, rolling.update_revision)
        for pod in pods
        if _owned_by_workload(pod, body, rs_uids)
    )
    template_spec = _get(spec, "template", "spec")
    return WorkloadView(
        kind=kind,
        name=name,
        replicas=replicas,
        current_replicas=_int(status.get("replicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
        ready_replicas=_int(status.get("readyReplicas")),
        update_revision=rolling.update_revision,
        current_revision=rolling.current_revision,
        generation=_int(metadata.get("generation"), 1),
        observed_generation=_int(status.get("observedGeneration"), 0),
        partition=rolling.partition,
        pod_management=rolling.pod_management,
        update_strategy=strategy_type,
        paused=bool(spec.get("paused")),
        max_surge=rolling.max_surge,
        max_unavailable=rolling.max_unavailable,
        gate_installed=has_gate(template_spec),
        gate_holds_join=gate_hold(template_spec) is GateHold.JOIN,
        identity_slots=takes_identity_slots(template_spec),
        group_protocol=template_property(template_spec, "group.protocol"),
        assignment_strategy=template_property(template_spec, "partition.assignment.strategy"),
        held_for_rollout=ROLLOUT_HOLD_ANNOTATION in (metadata.get("annotations") or {}),
        template_pending=rolling.template_pending,
        pods=views,
        partition_writer=field_writer(body, PARTITION_FIELD),
        partition_owners=field_owners(body, PARTITION_FIELD),
        template_writer=field_writer(body, TEMPLATE_FIELD, skip=FIELD_MANAGER),
        replicas_writer=field_writer(body, REPLICAS_FIELD, skip=FIELD_MANAGER),
        resource_version=str(metadata["resourceVersion"])
        if metadata.get("resourceVersion")
        else None,
    )


PARTITION_FIELD = ("f:spec", "f:updateStrategy", "f:rollingUpdate", "f:partition")
TEMPLATE_FIELD = ("f:spec", "f:template")
REPLICAS_FIELD = ("f:spec", "f:replicas")


def field_writer(body: Raw, path: Sequence[str], skip: str | None = None) -> str | None:
    """The field manager that last wrote `path` (or anything under it), from managedFields.

    For an update the API server hands a changed field to the manager that changed it; an apply
    owns what it applied. Of the managers owning the field, the one whose entry is newest wrote
    it last. Status writes do not count; nor does `skip` (the operator itself, for fields it
    shares with the user, such as the template its gate is injected into).
    """
    found: tuple[str, str] | None = None
    for entry in _get(body, "metadata", "managedFields") or []:
        manager = _get(entry, "manager")
        if not isinstance(manager, str) or manager == skip:
            continue
        if _get(entry, "subresource") == "status":
            continue
        owned: object = _get(entry, "fieldsV1")
        for key in path:
            owned = owned.get(key) if isinstance(owned, Mapping) else None
        if owned is None:
            continue
        stamp = str(_get(entry, "time") or "")
        if found is None or stamp >= found[0]:
            found = (stamp, manager)
    return found[1] if found is not None else None


def field_owners(body: Raw, path: Sequence[str]) -> tuple[str, ...] | None:
    """Every field manager that owns `path` (or anything under it), from managedFields, status
    writes aside; None when the object lists no managedFields (the API server lists at least
    its creator on every object it stores, so only a copy from elsewhere lacks them)."""
    entries = _get(body, "metadata", "managedFields")
    if not entries:
        return None
    owners: set[str] = set()
    for entry in entries:
        manager = _get(entry, "manager")
        if not isinstance(manager, str) or _get(entry, "subresource") == "status":
            continue
        owned: object = _get(entry, "fieldsV1")
        for key in path:
            owned = owned.get(key) if isinstance(owned, Mapping) else None
        if owned is not None:
            owners.add(manager)
    return tuple(sorted(owners))


def _same_template(replica_set: Raw, template: Raw) -> bool:
    """The ReplicaSet's pod template is the Deployment's but for its pod-template-hash label,
    which is how the Deployment controller finds its new ReplicaSet."""
    theirs = _get(replica_set, "spec", "template") or {}
    metadata = dict(theirs.get("metadata") or {})
    labels = {
        key: value
        for key, value in (metadata.get("labels") or {}).items()
        if key != DEPLOYMENT_REVISION_LABEL
    }
    metadata["labels"] = labels
    ours_metadata = dict(template.get("metadata") or {})
    ours_metadata["labels"] = dict(ours_metadata.get("labels") or {})
    return {**theirs, "metadata": metadata} == {**template, "metadata": ours_metadata}


def _revision_number(replica_set: Raw) -> int:
    text = str(_get(replica_set, "metadata", "annotations", REVISION_ANNOTATION) or "0")
    return int(text) if text.isdigit() else 0


def _template_hash(replica_set: Raw) -> str:
    return str(_get(replica_set, "metadata", "labels", DEPLOYMENT_REVISION_LABEL) or "")


def owned_rs_uids(replica_sets: Sequence[Raw], uid: object) -> frozenset[str]:
    return frozenset(
        str(_get(rs, "metadata", "uid"))
        for rs in replica_sets
        if _owned_by(rs, uid) and _get(rs, "metadata", "uid")
    )


def _owned_by_workload(pod: Raw, body: Raw, rs_uids: frozenset[str]) -> bool:
    """A StatefulSet owns its pods; a Deployment owns them through its ReplicaSets."""
    owners = _get(pod, "metadata", "ownerReferences") or []
    if not owners:
        return True
    uids = {_get(owner, "uid") for owner in owners}
    return _get(body, "metadata", "uid") in uids or bool(uids & rs_uids)


def selector_string(selector: object) -> str:
    """A LabelSelector (matchLabels and matchExpressions) in the API's query syntax."""
    parts = [
        f"{key}={value}" for key, value in sorted((_get(selector, "matchLabels") or {}).items())
    ]
    for expression in _get(selector, "matchExpressions") or []:
        key = _get(expression, "key")
        operator = _get(expression, "operator")
        values = ",".join(str(value) for value in _get(expression, "values") or [])
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
