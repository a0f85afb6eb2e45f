"""Helpers of the end-to-end tests: kubectl, polling, resource builders."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client
from tests import polling
from tests.kafka_brokers import shared_broker

from rebalancer.planning.gate_templates import (
    GateOptions,
    gate_container,
    join_gate_env,
    join_gate_mount,
    join_gate_volume,
)
from rebalancer.structs.gates import INSTANCE_ID_FIELD_PATH, GateHold
from rebalancer_lab.ports import free_port
from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.running import Lab, LabConfig

T = TypeVar("T")
KUBECTL = shutil.which("kubectl")


@contextmanager
def running_lab(
    state_dir: Path,
    *,
    fleet: bool,
    pods: bool = False,
    jitter: str | None = None,
    prometheus: bool = False,
    own_broker: bool = False,
    **config: Any,
) -> Iterator[Lab]:
    """A lab on free ports (Prometheus only when asked), stopped whatever the test did.

    It uses the session's shared Kafka broker unless `own_broker` (for tests that stop it)."""
    if not own_broker:
        config.setdefault("external_bootstrap", shared_broker().bootstrap)
    config.setdefault("admission_port", free_port())
    lab = Lab(
        LabConfig(
            state_dir=state_dir,
            broker_port=free_port(),
            reports_port=free_port(),
            prometheus_port=free_port() if prometheus else None,
            **config,
        )
    )
    try:
        lab.start(fleet=fleet, pods=pods, jitter=jitter)
        yield lab
    finally:
        lab.stop()


def kubectl(lab: Lab, *args: str, stdin: str | None = None, check: bool = True) -> str:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(lab.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result.stdout + result.stderr


def apply(lab: Lab, *documents: dict[str, Any]) -> str:
    return kubectl(lab, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))


def eventually(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    every: float = 0.5,
    context: Callable[[], str] | None = None,
) -> T:
    # An API error (a 404 before the object exists) is "not yet" as a failed assertion is.
    value: T = polling.eventually(
        probe,
        what,
        timeout,
        every=every,
        not_yet=(AssertionError, client.ApiException),
        context=context,
    )
    return value


def lab_context(lab: Lab, name: str, logs: tuple[str, ...] = ()) -> Callable[[], str]:
    """What a failed wait on ConsumerGroup `name` should show: its status, the tail of the
    operator's log and of the named lab process logs (`<state>/logs/<name>.log`)."""

    def describe() -> str:
        lines = []
        try:
            lines.append(f"status: {json.dumps(get_cg(lab, name).get('status'))[:3000]}")
        except Exception as error:  # the wait failed anyway: show what can be shown
            lines.append(f"status: unreadable ({error})")
        root = lab.config.state_dir / "logs"
        for log in ("operator", *logs):
            path = root / f"{log}.log"
            text = path.read_text(errors="replace") if path.exists() else "(none)"
            lines.append(f"--- {log}.log (tail)\n" + "\n".join(text.splitlines()[-25:]))
        return "\n".join(lines)

    return describe


def get_cg(lab: Lab, name: str, namespace: str = "default") -> dict[str, Any]:
    assert lab.api_client is not None
    body = client.CustomObjectsApi(lab.api_client).get_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", namespace, "consumergroups", name
    )
    return dict(body)


def condition(body: dict[str, Any], kind: str) -> dict[str, Any]:
    for item in (body.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return {}


def events_for(lab: Lab, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    out = kubectl(lab, "get", "events", "-n", namespace, "-o", "json")
    items = json.loads(out[: out.rindex("}") + 1])["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


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
) -> dict[str, Any]:
    """A gated Deployment `<name>-consumer` of lab consumers whose group.instance.id is the
    identity slot the operator writes on each pod (rebalancer.dev/instance-id), rolling with
    `max_surge` and maxUnavailable 0."""
    body = consumer_statefulset(lab, name, replicas, gated=True, version=version)
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


def statefulset(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]},
            },
        },
    }


def consumer_log_generations(path: Path) -> set[int]:
    """Generations a consumer process printed in its rebalance lines."""
    found: set[int] = set()
    if not path.exists():
        return found
    for line in path.read_text(errors="replace").splitlines():
        for word in line.replace(",", " ").split():
            if word.startswith("generation="):
                value = word.split("=", 1)[1]
                if value.lstrip("-").isdigit() and int(value) >= 0:
                    found.add(int(value))
    return found


def incarnations(lab: Lab, pod: str, namespace: str = "default") -> int:
    """How many times the lab's kubelet has run `pod` (one log directory per pod uid)."""
    return len(list((lab.config.state_dir / "logs" / "pods").glob(f"{namespace}_{pod}_*")))


def restart_operator(lab: Lab) -> None:
    """SIGKILL, as a node failure would, and the same command again."""
    old = lab.operator
    assert old is not None and old.process is not None
    old.process.send_signal(signal.SIGKILL)
    old.process.wait(timeout=10)
    old.stop()
    fresh = ChildProcess(old.name, old.argv, old.log_path)
    fresh.start()
    lab.operator = fresh


def consumer_pid(lab: Lab, pod: str) -> int | None:
    """The pid of the consumer container the lab's kubelet runs for `pod` now."""
    kubelet = lab.cluster.kubelet if lab.cluster is not None else None
    assert kubelet is not None, "the lab runs no kubelet"
    for worker in list(kubelet.workers.values()):
        if worker.name != pod or worker.terminating:
            continue
        for container in worker.containers:
            if container.kind == "main" and container.running and container.process is not None:
                return int(container.process.pid)
    return None
