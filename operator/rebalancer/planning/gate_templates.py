"""The join gate as an init container in a workload's pod template, rendered as a JSON patch.

The gate goes last among the init containers: whatever the others prepare (migrations, config
rendering) is done by the time the gate lets go, so the consumer starts at once. Adding it
changes the pod template, which the workload's controller rolls out like any template change;
the patch is guarded by the workload's resourceVersion so two writers cannot add it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.structs.gates import (
    DEFAULT_BYPASS_SECONDS,
    GATE_CONTAINER,
    JOIN_GATE_DIR,
    JOIN_GATE_ENV,
    JOIN_GATE_FILE,
    JOIN_GATE_VOLUME,
    GateHold,
)

DEFAULT_IMAGE = "ghcr.io/rebalancer-dev/rebalancer"


@dataclass(frozen=True)
class GateOptions:
    image: str = DEFAULT_IMAGE
    # Seconds before the gate gives up and fails (the pod's init container then restarts);
    # 0 waits forever.
    timeout_seconds: int = 900
    # Seconds without a sign of the operator after which the gate lets the pod go; 0 never.
    bypass_after_seconds: int = DEFAULT_BYPASS_SECONDS
    image_pull_policy: str = "IfNotPresent"
    # Extra environment, for example REBALANCER_API_SERVER where no service account token is
    # mounted.
    env: Mapping[str, str] = field(default_factory=dict)
    # POD: an init container that holds the pod's containers; JOIN: a native sidecar that
    # holds only the join, for consumers that wait for JOIN_GATE_ENV's file before subscribing.
    hold: GateHold = GateHold.POD


def gate_container(options: GateOptions) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_UID", "metadata.uid"),
        )
    ]
    env += [{"name": name, "value": value} for name, value in sorted(options.env.items())]
    container: dict[str, Any] = {
        "name": GATE_CONTAINER,
        "image": options.image,
        "imagePullPolicy": options.image_pull_policy,
        "args": [
            "gate",
            "--timeout",
            str(options.timeout_seconds),
            "--bypass-after",
            str(options.bypass_after_seconds),
        ],
        "env": env,
        "resources": {
            "requests": {"cpu": "10m", "memory": "48Mi"},
            "limits": {"memory": "128Mi"},
        },
        "securityContext": restricted_security_context(),
    }
    if options.hold is GateHold.JOIN:
        container["restartPolicy"] = "Always"
        container["args"] += ["--hold-join", JOIN_GATE_DIR]
        container["volumeMounts"] = [{"name": JOIN_GATE_VOLUME, "mountPath": JOIN_GATE_DIR}]
    return container


def restricted_security_context() -> dict[str, Any]:
    """The securityContext of a container the operator injects (the gate, the sidecar).

    On the container itself, so it meets the restricted Pod Security Standard whatever the
    pod's own securityContext says. runAsNonRoot needs a numeric non-root USER in the image
    (the project's image runs as 10001); an image that runs as root is refused by the kubelet
    with CreateContainerConfigError. A new dict each call, so no two templates share one."""
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def join_gate_volume() -> dict[str, Any]:
    """The emptyDir the gate writes its file into and the consumers read it from."""
    return {"name": JOIN_GATE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}


def join_gate_mount() -> dict[str, Any]:
    return {"name": JOIN_GATE_VOLUME, "mountPath": JOIN_GATE_DIR, "readOnly": True}


def join_gate_env() -> dict[str, Any]:
    return {"name": JOIN_GATE_ENV, "value": f"{JOIN_GATE_DIR}/{JOIN_GATE_FILE}"}


def render_gate_patch(workload: Mapping[str, Any], options: GateOptions) -> list[dict[str, Any]]:
    """JSON-patch operations that add the gate to `workload`'s pod template; [] if it has one."""
    template_spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    inits = template_spec.get("initContainers")
    if any(item.get("name") == GATE_CONTAINER for item in inits or []):
        return []
    ops: list[dict[str, Any]] = []
    version = (workload.get("metadata") or {}).get("resourceVersion")
    if version:
        ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": version})
    container = gate_container(options)
    ops.append(_append(template_spec, "initContainers", "/spec/template/spec", container))
    if options.hold is GateHold.JOIN:
        ops += _join_gate_wiring(template_spec)
    return ops


def _append(parent: Mapping[str, Any], key: str, path: str, value: object) -> dict[str, Any]:
    """A JSON-patch add of `value` to the list `parent[key]` at `path`, created if absent."""
    if parent.get(key) is None:
        return {"op": "add", "path": f"{path}/{key}", "value": [value]}
    return {"op": "add", "path": f"{path}/{key}/-", "value": value}


def _join_gate_wiring(template_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The shared volume, and in every container its mount and the variable naming the file."""
    ops = [_append(template_spec, "volumes", "/spec/template/spec", join_gate_volume())]
    for index, container in enumerate(template_spec.get("containers") or []):
        path = f"/spec/template/spec/containers/{index}"
        ops.append(_append(container, "volumeMounts", path, join_gate_mount()))
        ops.append(_append(container, "env", path, join_gate_env()))
    return ops
