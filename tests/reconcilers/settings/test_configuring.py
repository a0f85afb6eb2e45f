"""The settings' Kubernetes writes against the real API server: the ConfigMap (owned by the
ConsumerGroup), the guarded pod-template patch, and a Strimzi Kafka resource's broker config."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tests.reconcilers.settings.support import STRIMZI_CRD, STRIMZI_V1, crds, statefulset

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.strimzi_configs import read_strimzi_delay, set_strimzi_delay
from rebalancer.clients.workload_patching import (
    ConfigMapOutcome,
    ConfiguringFailed,
    apply_configmap,
    patch_workload,
    read_workload_body,
)
from rebalancer.planning.broker_delay import strimzi_config_patch
from rebalancer.planning.consumer_settings_plans import SettingsInputs, plan_settings
from rebalancer.planning.consumer_settings_templates import SETTINGS_HASH_ANNOTATION, template_hash
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind

ROOT = Path(__file__).resolve().parents[3]


def consumer_group(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    crds(kube, yaml.safe_load((ROOT / "crds" / "consumergroups.rebalancer.dev.yaml").read_text()))
    body = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "orders", "namespace": ns},
        "spec": {
            "groupId": "orders",
            "kafka": {"bootstrapServers": ["127.0.0.1:9092"]},
            "subscription": {"topics": ["orders"]},
            "workload": {"kind": "StatefulSet", "name": "orders-consumer"},
        },
    }
    created: dict[str, Any] = kube.custom.create_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", ns, "consumergroups", body
    )
    return created


def inputs(workload: dict[str, Any], uid: str | None, ns: str, **policy: Any) -> SettingsInputs:
    return SettingsInputs(
        namespace=ns,
        name="orders",
        uid=uid,
        policy=SettingsPolicy(session_timeout_ms=6000, max_poll_interval_ms=60000, **policy),
        workload_kind=WorkloadKind.STATEFULSET,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        workload=workload,
        view=None,
    )


async def test_configmap_is_created_kept_replaced_and_collected_with_its_owner(
    kube: KubernetesApi, ns: str
) -> None:
    owner = consumer_group(kube, ns)
    body = plan_settings(inputs(statefulset(ns), owner["metadata"]["uid"], ns)).configmap
    assert body is not None
    assert await apply_configmap(kube, body) is ConfigMapOutcome.CREATED
    assert await apply_configmap(kube, body) is ConfigMapOutcome.UNCHANGED
    # Someone else labels it; a settings change replaces the data and keeps their label.
    kube.core.patch_namespaced_config_map(
        body["metadata"]["name"], ns, {"metadata": {"labels": {"team": "payments"}}}
    )
    changed = plan_settings(
        inputs(
            statefulset(ns), owner["metadata"]["uid"], ns, properties=(("fetch.min.bytes", "1"),)
        )
    ).configmap
    assert changed is not None
    assert await apply_configmap(kube, changed) is ConfigMapOutcome.REPLACED
    stored = kube.core.read_namespaced_config_map(body["metadata"]["name"], ns)
    assert "fetch.min.bytes=1" in stored.data["consumer.properties"]
    assert stored.metadata.labels["team"] == "payments"
    assert stored.metadata.owner_references[0].uid == owner["metadata"]["uid"]
    # Deleting the ConsumerGroup collects its ConfigMap (the volume is optional, so the
    # consumers' pods still start).
    kube.custom.delete_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", ns, "consumergroups", "orders"
    )
    # kube's garbage collector watches a kind once its discovery (every 30 s) has seen it.
    for _ in range(400):
        names = [c.metadata.name for c in kube.core.list_namespaced_config_map(ns).items]
        if body["metadata"]["name"] not in names:
            break
        await asyncio.sleep(0.2)
    assert body["metadata"]["name"] not in names


async def test_template_patch_is_guarded_and_idempotent(kube: KubernetesApi, ns: str) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    workload = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert workload is not None
    plan = plan_settings(inputs(workload, None, ns, static_membership=True))
    assert plan.patch.changes and plan.rendered is not None
    # A write between our read and our patch: the guard refuses, nothing is half-applied.
    stale = copy.deepcopy(workload)
    kube.apps.patch_namespaced_stateful_set(
        "orders-consumer", ns, {"metadata": {"labels": {"touched": "yes"}}}
    )
    assert not await patch_workload(
        kube, ns, WorkloadKind.STATEFULSET, "orders-consumer", list(plan.patch.ops)
    )
    fresh = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert fresh is not None and template_hash(fresh) is None
    assert stale["metadata"]["resourceVersion"] != fresh["metadata"]["resourceVersion"]
    # Planned again from a fresh read, it applies; planned once more, there is nothing to do.
    # The StatefulSet controller writes the status meanwhile (replicas, observedGeneration),
    # which moves the resourceVersion too: like the reconciler, read and plan again on a refusal.
    for _ in range(10):
        plan = plan_settings(inputs(fresh, None, ns, static_membership=True))
        if await patch_workload(
            kube, ns, WorkloadKind.STATEFULSET, "orders-consumer", list(plan.patch.ops)
        ):
            break
        await asyncio.sleep(0.5)
        fresh = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
        assert fresh is not None and template_hash(fresh) is None
    else:
        pytest.fail("the guarded patch never applied from a fresh read")
    after = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert after is not None and plan.rendered is not None
    template = after["spec"]["template"]
    assert template["metadata"]["annotations"][SETTINGS_HASH_ANNOTATION] == plan.rendered.hash
    assert after["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    env = {e["name"]: e for e in template["spec"]["containers"][0]["env"]}
    assert env["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["KAFKA_SESSION_TIMEOUT_MS"]["value"] == "6000"
    again = plan_settings(inputs(after, None, ns, static_membership=True)).patch.ops
    assert again == (), json.dumps(again, indent=1)
    assert await read_workload_body(kube, ns, WorkloadKind.DEPLOYMENT, "missing") is None


def create_kafka(kube: KubernetesApi, ns: str, name: str, kafka: dict[str, Any]) -> None:
    """A Strimzi Kafka resource written at v1beta2, as a user of an older Strimzi has it."""
    crds(kube, STRIMZI_CRD)
    kube.custom.create_namespaced_custom_object(
        "kafka.strimzi.io",
        "v1beta2",
        ns,
        "kafkas",
        {
            "apiVersion": "kafka.strimzi.io/v1beta2",
            "kind": "Kafka",
            "metadata": {"name": name},
            "spec": {"kafka": kafka},
        },
    )


async def test_strimzi_delay_is_written_once_and_only_the_delay(
    kube: KubernetesApi, ns: str
) -> None:
    create_kafka(
        kube, ns, "my-cluster", {"replicas": 3, "config": {"offsets.topic.replication.factor": 3}}
    )
    assert await read_strimzi_delay(kube, ns, "my-cluster") is None
    first = await set_strimzi_delay(kube, ns, "my-cluster", strimzi_config_patch(8000))
    assert (first.changed, first.previous) == (True, None)
    version = kube.custom.get_namespaced_custom_object(
        "kafka.strimzi.io", "v1beta2", ns, "kafkas", "my-cluster"
    )["metadata"]["resourceVersion"]
    again = await set_strimzi_delay(kube, ns, "my-cluster", strimzi_config_patch(8000))
    assert (again.changed, again.previous) == (False, "8000")
    stored = kube.custom.get_namespaced_custom_object(
        "kafka.strimzi.io", "v1beta2", ns, "kafkas", "my-cluster"
    )
    # Unchanged means unwritten: every write would make Strimzi roll the brokers.
    assert stored["metadata"]["resourceVersion"] == version
    assert stored["spec"]["kafka"]["config"] == {
        "offsets.topic.replication.factor": 3,
        "group.initial.rebalance.delay.ms": 8000,
    }
    assert await read_strimzi_delay(kube, ns, "my-cluster") == "8000"
    with pytest.raises(ConfiguringFailed, match=rf"Kafka {ns}/other .* not found"):
        await set_strimzi_delay(kube, ns, "other", strimzi_config_patch(8000))


def _written_at(kube: KubernetesApi, ns: str, name: str) -> set[str]:
    """The API versions at which the Kafka's delay was last written, as its managedFields tell
    (an entry per writer and version, each owning the fields its last write set)."""
    stored = kube.custom.get_namespaced_custom_object(
        "kafka.strimzi.io", "v1beta2", ns, "kafkas", name
    )
    return {
        entry["apiVersion"]
        for entry in stored["metadata"]["managedFields"]
        if "f:group.initial.rebalance.delay.ms" in json.dumps(entry.get("fieldsV1"))
    }


def _serve_v1(kube: KubernetesApi, served: bool) -> None:
    """Serve the Kafka kind's v1 or stop serving it, and wait until the API server does so."""
    versions = copy.deepcopy(STRIMZI_CRD["spec"]["versions"])
    versions[STRIMZI_V1]["served"] = served
    client.ApiextensionsV1Api(kube.api_client).patch_custom_resource_definition(
        "kafkas.kafka.strimzi.io",
        {"spec": {"versions": versions}},
        _content_type="application/merge-patch+json",
    )
    for _ in range(100):
        try:
            kube.custom.list_cluster_custom_object("kafka.strimzi.io", "v1", "kafkas")
            if served:
                return
        except ApiException as error:
            if error.status == 404 and not served:
                return
        time.sleep(0.1)
    raise AssertionError(f"v1 of kafkas.kafka.strimzi.io never became served={served}")


