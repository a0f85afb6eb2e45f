"""The shared clients every handler uses, created once at startup."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.receiving import ReportHub, ReportServer
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.settings import OperatorSettings


@dataclass
class Dependencies:
    settings: OperatorSettings
    kube: KubernetesApi
    pool: AdminPool
    hub: ReportHub
    recorder: HistoryRecorder
    sidecars: SidecarClient
    server: ReportServer | None = None
