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

# The builders live in the lab package (the benches build the same fleets); imported from here.
from rebalancer_lab.fleets import (  # noqa: F401
    consumer_deployment,
    consumer_group,
    consumer_pid,
    consumer_statefulset,
)
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
