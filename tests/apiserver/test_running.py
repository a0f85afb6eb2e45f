"""The public entry points: ApiServer in the caller's loop, serve(), the kubeconfig file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes import client, config

from rebalancer.lab.apiserver import ApiServer, ApiServerThread, serve
from rebalancer.lab.apiserver.jsonpath import find


async def test_api_server_runs_in_the_callers_loop(tmp_path: Path) -> None:
    server = ApiServer(host="127.0.0.1", port=0)
    await server.start()
    try:
        assert server.url.startswith("http://127.0.0.1:") and not server.url.endswith(":0")
        async with aiohttp.ClientSession() as session:
            created = await session.post(
                f"{server.url}/api/v1/namespaces/default/configmaps",
                json={"metadata": {"name": "a"}},
                headers={"Authorization": "Bearer ignored"},
            )
            assert created.status == 201
            async with session.get(f"{server.url}/api/v1/namespaces/default/configmaps/a") as got:
                assert (await got.json())["metadata"]["name"] == "a"
    finally:
        await server.stop()


async def test_serve_writes_a_kubeconfig_and_runs_until_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    task = asyncio.create_task(serve("127.0.0.1", 0, path))
    for _ in range(100):
        if path.exists():
            break
        await asyncio.sleep(0.05)
    server = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"]
    async with aiohttp.ClientSession() as session, session.get(server + "/version") as answer:
        assert answer.status == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_kubeconfig_loads_in_the_official_client(tmp_path: Path) -> None:
    with ApiServerThread() as api:
        path = api.write_kubeconfig(tmp_path / "nested" / "kubeconfig", namespace="team")
        document = yaml.safe_load(path.read_text())
        assert document["current-context"] == "rebalancer-lab"
        assert document["contexts"][0]["context"]["namespace"] == "team"
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        with client.ApiClient(configuration) as api_client:
            names = [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items]
        assert "default" in names


def test_events_expire_after_their_ttl() -> None:
    with ApiServerThread(event_ttl=0.2) as api:
        configuration = client.Configuration()
        configuration.host = api.url
        with client.ApiClient(configuration) as api_client:
            core = client.CoreV1Api(api_client)
            event = {
                "metadata": {"generateName": "e-"},
                "involvedObject": {"kind": "Pod", "name": "p"},
            }
            core.create_namespaced_event("default", event)
            asyncio.run(asyncio.sleep(0.3))
            core.create_namespaced_event("default", event)
            assert len(core.list_namespaced_event("default").items) == 1


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".spec.size", [3]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type!='Ready')].type", ["Synced"]),
        (".status.conditions[*].type", ["Ready", "Synced"]),
        (".status.conditions[-1].reason", ["Later"]),
        ("{.metadata.labels['app.kubernetes.io/name']}", ["w"]),
        (".status.conditions[?(@.reason)].type", ["Synced"]),
        ("..reason", ["Later"]),
        (".spec.missing", []),
    ],
)
def test_printer_column_jsonpath(path: str, expected: list[object]) -> None:
    obj = {
        "metadata": {"labels": {"app.kubernetes.io/name": "w"}},
        "spec": {"size": 3},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False", "reason": "Later"},
            ]
        },
    }
    assert find(obj, path) == expected
