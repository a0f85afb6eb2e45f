"""Builders and watchers for the lab kubelet's tests: tiny processes, the real API server, real
watches, each test in a namespace of its own."""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests import polling

from rebalancer_lab.cluster import LabCluster
from rebalancer_lab.kube.informing import Change, Informer
from rebalancer_lab.kube.objects import condition, is_terminating
from rebalancer_lab.kube.requesting import Api, resource_path

Body = dict[str, Any]
T = TypeVar("T")

SLEEP = ["python", "-c", "import time; time.sleep(600)"]
# A rollout through the real controllers and the lab kubelet takes 1 to 3 s here; the
# controller manager, the scheduler and the kubelet share 2 cores with other test runs.
ROLLOUT_S = 30.0
# Tolerated by a test's pods only: the Node of a kubelet of the test's own carries it.
OWN_NODE_TAINT = "lab.rebalancer.dev/test-node"
_API_VERSIONS = {"statefulsets": "apps/v1", "deployments": "apps/v1", "replicasets": "apps/v1"}


def wait_for(probe: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    value: T = polling.eventually(probe, what, timeout, every=0.03, not_yet=())
    return value


@dataclass
class Lab:
    """A test's namespace, the admin's client, and the kubelet (node) that runs its pods."""

    api: Api
    namespace: str
    kubelet: LabCluster
    # The kubelet's state folder: pods' volumes under pods/, their logs under logs/pods/.
    state: Path
    node: str = "lab"

    def path(self, plural: str, name: str | None = None) -> str:
        version = _API_VERSIONS.get(plural, "v1")
        return resource_path(version, plural, self.namespace, name)

    @property
    def pods(self) -> str:
        return self.path("pods")

    def get(self, name: str) -> Body:
        found = self.api.get(self.path("pods", name))
        assert found is not None, f"pod {name} is gone"
        return found

    def find(self, name: str) -> Body | None:
        return self.api.get(self.path("pods", name))

    def phase_of(self, name: str) -> str | None:
        found = self.find(name)
        return None if found is None else found["status"].get("phase")

    def create(self, body: Body) -> Body:
        """Create a pod, placed on this kubelet's node."""
        return self.api.create(self.pods, self.placed(body))

    def placed(self, body: Body) -> Body:
        """A pod or pod template that only this kubelet's node takes, through the scheduler."""
        placed = copy.deepcopy(body)
        spec = placed["spec"]
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), "kubernetes.io/hostname": self.node}
        toleration = {"key": OWN_NODE_TAINT, "operator": "Equal", "value": self.node}
        spec["tolerations"] = [*spec.get("tolerations", []), toleration]
        return placed

    def logs(self, pod_name: str, container_name: str) -> str:
        pattern = f"logs/pods/{self.namespace}_{pod_name}_*/{container_name}/*.log"
        return "".join(f.read_text() for f in sorted(self.state.glob(pattern)))

    def volume(self, pod_name: str, volume: str) -> Path:
        return next(self.state.glob(f"pods/{self.namespace}_{pod_name}_*/volumes/{volume}"))


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


def statefulset(lab: Lab, name: str, replicas: int, **spec: Any) -> Body:
    tmpl = spec.pop("template", None) or template(labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": lab.placed(tmpl),
            **spec,
        },
    }


def deployment(lab: Lab, name: str, replicas: int, **spec: Any) -> Body:
    tmpl = spec.pop("template", None) or template(labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": lab.placed(tmpl),
            **spec,
        },
    }


def new_version(obj: Body, version: str) -> Body:
    """A merge patch changing the pod template of a workload built by `template`."""
    tmpl = copy.deepcopy(obj["spec"]["template"])
    tmpl["spec"]["containers"][0]["env"] = [{"name": "VERSION", "value": version}]
    return {"spec": {"template": tmpl}}


def live_pods(lab: Lab) -> list[Body]:
    return [p for p in lab.api.list(lab.pods)["items"] if not is_terminating(p)]


def complete(lab: Lab, name: str) -> Body | None:
    """The Deployment once its rollout is complete, as `kubectl rollout status` decides."""
    found = lab.api.get(lab.path("deployments", name))
    assert found is not None
    st = found.get("status") or {}
    replicas = found["spec"]["replicas"]
    done = (
        st.get("observedGeneration") == found["metadata"]["generation"]
        and st.get("updatedReplicas", 0) == replicas
        and st.get("replicas", 0) == replicas
        and st.get("availableReplicas", 0) == replicas
        and len([p for p in live_pods(lab) if p["metadata"]["labels"].get("app") == name])
        == replicas
    )
    return found if done else None


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
    """Every event of the namespace's pods in order, and checks evaluated on the cache after
    each one."""

    lab: Lab
    events: list[Event] = field(default_factory=list)
    checks: list[Callable[[list[Body]], None]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    informer: Informer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> PodWatch:
        self.informer = Informer(self.lab.api, self.lab.pods, name="test-pods")
        self.informer.add_handler(self._record)
        self.informer.start()
        assert self.informer.wait_synced(), "the test's pod watch did not sync"
        return self

    def __exit__(self, *_: object) -> None:
        assert self.informer is not None
        self.informer.stop()

    def _record(self, change: Change) -> None:
        assert self.informer is not None
        with self._lock:
            self.events.append(Event(time.monotonic(), change.type, change.object))
            pods = self.informer.items(self.lab.namespace)
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
