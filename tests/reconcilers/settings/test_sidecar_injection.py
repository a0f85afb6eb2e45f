"""The injected sidecar through reconcile_settings, against the real API server and Apache Kafka:
what the template gets, in how many writes, what status and Events say, and the CRD's own check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from tests.reconcilers.settings.support import crds, settings_target, statefulset

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.workload_patching import read_workload_body
from rebalancer.planning.consumer_settings_plans import settings_conditions
from rebalancer.planning.consumer_settings_templates import template_hash
from rebalancer.planning.sidecar_templates import (
    SIDECAR_CONTAINER,
    TOKEN_VOLUME,
    SidecarOptions,
    sidecar_hash,
)
from rebalancer.reconcilers.settings_delivery import SettingsTarget, reconcile_settings
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.specs import WorkloadKind
from rebalancer_lab.broker import KafkaBroker

ROOT = Path(__file__).resolve().parents[3]
INJECT = SidecarPolicy(inject=True, port=8091, token_secret="orders-token")


def target(broker: KafkaBroker, ns: str, **changes: Any) -> SettingsTarget:
    defaults: dict[str, Any] = dict(
        sidecar=INJECT,
        sidecar_options=SidecarOptions(image="ghcr.io/rebalancer-dev/rebalancer:9.9"),
    )
    return settings_target(broker.bootstrap, ns, **{**defaults, **changes})


async def workload(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    body = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert body is not None
    return body


def containers(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in body["spec"]["template"]["spec"]["containers"]}


async def test_inject_adds_the_sidecar_once_and_off_takes_it_out(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    first = await reconcile_settings(kube, gateway, target(broker, ns), {}, {})
    assert first.status is not None
    sidecar = first.status["sidecar"]
    assert (sidecar["injected"], sidecar["reason"], sidecar["rolledOut"]) == (
        True,
        "SidecarInjected",
        False,
    )
    assert [n.reason for n in first.notices] == ["SidecarInjected"]
    assert "applied" not in first.status  # no settings managed, none reported
    body = await workload(kube, ns)
    assert list(containers(body)) == ["consumer", SIDECAR_CONTAINER]
    added = containers(body)[SIDECAR_CONTAINER]
    assert added["image"] == "ghcr.io/rebalancer-dev/rebalancer:9.9"
    env = {e["name"]: e.get("value") for e in added["env"]}
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == broker.bootstrap and env["KAFKA_GROUP_ID"] == "orders"
    assert sidecar_hash(body) == sidecar["hash"]
    assert body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3  # parked
    generation = body["metadata"]["generation"]

    again = await reconcile_settings(kube, gateway, target(broker, ns), first.status, {})
    assert again.status == first.status and again.notices == () and again.retry_after is None
    assert (await workload(kube, ns))["metadata"]["generation"] == generation

    off = target(broker, ns, sidecar=SidecarPolicy())
    removed = await reconcile_settings(kube, gateway, off, first.status, {})
    assert removed.status is not None
    assert (removed.status["sidecar"]["injected"], removed.status["sidecar"]["reason"]) == (
        False,
        "SidecarRemoved",
    )
    assert [n.reason for n in removed.notices] == ["SidecarRemoved"]
    body = await workload(kube, ns)
    assert list(containers(body)) == ["consumer"] and sidecar_hash(body) is None
    assert TOKEN_VOLUME not in {
        v["name"] for v in body["spec"]["template"]["spec"].get("volumes") or ()
    }
    quiet = await reconcile_settings(kube, gateway, off, removed.status, {})
    assert quiet.notices == () and quiet.status == removed.status


async def test_settings_and_sidecar_go_in_one_write_and_the_sidecar_copies_the_settings(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    generation = (await workload(kube, ns))["metadata"]["generation"]
    both = target(
        broker, ns, settings=SettingsPolicy(session_timeout_ms=6000, heartbeat_interval_ms=1500)
    )
    outcome = await reconcile_settings(kube, gateway, both, {}, {})
    assert outcome.status is not None
    assert [n.reason for n in outcome.notices] == ["SettingsApplied", "SidecarInjected"]
    assert outcome.status["applied"] is True and outcome.status["sidecar"]["injected"] is True
    body = await workload(kube, ns)
    # One template revision, so one staggered rollout carries both.
    assert body["metadata"]["generation"] == generation + 1
    assert template_hash(body) == outcome.status["hash"]
    sidecar = containers(body)[SIDECAR_CONTAINER]
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["KAFKA_SESSION_TIMEOUT_MS"] == "6000"
    assert env["KAFKA_HEARTBEAT_INTERVAL_MS"] == "1500"
    # The settings file the consumer reads is the sidecar's too (mounted read-only).
    assert env["KAFKA_CONFIG_FILE"].endswith("/consumer.properties")
    mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    assert mounts["rebalancer-settings"]["readOnly"] is True

    # A settings change alone moves the sidecar along, still in one write.
    changed = replace(both, settings=SettingsPolicy(session_timeout_ms=9000))
    moved = await reconcile_settings(kube, gateway, changed, outcome.status, {})
    assert moved.status is not None
    assert moved.status["sidecar"]["hash"] != outcome.status["sidecar"]["hash"]
    body = await workload(kube, ns)
    assert body["metadata"]["generation"] == generation + 2
    env = {e["name"]: e.get("value") for e in containers(body)[SIDECAR_CONTAINER]["env"]}
    assert env["KAFKA_SESSION_TIMEOUT_MS"] == "9000"


async def test_without_managed_rollouts_injection_is_refused_once_and_changes_nothing(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    unmanaged = target(broker, ns, staggered=False)
    first = await reconcile_settings(kube, gateway, unmanaged, {}, {})
    assert first.status is not None
    sidecar = first.status["sidecar"]
    assert sidecar["reason"] == "SidecarRefused" and sidecar["injected"] is False
    assert "spec.policy.rollout.enabled" in sidecar["message"]
    assert [(n.warning, n.reason) for n in first.notices] == [(True, "SidecarRefused")]
    [condition] = settings_conditions(first.status)
    assert condition.reason == "SidecarRefused"
    again = await reconcile_settings(kube, gateway, unmanaged, first.status, {})
    assert again.notices == ()
    assert list(containers(await workload(kube, ns))) == ["consumer"]


def test_the_crd_refuses_inject_without_a_token_secret(kube: KubernetesApi, ns: str) -> None:
    crds(kube, yaml.safe_load((ROOT / "crds" / "consumergroups.rebalancer.dev.yaml").read_text()))

    def group(name: str, sidecar: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "rebalancer.dev/v1alpha1",
            "kind": "ConsumerGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "groupId": name,
                "kafka": {"bootstrapServers": ["127.0.0.1:9092"]},
                "subscription": {"topics": ["orders"]},
                "workload": {"kind": "StatefulSet", "name": "orders-consumer"},
                "policy": {"enforce": {"sidecar": sidecar}},
            },
        }

    with pytest.raises(client.ApiException) as refused:
        kube.custom.create_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", ns, "consumergroups", group("a", {"inject": True})
        )
    assert refused.value.status == 422
    assert "inject needs tokenSecretRef" in str(refused.value.body)
    created = kube.custom.create_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", ns, "consumergroups",
        group("b", {"inject": True, "tokenSecretRef": {"name": "t"}}),
    )  # fmt: skip
    assert created["spec"]["policy"]["enforce"]["sidecar"]["inject"] is True
    defaulted = kube.custom.create_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", ns, "consumergroups", group("c", {"port": 9000})
    )
    assert defaulted["spec"]["policy"]["enforce"]["sidecar"]["inject"] is False
