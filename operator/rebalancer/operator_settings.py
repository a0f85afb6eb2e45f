"""Operator settings, from flags and environment, shared by every handler through kopf's memo."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class AdmissionSettings:
    port: int
    # Where the webhook server listens, and the address the API server is told to call
    # when the operator writes the webhook configuration itself (`configuration`).
    listen: str = "0.0.0.0"
    host: str | None = None
    # PEM files, re-read when they change (a cert-manager renewal); None: a self-signed pair
    # is made at start.
    certfile: Path | None = None
    keyfile: Path | None = None
    # The ValidatingWebhookConfiguration the operator keeps current itself (a lab, a local
    # run); None when it is installed by the chart.
    configuration: str | None = None


@dataclass(frozen=True)
class PeeringSettings:
    """Leader election through kopf's peering (docs/high-availability.md)."""

    # The ClusterKopfPeering object the replicas share; the chart creates it.
    name: str
    # Seconds a replica's keep-alive counts: a replica silent for that long is taken as dead
    # and the next one in line takes over.
    lifetime_seconds: int
    # This replica's entry in the peering object: the pod's name in a cluster.
    identity: str
    # Higher leads; set from the start time so the oldest live replica leads and a restarted
    # one never preempts the replica that took over from it.
    priority: int
    # The pod to label rebalancer.dev/active (the Services send traffic to the leader only);
    # None outside a pod.
    pod_namespace: str | None = None
    pod_name: str | None = None


@dataclass(frozen=True)
class ShardingSettings:
    """ConsumerGroups shared out among replicas by shard Leases (docs/sharding.md)."""

    shards: int
    # The Leases live in this namespace (the operator's own), named <prefix>-shard-<i>, with one
    # <prefix>-member-<identity> per live replica.
    namespace: str
    prefix: str
    # This replica's holderIdentity: the pod's name in a cluster.
    identity: str
    # A Lease not renewed for this long is free for another replica to take.
    lease_seconds: int = 10
    renew_seconds: float = 3.0
    # Where the other replicas pass member reports on to this one (its member Lease says it).
    reports_url: str | None = None
    # The pod labelled rebalancer.dev/active while it holds shard 0; None outside a pod.
    pod_namespace: str | None = None
    pod_name: str | None = None


@dataclass(frozen=True)
class OperatorSettings:
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    reports_host: str = "0.0.0.0"
    reports_port: int = 8090
    report_token: str | None = field(default=None, repr=False)
    # A directory or an fsspec URL (s3://...): a Path would fold the URL's double slash.
    history_dir: str | None = None
    # Where `rebalancer learn` writes recommendations.json; default <history_dir>/_recommendations.
    recommendations_dir: str | None = None
    liveness_url: str | None = None
    min_observe_spacing_seconds: float = 1.0
    # The freshness stamp (status.group.observedAt) of a status nothing visible changed in is
    # rewritten this often; a visible change is written at once (planning.status_writes).
    status_refresh_seconds: float = 600.0
    # A group that looked the same for a few looks is looked at every interval times this
    # (planning.observe_cadence); 1 looks at every group at its own interval.
    quiet_observe_factor: float = 1.0
    # How often the rollout planner looks at a workload while no rollout runs. A change to the
    # workload's spec wakes it at once (handlers.workloads), so this only bounds how late a
    # change is seen where the watch is not granted, and pods gone or come without one.
    rollout_resting_poll_seconds: float = 10.0
    max_workers: int = 20
    # Image of the join gate init container; the chart sets the operator's own image.
    gate_image: str | None = None
    # Seconds a gate waits without a sign of the operator before letting its pod start, for
    # groups that do not set spec.policy.rollout.bypassGateAfterSeconds (0: never).
    gate_bypass_after_seconds: int = 120
    # The validating admission webhook (handlers.ownership): off without a port.
    admission: AdmissionSettings | None = None
    # Leader election among replicas; None runs standalone (one replica).
    peering: PeeringSettings | None = None
    # ConsumerGroups shared out among replicas; None: this replica serves every one.
    sharding: ShardingSettings | None = None

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def token_from_environment(env: dict[str, str] | None = None) -> str | None:
    """The report token: REBALANCER_REPORT_TOKEN, or the file REBALANCER_REPORT_TOKEN_FILE.

    A file is preferred in clusters because a mounted Secret updates without a restart.
    """
    values = env if env is not None else dict(os.environ)
    path = values.get("REBALANCER_REPORT_TOKEN_FILE")
    if path:
        return Path(path).read_text(encoding="utf-8").strip() or None
    return values.get("REBALANCER_REPORT_TOKEN") or None
