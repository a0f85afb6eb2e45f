"""The built-in resource types, generic storage plus the little behaviour each kind needs.

To serve another built-in kind, add one `ResourceType(...)` to `BUILTINS`: discovery,
OpenAPI, routing, tables and watches pick it up from the registry.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from . import tables
from .resources import Column, ResourceType, ScalePaths
from .selectors import path_getter

Body = dict[str, Any]


def _get(path: str) -> Callable[[Body], Any]:
    return path_getter(path)


def _count(path: str) -> Callable[[Body], Any]:
    getter = path_getter(path)
    return lambda obj: len(getter(obj) or ())


def _ratio(ready: str, total: str) -> Callable[[Body], str]:
    ready_of, total_of = path_getter(ready), path_getter(total)
    return lambda obj: f"{ready_of(obj) or 0}/{total_of(obj) or 0}"


def _status_count(key: str) -> Callable[[Body], int]:
    return lambda obj: int((obj.get("status") or {}).get(key) or 0)


def _age_of(*paths: str) -> Callable[[Body], Any]:
    getters = [path_getter(p) for p in paths]
    return lambda obj: tables.age(next((v for g in getters if (v := g(obj))), None))


def _pod_ready(obj: Body) -> str:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    containers = obj.get("spec", {}).get("containers") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_restarts(obj: Body) -> int:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def _service_ports(obj: Body) -> str:
    ports = obj.get("spec", {}).get("ports") or []
    text = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports)
    return text or "<none>"


def _event_object(reference: str) -> Callable[[Body], str]:
    def render(obj: Body) -> str:
        ref = obj.get(reference) or {}
        return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"

    return render


AGE = Column("Age", "string", getter=_age_of("metadata.creationTimestamp"))


def _prepare_namespace(obj: Body, creating: bool) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    if creating:
        obj["status"] = {"phase": "Active"}


def _prepare_secret(obj: Body, creating: bool) -> None:
    # The API folds write-only stringData into base64 data, as kube-apiserver does.
    plain = obj.pop("stringData", None) or {}
    data = obj.setdefault("data", {}) if plain else obj.get("data")
    for key, value in plain.items():
        data[key] = base64.b64encode(str(value).encode()).decode()  # type: ignore[index]
    obj.setdefault("type", "Opaque")


def _prepare_pod(obj: Body, creating: bool) -> None:
    if creating:
        obj["status"] = {"phase": "Pending"}
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("serviceAccountName", "default")


def _prepare_workload(obj: Body, creating: bool) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)


def _prepare_service(obj: Body, creating: bool) -> None:
    obj.setdefault("spec", {}).setdefault("type", "ClusterIP")


def _prepare_event(obj: Body, creating: bool) -> None:
    obj.setdefault("type", "Normal")


def _to_events_v1(obj: Body) -> Body:
    """Core v1 Event (the stored form) as events.k8s.io/v1 presents it."""
    renamed = {
        "involvedObject": "regarding",
        "message": "note",
        "reportingComponent": "reportingController",
        "source": "deprecatedSource",
        "firstTimestamp": "deprecatedFirstTimestamp",
        "lastTimestamp": "deprecatedLastTimestamp",
        "count": "deprecatedCount",
    }
    out: Body = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[renamed.get(key, key)] = value
    return out


def _from_events_v1(obj: Body) -> Body:
    renamed = {
        "regarding": "involvedObject",
        "note": "message",
        "reportingController": "reportingComponent",
        "deprecatedSource": "source",
        "deprecatedFirstTimestamp": "firstTimestamp",
        "deprecatedLastTimestamp": "lastTimestamp",
        "deprecatedCount": "count",
    }
    out: Body = {"apiVersion": "v1", "kind": "Event"}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[renamed.get(key, key)] = value
    return out


_EVENT_FIELDS = {
    "involvedObject.kind": _get("involvedObject.kind"),
    "involvedObject.namespace": _get("involvedObject.namespace"),
    "involvedObject.name": _get("involvedObject.name"),
    "involvedObject.uid": _get("involvedObject.uid"),
    "involvedObject.apiVersion": _get("involvedObject.apiVersion"),
    "involvedObject.resourceVersion": _get("involvedObject.resourceVersion"),
    "involvedObject.fieldPath": _get("involvedObject.fieldPath"),
    "reason": _get("reason"),
    "reportingComponent": _get("reportingComponent"),
    "source": _get("source.component"),
    "type": _get("type"),
}
# Selectors see the stored (core v1) form, so events.k8s.io's field names map onto core
# paths; printer columns see each endpoint's own form.
_EVENT_V1_FIELDS = {
    **{k.replace("involvedObject", "regarding"): getter
       for k, getter in _EVENT_FIELDS.items() if k.startswith("involvedObject")},
    "reportingController": _get("reportingComponent"),
}  # fmt: skip
_EVENT_COLUMNS = (
    Column(
        "Last Seen",
        "string",
        getter=_age_of("lastTimestamp", "eventTime", "metadata.creationTimestamp"),
    ),
    Column("Type", "string", getter=_get("type")),
    Column("Reason", "string", getter=_get("reason")),
    Column("Object", "string", getter=_event_object("involvedObject")),
    Column("Message", "string", getter=_get("message")),
    # kube lists an event's name last, in wide output only.
    Column("Name", "string", priority=1, format="name", getter=_get("metadata.name")),
)
_EVENT_V1_COLUMNS = (
    Column(
        "Last Seen",
        "string",
        getter=_age_of("deprecatedLastTimestamp", "eventTime", "metadata.creationTimestamp"),
    ),
    Column("Type", "string", getter=_get("type")),
    Column("Reason", "string", getter=_get("reason")),
    Column("Object", "string", getter=_event_object("regarding")),
    Column("Message", "string", getter=_get("note")),
    Column("Name", "string", priority=1, format="name", getter=_get("metadata.name")),
)


def _allow(review: Body) -> Body:
    """Every access review is allowed: the emulator has no RBAC."""
    return {**review, "status": {"allowed": True, "reason": "the API emulator has no RBAC"}}


def _all_rules(review: Body) -> Body:
    rules = {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    }
    return {**review, "status": rules}


def _whoami(review: Body) -> Body:
    user = {"username": "rebalancer-lab", "groups": ["system:masters", "system:authenticated"]}
    return {**review, "status": {"userInfo": user}}


_WORKLOAD_SCALE = ScalePaths(".spec.replicas", ".status.replicas", ".spec.selector")

BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), status=True,
        columns=(Column("Status", getter=_get("status.phase")), AGE),
        field_labels={"status.phase": _get("status.phase")}, prepare=_prepare_namespace,
    ),
    ResourceType(
        "", "v1", "pods", "Pod", short_names=("po",), categories=("all",), status=True,
        returns_deleted=True,
        columns=(
            Column("Ready", getter=_pod_ready),
            Column("Status", getter=_get("status.phase")),
            Column("Restarts", "integer", getter=_pod_restarts),
            AGE,
        ),
        field_labels={
            "spec.nodeName": _get("spec.nodeName"),
            "spec.restartPolicy": _get("spec.restartPolicy"),
            "spec.schedulerName": _get("spec.schedulerName"),
            "spec.serviceAccountName": _get("spec.serviceAccountName"),
            "spec.hostNetwork": lambda o: bool(o.get("spec", {}).get("hostNetwork")),
            "status.phase": _get("status.phase"),
            "status.podIP": _get("status.podIP"),
            "status.nominatedNodeName": _get("status.nominatedNodeName"),
        },
        prepare=_prepare_pod,
    ),
    ResourceType(
        "", "v1", "services", "Service", short_names=("svc",), categories=("all",), status=True,
        columns=(
            Column("Type", getter=_get("spec.type")),
            Column("Cluster-IP", getter=_get("spec.clusterIP")),
            Column("Port(s)", getter=_service_ports),
            AGE,
        ),
        prepare=_prepare_service,
    ),
    ResourceType(
        "", "v1", "configmaps", "ConfigMap", short_names=("cm",),
        columns=(Column("Data", "integer", getter=_count("data")), AGE),
    ),
    ResourceType(
        "", "v1", "secrets", "Secret",
        columns=(
            Column("Type", getter=_get("type")),
            Column("Data", "integer", getter=_count("data")),
            AGE,
        ),
        field_labels={"type": _get("type")}, prepare=_prepare_secret,
    ),
    ResourceType(
        "", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",), returns_deleted=True,
        columns=(Column("Secrets", "integer", getter=_count("secrets")), AGE),
    ),
    ResourceType(
        "", "v1", "events", "Event", short_names=("ev",), columns=_EVENT_COLUMNS,
        field_labels=_EVENT_FIELDS, prepare=_prepare_event,
    ),
    ResourceType(
        "apps", "v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",),
        status=True, scale=_WORKLOAD_SCALE, generation=True, prepare=_prepare_workload,
        columns=(
            Column("Ready", getter=_ratio("status.readyReplicas", "spec.replicas")),
            Column("Up-to-date", "integer", getter=_status_count("updatedReplicas")),
            Column("Available", "integer", getter=_status_count("availableReplicas")),
            AGE,
        ),
    ),
    ResourceType(
        "apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",), categories=("all",),
        status=True, scale=_WORKLOAD_SCALE, generation=True, prepare=_prepare_workload,
        columns=(Column("Ready", getter=_ratio("status.readyReplicas", "spec.replicas")), AGE),
    ),
    ResourceType(
        "apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), categories=("all",),
        status=True, scale=_WORKLOAD_SCALE, generation=True, prepare=_prepare_workload,
        columns=(
            Column("Desired", "integer", getter=_get("spec.replicas")),
            Column("Current", "integer", getter=_status_count("replicas")),
            Column("Ready", "integer", getter=_status_count("readyReplicas")),
            AGE,
        ),
        field_labels={"status.replicas": _get("status.replicas")},
    ),
    ResourceType(
        "apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), categories=("all",),
        status=True, generation=True, columns=(AGE,),
    ),
    ResourceType(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
        namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",),
        status=True, generation=True,
        columns=(Column("Created At", "date", getter=_get("metadata.creationTimestamp")),),
    ),
    ResourceType(
        "coordination.k8s.io", "v1", "leases", "Lease",
        columns=(Column("Holder", getter=_get("spec.holderIdentity")), AGE),
    ),
    ResourceType(
        "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
        namespaced=False, verbs=("create",), review=_allow,
    ),
    ResourceType(
        "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
        namespaced=False, verbs=("create",), review=_all_rules,
    ),
    ResourceType(
        "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
        namespaced=False, verbs=("create",), review=_allow,
    ),
    ResourceType(
        "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview",
        namespaced=False, verbs=("create",), review=_whoami,
    ),
    ResourceType(
        "events.k8s.io", "v1", "events", "Event", short_names=("ev",), storage="/events",
        columns=_EVENT_V1_COLUMNS, field_labels={**_EVENT_FIELDS, **_EVENT_V1_FIELDS},
        decode=_from_events_v1, encode=_to_events_v1, prepare=_prepare_event,
    ),
)  # fmt: skip
