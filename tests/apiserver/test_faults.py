"""Fault injection: canned errors by method and path, dropped watches, the admin endpoint."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from kubernetes import client

from rebalancer.lab.apiserver import ApiServerThread

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def test_injected_errors_hit_matching_requests_the_given_number_of_times(
    api: ApiServerThread, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    api.faults.inject(method="PATCH", path_regex=r"/configmaps/c$", status=409, times=2)
    for _ in range(2):
        with pytest.raises(client.ApiException) as raised:
            core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
        body = json.loads(raised.value.body)
        assert (
            raised.value.status == 409 and body["kind"] == "Status" and body["reason"] == "Conflict"
        )
    core.read_namespaced_config_map("c", "default")  # GETs are not matched
    assert core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}}).data == {"a": "1"}
    assert api.faults.active() == []


def test_throttling_and_server_errors(api: ApiServerThread) -> None:
    api.faults.inject(status=429, path_regex="configmaps", times=1)
    throttled = requests.get(api.url + CONFIGMAPS, timeout=5)
    assert throttled.status_code == 429 and throttled.headers["Retry-After"] == "1"
    assert throttled.json()["reason"] == "TooManyRequests"
    assert throttled.json()["details"]["retryAfterSeconds"] == 1
    api.faults.inject(status=500, times=None, message="etcd is sad")
    assert requests.get(api.url + "/version", timeout=5).json()["message"] == "etcd is sad"
    assert requests.get(api.url + "/api", timeout=5).status_code == 500
    api.faults.clear()
    assert requests.get(api.url + "/api", timeout=5).status_code == 200


def test_admin_endpoint_for_other_processes(api: ApiServerThread) -> None:
    spec = {"method": "POST", "path_regex": "configmaps", "status": 500, "times": 1}
    assert requests.post(api.url + "/_emulator/faults", json=spec, timeout=5).status_code == 201
    assert [f["status"] for f in requests.get(api.url + "/_emulator/faults", timeout=5).json()] == [
        500
    ]
    failed = requests.post(api.url + CONFIGMAPS, json={"metadata": {"name": "x"}}, timeout=5)
    assert failed.status_code == 500 and failed.json()["reason"] == "InternalError"
    assert (
        requests.post(api.url + CONFIGMAPS, json={"metadata": {"name": "x"}}, timeout=5).status_code
        == 201
    )
    requests.post(api.url + "/_emulator/faults", json={"status": 503, "times": None}, timeout=5)
    requests.delete(api.url + "/_emulator/faults", timeout=5)
    assert requests.get(api.url + "/_emulator/faults", timeout=5).json() == []


@pytest.mark.parametrize("how", ["python", "http"])
def test_dropping_watches_ends_open_streams(api: ApiServerThread, how: str) -> None:
    ended = threading.Event()

    def follow() -> None:
        with requests.get(
            api.url + CONFIGMAPS + "?watch=true", stream=True, timeout=10
        ) as response:
            for _ in response.iter_lines():
                pass
        ended.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert not ended.is_set()
    if how == "python":
        api.faults.drop_watches()
    else:
        assert requests.post(api.url + "/_emulator/drop-watches", timeout=5).json() == {
            "dropped": 1
        }
    assert ended.wait(5)