async def test_strimzi_kafka_is_written_at_v1_and_at_v1beta2_where_v1_is_not_served(
    kube: KubernetesApi, ns: str
) -> None:
    """Strimzi 1.0 and later serve the Kafka kind at v1 alone, Strimzi before 0.49 at v1beta2
    alone: the delay reaches both."""
    create_kafka(kube, ns, "versions", {"config": {}})
    assert _written_at(kube, ns, "versions") == set()
    assert (await set_strimzi_delay(kube, ns, "versions", strimzi_config_patch(8000))).changed
    assert _written_at(kube, ns, "versions") == {"kafka.strimzi.io/v1"}
    _serve_v1(kube, False)
    try:
        with pytest.raises(ApiException):
            kube.custom.get_namespaced_custom_object(
                "kafka.strimzi.io", "v1", ns, "kafkas", "versions"
            )
        assert await read_strimzi_delay(kube, ns, "versions") == "8000"
        change = await set_strimzi_delay(kube, ns, "versions", strimzi_config_patch(9000))
        assert (change.changed, change.previous) == (True, "8000")
        assert _written_at(kube, ns, "versions") == {"kafka.strimzi.io/v1beta2"}
        assert await read_strimzi_delay(kube, ns, "versions") == "9000"
        with pytest.raises(ConfiguringFailed, match=r"kafka.strimzi.io/v1 or kafka.strimzi.io/v1"):
            await set_strimzi_delay(kube, ns, "missing", strimzi_config_patch(8000))
    finally:
        _serve_v1(kube, True)
