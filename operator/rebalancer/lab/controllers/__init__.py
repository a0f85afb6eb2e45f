"""The lab's controller manager: StatefulSet, Deployment, ReplicaSet and garbage collection."""

from __future__ import annotations

from ..kube.recording import EventRecorder
from ..kube.requesting import Api
from .base import Controller, Informers
from .collecting import GarbageCollector
from .deployments import DeploymentController
from .replicasets import ReplicaSetController
from .statefulsets import StatefulSetController


class ControllerManager:
    """Runs the controllers on shared informers (started and stopped by the caller)."""

    def __init__(
        self,
        api: Api,
        informers: Informers,
        resync_seconds: float = 10.0,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.controllers: list[Controller] = [
            StatefulSetController(api, informers, resync_seconds, recorder),
            ReplicaSetController(api, informers, resync_seconds, recorder),
            DeploymentController(api, informers, resync_seconds, recorder),
        ]
        self.collector = GarbageCollector(api, informers, resync_seconds)

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()
        self.collector.start()

    def stop(self) -> None:
        self.collector.stop()
        for controller in self.controllers:
            controller.stop()


__all__ = [
    "ControllerManager",
    "DeploymentController",
    "GarbageCollector",
    "Informers",
    "ReplicaSetController",
    "StatefulSetController",
]
