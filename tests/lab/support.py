"""Builders and watchers for the lab cluster's tests: tiny processes, real API, real watches."""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rebalancer.lab.kube.informing import Change, Informer
from rebalancer.lab.kube.objects import condition, is_terminating
from rebalancer.lab.kube.requesting import Api

Body = dict[str, Any]
T = TypeVar("T")

SLEEP = ["python", "-c", "import time; time.sleep(600)"]
PODS = "/api/v1/namespaces/default/pods"
STATEFULSETS = "/apis/apps/v1/namespaces/default/statefulsets"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"


def wait_for(probe: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.03)


def container(name: str = "main", command: list[str] | None = None, **extra: Any) -> Body:
    return {"name": name, "image": "example/app:1", "command": command or SLEEP, **extra}


def pod(name: str, *containers: Body, **spec: Any) -> Body:
    body: Body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 2, "containers": list(containers), **spec},
    }
    return body


def flag_probe(flags: Path, period: int = 1) -> Body:
    """Ready while `<flags>/<pod name>` exists: lets a test decide each pod's readiness."""
    return {
        "exec": {"command": ["sh", "-c", f'test -e "{flags}/$HOSTNAME"']},
        "periodSeconds": period,
        "failureThreshold": 1,
    }


def template(
    version: str = "1", labels: dict[str, str] | None = None, **container_extra: Any
) -> Body:
    return {
        "metadata": {"labels": labels or {"app": "demo"}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                container(env=[{"name": "VERSION", "value": version}], **container_extra)
            ],
        },
    }


def statefulset(name: str, replicas: int, **spec: Any) -> Body:
    tmpl = spec.pop("template", None) or template(labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": tmpl,
            **spec,
        },
    }


def deployment(name: str, replicas: int, **spec: Any) -> Body:
    tmpl = spec.pop("template", None) or template(labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": tmpl,
            **spec,
        },
    }


def new_version(obj: Body, version: str) -> Body:
    """A merge patch changing the pod template of a workload built by `template`."""
    tmpl = copy.deepcopy(obj["spec"]["template"])
    tmpl["spec"]["containers"][0]["env"] = [{"name": "VERSION", "value": version}]
    return {"spec": {"template": tmpl}}


def is_ready(body: Body) -> bool:
    cond = condition(body, "Ready")
    return bool(cond and cond.get("status") == "True") and not is_terminating(body)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def pid_of(status: Body) -> int:
    return int(str(status["containerID"]).removeprefix("lab://"))


@dataclass
class Event:
    at: float
    type: str
    pod: Body


@dataclass
class PodWatch:
    """Every pod event in order, and checks evaluated on the cache after each one."""

    api: Api
    events: list[Event] = field(default_factory=list)
    checks: list[Callable[[list[Body]], None]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    informer: Informer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> PodWatch:
        self.informer = Informer(self.api, "/api/v1/pods", name="test-pods")
        self.informer.add_handler(self._record)
        self.informer.start()
        self.informer.wait_synced()
        return self

    def __exit__(self, *_: object) -> None:
        assert self.informer is not None
        self.informer.stop()

    def _record(self, change: Change) -> None:
        assert self.informer is not None
        with self._lock:
            self.events.append(Event(time.monotonic(), change.type, change.object))
            pods = self.informer.items("default")
            for check in self.checks:
                try:
                    check(pods)
                except AssertionError as exc:
                    self.failures.append(str(exc))

    def first(self, predicate: Callable[[Event], bool]) -> Event | None:
        with self._lock:
            return next((e for e in self.events if predicate(e)), None)

    def names_in_order(self, predicate: Callable[[Event], bool]) -> list[str]:
        """Pod names in the order they first matched `predicate`."""
        seen: list[str] = []
        with self._lock:
            for e in self.events:
                name = e.pod["metadata"]["name"]
                if predicate(e) and name not in seen:
                    seen.append(name)
        return seen


def python_script(source: str) -> list[str]:
    return [sys.executable, "-c", source]
