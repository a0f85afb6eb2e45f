"""Workloads of lab consumers and their ConsumerGroups, as the end-to-end tests and the benches
build them: a StatefulSet of lab consumers (gated or not, static members or not), a Deployment
whose consumers take the identity slot the operator writes, and an observe-only ConsumerGroup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rebalancer.planning.gate_templates import (
    GateOptions,
    gate_container,
    join_gate_env,
    join_gate_mount,
    join_gate_volume,
)
from rebalancer.structs.gates import INSTANCE_ID_FIELD_PATH, GateHold
from rebalancer_lab.running import Lab


def consumer_group(
    name: str, bootstrap: str, *, group_id: str | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "groupId": group_id or name,
            "kafka": {"bootstrapServers": [bootstrap]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
            "policy": {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 20}},
        },
    }
    body["spec"].update(spec)
    return body


def consumer_statefulset(
    lab: Lab,
    name: str,
    replicas: int,
    *,
    gated: bool,
    version: str = "1",
    record_dir: Path | None = None,
    holds: GateHold = GateHold.POD,
) -> dict[str, Any]:
    """A Parallel StatefulSet `<name>-consumer` of lab consumers in group and topic `name`, with
    the join gate when `gated` (holding the pod, or only the join); with `record_dir`, each pod
    records what it processes in `<record_dir>/<pod>.tsv`. APP_VERSION changes the template (a
    rolling update)."""
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    env += [
        {"name": key, "value": value}
        for key, value in lab.consumer_env(0, group_id=name).items()
        if key != "POD_NAME"
    ]
    env.append({"name": "APP_VERSION", "value": version})
    if record_dir is not None:
        env.append({"name": "RECORD_FILE", "value": f"{record_dir}/$(POD_NAME).tsv"})
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 10,
        "containers": [
            {
                "name": "consumer",
                "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
                "command": ["python", "-m", "rebalancer_lab.consumer"],
                "env": env,
            }
        ],
    }
    if gated:
        spec["initContainers"] = [gate_container(GateOptions(timeout_seconds=300, hold=holds))]
    if gated and holds is GateHold.JOIN:
        spec["volumes"] = [join_gate_volume()]
        spec["containers"][0]["volumeMounts"] = [join_gate_mount()]
        env.append(join_gate_env())
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"{name}-consumer", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def consumer_deployment(
    lab: Lab,
    name: str,
    replicas: int,
    *,
    version: str = "1",
    session_ms: int | None = None,
    max_surge: int | str = "100%",
    record_dir: Path | None = None,
) -> dict[str, Any]:
    """A gated Deployment `<name>-consumer` of lab consumers whose group.instance.id is the
    identity slot the operator writes on each pod (rebalancer.dev/instance-id), rolling with
    `max_surge` and maxUnavailable 0; with `record_dir`, each pod records what it processes in
    `<record_dir>/<pod>.tsv`."""
    body = consumer_statefulset(
        lab, name, replicas, gated=True, version=version, record_dir=record_dir
    )
    spec = body["spec"]
    env = spec["template"]["spec"]["containers"][0]["env"]
    slot = {"fieldRef": {"fieldPath": INSTANCE_ID_FIELD_PATH}}
    env.append({"name": "KAFKA_GROUP_INSTANCE_ID", "valueFrom": slot})
    if session_ms is not None:
        env[:] = [e for e in env if e["name"] != "KAFKA_SESSION_TIMEOUT_MS"]
        env.append({"name": "KAFKA_SESSION_TIMEOUT_MS", "value": str(session_ms)})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": body["metadata"],
        "spec": {
            "replicas": replicas,
            "selector": spec["selector"],
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": 0},
            },
            "template": spec["template"],
        },
    }


def consumer_pid(lab: Lab, pod: str, container: str | None = None) -> int | None:
    """The pid of the consumer container the lab's kubelet runs for `pod` now (its first
    container), or of the container named `container` (a sidecar next to it)."""
    kubelet = lab.cluster.kubelet if lab.cluster is not None else None
    assert kubelet is not None, "the lab runs no kubelet"
    for worker in list(kubelet.workers.values()):
        if worker.name != pod or worker.terminating:
            continue
        mains = [c for c in worker.containers if c.kind == "main"]
        named = [c for c in mains if c.name == container] if container is not None else mains[:1]
        for found in named:
            if found.running and found.process is not None:
                return found.process.pid
    return None
