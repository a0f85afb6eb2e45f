"""The chart grants the operator exactly the API calls its code makes, and says which code.

A new grant fails here until it is added to ALLOWED with the code that needs it; a grant whose
code is gone fails too, because each entry names an importable function.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.deploy.chart.support import NAMESPACED, Helm, Manifest, by_kind

Grant = tuple[str, str, str]  # (apiGroup, resource, verb)


@dataclass(frozen=True)
class Use:
    why: str
    code: str  # "module:function" that makes the call


KOPF_WATCH = "kopf._cogs.clients.watching:continuous_watch"
KOPF_PATCH = "kopf._cogs.clients.patching:patch_obj"
KOPF_CRDS = "kopf._core.reactor.observation:resource_observer"
KOPF_NAMESPACES = "kopf._core.reactor.observation:namespace_observer"

ALLOWED: dict[Grant, Use] = {
    ("rebalancer.dev", "consumergroups", "list"): Use(
        "kopf lists ConsumerGroups before each watch", KOPF_WATCH
    ),
    ("rebalancer.dev", "consumergroups", "watch"): Use(
        "kopf watches ConsumerGroups; every handler and the observer daemon start from it",
        KOPF_WATCH,
    ),
    ("rebalancer.dev", "consumergroups", "patch"): Use(
        "kopf stores handler progress in annotations and adds the observer's finalizer",
        KOPF_PATCH,
    ),
    ("rebalancer.dev", "consumergroups/status", "patch"): Use(
        "the operator writes conditions and status.group with JSON patches",
        "rebalancer.clients.patching:patch_status",
    ),
    ("", "secrets", "get"): Use(
        "TLS and SASL material named by spec.kafka", "rebalancer.clients.resolving:read_secret_key"
    ),
    ("apps", "statefulsets", "patch"): Use(
        "rollouts set the partition and install the join gate",
        "rebalancer.clients.rolling:Actuator.set_partition",
    ),
    ("apps", "deployments", "patch"): Use(
        "rollouts pause, resume and scale a Deployment",
        "rebalancer.clients.rolling:Actuator.set_paused",
    ),
    ("apps", "replicasets", "list"): Use(
        "a Deployment's ReplicaSets tell old pods from new ones",
        "rebalancer.clients.rolling:read_workload",
    ),
    ("keda.sh", "scaledobjects", "list"): Use(
        "a managed workload's KEDA ScaledObject, found by its scaleTargetRef",
        "rebalancer.clients.autoscaling:read_autoscalers",
    ),
    ("keda.sh", "scaledobjects", "patch"): Use(
        "KEDA paused during a rollout and resumed after",
        "rebalancer.clients.autoscaling:pause_scaled_object",
    ),
    ("autoscaling", "horizontalpodautoscalers", "list"): Use(
        "a managed workload's HPA, whose quick steps a scale-up gathers",
        "rebalancer.clients.autoscaling:read_autoscalers",
    ),
    ("", "pods", "patch"): Use(
        "opening a batch's join gates", "rebalancer.clients.rolling:Actuator.open_gates"
    ),
    ("", "pods", "delete"): Use(
        "replacing a StatefulSet batch's old pods",
        "rebalancer.clients.rolling:Actuator.delete_pods",
    ),
    ("apps", "statefulsets", "get"): Use(
        "a missing spec.workload is reported as Degraded",
        "rebalancer.clients.patching:workload_exists",
    ),
    ("apps", "deployments", "get"): Use(
        "a missing spec.workload is reported as Degraded",
        "rebalancer.clients.patching:workload_exists",
    ),
    ("apps", "statefulsets", "list"): Use("kopf lists StatefulSets before each watch", KOPF_WATCH),
    ("apps", "statefulsets", "watch"): Use(
        "a change to a StatefulSet's spec or pods wakes its rollout planner",
        "rebalancer.handlers.workloads:workload_changed",
    ),
    ("apps", "deployments", "list"): Use("kopf lists Deployments before each watch", KOPF_WATCH),
    ("apps", "deployments", "watch"): Use(
        "a change to a Deployment's spec or pods wakes its rollout planner",
        "rebalancer.handlers.workloads:workload_changed",
    ),
    ("", "pods", "list"): Use(
        "enforcement requests go to the sidecars in the workload's ready pods",
        "rebalancer.clients.enforcing:sidecar_addresses",
    ),
    ("", "configmaps", "get"): Use(
        "the consumer-settings ConfigMap is read before it is written",
        "rebalancer.clients.workload_patching:apply_configmap",
    ),
    ("", "configmaps", "create"): Use(
        "the consumer-settings ConfigMap is created",
        "rebalancer.clients.workload_patching:apply_configmap",
    ),
    ("", "configmaps", "update"): Use(
        "the consumer-settings ConfigMap is replaced",
        "rebalancer.clients.workload_patching:apply_configmap",
    ),
    ("kafka.strimzi.io", "kafkas", "get"): Use(
        "brokerDelay mode strimzi reads spec.kafka.config",
        "rebalancer.clients.strimzi_configs:read_strimzi_delay",
    ),
    ("kafka.strimzi.io", "kafkas", "patch"): Use(
        "brokerDelay mode strimzi sets group.initial.rebalance.delay.ms",
        "rebalancer.clients.strimzi_configs:set_strimzi_delay",
    ),
    ("", "events", "create"): Use(
        "Rebalance, warning and recovery Events from kopf.info and kopf.warn",
        "kopf._cogs.clients.events:post_event",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): Use(
        "kopf finds the ConsumerGroup resource by scanning CRDs", KOPF_CRDS
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): Use(
        "kopf notices the CRD being installed or removed while it runs", KOPF_CRDS
    ),
    ("", "namespaces", "list"): Use(
        "with --namespace, kopf lists namespaces to serve those that exist", KOPF_NAMESPACES
    ),
    ("", "namespaces", "watch"): Use(
        "with --namespace, kopf notices watched namespaces being created later", KOPF_NAMESPACES
    ),
    ("kopf.dev", "clusterkopfpeerings", "list"): Use(
        "leader election: kopf lists the peering objects before it watches them", KOPF_WATCH
    ),
    ("kopf.dev", "clusterkopfpeerings", "watch"): Use(
        "leader election: kopf watches the other replicas' keep-alives", KOPF_WATCH
    ),
    ("kopf.dev", "clusterkopfpeerings", "get"): Use(
        "leader election: the release's peering object is checked at start and read for the "
        "active pod's label",
        "rebalancer.clients.leading:follow_leadership",
    ),
    ("kopf.dev", "clusterkopfpeerings", "patch"): Use(
        "leader election: each replica writes its keep-alive", "kopf._core.engines.peering:touch"
    ),
}
# With sharding.enabled only, in the release's namespace only (SHARD_ROLE).
SHARD_GRANTS: dict[Grant, Use] = {
    ("coordination.k8s.io", "leases", "list"): Use(
        "sharding: one list a round reads every shard and member Lease",
        "rebalancer.clients.sharding:ShardHolder.step",
    ),
    ("coordination.k8s.io", "leases", "create"): Use(
        "sharding: a shard Lease taken for the first time, and each replica's member Lease",
        "rebalancer.clients.sharding:ShardHolder.step",
    ),
    ("coordination.k8s.io", "leases", "update"): Use(
        "sharding: shard Leases renewed, taken over (resourceVersion-guarded) and given back",
        "rebalancer.clients.sharding:ShardHolder.step",
    ),
    ("coordination.k8s.io", "leases", "delete"): Use(
        "sharding: a replica's member Lease removed on a clean stop, a crashed one's once stale",
        "rebalancer.clients.sharding:ShardHolder.release_all",
    ),
}
SHARD_ROLE = "rebalancer-shards"
# The one object of a kind the operator reads and writes by name: the release's peering.
NAMED = {"clusterkopfpeerings": ["rebalancer"]}
# The Role in the release's namespace with which each replica labels its own pod active or not.
LEADER_ROLE = "rebalancer-leader"

# Grants only the cluster-wide ClusterRole may hold when given namespaces are watched: the
# resources are cluster-scoped, so no Role can grant them.
CLUSTER_SCOPED = {"customresourcedefinitions", "namespaces", "clusterkopfpeerings"}
# Granted only when a value asks for them (rbac.strimzi) or in one mode (namespaces).
OPTIONAL = {"namespaces", "kafkas"}


def grants(role: Manifest) -> Iterator[Grant]:
    for rule in role.get("rules") or []:
        assert "nonResourceURLs" not in rule, rule
        if "resourceNames" in rule:
            assert [rule["resourceNames"]] == [NAMED.get(r) for r in rule["resources"]], rule
            assert set(rule["verbs"]) <= {"get", "patch"}, rule
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    yield group, resource, verb


def granted(manifests: list[Manifest], kind: str) -> set[Grant]:
    return {grant for role in by_kind(manifests, kind) for grant in grants(role)}


def test_every_allowed_grant_names_code_that_exists() -> None:
    for grant, use in {**ALLOWED, **SHARD_GRANTS}.items():
        module, _, function = use.code.partition(":")
        target: object = importlib.import_module(module)
        for part in function.split("."):
            target = getattr(target, part, None)
        assert callable(target), (grant, use)


def test_clusterwide_grants_are_allowed_and_nothing_else(helm: Helm) -> None:
    manifests = helm.render()
    cluster = granted(manifests, "ClusterRole")
    # The ClusterRole's pod patch also lets each replica label its own pod: no leader Role.
    assert not by_kind(manifests, "Role")
    for grant in cluster:
        assert "*" not in grant, f"wildcard grant {grant}"
        assert grant in ALLOWED, f"{grant} is granted but no code needs it; see ALLOWED"
    # kopf reads namespaces only when given some to watch; Strimzi grants are a value, off.
    assert {grant for grant in ALLOWED if grant[1] not in OPTIONAL} == cluster
    with_strimzi = granted(helm.render({"rbac": {"strimzi": True}}), "ClusterRole")
    assert with_strimzi - cluster == {g for g in ALLOWED if g[1] == "kafkas"}


def test_namespaced_grants_stay_in_the_watched_namespaces(helm: Helm) -> None:
    manifests = helm.render(NAMESPACED)
    cluster = granted(manifests, "ClusterRole")
    assert {resource for _, resource, _ in cluster} == CLUSTER_SCOPED
    (leader,) = [r for r in by_kind(manifests, "Role") if r["metadata"]["name"] == LEADER_ROLE]
    assert leader["metadata"]["namespace"] == "rebalancer"
    assert set(grants(leader)) == {("", "pods", "patch")}
    roles = [r for r in by_kind(manifests, "Role") if r["metadata"]["name"] != LEADER_ROLE]
    assert sorted(role["metadata"]["namespace"] for role in roles) == ["team-a", "team-b"]
    namespaced = {grant for grant in ALLOWED if grant[1] not in CLUSTER_SCOPED | {"kafkas"}}
    for role in roles:
        assert set(grants(role)) == namespaced
    assert cluster | namespaced == {grant for grant in ALLOWED if grant[1] != "kafkas"}


def test_bindings_name_the_operator_service_account(helm: Helm) -> None:
    for values, account in ((None, "rebalancer"), (NAMESPACED, "existing")):
        manifests = helm.render(values)
        roles = {
            (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
            for r in by_kind(manifests, "Role") + by_kind(manifests, "ClusterRole")
        }
        bindings = by_kind(manifests, "RoleBinding") + by_kind(manifests, "ClusterRoleBinding")
        assert len(bindings) == len(roles)
        for binding in bindings:
            ref = binding["roleRef"]
            namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
            assert (ref["kind"], namespace, ref["name"]) in roles
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": "rebalancer"}
            ]
            if binding["kind"] == "RoleBinding":
                assert binding["roleRef"]["kind"] == "Role"


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["clusterwide", "namespaced"])
def test_pod_uses_the_bound_service_account(helm: Helm, values: dict[str, Any] | None) -> None:
    manifests = helm.render(values)
    (deployment,) = by_kind(manifests, "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    subjects = {
        subject["name"]
        for binding in by_kind(manifests, "ClusterRoleBinding") + by_kind(manifests, "RoleBinding")
        for subject in binding["subjects"]
    }
    assert subjects == {account}


SHARDED = {"sharding": {"enabled": True}}


@pytest.mark.parametrize("namespaced", [False, True], ids=["clusterwide", "namespaced"])
def test_sharding_grants_leases_in_the_release_namespace_only(helm: Helm, namespaced: bool) -> None:
    values: dict[str, Any] = {**(NAMESPACED if namespaced else {}), **SHARDED}
    manifests = helm.render(values)
    (shards,) = [r for r in by_kind(manifests, "Role") if r["metadata"]["name"] == SHARD_ROLE]
    assert shards["metadata"]["namespace"] == "rebalancer"
    assert set(grants(shards)) == set(SHARD_GRANTS)
    cluster = granted(manifests, "ClusterRole")
    assert not {grant for grant in cluster if grant[1] == "leases"}
    # No peering with sharding: kopf does not pause the replicas.
    assert not {grant for grant in cluster if grant[1] == "clusterkopfpeerings"}
    assert not by_kind(manifests, "ClusterKopfPeering")
    others = [r for r in by_kind(manifests, "Role") if r["metadata"]["name"] != SHARD_ROLE]
    assert all(grant[1] != "leases" for role in others for grant in grants(role))
    if namespaced:  # the holder of shard 0 labels its pod active
        (leader,) = [r for r in others if r["metadata"]["name"] == LEADER_ROLE]
        assert set(grants(leader)) == {("", "pods", "patch")}


def test_without_sharding_no_lease_is_granted(helm: Helm) -> None:
    for values in (None, NAMESPACED):
        manifests = helm.render(values)
        roles = by_kind(manifests, "Role") + by_kind(manifests, "ClusterRole")
        assert all(grant[1] != "leases" for role in roles for grant in grants(role))
