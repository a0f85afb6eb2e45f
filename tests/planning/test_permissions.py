"""What a refused request is told as: the permission, where the chart grants it, and no secret."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from rebalancer.clients.kubernetes_api import PermissionDenied, _refusal
from rebalancer.planning.permissions import (
    EVERY_GROUP_NEEDS,
    REASON,
    Denial,
    DenialBook,
    account_from_status,
    denial_conditions,
    denial_from_request,
    denial_of,
    needs,
)
from rebalancer.structs.conditions import ConditionStatus, ConditionType

SERVER = "https://10.0.0.1:6443"
ACCOUNT = "system:serviceaccount:rebalancer:rebalancer"


@pytest.mark.parametrize(
    ("method", "path", "verb", "resource", "group", "namespace"),
    [
        ("PATCH", "/apis/apps/v1/namespaces/apps/statefulsets/orders", "patch", "statefulsets",
         "apps", "apps"),
        ("GET", "/apis/apps/v1/namespaces/apps/deployments/web", "get", "deployments", "apps",
         "apps"),
        ("GET", "/api/v1/namespaces/apps/pods?labelSelector=app%3Dorders", "list", "pods", "",
         "apps"),
        ("GET", "/api/v1/namespaces/apps/pods?watch=true&fieldSelector=x", "watch", "pods", "",
         "apps"),
        ("DELETE", "/api/v1/namespaces/apps/pods/orders-0", "delete", "pods", "", "apps"),
        ("DELETE", "/api/v1/namespaces/apps/pods", "deletecollection", "pods", "", "apps"),
        ("POST", "/api/v1/namespaces/apps/configmaps", "create", "configmaps", "", "apps"),
        ("PUT", "/api/v1/namespaces/apps/configmaps/orders-consumer-settings", "update",
         "configmaps", "", "apps"),
        ("PATCH", "/apis/rebalancer.dev/v1alpha1/namespaces/apps/consumergroups/orders/status",
         "patch", "consumergroups/status", "rebalancer.dev", "apps"),
        ("GET", "/api/v1/namespaces", "list", "namespaces", "", None),
        ("GET", "/api/v1/namespaces/apps", "get", "namespaces", "", None),
        ("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1", "watch",
         "customresourcedefinitions", "apiextensions.k8s.io", None),
        ("GET", "/apis/rebalancer.dev/v1alpha1/consumergroups", "list", "consumergroups",
         "rebalancer.dev", None),
    ],
)  # fmt: skip
def test_the_permission_is_read_from_the_request(
    method: str, path: str, verb: str, resource: str, group: str, namespace: str | None
) -> None:
    denial = denial_from_request(method, SERVER + path)
    assert (denial.verb, denial.resource, denial.group, denial.namespace) == (
        verb,
        resource,
        group,
        namespace,
    )


def test_the_message_names_verb_resource_namespace_and_the_fix() -> None:
    denial = Denial("patch", "statefulsets", "apps", "payments", ACCOUNT)
    message = denial.message()
    assert message.startswith(f"the operator's ServiceAccount ({ACCOUNT}) may not patch ")
    assert "may not patch statefulsets.apps in namespace payments: grant it (" in message
    assert "charts/rebalancer rbac: rbac.create=true with payments in operator.watchNamespaces" in (
        message
    )
    assert "add `patch` on statefulsets.apps to its Role in payments" in message


def test_cluster_scoped_and_strimzi_grants_point_at_the_cluster_role() -> None:
    listing = Denial("list", "namespaces", "", None).message()
    assert "may not list namespaces cluster-wide: grant it (" in listing
    assert "to its ClusterRole" in listing
    assert listing.startswith("the operator's ServiceAccount may not")
    kafka = Denial("patch", "kafkas", "kafka.strimzi.io", "kafka").message()
    assert "may not patch kafkas.kafka.strimzi.io in namespace kafka" in kafka
    assert "rbac.strimzi=true" in kafka
    status = Denial("patch", "consumergroups/status", "rebalancer.dev", "apps").permission
    assert status == "patch consumergroups.rebalancer.dev/status in namespace apps"


def test_a_user_account_is_not_called_a_service_account() -> None:
    assert (
        Denial("get", "secrets", "", "apps", "alice")
        .message()
        .startswith("the operator's account (alice) may not get secrets")
    )


def test_the_account_comes_from_the_status_message() -> None:
    message = (
        'statefulsets.apps "orders" is forbidden: User "system:serviceaccount:a:b" cannot '
        'patch resource "statefulsets" in API group "apps" in the namespace "a"'
    )
    assert account_from_status(message) == "system:serviceaccount:a:b"
    assert account_from_status("forbidden") is None
    assert account_from_status(None) is None


@dataclass
class Response:
    """What the kubernetes client's REST layer hands back (a RESTResponse)."""

    body: bytes
    status: int = 403
    reason: str = "Forbidden"
    headers: dict[str, str] = field(default_factory=dict)
    data: bytes | None = None

    def read(self) -> bytes:
        self.data = self.body
        return self.body


