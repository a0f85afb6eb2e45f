"""Settings delivered into a workload a GitOps tool applies: which template fields the operator
then owns (metadata.managedFields, as the real API server files them), and that the tool's
forced re-apply of its manifest leaves them, so the next reconcile has nothing to write.

Real parts: the API server (server-side apply, managedFields) and Apache Kafka (the settings
reconcile describes the broker). The StatefulSet is written by server-side apply under the field
manager `gitops` with force, as Argo CD (ServerSideApply) and Flux's kustomize-controller do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.managed_fields import documented, owned_by
from tests.reconcilers.settings.support import settings_target, statefulset

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.reconcilers.settings_delivery import reconcile_settings
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.workloads import FIELD_MANAGER
from rebalancer_lab.broker import KafkaBroker

MANAGER = "gitops"


def server_side_apply(kube: KubernetesApi, ns: str, body: dict[str, Any]) -> None:
    kube.apps.patch_namespaced_stateful_set(
        body["metadata"]["name"],
        ns,
        body,
        field_manager=MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def workload(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    read = kube.apps.read_namespaced_stateful_set("orders-consumer", ns, _preload_content=False)
    return dict(json.loads(read.data))


async def test_settings_own_their_fields_and_survive_a_gitops_reapply(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    manifest = statefulset(ns)
    manifest["apiVersion"], manifest["kind"] = "apps/v1", "StatefulSet"
    await asyncio.to_thread(server_side_apply, kube, ns, manifest)
    target = settings_target(broker.bootstrap, ns, settings=SettingsPolicy(session_timeout_ms=6000))
    first = await reconcile_settings(kube, gateway, target, {}, {})
    assert first.status is not None and first.status["applied"], first.status
    body = workload(kube, ns)
    ours = owned_by(body, FIELD_MANAGER)
    print("fields of the operator's manager:", sorted(ours))
    assert ours == documented("settings"), (sorted(ours), sorted(documented("settings")))
    assert not ours & owned_by(body, MANAGER)

    await asyncio.to_thread(server_side_apply, kube, ns, manifest)
    assert owned_by(workload(kube, ns), FIELD_MANAGER) == ours
    again = await reconcile_settings(kube, gateway, target, first.status, {})
    # Nothing to write again: the re-apply left every field the settings need.
    assert again.status == first.status and again.notices == (), again
