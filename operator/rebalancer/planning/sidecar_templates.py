"""The enforcement sidecar as a container in a workload's pod template, rendered as a JSON patch.

    patch = render_sidecar_patch(workload, rendered_sidecar(...), kind=..., park=True)

The sidecar joins the application's group, so it must speak to the same cluster with the same
session timeout, assignor and security as the application (docs/enforcing.md, "Limits"). It
therefore takes the application container's `KAFKA_*` variables, its `envFrom` and its mounts
(read-only, so a `KAFKA_CONFIG_FILE` or a TLS file the application reads is there too), and
the ConsumerGroup's bootstrap servers and group id on top. The bearer token is a Secret volume:
the sidecar reads it from a file, re-reads it on rotation, and it never appears in the template.

The template carries a hash of the rendered container in SIDECAR_HASH_ANNOTATION. A live
template is compared by that hash, not field by field: the API server defaults fields of a
container (probe thresholds, terminationMessagePath), so a field-by-field comparison would
never settle on a real cluster. Any change of what is rendered, the application's variables
included, changes the hash and the template, which rolls out like the settings do.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch

from rebalancer.planning.consumer_settings_templates import (
    TemplatePatch,
    find_container,
    park_ops,
    pointer,
)
from rebalancer.planning.gate_templates import DEFAULT_IMAGE, restricted_security_context
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.specs import WorkloadKind

SIDECAR_CONTAINER = "rebalancer-sidecar"
SIDECAR_HASH_ANNOTATION = "rebalancer.dev/sidecar-hash"
# The chart's PodMonitor finds injected sidecars by this port name (podMonitor.portName).
SIDECAR_PORT_NAME = "rb-sidecar"
TOKEN_VOLUME = "rebalancer-sidecar-token"
TOKEN_DIRECTORY = "/var/run/rebalancer/sidecar-token"
TOKEN_FILE = "token"
# The member-report contract (docs/member-reports.md): a sidecar reports as <pod>-sidecar.
_SHARED_VARIABLES = ("REBALANCER_REPORT_URL", "REBALANCER_REPORT_TOKEN")
_OURS = frozenset(
    {
        "KAFKA_BOOTSTRAP_SERVERS",
        "KAFKA_GROUP_ID",
        "POD_NAME",
        "POD_IP",
        "REBALANCER_SIDECAR_TOKEN_FILE",
        "REBALANCER_SIDECAR_LISTEN",
    }
)

Body = dict[str, Any]


@dataclass(frozen=True)
class SidecarOptions:
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"


@dataclass(frozen=True)
class RenderedSidecar:
    container: Body
    volume: Body
    hash: str


def _copied_env(consumer: Mapping[str, Any]) -> list[Body]:
    copied: list[Body] = []
    for entry in consumer.get("env") or []:
        name = str(entry.get("name", ""))
        if name in _OURS:
            continue
        if name.startswith("KAFKA_") or name in _SHARED_VARIABLES:
            copied.append(copy.deepcopy(dict(entry)))
    return copied


def _copied_mounts(consumer: Mapping[str, Any]) -> list[Body]:
    mounts: list[Body] = []
    for mount in consumer.get("volumeMounts") or []:
        if mount.get("name") == TOKEN_VOLUME:
            continue
        # The sidecar only reads what the application reads; it must not write to its volumes.
        mounts.append({**copy.deepcopy(dict(mount)), "readOnly": True})
    return mounts


def _sidecar_env(
    consumer: Mapping[str, Any],
    group_id: str,
    bootstrap_servers: Sequence[str],
    policy: SidecarPolicy,
) -> list[Body]:
    """The sidecar's environment: the pod's name and IP, the consumer's Kafka settings, and
    where the sidecar reads its token and listens."""
    return [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        *_copied_env(consumer),
        {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": ",".join(bootstrap_servers)},
        # Kubernetes would expand $(NAME) in the group id; $$ keeps a literal $.
        {"name": "KAFKA_GROUP_ID", "value": group_id.replace("$(", "$$(")},
        {"name": "REBALANCER_SIDECAR_TOKEN_FILE", "value": f"{TOKEN_DIRECTORY}/{TOKEN_FILE}"},
        # The operator calls the sidecar on the pod's IP (status.podIP), so it listens there:
        # loopback alone would not be reached, and the pod IP, unlike 0.0.0.0, is the pod's
        # own also where pods share a host's interfaces (the lab). Kubernetes expands $(POD_IP)
        # because POD_IP comes earlier in the list; a v6 address parses too (host:port is split
        # at the last colon).
        {"name": "REBALANCER_SIDECAR_LISTEN", "value": f"$(POD_IP):{policy.port}"},
    ]


def render_sidecar(
    consumer: Mapping[str, Any],
    *,
    group_id: str,
    bootstrap_servers: Sequence[str],
    policy: SidecarPolicy,
    options: SidecarOptions = SidecarOptions(),
) -> RenderedSidecar:
    """The sidecar container next to `consumer` (the application container as the template
    has it) and the token volume it mounts. `policy.token_secret` must be set (the parser
    requires it with inject)."""
    assert policy.token_secret is not None, "inject requires tokenSecretRef"
    env = _sidecar_env(consumer, group_id, bootstrap_servers, policy)
    mounts = _copied_mounts(consumer)
    mounts.append({"name": TOKEN_VOLUME, "mountPath": TOKEN_DIRECTORY, "readOnly": True})
    container: Body = {
        "name": SIDECAR_CONTAINER,
        "image": options.image,
        "imagePullPolicy": options.image_pull_policy,
        "args": ["sidecar"],
        "env": env,
        "ports": [{"name": SIDECAR_PORT_NAME, "containerPort": policy.port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": policy.port},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "resources": {
            # About 50 MB resident was measured (bench/enforce.py); four librdkafka clients.
            "requests": {"cpu": "20m", "memory": "64Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": restricted_security_context(),
    }
    if consumer.get("envFrom"):
        container["envFrom"] = copy.deepcopy(list(consumer["envFrom"]))
    container["volumeMounts"] = mounts
    volume: Body = {
        "name": TOKEN_VOLUME,
        "secret": {
            "secretName": policy.token_secret,
            "items": [{"key": policy.token_key, "path": TOKEN_FILE}],
            # As the API server defaults it, so a re-read template shows the same volume.
            "defaultMode": 0o644,
        },
    }
    digest = hashlib.sha256(
        json.dumps({"container": container, "volume": volume}, sort_keys=True).encode()
    ).hexdigest()[:16]
    return RenderedSidecar(container=container, volume=volume, hash=digest)


def _template(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    return (workload.get("spec") or {}).get("template") or {}


def sidecar_hash(workload: Mapping[str, Any]) -> str | None:
    """The sidecar hash the workload's pod template carries (None: no injected sidecar)."""
    annotations = (_template(workload).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(SIDECAR_HASH_ANNOTATION)
    return str(value) if value is not None else None


def user_sidecar(template_spec: Mapping[str, Any]) -> str | None:
    """The name of a container the user's manifest runs `rebalancer sidecar` in, if any."""
    for container in template_spec.get("containers") or []:
        if container.get("name") == SIDECAR_CONTAINER:
            continue
        words = [
            str(word)
            for word in [*(container.get("command") or ()), *(container.get("args") or ())]
        ]
        image = str(container.get("image") or "")
        if "sidecar" in words and ("rebalancer" in image or any("rebalancer" in w for w in words)):
            return str(container.get("name"))
    return None


def render_sidecar_patch(
    workload: Mapping[str, Any],
    rendered: RenderedSidecar | None,
    *,
    kind: WorkloadKind,
    park: bool = False,
) -> TemplatePatch:
    """JSON-patch operations that put `rendered` into the pod template, or take the operator's
    sidecar out when `rendered` is None. No operations when the template is already right.

    `park` as in consumer_settings_templates.render_template_patch: a StatefulSet is held at its
    revision in the same write, so the rollout planner staggers the change.
    """
    template = _template(workload)
    spec = template.get("spec") or {}
    containers = list(spec.get("containers") or [])
    index = next((i for i, c in enumerate(containers) if c.get("name") == SIDECAR_CONTAINER), None)
    carried = sidecar_hash(workload)
    ops: list[Body] = []
    if rendered is None:
        if index is None and carried is None:
            return TemplatePatch()
        if index is not None and carried is None:
            # Named like ours but not put there by the operator: the user's own container.
            return TemplatePatch()
        ops += _removal_ops(spec, index)
    else:
        problem = _injection_problem(spec, index, carried, rendered)
        if problem is not None:
            return TemplatePatch(problem=problem)
        if index is not None and carried == rendered.hash:
            return TemplatePatch()
        if index is None:
            ops.append(
                {
                    "op": "add",
                    "path": "/spec/template/spec/containers/-",
                    "value": rendered.container,
                }
            )
        else:
            ops.append(
                {
                    "op": "replace",
                    "path": f"/spec/template/spec/containers/{index}",
                    "value": rendered.container,
                }
            )
        ops += _volume_ops(spec, rendered.volume)
        ops += _hash_ops(template, rendered.hash)
    if park and kind is WorkloadKind.STATEFULSET:
        ops += park_ops(workload)
    version = (workload.get("metadata") or {}).get("resourceVersion")
    if version:
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": version})
    return TemplatePatch(ops=tuple(ops))


def _injection_problem(
    spec: Mapping[str, Any], index: int | None, carried: str | None, rendered: RenderedSidecar
) -> FieldProblem | None:
    """Why the sidecar cannot go into this template: a container of its name the operator did
    not add, the user's own sidecar, or its port taken."""
    if index is not None and carried is None:
        return FieldProblem(
            "spec.policy.enforce.sidecar.inject",
            f"is true, but the pod template already has a container named "
            f"{SIDECAR_CONTAINER!r} the operator did not add",
            "rename that container, or set inject: false and keep your own sidecar",
        )
    own = user_sidecar(spec)
    if own is not None:
        return FieldProblem(
            "spec.policy.enforce.sidecar.inject",
            f"is true, but container {own!r} of the pod template already runs `rebalancer sidecar`",
            "set inject: false to keep your own sidecar, or remove it from the manifest",
        )
    port = rendered.container["ports"][0]["containerPort"]
    taken = _port_owner(spec, port)
    if taken is not None:
        return FieldProblem(
            "spec.policy.enforce.sidecar.port",
            f"({port}) is a port container {taken!r} of the pod template declares",
            "choose another port from 1024 to 65535",
        )
    return None


def _removal_ops(spec: Mapping[str, Any], index: int | None) -> list[Body]:
    """Take the operator's sidecar, its token volume and its hash annotation out."""
    ops: list[Body] = []
    if index is not None:
        ops.append({"op": "remove", "path": f"/spec/template/spec/containers/{index}"})
    ops += _volume_ops(spec, None)
    ops.append(
        {
            "op": "remove",
            "path": f"/spec/template/metadata/annotations/{pointer(SIDECAR_HASH_ANNOTATION)}",
        }
    )
    return ops


def _port_owner(spec: Mapping[str, Any], port: int) -> str | None:
    """The other container that declares `port`: the pod shares one network namespace."""
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if container.get("name") == SIDECAR_CONTAINER:
            continue
        if any(entry.get("containerPort") == port for entry in container.get("ports") or []):
            return str(container.get("name"))
    return None


def _volume_ops(spec: Mapping[str, Any], volume: Body | None) -> list[Body]:
    volumes = list(spec.get("volumes") or [])
    index = next((i for i, v in enumerate(volumes) if v.get("name") == TOKEN_VOLUME), None)
    path = "/spec/template/spec/volumes"
    if volume is None:
        return [] if index is None else [{"op": "remove", "path": f"{path}/{index}"}]
    if index is not None:
        if volumes[index] == volume:
            return []
        return [{"op": "replace", "path": f"{path}/{index}", "value": volume}]
    if "volumes" not in spec or spec.get("volumes") is None:
        return [{"op": "add", "path": path, "value": [volume]}]
    return [{"op": "add", "path": f"{path}/-", "value": volume}]


def _hash_ops(template: Mapping[str, Any], digest: str) -> list[Body]:
    metadata = template.get("metadata")
    annotations = {SIDECAR_HASH_ANNOTATION: digest}
    if metadata is None:
        value = {"annotations": annotations}
        return [{"op": "add", "path": "/spec/template/metadata", "value": value}]
    if metadata.get("annotations") is None:
        path = "/spec/template/metadata/annotations"
        return [{"op": "add", "path": path, "value": annotations}]
    path = f"/spec/template/metadata/annotations/{pointer(SIDECAR_HASH_ANNOTATION)}"
    return [{"op": "add", "path": path, "value": digest}]


def consumer_container(
    workload: Mapping[str, Any], name: str | None
) -> tuple[Mapping[str, Any] | None, FieldProblem | None]:
    """The application container the sidecar copies from (spec.workload.container)."""
    spec = _template(workload).get("spec") or {}
    index = find_container(spec, name)
    if index is not None and spec["containers"][index].get("name") == SIDECAR_CONTAINER:
        index = None  # the sidecar is never the application
    if index is None:
        where = f"container {name!r}" if name else "a container"
        return None, FieldProblem(
            "spec.workload.container",
            f"names {where} the pod template does not have",
            "name one of the template's containers, or omit it for the first",
        )
    return spec["containers"][index], None


# Applying a patch to a body in memory ------------------------------------------------------


PatchFailed = jsonpatch.JsonPatchException  # an op does not apply (missing path, failed test)


def apply_ops(body: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> Body:
    """`body` with the JSON-patch `ops` applied (RFC 6902, as the API server applies them): to
    render one change on top of another and send both in one write."""
    result: Body = jsonpatch.apply_patch(dict(body), [dict(op) for op in ops])
    return result
