"""Watch streams: replay by resourceVersion, no lost events, 410, bookmarks, selectors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from kubernetes import client, watch

from rebalancer.lab.apiserver import ApiServerThread

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def stream(
    api: ApiServerThread, query: str, path: str = CONFIGMAPS, timeout: float = 5
) -> Iterator[dict[str, Any]]:
    response = requests.get(f"{api.url}{path}?{query}", stream=True, timeout=timeout)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers.get("Transfer-Encoding") == "chunked"
    for line in response.iter_lines():
        if line:
            yield json.loads(line)


def events(
    api: ApiServerThread, query: str, count: int, path: str = CONFIGMAPS
) -> list[tuple[str, str]]:
    found = []
    for event in stream(api, query, path):
        found.append((event["type"], event["object"]["metadata"].get("name", "")))
        if len(found) == count:
            break
    return found


def cm(core: client.CoreV1Api, name: str, **labels: str) -> str:
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": name, "labels": labels}}
    )
    return str(created.metadata.resource_version)


def test_no_event_is_lost_between_list_and_watch(
    core: client.CoreV1Api, api: ApiServerThread
) -> None:
    cm(core, "before")
    listed = core.list_namespaced_config_map("default")
    cm(core, "between")  # happens after the list, before the watch starts
    core.delete_namespaced_config_map("before", "default")
    seen = events(api, f"watch=true&resourceVersion={listed.metadata.resource_version}", 2)
    assert seen == [("ADDED", "between"), ("DELETED", "before")]


def test_python_watch_without_resource_version_starts_with_the_state(
    core: client.CoreV1Api,
) -> None:
    cm(core, "a")
    w = watch.Watch()
    seen = []
    threading.Timer(0.3, lambda: cm(core, "b")).start()
    for event in w.stream(core.list_namespaced_config_map, "default", timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_param_1_and_modified_and_deleted_versions(
    core: client.CoreV1Api, api: ApiServerThread
) -> None:
    rv = cm(core, "x")
    core.patch_namespaced_config_map("x", "default", {"data": {"k": "v"}})
    core.delete_namespaced_config_map("x", "default")
    found = []
    for event in stream(api, f"watch=1&resourceVersion={rv}"):
        found.append(event)
        if len(found) == 2:
            break
    assert [e["type"] for e in found] == ["MODIFIED", "DELETED"]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in found]
    assert int(rv) < versions[0] < versions[1]


def test_too_old_resource_version_is_a_410_error_event(core: client.CoreV1Api) -> None:
    with ApiServerThread(history_limit=3) as small:
        url = f"{small.url}{CONFIGMAPS}"
        first = requests.post(url, json={"metadata": {"name": "c0"}}, timeout=5).json()
        for i in range(1, 6):
            requests.post(url, json={"metadata": {"name": f"c{i}"}}, timeout=5)
        rv = first["metadata"]["resourceVersion"]
        error = next(stream(small, f"watch=true&resourceVersion={rv}"))
        assert error["type"] == "ERROR"
        assert error["object"]["code"] == 410 and error["object"]["reason"] == "Expired"
        assert error["object"]["message"].startswith(f"too old resource version: {rv} (")
        config = client.Configuration()
        config.host = small.url
        with client.ApiClient(config) as api_client, pytest.raises(client.ApiException) as raised:
            for _ in watch.Watch().stream(
                client.CoreV1Api(api_client).list_namespaced_config_map,
                "default",
                resource_version=rv,
                timeout_seconds=2,
            ):
                pass
        assert raised.value.status == 410


def test_bookmarks_carry_the_current_version(core: client.CoreV1Api, api: ApiServerThread) -> None:
    rv = cm(core, "b")
    latest = cm(core, "c")
    found = []
    for event in stream(api, f"watch=true&allowWatchBookmarks=true&resourceVersion={rv}"):
        found.append(event)
        if event["type"] == "BOOKMARK":
            break
    assert [e["type"] for e in found] == ["ADDED", "BOOKMARK"]
    bookmark = found[-1]["object"]
    assert bookmark["kind"] == "ConfigMap" and bookmark["apiVersion"] == "v1"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(latest)


def test_timeout_seconds_ends_the_stream(api: ApiServerThread) -> None:
    started = time.monotonic()
    assert list(stream(api, "watch=true&timeoutSeconds=1&resourceVersion=1")) == []
    assert 0.9 < time.monotonic() - started < 3


def test_selectors_turn_changes_into_added_and_deleted(
    core: client.CoreV1Api, api: ApiServerThread
) -> None:
    rv = cm(core, "sel", app="x")
    core.patch_namespaced_config_map("sel", "default", {"metadata": {"labels": {"app": "y"}}})
    core.patch_namespaced_config_map("sel", "default", {"metadata": {"labels": {"app": "x"}}})
    core.patch_namespaced_config_map("sel", "default", {"data": {"k": "v"}})
    cm(core, "other", app="y")
    seen = events(api, f"watch=true&labelSelector=app%3Dx&resourceVersion={rv}", 3)
    assert seen == [("DELETED", "sel"), ("ADDED", "sel"), ("MODIFIED", "sel")]
    by_name = events(api, f"watch=true&fieldSelector=metadata.name%3Dother&resourceVersion={rv}", 1)
    assert by_name == [("ADDED", "other")]


def test_send_initial_events_ends_with_an_annotated_bookmark(
    core: client.CoreV1Api, api: ApiServerThread
) -> None:
    cm(core, "i1")
    cm(core, "i2")
    query = (
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true"
    )
    found = []
    for event in stream(api, query):
        found.append(event)
        if event["type"] == "BOOKMARK":
            break
    assert [e["type"] for e in found] == ["ADDED", "ADDED", "BOOKMARK"]
    assert found[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_across_namespaces_and_cluster_scoped(
    core: client.CoreV1Api, api: ApiServerThread
) -> None:
    rv = cm(core, "here")
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "there"}})
    assert events(api, f"watch=true&resourceVersion={rv}", 1, "/api/v1/configmaps") == [
        ("ADDED", "there")
    ]
    assert events(api, f"watch=true&resourceVersion={rv}", 1, "/api/v1/namespaces") == [
        ("ADDED", "team")
    ]


def test_abandoned_watches_release_their_subscriptions(api: ApiServerThread) -> None:
    store = api.server.cluster.store
    for _ in range(3):
        response = requests.get(f"{api.url}{CONFIGMAPS}?watch=true", stream=True, timeout=5)
        assert response.status_code == 200
        response.close()
    deadline = time.monotonic() + 5
    while store.subscriptions() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.subscriptions() == []
