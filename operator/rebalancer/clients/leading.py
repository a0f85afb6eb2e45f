"""Leader election's I/O: the peering object kopf elects through, and the active pod's label.

kopf pauses a standby replica itself (its watches, handlers and daemons); this module only
checks the peering object exists and follows who leads, so the Services, which select
rebalancer.dev/active=true, send member reports and webhook calls to the leader alone.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import time

from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.metrics import record_leader
from rebalancer.operator_settings import PeeringSettings
from rebalancer.planning.leadership import leads, peer_entries
from rebalancer.structs.errors import RebalancerError

logger = logging.getLogger(__name__)
PEERING_GROUP = "kopf.dev"
PEERING_VERSION = "v1"
PEERING_PLURAL = "clusterkopfpeerings"
ACTIVE_LABEL = "rebalancer.dev/active"
MERGE_PATCH = "application/merge-patch+json"
# How often the peering object is read: a takeover shows in the label this soon after kopf
# resumes the replica.
FOLLOW_SECONDS = 1.0


class PeeringMissing(RebalancerError):
    """The peering object (or its CRD) is not there: kopf would keep every replica paused."""


async def check_peering(api: KubernetesApi, peering: PeeringSettings) -> None:
    """The peering object is there and this replica may write its entry: it writes its first
    keep-alive, as kopf will. Refused, the PermissionDenied names the grant; kopf would only
    log its own refusals, and a replica that cannot write its entry would act unseen."""
    try:
        await asyncio.to_thread(
            api.custom.get_cluster_custom_object,
            PEERING_GROUP,
            PEERING_VERSION,
            PEERING_PLURAL,
            peering.name,
        )
    except ApiException as error:
        if error.status != 404:
            raise
        raise PeeringMissing(
            f"--peering {peering.name}: no ClusterKopfPeering {peering.name!r} (or no "
            "clusterkopfpeerings.kopf.dev CRD); without it every replica stays paused. Install "
            "the chart (it creates both), or apply them (docs/high-availability.md), or run "
            "one replica without --peering"
        ) from None
    entry = {
        "priority": peering.priority,
        "lifetime": peering.lifetime_seconds,
        "lastseen": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    await asyncio.to_thread(
        api.custom.patch_cluster_custom_object,
        PEERING_GROUP,
        PEERING_VERSION,
        PEERING_PLURAL,
        peering.name,
        {"status": {peering.identity: entry}},
        _content_type=MERGE_PATCH,
    )


async def label_pod(api: KubernetesApi, peering: PeeringSettings, active: bool) -> None:
    """Mark this replica's pod active or standby; nothing outside a pod."""
    if peering.pod_name is None or peering.pod_namespace is None:
        return
    patch = {"metadata": {"labels": {ACTIVE_LABEL: "true" if active else "false"}}}
    await asyncio.to_thread(
        api.core.patch_namespaced_pod,
        peering.pod_name,
        peering.pod_namespace,
        patch,
        _content_type=MERGE_PATCH,
    )


async def follow_leadership(api: KubernetesApi, peering: PeeringSettings) -> None:
    """Forever: read the peering object, and on a change of leader relabel this pod, set
    rebalancer_leader and log it."""
    leading: bool | None = None
    while True:
        try:
            found = await asyncio.to_thread(
                api.custom.get_cluster_custom_object,
                PEERING_GROUP,
                PEERING_VERSION,
                PEERING_PLURAL,
                peering.name,
                _preload_content=False,
            )
            status = json.loads(found.data).get("status")
            now_leading = leads(peer_entries(status), peering.identity, time.time())
            if now_leading != leading:
                await label_pod(api, peering, now_leading)
                record_leader(now_leading)
                logger.info(
                    "replica %s is %s",
                    peering.identity,
                    "the leader: it acts" if now_leading else "a standby: kopf keeps it paused",
                )
                leading = now_leading
        except (ApiException, OSError, ValueError) as error:  # PermissionDenied names the grant
            # Kept trying: the label is routing only, kopf decides what runs.
            logger.warning("could not follow the leader in %s: %s", peering.name, error)
        await asyncio.sleep(FOLLOW_SECONDS)
