"""Operator start-up and shut-down: kopf settings, shared clients, the report endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import tempfile
from pathlib import Path
from typing import Any

import kopf

import rebalancer.handlers.workloads
from rebalancer import metrics
from rebalancer.clients.certificates import make_self_signed
from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.forwarding import ReportForwarder
from rebalancer.clients.kafka_admin import AdminGateway, AdminPool
from rebalancer.clients.kubernetes_api import (
    KubernetesApi,
    PermissionDenied,
    connect,
    connection_details,
)
from rebalancer.clients.leading import (
    PeeringMissing,
    check_peering,
    follow_leadership,
    label_pod,
)
from rebalancer.clients.permissions import follow_permissions, followable_workloads
from rebalancer.clients.receiving import ReportHub, ReportServer
from rebalancer.clients.recommending import RecommendationReader
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.clients.sharding import ShardHolder, follow_shard_leadership
from rebalancer.metrics import record_leader
from rebalancer.operator_settings import AdmissionSettings, OperatorSettings, PeeringSettings
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.shard_takeover import ShardIndex, follow_takeovers
from rebalancer.reconcilers.sharding import ServedDiffBase
from rebalancer.structs.consumer_group import FINALIZER

PREFIX = "rebalancer.dev"
DIFFBASE_KEY = "last-handled-configuration"
logger = logging.getLogger(__name__)
# kopf SIGKILLs an operator whose stop has not ended this long after it began (10 minutes by
# default). A stop it began on its own (its peering keep-alive refused 409) once hung in
# kopf's watch cancellation for those ten minutes, with the replica neither leading nor
# restarted. Under the chart's 30 s terminationGracePeriodSeconds, where a kubelet would
# SIGKILL a stop it asked for anyway.
ULTIMATE_EXIT_SECONDS = 25.0


@kopf.on.startup()
async def start(
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    groups_by_shard: ShardIndex | None = None,  # kopf passes every index, filled as it lists
    **_: Any,
) -> None:
    config: OperatorSettings = memo.settings
    _configure_kopf(settings, config)
    if config.admission is not None:
        _serve_admission(settings, config.admission)
    kube = connect(config.kubeconfig, config.context)
    peering = config.peering
    if peering is None:
        record_leader(config.sharding is None)
    else:
        await _join_election(settings, kube, peering)
    hub = ReportHub()
    deps = _dependencies(config, kube, hub)
    if config.sharding is not None:
        await _take_shards(kube, config, deps)
        settings.persistence.diffbase_storage = ServedDiffBase(
            deps, prefix=PREFIX, key=DIFFBASE_KEY
        )
        assert groups_by_shard is not None
        deps.takeovers = asyncio.create_task(follow_takeovers(deps, groups_by_shard))
    server = ReportServer(hub, config.reports_host, config.reports_port, config.report_token)
    await server.start()
    deps.server = server
    # Before kopf lists anything: what kopf's own requests need is named at start (kopf would
    # retry a refused one for a minute and then only log it).
    deps.permission_check = asyncio.create_task(
        follow_permissions(kube, config.namespaces, deps.denials, peering=peering is not None)
    )
    if peering is not None:
        deps.leadership = asyncio.create_task(follow_leadership(kube, peering))
    memo.deps = deps
    # Before kopf starts its watches (it starts them once the startup handlers are done).
    await _follow_workloads(kube, config, deps)


def _configure_kopf(settings: kopf.OperatorSettings, config: OperatorSettings) -> None:
    # Progress lives in annotations: the CRD's structural status has no room for kopf's own.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key=DIFFBASE_KEY
    )
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.INFO
    settings.execution.max_workers = config.max_workers
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    settings.process.ultimate_exiting_timeout = ULTIMATE_EXIT_SECONDS


async def _join_election(
    settings: kopf.OperatorSettings, kube: KubernetesApi, peering: PeeringSettings
) -> None:
    """Take part in kopf's peering as a standby; refuse to start when that cannot work."""
    # One ClusterKopfPeering for every mode: a namespaced operator would otherwise elect
    # in each watched namespace apart, and two leaders could split the namespaces.
    settings.peering.clusterwide = True
    settings.peering.lifetime = peering.lifetime_seconds
    try:
        await check_peering(kube, peering)
        # Standby until the peering says otherwise: a pod restarted after a kill still
        # carries the active label of its previous run; the Services must not pick it.
        await label_pod(kube, peering, False)
    except (PeeringMissing, PermissionDenied) as error:
        # Stopped at start, named: a replica that cannot take part in the election must
        # not run beside the others.
        raise kopf.PermanentError(f"leader election: {error}") from None
    record_leader(False)


