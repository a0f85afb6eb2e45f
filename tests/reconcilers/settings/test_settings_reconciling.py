"""reconcile_settings, the handler's one call, against the real API server and Apache Kafka: what it
writes, what it reports, and that a second reconcile writes and reports nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.reconcilers.settings.support import STRIMZI_CRD, crds, settings_target, statefulset

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.strimzi_configs import read_strimzi_delay
from rebalancer.clients.workload_patching import read_workload_body
from rebalancer.planning.broker_delay import DelayWant
from rebalancer.planning.consumer_settings_plans import settings_conditions
from rebalancer.planning.consumer_settings_templates import template_hash
from rebalancer.reconcilers.settings_delivery import SettingsTarget, reconcile_settings
from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy, DelayMode, StrimziRef
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer_lab.broker import KafkaBroker


def target(broker: KafkaBroker, ns: str, **changes: Any) -> SettingsTarget:
    defaults: dict[str, Any] = dict(
        settings=SettingsPolicy(session_timeout_ms=6000, max_poll_interval_ms=60000),
    )
    return settings_target(broker.bootstrap, ns, **{**defaults, **changes})


async def test_settings_are_delivered_once_and_reported(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    first = await reconcile_settings(kube, gateway, target(broker, ns), {}, {})
    status = first.status
    assert status is not None
    assert (status["applied"], status["protocol"], status["rolledOut"]) == (
        True,
        "classic",
        False,
    ), status
    assert status["sessionLimits"]["source"] == "broker"  # Kafka describes its configs
    assert [n.reason for n in first.notices] == ["SettingsApplied"]
    assert kube.core.read_namespaced_config_map("orders-consumer-settings", ns).data
    body = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert body is not None and template_hash(body) == status["hash"]
    again = await reconcile_settings(kube, gateway, target(broker, ns), status, {})
    assert again.status == status and again.notices == () and again.retry_after is None
    assert settings_conditions(status) == []
    # Settings removed: the operator takes its part out of the template again.
    gone = await reconcile_settings(kube, gateway, target(broker, ns, settings=None), status, {})
    assert gone.status is None and [n.reason for n in gone.notices] == ["SettingsRemoved"]
    body = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert body is not None and template_hash(body) is None


class _Interloper:
    """AppsV1Api whose first StatefulSet patches each land just after another writer's: the
    StatefulSet controller writes status right after a create or a scale, between the
    operator's read and its patch."""

    def __init__(self, apps: Any, races: int) -> None:
        self._apps, self.races, self.patches = apps, races, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._apps, name)

    def patch_namespaced_stateful_set(self, name: str, namespace: str, *a: Any, **kw: Any) -> Any:
        self.patches += 1
        if self.races:
            self.races -= 1
            self._apps.patch_namespaced_stateful_set(
                name, namespace, {"metadata": {"labels": {"touched": str(self.patches)}}}
            )
        return self._apps.patch_namespaced_stateful_set(name, namespace, *a, **kw)


