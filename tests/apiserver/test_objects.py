"""Object lifecycle through the official client: metadata, errors, verbs, selectors, deletion."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubernetes import client
from tests.apiserver.support import GROUP, PLURAL, widget


def failure(exc: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def configmap(name: str = "", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta} if name else meta, "data": {"a": "1"}}


def event(kind: str, name: str, message: str) -> dict[str, Any]:
    return {
        "metadata": {"generateName": "kopf-event-"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "default"},
        "reason": "Logging",
        "message": message,
        "type": "Normal",
        # events.k8s.io/v1 requires it; the Python client refuses events without it.
        "eventTime": "2024-01-01T00:00:00.000000Z",
    }


def test_default_namespaces_exist(core: client.CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names
    assert core.read_namespace("default").status.phase == "Active"


def test_create_sets_system_metadata(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", configmap("one"))
    meta = created.metadata
    assert re.fullmatch(r"[0-9a-f-]{36}", meta.uid)
    assert meta.namespace == "default"
    assert meta.creation_timestamp is not None
    assert int(meta.resource_version) > 0
    second = core.create_namespaced_config_map("default", configmap("two"))
    assert int(second.metadata.resource_version) > int(meta.resource_version)
    assert second.metadata.uid != meta.uid


def test_generate_name_gives_a_random_suffix_every_time(core: client.CoreV1Api) -> None:
    names = {
        core.create_namespaced_config_map("default", configmap(generateName="cm-")).metadata.name
        for _ in range(5)
    }
    assert len(names) == 5
    assert all(re.fullmatch(r"cm-[a-z0-9]{5}", n) for n in names)


def test_duplicate_create_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("dup"))
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_config_map("default", configmap("dup"))
    body = failure(raised.value)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'
    assert body["details"] == {"name": "dup", "kind": "configmaps"}


def test_missing_object_is_404_with_kube_status(custom: client.CustomObjectsApi, crd: Any) -> None:
    with pytest.raises(client.ApiException) as raised:
        custom.get_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "nope")
    body = failure(raised.value)
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{PLURAL}.{GROUP} "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "group": GROUP, "kind": PLURAL},
        "code": 404,
    }


def test_objects_in_a_missing_namespace_are_404(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_config_map("nowhere", configmap("x"))
    assert failure(raised.value)["message"] == 'namespaces "nowhere" not found'


def test_invalid_names_are_422(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_config_map("default", configmap("Bad_Name"))
    body = failure(raised.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert "RFC 1123 subdomain" in body["message"]


def test_stale_resource_version_is_409_conflict(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", configmap("cas"))
    stale = created.metadata.resource_version
    core.patch_namespaced_config_map("cas", "default", {"data": {"a": "2"}})
    body = configmap("cas")
    body["metadata"]["resourceVersion"] = stale
    with pytest.raises(client.ApiException) as raised:
        core.replace_namespaced_config_map("cas", "default", body)
    conflict = failure(raised.value)
    assert conflict["reason"] == "Conflict"
    assert conflict["message"] == (
        'Operation cannot be fulfilled on configmaps "cas": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_config_map("cas", "default", {"metadata": {"resourceVersion": stale}})
    assert raised.value.status == 409


def test_replace_and_unconditional_update(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("rep"))
    replaced = core.replace_namespaced_config_map(
        "rep", "default", {"metadata": {"name": "rep"}, "data": {"b": "2"}}
    )
    assert replaced.data == {"b": "2"}
    with pytest.raises(client.ApiException) as raised:
        core.replace_namespaced_config_map("rep", "default", {"metadata": {"name": "other"}})
    assert raised.value.status == 400


def test_noop_writes_keep_the_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", configmap("same"))
    patched = core.patch_namespaced_config_map("same", "default", {"data": {"a": "1"}})
    assert patched.metadata.resource_version == created.metadata.resource_version


def test_list_has_kind_api_version_and_resource_version(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", configmap("l1"))
    raw = core.list_namespaced_config_map("default", _preload_content=False).json()
    assert raw["kind"] == "ConfigMapList" and raw["apiVersion"] == "v1"
    assert int(raw["metadata"]["resourceVersion"]) >= 1
    apps = (
        client.AppsV1Api(api_client)
        .list_deployment_for_all_namespaces(_preload_content=False)
        .json()
    )
    assert apps["kind"] == "DeploymentList" and apps["apiVersion"] == "apps/v1"


def test_list_across_namespaces_and_pagination(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    for ns in ("default", "team"):
        for i in range(3):
            core.create_namespaced_config_map(ns, configmap(f"cm{i}"))
    everything = core.list_config_map_for_all_namespaces()
    assert [(c.metadata.namespace, c.metadata.name) for c in everything.items] == [
        (ns, f"cm{i}") for ns in ("default", "team") for i in range(3)
    ]
    page = core.list_config_map_for_all_namespaces(limit=4)
    assert (
        len(page.items) == 4 and page.metadata._continue and page.metadata.remaining_item_count == 2
    )
    rest = core.list_config_map_for_all_namespaces(limit=4, _continue=page.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["cm1", "cm2"] and not rest.metadata._continue


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", {"a", "b"}),
        ("app==web,tier=front", {"a"}),
        ("app!=web", {"c", "d"}),
        ("tier in (front,back)", {"a", "b", "c"}),
        ("tier notin (front)", {"b", "c", "d"}),
        ("tier", {"a", "b", "c"}),
        ("!tier", {"d"}),
    ],
)
def test_label_selectors(core: client.CoreV1Api, selector: str, expected: set[str]) -> None:
    labels = {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "back"},
        "c": {"app": "db", "tier": "back"},
        "d": {"app": "db"},
    }
    for name, values in labels.items():
        core.create_namespaced_config_map("default", configmap(name, labels=values))
    found = core.list_namespaced_config_map("default", label_selector=selector)
    assert {c.metadata.name for c in found.items} == expected


def test_bad_selectors_are_400(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as raised:
        core.list_namespaced_config_map("default", label_selector="a in (b")
    assert raised.value.status == 400
    with pytest.raises(client.ApiException) as raised:
        core.list_namespaced_config_map("default", field_selector="data.a=1")
    assert failure(raised.value)["message"] == "field label not supported: data.a"


def test_field_selectors_on_metadata_and_event_fields(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    for ns in ("default", "team"):
        core.create_namespaced_config_map(ns, configmap("x"))
        core.create_namespaced_config_map(ns, configmap("y"))
    found = core.list_config_map_for_all_namespaces(
        field_selector="metadata.name=x,metadata.namespace!=team"
    )
    assert [(c.metadata.namespace, c.metadata.name) for c in found.items] == [("default", "x")]
    for kind, name in (("Pod", "p"), ("Widget", "w")):
        core.create_namespaced_event("default", event(kind, name, f"about {name}"))
    events = core.list_namespaced_event(
        "default", field_selector="involvedObject.kind=Widget,involvedObject.name=w"
    )
    assert [e.message for e in events.items] == ["about w"]


def test_events_post_with_generate_name_repeatedly_and_read_as_events_v1(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    for i in range(3):
        core.create_namespaced_event("default", event("Widget", "w", f"m{i}"))
    assert len(core.list_namespaced_event("default").items) == 3
    v1 = client.EventsV1Api(api_client).list_namespaced_event("default")
    assert sorted(e.note for e in v1.items) == ["m0", "m1", "m2"]
    assert {e.regarding.kind for e in v1.items} == {"Widget"}


def test_finalizers_hold_deletion_until_removed(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("held", finalizers=["test/hold"]))
    deleted = core.delete_namespaced_config_map("held", "default", _preload_content=False).json()
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    still = core.read_namespaced_config_map("held", "default")
    assert still.metadata.deletion_timestamp is not None
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_config_map(
            "held", "default", {"metadata": {"finalizers": ["test/hold", "new"]}}
        )
    assert failure(raised.value)["reason"] == "Invalid"
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as raised:
        core.read_namespaced_config_map("held", "default")
    assert raised.value.status == 404


def test_creating_with_deletion_timestamp_clears_it(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(
        "default", configmap("fresh", deletionTimestamp="2020-01-01T00:00:00Z")
    )
    assert created.metadata.deletion_timestamp is None


def test_delete_returns_status_and_delete_collection_by_label(core: client.CoreV1Api) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map("default", configmap(name, labels={"app": app}))
    status = core.delete_namespaced_config_map("a", "default", _preload_content=False).json()
    assert status["status"] == "Success" and status["details"]["name"] == "a"
    gone = core.delete_collection_namespaced_config_map(
        "default", label_selector="app=x", _preload_content=False
    ).json()
    assert [i["metadata"]["name"] for i in gone["items"]] == ["b"]
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["c"]


def test_delete_preconditions(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("pre"))
    with pytest.raises(client.ApiException) as raised:
        core.delete_namespaced_config_map(
            "pre", "default", body={"preconditions": {"uid": "not-it"}}
        )
    assert raised.value.status == 409


def test_deleting_a_namespace_deletes_its_objects(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", configmap("plain"))
    core.create_namespaced_config_map("doomed", configmap("held", finalizers=["test/hold"]))
    answer = core.delete_namespace("doomed", _preload_content=False).json()
    assert answer["status"]["phase"] == "Terminating"
    assert [c.metadata.name for c in core.list_namespaced_config_map("doomed").items] == ["held"]
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_config_map("doomed", configmap("late"))
    assert failure(raised.value)["reason"] == "Forbidden"
    # The typed client sends strategic merge patches, where finalizers merge as a set:
    # an empty list changes nothing (as on kube), a null removes them.
    core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": []}})
    assert core.read_namespace("doomed").status.phase == "Terminating"
    core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as raised:
        core.read_namespace("doomed")
    assert raised.value.status == 404


def test_deleting_a_crd_deletes_its_custom_resources(
    api_client: client.ApiClient, custom: client.CustomObjectsApi, crd: Any
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("w1"))
    client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(crd["metadata"]["name"])
    with pytest.raises(client.ApiException) as raised:
        custom.list_namespaced_custom_object(GROUP, "v1", "default", PLURAL)
    assert raised.value.status == 404
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(
        {k: v for k, v in crd.items() if k in ("apiVersion", "kind", "spec")}
        | {"metadata": {"name": crd["metadata"]["name"]}}
    )
    assert custom.list_namespaced_custom_object(GROUP, "v1", "default", PLURAL)["items"] == []


def test_secrets_fold_string_data_into_data(core: client.CoreV1Api) -> None:
    secret = core.create_namespaced_secret(
        "default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}
    )
    assert secret.data == {"k": "dg=="} and secret.type == "Opaque" and secret.string_data is None


def test_dry_run_does_not_store(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("dry"), dry_run="All")
    with pytest.raises(client.ApiException):
        core.read_namespaced_config_map("dry", "default")
    core.create_namespaced_config_map("default", configmap("wet"))
    core.patch_namespaced_config_map("wet", "default", {"data": {"a": "9"}}, dry_run="All")
    assert core.read_namespaced_config_map("wet", "default").data == {"a": "1"}
    core.delete_namespaced_config_map("wet", "default", dry_run="All")
    assert core.read_namespaced_config_map("wet", "default").data == {"a": "1"}


def test_scale_subresource(api_client: client.ApiClient) -> None:
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment("default", deployment("web"))
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web"
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
    updated = apps.read_namespaced_deployment("web", "default")
    assert updated.spec.replicas == 5 and updated.metadata.generation == 2


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
                    ]
                },
            },
        },
    }


def test_garbage_collection_deletes_dependents_of_deleted_owners(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, crd: Any
) -> None:
    owner = custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("owner"))
    other = custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("other"))

    def ref(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Widget",
            "name": meta["name"],
            "uid": meta["uid"],
        }

    core.create_namespaced_config_map("default", configmap("owned", ownerReferences=[ref(owner)]))
    core.create_namespaced_config_map(
        "default", configmap("shared", ownerReferences=[ref(owner), ref(other)])
    )
    core.create_namespaced_config_map("default", configmap("free"))
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "owner")
    assert sorted(c.metadata.name for c in core.list_namespaced_config_map("default").items) == [
        "free",
        "shared",
    ]
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "other")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["free"]
