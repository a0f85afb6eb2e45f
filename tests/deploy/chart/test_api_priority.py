"""The chart's API Priority and Fairness objects: on by default, the operator's ServiceAccount
(whichever the chart uses) mapped to a priority level of its own, its keep-alives and Leases to
the cluster's leader-election level, and gone when switched off."""

from __future__ import annotations

from tests.deploy.chart.support import NAMESPACE, NAMESPACED, Helm, Manifest, by_kind, only


def schema_to(manifests: list[Manifest], level: str) -> Manifest:
    """The one FlowSchema that maps to the priority level `level`."""
    (schema,) = [
        m
        for m in by_kind(manifests, "FlowSchema")
        if m["spec"]["priorityLevelConfiguration"]["name"] == level
    ]
    return schema


def test_on_by_default_for_the_operators_account(helm: Helm) -> None:
    manifests = helm.render({})
    level = only(manifests, "PriorityLevelConfiguration")
    schema = schema_to(manifests, level["metadata"]["name"])
    assert level["apiVersion"] == schema["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
    limited = level["spec"]["limited"]
    assert level["spec"]["type"] == "Limited"
    assert limited["nominalConcurrencyShares"] == 20
    assert limited["limitResponse"]["type"] == "Queue"
    # Before the cluster's service-accounts schema (9000), so the operator's requests leave
    # workload-low; after the system schemas.
    assert 1000 <= schema["spec"]["matchingPrecedence"] < 9000
    (rule,) = schema["spec"]["rules"]
    (subject,) = rule["subjects"]
    account = only(manifests, "ServiceAccount")["metadata"]["name"]
    assert subject == {
        "kind": "ServiceAccount",
        "serviceAccount": {"name": account, "namespace": NAMESPACE},
    }
    deployment = only(manifests, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert rule["resourceRules"][0]["clusterScope"] is True


def test_follows_an_existing_account_and_the_values(helm: Helm) -> None:
    values = {
        **NAMESPACED,
        "apiPriority": {"concurrencyShares": 50, "matchingPrecedence": 500, "queueLengthLimit": 9},
    }
    manifests = helm.render(values)
    schema = schema_to(manifests, only(manifests, "PriorityLevelConfiguration")["metadata"]["name"])
    (rule,) = schema["spec"]["rules"]
    assert rule["subjects"][0]["serviceAccount"]["name"] == "existing"
    assert schema["spec"]["matchingPrecedence"] == 500
    leases = schema_to(manifests, "leader-election")
    assert leases["spec"]["matchingPrecedence"] == 499
    assert leases["spec"]["rules"][0]["subjects"] == rule["subjects"]
    limited = only(manifests, "PriorityLevelConfiguration")["spec"]["limited"]
    assert limited["nominalConcurrencyShares"] == 50
    assert limited["limitResponse"]["queuing"]["queueLengthLimit"] == 9


def test_off_installs_neither(helm: Helm) -> None:
    manifests = helm.render({"apiPriority": {"enabled": False}})
    assert not by_kind(manifests, "FlowSchema")
    assert not by_kind(manifests, "PriorityLevelConfiguration")


def test_the_schema_refuses_a_share_of_zero(helm: Helm) -> None:
    result = helm.template({"apiPriority": {"concurrencyShares": 0}})
    assert result.returncode != 0
    assert "concurrencyShares" in result.stderr


def test_keep_alives_and_leases_go_to_leader_election_before_the_operators_level(
    helm: Helm,
) -> None:
    manifests = helm.render({})
    own = schema_to(manifests, only(manifests, "PriorityLevelConfiguration")["metadata"]["name"])
    leases = schema_to(manifests, "leader-election")
    # Sorted first: a Lease request matches both schemas, and the lower precedence wins.
    assert leases["spec"]["matchingPrecedence"] < own["spec"]["matchingPrecedence"]
    (rule,) = leases["spec"]["rules"]
    assert rule["subjects"] == own["spec"]["rules"][0]["subjects"]
    assert "nonResourceRules" not in rule
    by_group = {r["apiGroups"][0]: r for r in rule["resourceRules"]}
    # The shard Leases in the release's namespace only; kopf's peering object is cluster-wide.
    assert by_group["coordination.k8s.io"]["resources"] == ["leases"]
    assert by_group["coordination.k8s.io"]["namespaces"] == [NAMESPACE]
    assert by_group["kopf.dev"]["resources"] == ["clusterkopfpeerings"]
    assert by_group["kopf.dev"]["clusterScope"] is True


def test_an_empty_leader_election_level_leaves_them_in_the_operators_level(helm: Helm) -> None:
    manifests = helm.render({"apiPriority": {"leaderElectionLevel": ""}})
    (schema,) = by_kind(manifests, "FlowSchema")
    assert schema["spec"]["priorityLevelConfiguration"]["name"] != "leader-election"


def test_the_schema_refuses_a_precedence_with_none_before_it(helm: Helm) -> None:
    result = helm.template({"apiPriority": {"matchingPrecedence": 1}})
    assert result.returncode != 0
    assert "matchingPrecedence" in result.stderr
