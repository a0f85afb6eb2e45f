"""Custom resources: schema validation, defaulting, pruning, CEL, status and generation."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from kubernetes import client
from tests.apiserver.support import GROUP, PLURAL, widget

from rebalancer.lab.apiserver import ApiServerThread

pytestmark = pytest.mark.usefixtures("crd")


def create(custom: client.CustomObjectsApi, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    created: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, "v1", "default", PLURAL, body, **kwargs
    )
    return created


def rejection(
    custom: client.CustomObjectsApi, body: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    with pytest.raises(client.ApiException) as raised:
        create(custom, body, **kwargs)
    status: dict[str, Any] = json.loads(raised.value.body)
    return status


def causes(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["field"]: (c["reason"], c["message"]) for c in status["details"]["causes"]}


def test_required_fields_use_kubes_message(custom: client.CustomObjectsApi) -> None:
    body = widget("bad")
    del body["spec"]["backend"]["url"]
    status = rejection(custom, body)
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert (
        status["message"]
        == 'Widget.test.rebalancer.dev "bad" is invalid: spec.backend.url: Required value'
    )
    assert status["details"]["group"] == GROUP and status["details"]["kind"] == "Widget"
    assert causes(status) == {"spec.backend.url": ("FieldValueRequired", "Required value")}


def test_every_error_is_reported_with_kube_wording(custom: client.CustomObjectsApi) -> None:
    body = widget(
        "bad",
        size=0,
        mode="Slow",
        ratio=0,
        since="yesterday",
        tags=["a", "a", "b", "c"],
        backend={"url": "ftp", "timeoutSeconds": 0},
    )
    status = rejection(custom, body)
    found = {(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]}
    assert found == {
        (
            "spec.size",
            "FieldValueInvalid",
            "Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            "spec.mode",
            "FieldValueNotSupported",
            'Unsupported value: "Slow": supported values: "Fast", "Safe"',
        ),
        (
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            "spec.since",
            "FieldValueTypeInvalid",
            'Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday"',
        ),
        ("spec.tags", "FieldValueTooMany", "Too many: 4: must have at most 3 items"),
        ("spec.tags[1]", "FieldValueDuplicate", 'Duplicate value: "a"'),
        (
            "spec.backend.url",
            "FieldValueInvalid",
            'Invalid value: "ftp": spec.backend.url in body should be at least 8 chars long',
        ),
        (
            "spec.backend.url",
            "FieldValueInvalid",
            "Invalid value: \"ftp\": spec.backend.url in body should match '^https?://'",
        ),
        (
            "spec.backend.timeoutSeconds",
            "FieldValueInvalid",
            "Invalid value: 0: spec.backend.timeoutSeconds in body should be greater than or "
            "equal to 1",
        ),
        (
            "<nil>",
            "FieldValueInvalid",
            'Invalid value: "null": some validation rules were not checked because the object was '
            "invalid; correct the existing errors to complete validation",
        ),
    }
    assert status["message"].startswith('Widget.test.rebalancer.dev "bad" is invalid: [spec.')


def test_type_errors_and_lengths(custom: client.CustomObjectsApi) -> None:
    found = causes(
        rejection(custom, widget("bad", size="3", backend={"url": "https://" + "x" * 40}))
    )
    assert found["spec.size"] == (
        "FieldValueTypeInvalid",
        'Invalid value: "string": spec.size in body must be of type integer: "string"',
    )
    assert found["spec.backend.url"] == (
        "FieldValueTooLong",
        "Too long: may not be more than 40 bytes",
    )


def test_int_or_string_and_preserved_and_additional_properties(
    custom: client.CustomObjectsApi,
) -> None:
    created = create(
        custom,
        widget("ok", port="http", extra={"anything": {"goes": [1, 2]}}, labels={"a": "b"}),
    )
    assert created["spec"]["port"] == "http"
    assert created["spec"]["extra"] == {"anything": {"goes": [1, 2]}}
    assert create(custom, widget("num", port=8080))["spec"]["port"] == 8080
    found = causes(rejection(custom, widget("bad", port=True, labels={"a": 1})))
    assert (
        found["spec.port"][1]
        == 'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'
    )
    assert found["spec.labels.a"][0] == "FieldValueTypeInvalid"


def test_defaults_are_applied_on_create_nested_and_in_lists(
    custom: client.CustomObjectsApi,
) -> None:
    created = create(custom, widget("d", ports=[{"name": "a"}, {"name": "b", "port": 9}]))
    spec = created["spec"]
    assert spec["mode"] == "Safe" and spec["replicas"] == 1
    assert spec["backend"]["timeoutSeconds"] == 30
    assert spec["ports"] == [{"name": "a", "port": 80}, {"name": "b", "port": 9}]


def test_defaults_apply_on_update_and_to_objects_stored_before_the_schema_changed(
    api_client: client.ApiClient, custom: client.CustomObjectsApi, crd: dict[str, Any]
) -> None:
    create(custom, widget("old"))
    extensions = client.ApiextensionsV1Api(api_client)
    patch = [
        {
            "op": "add",
            "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/zone",
            "value": {"type": "string", "default": "eu"},
        }
    ]
    extensions.patch_custom_resource_definition(crd["metadata"]["name"], patch)
    assert (
        custom.get_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "old")["spec"]["zone"]
        == "eu"
    )


def test_unknown_fields_by_field_validation(
    api: ApiServerThread, custom: client.CustomObjectsApi
) -> None:
    url = f"{api.url}/apis/{GROUP}/v1/namespaces/default/{PLURAL}"
    strict = requests.post(url + "?fieldValidation=Strict", json=widget("s", bogus=1), timeout=5)
    assert strict.status_code == 400
    assert strict.json()["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: '
        'strict decoding error: unknown field "spec.bogus"'
    )
    warned = requests.post(url + "?fieldValidation=Warn", json=widget("w", bogus=1), timeout=5)
    assert warned.status_code == 201
    assert warned.headers["Warning"] == '299 - "unknown field \\"spec.bogus\\""'
    assert "bogus" not in warned.json()["spec"]
    ignored = requests.post(url + "?fieldValidation=Ignore", json=widget("i", bogus=1), timeout=5)
    assert ignored.status_code == 201 and "Warning" not in ignored.headers
    assert "bogus" not in ignored.json()["spec"]
    patched = requests.patch(
        url + "/w?fieldValidation=Strict",
        data=json.dumps({"spec": {"other": 1}}),
        headers={"Content-Type": "application/merge-patch+json"},
        timeout=5,
    )
    assert patched.status_code == 422
    assert 'strict decoding error: unknown field "spec.other"' in patched.json()["message"]


def test_cel_rules_with_message_expression_field_path_and_reason(
    custom: client.CustomObjectsApi,
) -> None:
    found = causes(rejection(custom, widget("c", replicas=5, limits={"min": 3, "max": 1})))
    assert found == {
        "spec": ("FieldValueInvalid", 'Invalid value: "object": replicas 5 exceed size 3'),
        "spec.limits": ("FieldValueForbidden", "Forbidden: min must not exceed max"),
    }


def test_transition_rules_only_run_on_update(custom: client.CustomObjectsApi) -> None:
    create(custom, widget("t", mode="Fast"))
    with pytest.raises(client.ApiException) as raised:
        custom.patch_namespaced_custom_object(
            GROUP, "v1", "default", PLURAL, "t", {"spec": {"mode": "Safe"}}
        )
    status = json.loads(raised.value.body)
    assert causes(status) == {
        "spec.mode": (
            "FieldValueInvalid",
            'Invalid value: "object": mode can only change while scaled to zero',
        )
    }
    custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", PLURAL, "t", {"spec": {"replicas": 0, "mode": "Safe"}}
    )


def test_status_subresource_splits_spec_and_status_and_generation(
    custom: client.CustomObjectsApi,
) -> None:
    created = create(custom, {**widget("s"), "status": {"phase": "Ignored"}})
    assert "status" not in created
    assert created["metadata"]["generation"] == 1
    status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    after_status = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", PLURAL, "s", status
    )
    assert after_status["status"]["phase"] == "Running"
    assert after_status["metadata"]["generation"] == 1
    sneaky = {"spec": {"size": 9}, "status": {"phase": "Sneaky"}}
    custom.patch_namespaced_custom_object_status(GROUP, "v1", "default", PLURAL, "s", sneaky)
    current = custom.get_namespaced_custom_object_status(GROUP, "v1", "default", PLURAL, "s")
    assert current["spec"]["size"] == 3 and current["status"]["phase"] == "Sneaky"
    main = custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", PLURAL, "s", sneaky | {"status": {"phase": "X"}}
    )
    assert main["spec"]["size"] == 9 and main["status"]["phase"] == "Sneaky"
    assert main["metadata"]["generation"] == 2
    labelled = custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", PLURAL, "s", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 2


def test_status_is_validated_too(custom: client.CustomObjectsApi) -> None:
    create(custom, widget("v"))
    with pytest.raises(client.ApiException) as raised:
        custom.patch_namespaced_custom_object_status(
            GROUP,
            "v1",
            "default",
            PLURAL,
            "v",
            {"status": {"conditions": [{"type": "Ready", "status": "Yes"}]}},
        )
    assert (
        causes(json.loads(raised.value.body))["status.conditions[0].status"][0]
        == "FieldValueNotSupported"
    )


def test_ratcheting_lets_unchanged_invalid_values_through(
    api_client: client.ApiClient, custom: client.CustomObjectsApi, crd: dict[str, Any]
) -> None:
    create(custom, widget("r", size=8))
    path = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/maximum"
    client.ApiextensionsV1Api(api_client).patch_custom_resource_definition(
        crd["metadata"]["name"], [{"op": "replace", "path": path, "value": 5}]
    )
    custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", PLURAL, "r", {"status": {"phase": "ok"}}
    )
    with pytest.raises(client.ApiException):
        custom.patch_namespaced_custom_object(
            GROUP, "v1", "default", PLURAL, "r", {"spec": {"size": 7}}
        )


def test_crd_admission_rejects_broken_definitions(
    api_client: client.ApiClient, crd: dict[str, Any]
) -> None:
    broken = json.loads(json.dumps(crd))
    broken["metadata"] = {"name": "gadgets.test.rebalancer.dev"}
    broken["spec"]["names"] = {"plural": "gizmos", "kind": "Gadget"}
    props = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    props["tags"]["uniqueItems"] = True
    props["size"]["x-kubernetes-validations"] = [{"rule": "self >"}]
    with pytest.raises(client.ApiException) as raised:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(broken)
    fields = set(causes(json.loads(raised.value.body)))
    assert "metadata.name" in fields
    assert any(f.endswith("properties[tags].uniqueItems") for f in fields)
    assert any(f.endswith("properties[size].x-kubernetes-validations[0].rule") for f in fields)


def test_dry_run_create_validates_without_storing(custom: client.CustomObjectsApi) -> None:
    dry = create(custom, widget("dry"), dry_run="All")
    assert dry["spec"]["mode"] == "Safe"
    assert rejection(custom, widget("dry", size=0), dry_run="All")["code"] == 422
    assert custom.list_namespaced_custom_object(GROUP, "v1", "default", PLURAL)["items"] == []
