"""The shared clients every handler uses, created once at startup."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.forwarding import ReportForwarder
from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.receiving import ReportHub, ReportServer
from rebalancer.clients.recommending import RecommendationReader
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.clients.sharding import ShardHolder
from rebalancer.clients.workload_cache import WorkloadCache
from rebalancer.operator_settings import OperatorSettings
from rebalancer.planning.permissions import DenialBook
from rebalancer.planning.sightings import GroupSightings


@dataclass
class Dependencies:
    settings: OperatorSettings
    kube: KubernetesApi
    pool: AdminPool
    hub: ReportHub
    recorder: HistoryRecorder
    sidecars: SidecarClient
    recommender: RecommendationReader
    # The observer's latest look at each group, for the rollout planner.
    sightings: GroupSightings = field(default_factory=GroupSightings)
    server: ReportServer | None = None
    # Set when a settings write changed what the rollout planner looks at (a Deployment paused
    # for it, say): its daemon then steps at once instead of at its next resting poll.
    rollout_wakeups: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    # Each claimed workload's pod counts at its last event (reconcilers.workloads): a change
    # wakes its rollout planner.
    workload_progress: dict[tuple[str, ...], tuple[object, ...]] = field(default_factory=dict)
    # Each claimed workload's spec.replicas as the same watch tells it: the observers read it
    # here instead of a GET per group per look.
    workloads: WorkloadCache = field(default_factory=WorkloadCache)
    # What the Kubernetes API refused, for the groups' Degraded condition (reconcilers.permissions).
    denials: DenialBook = field(default_factory=DenialBook)
    # The check of what every group needs (clients.permissions.follow_permissions).
    permission_check: asyncio.Task[None] | None = None
    # Who leads, for the active pod's label (clients.leading.follow_leadership).
    leadership: asyncio.Task[None] | None = None
    # This replica's share of the ConsumerGroups (clients.sharding); None serves every one.
    shards: ShardHolder | None = None
    sharding: asyncio.Task[None] | None = None
    # Taking up the groups of shards as this replica takes them (reconcilers.shard_takeover).
    takeovers: asyncio.Task[None] | None = None
    # The groups whose observer daemon kopf runs on this replica.
    daemons_here: set[tuple[str, str]] = field(default_factory=set)
    forwarder: ReportForwarder | None = None

    def rollout_wakeup(self, namespace: str, name: str) -> asyncio.Event:
        event = self.rollout_wakeups.get((namespace, name))
        if event is None:
            event = self.rollout_wakeups[(namespace, name)] = asyncio.Event()
        return event