async def test_a_lost_race_for_the_template_is_run_again_at_once(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    apps = _Interloper(kube.apps, races=1)
    raced = replace(kube, apps=apps)
    outcome = await reconcile_settings(raced, gateway, target(broker, ns), {}, {})
    assert outcome.status is not None and outcome.status["applied"] is True, outcome.status
    assert outcome.retry_after is None and apps.patches == 2
    assert [n.reason for n in outcome.notices] == ["SettingsApplied"]
    # A writer that keeps winning: nothing is announced, and the handler is asked to come back.
    apps.races = 10
    lost = await reconcile_settings(raced, gateway, target(broker, ns, settings=None), {}, {})
    assert lost.retry_after is not None and lost.notices == ()
    body = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert body is not None and template_hash(body) is not None  # still the operator's part
    apps.races = 0
    gone = await reconcile_settings(raced, gateway, target(broker, ns, settings=None), {}, {})
    assert gone.retry_after is None and [n.reason for n in gone.notices] == ["SettingsRemoved"]


async def test_a_refusal_is_reported_once_and_patches_nothing(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    deployment = statefulset(ns)
    deployment["kind"] = "Deployment"
    del deployment["spec"]["serviceName"]
    kube.apps.create_namespaced_deployment(ns, deployment)
    refused = target(
        broker,
        ns,
        workload_kind=WorkloadKind.DEPLOYMENT,
        settings=SettingsPolicy(session_timeout_ms=3000, static_membership=True),
    )
    first = await reconcile_settings(kube, gateway, refused, {}, {})
    assert first.status is not None and first.status["applied"] is False
    assert "spec.policy.settings.sessionTimeoutMs" in first.status["message"]
    assert "spec.policy.settings.staticMembership" in first.status["message"]
    assert [(n.warning, n.reason) for n in first.notices] == [(True, "SettingsRefused")]
    assert [c.reason for c in settings_conditions(first.status)] == ["SettingsRefused"]
    again = await reconcile_settings(kube, gateway, refused, first.status, {})
    assert again.notices == ()
    body = await read_workload_body(kube, ns, WorkloadKind.DEPLOYMENT, "orders-consumer")
    assert body is not None and template_hash(body) is None


async def test_kip848_group_configs_are_applied_and_read_back(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(ns))
    kip848 = target(broker, ns, protocol_choice=ProtocolChoice.CONSUMER, settings=SettingsPolicy())
    outcome = await reconcile_settings(kube, gateway, kip848, {}, {})
    status = outcome.status
    assert status is not None and status["protocol"] == "consumer"
    assert status["groupConfigs"]["state"] == "applied", status["groupConfigs"]
    assert "assignors" not in status
    body = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, "orders-consumer")
    assert body is not None
    env = {e["name"] for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "KAFKA_GROUP_PROTOCOL" in env and "KAFKA_SESSION_TIMEOUT_MS" not in env


async def test_altering_the_static_delay_on_apache_kafka_is_refused_not_reported_done(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    policy = BrokerDelayPolicy(DelayMode.ALTER_CONFIGS, 8000, 30000)
    delayed = target(broker, ns, settings=None, delay=policy)
    outcome = await reconcile_settings(kube, gateway, delayed, {}, {})
    assert outcome.status is not None
    delay = outcome.status["brokerDelay"]
    # The profile comes from the cluster id Kafka gives, and the delay is static there.
    assert delay["reason"] == "DelayRefused", delay
    assert delay.get("outcome") != "altered"
    assert outcome.want is not None and outcome.want.cluster.startswith("id:")


async def test_the_cluster_delay_goes_into_the_strimzi_resource_by_the_rule(
    kube: KubernetesApi, gateway: AdminGateway, broker: KafkaBroker, ns: str
) -> None:
    crds(kube, STRIMZI_CRD)
    kube.custom.create_namespaced_custom_object(
        "kafka.strimzi.io",
        "v1beta2",
        ns,
        "kafkas",
        {"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka",
         "metadata": {"name": "my-cluster"}, "spec": {"kafka": {"config": {}}}},
    )  # fmt: skip
    policy = BrokerDelayPolicy(DelayMode.STRIMZI, 3000, 30000, StrimziRef("my-cluster"))
    # The profile is set, as on a real Strimzi cluster.
    mine = target(broker, ns, settings=None, delay=policy, profile=BrokerProfile.APACHE_KAFKA)
    first = await reconcile_settings(kube, gateway, mine, {}, {})
    assert first.want is not None
    billing = DelayWant("shop", "billing", first.want.cluster, 8000, 30000, DelayMode.RECOMMEND)
    second = await reconcile_settings(kube, gateway, mine, first.status or {}, {}, [billing])
    delay = (second.status or {})["brokerDelay"]
    assert (delay["clusterMs"], delay["decidedBy"], delay["outcome"]) == (
        8000,
        "shop/billing",
        "patched",
    )
    assert "shop/billing wants 8000 (this group 3000)" in delay["message"]
    assert [n.reason for n in second.notices] == ["DelayPatched"]
    assert await read_strimzi_delay(kube, ns, "my-cluster") == "8000"
    third = await reconcile_settings(kube, gateway, mine, second.status or {}, {}, [billing])
    assert (third.status or {})["brokerDelay"]["outcome"] == "unchanged"
    assert third.notices == ()
    # A Kafka resource that is not there: Degraded, with the field to fix.
    lost = replace(mine, delay=replace(policy, strimzi=StrimziRef("other")))
    failed = await reconcile_settings(kube, gateway, lost, third.status or {}, {}, [billing])
    assert [c.reason for c in settings_conditions(failed.status)] == ["DelayFailed"]
    assert "fix spec.policy.brokerDelay.strimzi" in failed.notices[0].message
