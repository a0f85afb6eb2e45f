"""The chart's API Priority and Fairness objects: on by default, the operator's ServiceAccount
(whichever the chart uses) mapped to a priority level of its own, and gone when switched off."""

from __future__ import annotations

from tests.deploy.chart.support import NAMESPACE, NAMESPACED, Helm, by_kind, only


def test_on_by_default_for_the_operators_account(helm: Helm) -> None:
    manifests = helm.render({})
    level = only(manifests, "PriorityLevelConfiguration")
    schema = only(manifests, "FlowSchema")
    assert level["apiVersion"] == schema["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == level["metadata"]["name"]
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
    (rule,) = only(manifests, "FlowSchema")["spec"]["rules"]
    assert rule["subjects"][0]["serviceAccount"]["name"] == "existing"
    assert only(manifests, "FlowSchema")["spec"]["matchingPrecedence"] == 500
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
