"""PATCH in every content type kube accepts, through raw HTTP and the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from kubernetes import client
from tests.apiserver.support import GROUP, PLURAL, widget

from rebalancer.lab.apiserver import ApiServerThread

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def patch(
    api: ApiServerThread, path: str, content_type: str, body: Any, query: str = ""
) -> requests.Response:
    data = body if isinstance(body, str) else json.dumps(body)
    return requests.patch(
        f"{api.url}{path}{query}", data=data, headers={"Content-Type": content_type}, timeout=5
    )


def deployment() -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        },
                        {"name": "sidecar", "image": "side:1", "ports": [{"containerPort": 80}]},
                    ]
                },
            },
        },
        "status": {
            "conditions": [
                {"type": "Available", "status": "False"},
                {"type": "Progressing", "status": "True"},
            ]
        },
    }


DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/web"


@pytest.fixture
def web(api_client: client.ApiClient) -> None:
    client.AppsV1Api(api_client).create_namespaced_deployment("default", deployment())


@pytest.mark.usefixtures("web")
def test_strategic_merge_merges_containers_env_and_conditions_by_key(api: ApiServerThread) -> None:
    body = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:2",
                            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                        },
                        {"name": "sidecar", "$patch": "delete"},
                    ]
                }
            }
        }
    }
    answer = patch(api, DEPLOYMENT, STRATEGIC, body)
    assert answer.status_code == 200, answer.text
    containers = answer.json()["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["image"] == "app:2"
    assert containers[0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert "status" not in answer.json()  # create drops status: it has its own subresource
    patch(api, DEPLOYMENT + "/status", MERGE, {"status": deployment()["status"]})
    status = {"status": {"conditions": [{"type": "Available", "status": "True"}]}}
    conditions = patch(api, DEPLOYMENT + "/status", STRATEGIC, status).json()["status"][
        "conditions"
    ]
    assert conditions == [
        {"type": "Available", "status": "True"},
        {"type": "Progressing", "status": "True"},
    ]


@pytest.mark.usefixtures("web")
def test_merge_patch_replaces_lists_and_deletes_with_null(api: ApiServerThread) -> None:
    body = {
        "metadata": {"labels": {"app": None, "tier": "front"}},
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}},
    }
    answer = patch(api, DEPLOYMENT, MERGE, body).json()
    assert answer["metadata"]["labels"] == {"tier": "front"}
    assert [c["name"] for c in answer["spec"]["template"]["spec"]["containers"]] == ["only"]


@pytest.mark.usefixtures("web")
def test_json_patch_ops_and_failed_test_is_422(api: ApiServerThread) -> None:
    ops = [
        {"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "app"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "app:3"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}},
        {
            "op": "add",
            "path": "/spec/template/spec/containers/0/env/-",
            "value": {"name": "Z", "value": "9"},
        },
        {"op": "remove", "path": "/spec/template/spec/containers/1"},
        {"op": "copy", "from": "/metadata/labels", "path": "/spec/template/metadata/annotations"},
        {"op": "move", "from": "/metadata/annotations/a~1b", "path": "/metadata/annotations/moved"},
    ]
    answer = patch(api, DEPLOYMENT, JSON, ops)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    container = body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in container] == ["app"] and container[0]["image"] == "app:3"
    assert container[0]["env"][-1] == {"name": "Z", "value": "9"}
    assert body["metadata"]["annotations"] == {"moved": "c"}
    failed = patch(api, DEPLOYMENT, JSON, [{"op": "test", "path": "/spec/replicas", "value": 7}])
    assert failed.status_code == 422
    assert failed.json()["reason"] == "Invalid"
    assert "test failed" in failed.json()["details"]["causes"][0]["message"]
    missing = patch(api, DEPLOYMENT, JSON, [{"op": "remove", "path": "/spec/nothing"}])
    assert missing.status_code == 422
    malformed = patch(api, DEPLOYMENT, JSON, {"op": "add"})
    assert malformed.status_code == 400


def test_status_patch_with_json_patch_ops_through_the_client(
    custom: client.CustomObjectsApi, crd: Any
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("w"))
    ops = [{"op": "add", "path": "/status", "value": {"phase": "Running"}}]
    answer = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", PLURAL, "w", ops, _content_type="application/json-patch+json"
    )
    assert answer["status"] == {"phase": "Running"}
    # Without _content_type, client 37 sends a list as a merge patch: rejected, as kube does.
    with pytest.raises(client.ApiException) as raised:
        custom.patch_namespaced_custom_object_status(GROUP, "v1", "default", PLURAL, "w", ops)
    assert raised.value.status in (400, 422)


def test_custom_resources_refuse_strategic_merge_like_kube(api: ApiServerThread, crd: Any) -> None:
    requests.post(
        f"{api.url}/apis/{GROUP}/v1/namespaces/default/{PLURAL}", json=widget("w"), timeout=5
    )
    answer = patch(
        api, f"/apis/{GROUP}/v1/namespaces/default/{PLURAL}/w", STRATEGIC, {"spec": {"size": 4}}
    )
    assert answer.status_code == 415
    assert answer.json()["reason"] == "UnsupportedMediaType"
    assert answer.json()["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


def test_server_side_apply_creates_updates_and_removes_owned_fields(api: ApiServerThread) -> None:
    path = "/api/v1/namespaces/default/configmaps/applied"
    first = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n  b: '2'\n"
    )
    created = patch(api, path, APPLY, first, "?fieldManager=me")
    assert created.status_code == 201, created.text
    patch(api, path, MERGE, {"data": {"other": "x"}})
    second = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '3'\n"
    updated = patch(api, path, APPLY, second, "?fieldManager=me").json()
    assert updated["data"] == {"a": "3", "other": "x"}
    nameless = patch(api, path, APPLY, second)
    assert nameless.status_code == 422


def test_unknown_patch_type_is_415(api: ApiServerThread) -> None:
    requests.post(
        f"{api.url}/api/v1/namespaces/default/configmaps",
        json={"metadata": {"name": "c"}},
        timeout=5,
    )
    answer = patch(api, "/api/v1/namespaces/default/configmaps/c", "application/json", {"data": {}})
    assert answer.status_code == 415
