"""A tiny kopf operator run against the emulator with kopf.testing.KopfRunner."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kopf.testing import KopfRunner
from kubernetes import client
from tests.apiserver.support import GROUP, PLURAL, widget

from rebalancer.lab.apiserver import ApiServerThread

OPERATOR = """
import kopf

@kopf.on.login()
def login(**_):
    return kopf.ConnectionInfo(server={url!r}, insecure=True)

@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.watching.server_timeout = 10
    settings.posting.level = 20

@kopf.on.create("{group}", "v1", "{plural}")
def created(body, spec, patch, **_):
    patch.status["phase"] = "Created"
    patch.status["replicas"] = spec["replicas"]
    patch.status["conditions"] = [{{"type": "Ready", "status": "True", "reason": "Created"}}]
    kopf.info(body, reason="Created", message=f"size {{spec['size']}}")

@kopf.on.update("{group}", "v1", "{plural}", field="spec.size")
def resized(old, new, patch, **_):
    patch.status["phase"] = f"Resized {{old}} to {{new}}"

@kopf.on.delete("{group}", "v1", "{plural}")
def deleted(body, **_):
    kopf.info(body, reason="Deleted", message="bye")
"""


def eventually(check: Callable[[], Any], timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (AssertionError, KeyError, client.ApiException):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            pytest.fail(f"not true after {timeout}s: {check}")
        time.sleep(0.1)


@pytest.fixture
def operator_file(api: ApiServerThread, tmp_path: Path) -> Path:
    path = tmp_path / "operator.py"
    path.write_text(OPERATOR.format(url=api.url, group=GROUP, plural=PLURAL))
    return path


def phase(custom: client.CustomObjectsApi, namespace: str, name: str) -> str:
    obj = custom.get_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, name)
    return str(obj.get("status", {}).get("phase", ""))


@pytest.mark.usefixtures("crd")
def test_kopf_operator_handles_create_update_and_delete(
    operator_file: Path, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    with KopfRunner(
        ["run", "--standalone", "--all-namespaces", str(operator_file)], timeout=60
    ) as runner:
        custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("w1"))
        eventually(lambda: phase(custom, "default", "w1") == "Created")
        obj = custom.get_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "w1")
        assert obj["status"]["conditions"][0]["type"] == "Ready"
        assert obj["metadata"]["generation"] == 1
        events = eventually(
            lambda: (
                core.list_namespaced_event(
                    "default", field_selector="involvedObject.name=w1,involvedObject.kind=Widget"
                ).items
            )
        )
        assert any(e.reason == "Created" and e.message == "size 3" for e in events)

        custom.patch_namespaced_custom_object(
            GROUP, "v1", "default", PLURAL, "w1", {"spec": {"size": 5}}
        )
        eventually(lambda: phase(custom, "default", "w1") == "Resized 3 to 5")

        custom.delete_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "w1")
        eventually(
            lambda: (
                not custom.list_namespaced_custom_object(GROUP, "v1", "default", PLURAL)["items"]
            )
        )
        # kopf posts Events from a queue of its own, so the last one may follow the deletion.
        eventually(
            lambda: "Deleted" in {e.reason for e in core.list_namespaced_event("default").items}
        )
    assert runner.exit_code == 0, runner.output
    assert "Traceback" not in runner.output, runner.output


@pytest.mark.usefixtures("crd")
def test_kopf_operator_limited_to_one_namespace(
    operator_file: Path, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    with KopfRunner(
        ["run", "--standalone", "--namespace=default", str(operator_file)], timeout=60
    ) as runner:
        custom.create_namespaced_custom_object(GROUP, "v1", "other", PLURAL, widget("outside"))
        custom.create_namespaced_custom_object(GROUP, "v1", "default", PLURAL, widget("inside"))
        eventually(lambda: phase(custom, "default", "inside") == "Created")
        assert phase(custom, "other", "outside") == ""
    assert runner.exit_code == 0, runner.output
