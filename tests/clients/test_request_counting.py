"""rebalancer_kubernetes_requests_total names the resource of each request from its URL, from a
small fixed set, so the label stays bounded."""

from __future__ import annotations

import pytest

from rebalancer.clients.kubernetes_api import request_resource


@pytest.mark.parametrize(
    ("url", "resource"),
    [
        (
            "https://10.0.0.1:6443/apis/rebalancer.dev/v1alpha1/namespaces/default/"
            "consumergroups/orders/status",
            "consumergroups/status",
        ),
        ("/apis/rebalancer.dev/v1alpha1/namespaces/ns/consumergroups/orders", "consumergroups"),
        ("/apis/apps/v1/namespaces/default/statefulsets/orders", "statefulsets"),
        ("/apis/apps/v1/namespaces/default/deployments/web/scale", "deployments/scale"),
        ("/api/v1/namespaces/default/pods?labelSelector=app%3Dorders", "pods"),
        ("/api/v1/namespaces/pods", "namespaces"),
        ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "selfsubjectaccessreviews"),
        ("/api/v1/nodes", "other"),
        ("/apis/example.com/v1/namespaces/x/widgets/w", "other"),
    ],
)
def test_the_resource_of_a_request(url: str, resource: str) -> None:
    assert request_resource(url) == resource