async def _take_shards(kube: KubernetesApi, config: OperatorSettings, deps: Dependencies) -> None:
    """Hold this replica's share of shard Leases before kopf lists the ConsumerGroups, and keep
    it current; refuse to start when the Leases cannot be written."""
    assert config.sharding is not None
    holder = ShardHolder(kube, config.sharding)
    try:
        await holder.step()
    except PermissionDenied as error:
        # Stopped at start, named: a replica that cannot hold Leases would serve no group.
        raise kopf.PermanentError(f"sharding: {error}") from None
    deps.shards = holder
    deps.sharding = asyncio.create_task(holder.run())
    deps.leadership = asyncio.create_task(follow_shard_leadership(holder))
    deps.forwarder = ReportForwarder(holder)
    deps.hub.forward = deps.forwarder.pass_on


def _dependencies(config: OperatorSettings, kube: KubernetesApi, hub: ReportHub) -> Dependencies:
    return Dependencies(
        settings=config,
        kube=kube,
        # Each gateway counts the Kafka requests librdkafka sends, and the groups per describe.
        pool=AdminPool(
            functools.partial(
                AdminGateway,
                count_requests=metrics.record_kafka_requests,
                count_batch=metrics.record_describe_batch,
            )
        ),
        hub=hub,
        recorder=HistoryRecorder(config.history_dir),
        sidecars=SidecarClient(),
        recommender=RecommendationReader(config.recommendations_dir),
    )


async def _follow_workloads(
    kube: KubernetesApi, config: OperatorSettings, deps: Dependencies
) -> None:
    """Register the workload handlers for the kinds the operator may list and watch."""
    plurals, denied = await followable_workloads(kube, config.namespaces)
    for denial in denied:
        logger.error(
            "%s (a change to a workload is then seen at the rollout planner's next look, every "
            "%.0f s at rest; restart the operator once granted)",
            denial.message(),
            config.rollout_resting_poll_seconds,
        )
    rebalancer.handlers.workloads.register(plurals)
    for plural in plurals:
        # The observers trust the watch's copy of these kinds (clients.workload_cache).
        deps.workloads.watch(plural)


def _serve_admission(settings: kopf.OperatorSettings, admission: AdmissionSettings) -> None:
    """kopf serves the validating webhook (handlers.ownership) over HTTPS."""
    certfile, keyfile = admission.certfile, admission.keyfile
    if certfile is None or keyfile is None:
        host = admission.host or "127.0.0.1"
        names = [host, "localhost", "127.0.0.1"]
        pair = make_self_signed(Path(tempfile.mkdtemp(prefix="rebalancer-webhook-")), names)
        certfile, keyfile = pair.certfile, pair.keyfile
    settings.admission.server = kopf.WebhookServer(
        addr=admission.listen,
        port=admission.port,
        host=admission.host,
        certfile=str(certfile),
        pkeyfile=str(keyfile),
        # The caBundle kopf writes into a configuration it manages: a self-signed certificate
        # is its own CA; a mounted one comes with its CA beside it (ca.crt) when there is one.
        cafile=str(_ca_beside(certfile)),
    )
    if admission.configuration:
        settings.admission.managed = admission.configuration


def _ca_beside(certfile: Path) -> Path:
    ca = certfile.parent / "ca.crt"
    return ca if ca.exists() else certfile


@kopf.on.login()
def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    config: OperatorSettings = memo.settings
    details = connection_details(connect(config.kubeconfig, config.context))
    return kopf.ConnectionInfo(
        server=details.server,
        ca_path=details.ca_path,
        insecure=details.insecure,
        token=details.token,
        certificate_path=details.certificate_path,
        private_key_path=details.private_key_path,
        scheme="Bearer" if details.token else None,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    deps: Dependencies | None = getattr(memo, "deps", None)
    if deps is None:
        return
    if deps.permission_check is not None:
        deps.permission_check.cancel()
    if deps.leadership is not None:
        deps.leadership.cancel()
    if deps.takeovers is not None:
        deps.takeovers.cancel()
    if deps.sharding is not None:
        deps.sharding.cancel()  # it gives its shards back as it stops
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(deps.sharding, 10.0)
    if deps.forwarder is not None:
        await deps.forwarder.close()
    if deps.server is not None:
        await deps.server.stop()
    deps.pool.close_all()
    await deps.sidecars.close()
    deps.kube.close()
