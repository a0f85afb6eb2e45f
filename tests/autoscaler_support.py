"""KEDA's ScaledObject kind and a stand-in for KEDA, for the autoscaler tests.

The CRD is KEDA's own (tests/data/keda/, vendored with its source and version). No KEDA
controller runs here: `KedaStandIn` plays it, the second writer of the workload's replicas. Like
KEDA it scales the workload through the scale subresource to what its trigger asks for
(`demand`), and does nothing while the ScaledObject carries a pause (either of KEDA's pause
annotations, `paused` other than "false").
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from rebalancer.structs.autoscalers import KEDA_PAUSED_ANNOTATION, KEDA_PAUSED_REPLICAS_ANNOTATION

KEDA_CRD_PATH = Path(__file__).parent / "data" / "keda" / "keda.sh_scaledobjects.yaml"
KEDA_CRD: dict[str, Any] = next(doc for doc in yaml.safe_load_all(KEDA_CRD_PATH.read_text()) if doc)
GROUP, VERSION, PLURAL = "keda.sh", "v1alpha1", "scaledobjects"


def scaled_object(
    name: str, target: str, bootstrap: str, group: str, kind: str = "StatefulSet"
) -> dict[str, Any]:
    """A ScaledObject on the workload with a Kafka lag trigger, as a user writes one."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
            "minReplicaCount": 0,
            "maxReplicaCount": 6,
            "triggers": [
                {
                    "type": "kafka",
                    "metadata": {
                        "bootstrapServers": bootstrap,
                        "consumerGroup": group,
                        "topic": group,
                        "lagThreshold": "50",
                    },
                }
            ],
        },
    }


def annotations_of(api_client: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    body = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return dict((body.get("metadata") or {}).get("annotations") or {})


def paused(annotations: dict[str, str]) -> bool:
    flag = annotations.get(KEDA_PAUSED_ANNOTATION)
    pinned = annotations.get(KEDA_PAUSED_REPLICAS_ANNOTATION)
    return pinned is not None or (flag is not None and flag.lower() != "false")


@dataclass
class KedaStandIn:
    """Scales StatefulSet `target` to `demand` every `every` seconds unless ScaledObject `name`
    is paused. `log`: (epoch seconds, paused, spec.replicas, what it did) per look."""

    api_client: client.ApiClient
    namespace: str
    name: str
    target: str
    demand: int
    every: float = 0.5
    log: list[tuple[float, bool, int, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> KedaStandIn:
        self._thread = threading.Thread(target=self._run, name=f"keda-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def look(self) -> None:
        apps = client.AppsV1Api(self.api_client)
        stopped = paused(annotations_of(self.api_client, self.namespace, self.name))
        scale = json.loads(
            apps.read_namespaced_stateful_set_scale(
                self.target, self.namespace, _preload_content=False
            ).data
        )
        replicas = int((scale.get("spec") or {}).get("replicas") or 0)
        did = "paused" if stopped else "steady"
        if not stopped and replicas != self.demand:
            apps.patch_namespaced_stateful_set_scale(
                self.target,
                self.namespace,
                {"spec": {"replicas": self.demand}},
                field_manager="keda-stand-in",
                _preload_content=False,
            )
            did = f"scaled to {self.demand}"
        self.log.append((time.time(), stopped, replicas, did))

    def scaled_at(self) -> list[tuple[float, str]]:
        return [(moment, did) for moment, _, _, did in self.log if did.startswith("scaled")]

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.look()
            except (client.ApiException, OSError, ValueError):
                continue