def test_a_403_becomes_a_permission_denied_that_says_only_the_permission() -> None:
    # A Secret's 403 body as kube-apiserver words it; nothing of a request body gets in.
    status = {
        "kind": "Status",
        "status": "Failure",
        "message": f'secrets "kafka" is forbidden: User "{ACCOUNT}" cannot get resource '
        '"secrets" in API group "" in the namespace "apps"',
        "reason": "Forbidden",
        "details": {"name": "kafka", "kind": "secrets"},
        "code": 403,
    }
    error = _refusal("GET", f"{SERVER}/api/v1/namespaces/apps/secrets/kafka", Response(
        json.dumps(status).encode()
    ))  # fmt: skip
    assert isinstance(error, PermissionDenied)
    assert error.status == 403  # still an ApiException to code that looks at statuses
    assert error.denial == Denial("get", "secrets", "", "apps", ACCOUNT)
    assert str(error) == error.denial.message()
    unreadable = _refusal("GET", f"{SERVER}/api/v1/namespaces/apps/pods", Response(b"<html>"))
    assert unreadable.denial == Denial("list", "pods", "", "apps", None)


def test_the_condition_lists_every_denial_once_and_caps_the_list() -> None:
    first = Denial("create", "events", "", "apps")
    second = Denial("patch", "pods", "", "apps")
    [condition] = denial_conditions([first, second, first])
    assert (condition.type, condition.status, condition.reason) == (
        ConditionType.DEGRADED,
        ConditionStatus.TRUE,
        REASON,
    )
    assert condition.message == f"{first.message()}; {second.message()}"
    many = [Denial("get", f"things{index}", "", "apps") for index in range(6)]
    [capped] = denial_conditions(many)
    assert capped.message.endswith("(and 2 more)")
    assert denial_conditions([]) == []


def test_the_book_keeps_a_refusal_until_its_work_succeeds() -> None:
    book = DenialBook()
    denial = Denial("patch", "statefulsets", "apps", "apps")
    assert book.record("apps", "orders", "rollouts", denial)  # news: told once
    assert not book.record("apps", "orders", "rollouts", denial)  # the same again: not told
    other = Denial("list", "pods", "", "apps")
    assert book.record("apps", "orders", "rollouts", other)  # another refusal is news
    assert book.of("apps", "orders") == [other]
    assert book.of("apps", "payments") == []
    events = Denial("create", "events", "", "apps")
    everywhere = Denial("create", "events", "", None)
    book.set_namespaces({"apps": [events], "": [everywhere], "empty": []})
    assert book.of("apps", "orders") == [everywhere, events, other]
    assert book.of("other", "x") == [everywhere]
    assert book.clear("apps", "orders", "rollouts")
    assert not book.clear("apps", "orders", "rollouts")
    assert book.of("apps", "orders") == [everywhere, events]
    book.record("apps", "orders", "settings", other)
    book.forget("apps", "orders")
    assert book.of("apps", "orders") == [everywhere, events]


def test_what_is_checked_at_start() -> None:
    # Watching given namespaces: kopf's CRD and namespace observation cluster-wide, and what
    # every group needs in each namespace.
    checked = needs(["a", "b"])
    cluster = [(need.verb, need.resource) for need, namespace in checked if namespace is None]
    assert cluster == [
        ("list", "customresourcedefinitions"),
        ("watch", "customresourcedefinitions"),
        ("list", "namespaces"),
        ("watch", "namespaces"),
    ]
    assert [namespace for _, namespace in checked if namespace] == ["a"] * len(
        EVERY_GROUP_NEEDS
    ) + ["b"] * len(EVERY_GROUP_NEEDS)
    # Watching all: no namespace reads, and every group's needs checked for all namespaces,
    # named as cluster-wide grants.
    everywhere = needs([])
    assert all(need.resource != "namespaces" for need, _ in everywhere)
    need, namespace = everywhere[-1]
    assert namespace == ""
    assert denial_of(need, namespace).namespace is None
