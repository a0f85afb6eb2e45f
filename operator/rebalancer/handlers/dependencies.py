"""The shared clients every handler uses, created once at startup."""

from __future__ import annotations

from dataclasses import dataclass, field

from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.receiving import ReportHub, ReportServer
from rebalancer.clients.recommending import RecommendationReader
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.settings import OperatorSettings
from rebalancer.structs.snapshots import GroupSnapshot


@dataclass
class Dependencies:
    settings: OperatorSettings
    kube: KubernetesApi
    pool: AdminPool
    hub: ReportHub
    recorder: HistoryRecorder
    sidecars: SidecarClient
    recommender: RecommendationReader
    # The observer's latest snapshot and rebalance count per (namespace, name), for the rollouts.
    latest_groups: dict[tuple[str, str], tuple[GroupSnapshot, int]] = field(default_factory=dict)
    server: ReportServer | None = None
