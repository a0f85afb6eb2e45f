"""Discovery documents, as kopf, the Python client and kubectl read them."""

from __future__ import annotations

from typing import Any

import requests
from kubernetes import client, dynamic
from tests.apiserver.support import CRD, GROUP

from rebalancer.lab.apiserver import ApiServerThread

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


def get(api: ApiServerThread, path: str, accept: str = "application/json") -> Any:
    response = requests.get(api.url + path, headers={"Accept": accept}, timeout=5)
    response.raise_for_status()
    return response.json()


def test_version_and_legacy_roots(api: ApiServerThread) -> None:
    assert get(api, "/version")["minor"] == "32"
    assert get(api, "/api")["versions"] == ["v1"]
    groups = {g["name"]: g for g in get(api, "/apis")["groups"]}
    assert {"apps", "apiextensions.k8s.io", "coordination.k8s.io", "events.k8s.io"} <= set(groups)
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert get(api, "/apis/apps")["kind"] == "APIGroup"


def test_resource_lists_name_singulars_verbs_and_subresources(api: ApiServerThread) -> None:
    resources = {r["name"]: r for r in get(api, "/apis/apps/v1")["resources"]}
    deployments = resources["deployments"]
    assert deployments["singularName"] == "deployment"
    assert deployments["shortNames"] == ["deploy"]
    assert "all" in deployments["categories"]
    assert {"create", "get", "list", "watch", "patch", "update", "delete"} <= set(
        deployments["verbs"]
    )
    assert resources["deployments/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["deployments/scale"]["kind"] == "Scale"
    core = {r["name"]: r for r in get(api, "/api/v1")["resources"]}
    assert core["namespaces"]["namespaced"] is False
    assert core["pods"]["singularName"] == "pod"
    assert "pods/status" in core and "configmaps/status" not in core


def test_aggregated_discovery_is_served_to_kubectl(api: ApiServerThread) -> None:
    response = requests.get(api.url + "/apis", headers={"Accept": AGGREGATED}, timeout=5)
    assert response.headers["Content-Type"].startswith(
        "application/json;g=apidiscovery.k8s.io;v=v2"
    )
    body = response.json()
    assert body["kind"] == "APIGroupDiscoveryList"
    apps = next(i for i in body["items"] if i["metadata"].get("name") == "apps")
    deployments = next(
        r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments"
    )
    assert deployments["scope"] == "Namespaced"
    assert {s["subresource"] for s in deployments["subresources"]} == {"status", "scale"}
    core = get(api, "/api", AGGREGATED)
    assert [v["version"] for v in core["items"][0]["versions"]] == ["v1"]


def test_crd_appears_in_discovery_at_once_and_disappears_on_delete(
    api: ApiServerThread, api_client: client.ApiClient
) -> None:
    extensions = client.ApiextensionsV1Api(api_client)
    extensions.create_custom_resource_definition(CRD)
    resources = {r["name"]: r for r in get(api, f"/apis/{GROUP}/v1")["resources"]}
    assert resources["widgets"]["singularName"] == "widget"
    assert resources["widgets"]["shortNames"] == ["wd"]
    assert resources["widgets"]["categories"] == ["rebalancer"]
    assert {"widgets/status", "widgets/scale"} <= set(resources)
    crd = extensions.read_custom_resource_definition(CRD["metadata"]["name"])
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}

    extensions.delete_custom_resource_definition(CRD["metadata"]["name"])
    response = requests.get(api.url + f"/apis/{GROUP}/v1", timeout=5)
    assert response.status_code == 404
    assert GROUP not in {g["name"] for g in get(api, "/apis")["groups"]}


def test_dynamic_client_discovers_custom_resources(
    api: ApiServerThread, api_client: client.ApiClient
) -> None:
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CRD)
    dyn = dynamic.DynamicClient(api_client)
    widgets = dyn.resources.get(api_version=f"{GROUP}/v1", kind="Widget")
    assert widgets.namespaced
    assert widgets.subresources["status"].kind == "Widget"


def test_openapi_v3_tells_kubectl_that_field_validation_is_server_side(
    api: ApiServerThread, crd: dict[str, Any]
) -> None:
    root = get(api, "/openapi/v3")["paths"]
    assert "api/v1" in root and f"apis/{GROUP}/v1" in root
    doc = get(api, root[f"apis/{GROUP}/v1"]["serverRelativeURL"])
    patches = [p["patch"] for p in doc["paths"].values() if "patch" in p]
    assert patches
    for op in patches:
        assert op["x-kubernetes-group-version-kind"] == {
            "group": GROUP,
            "version": "v1",
            "kind": "Widget",
        }
        assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"])
    schema = doc["components"]["schemas"]["dev.rebalancer.test.v1.Widget"]
    assert schema["properties"]["spec"]["required"] == ["size", "backend"]
    assert requests.get(api.url + "/openapi/v2", timeout=5).status_code == 404


def test_dynamic_client_crud_and_status(api_client: client.ApiClient) -> None:
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CRD)
    dyn = dynamic.DynamicClient(api_client)
    widgets = dyn.resources.get(api_version=f"{GROUP}/v1", kind="Widget")
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "dyn"},
        "spec": {"size": 2, "backend": {"url": "https://kafka:9092"}},
    }
    created = widgets.create(body=body, namespace="default")
    assert created.spec.mode == "Safe" and created.metadata.generation == 1
    widgets.patch(
        name="dyn",
        namespace="default",
        body={"spec": {"size": 4}},
        content_type="application/merge-patch+json",
    )
    widgets.status.patch(
        name="dyn",
        namespace="default",
        body={"status": {"phase": "Up"}},
        content_type="application/merge-patch+json",
    )
    current = widgets.get(name="dyn", namespace="default")
    assert (current.spec.size, current.status.phase, current.metadata.generation) == (4, "Up", 2)
    assert [w.metadata.name for w in widgets.get(namespace="default").items] == ["dyn"]
    widgets.delete(name="dyn", namespace="default")
    assert widgets.get(namespace="default").items == []
