"""Two handlers writing the status of a new ConsumerGroup, both from its empty snapshot, keep
each other's fields (found by bench/scale.py: the create handler's write wiped status.group)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from rebalancer.clients.kubernetes_api import KubernetesApi, connect
from rebalancer.clients.patching import patch_status
from rebalancer.lab.apiserver import ApiServerThread
from rebalancer.lab.manifests import crds

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[KubernetesApi]:
    with ApiServerThread(host="127.0.0.1", port=0) as server:
        api = connect(server.write_kubeconfig(tmp_path / "kubeconfig"))
        extensions = client.ApiextensionsV1Api(api.api_client)
        for crd in crds():
            extensions.create_custom_resource_definition(crd)
        try:
            yield api
        finally:
            api.close()


def create(kube: KubernetesApi, name: str) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": name},
        },
    }
    for attempt in range(50):
        try:
            kube.custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
            return
        except client.ApiException as error:
            # The CRD is served a moment after it is created.
            if error.status != 404 or attempt == 49:
                raise
            time.sleep(0.1)


def status(kube: KubernetesApi, name: str) -> dict[str, object]:
    got = kube.custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    return dict(got.get("status") or {})


def test_two_writers_from_an_empty_snapshot_keep_both_fields(kube: KubernetesApi) -> None:
    create(kube, "orders")
    # The observer writes first, then the create handler, both from the empty snapshot.
    asyncio.run(patch_status(kube, "default", "orders", {}, {"group": {"members": 2}}))
    asyncio.run(patch_status(kube, "default", "orders", {}, {"observedGeneration": 1}))
    assert status(kube, "orders") == {"group": {"members": 2}, "observedGeneration": 1}


def test_concurrent_first_writes_keep_every_field(kube: KubernetesApi) -> None:
    names = [f"group-{index}" for index in range(20)]
    for name in names:
        create(kube, name)

    async def both(name: str) -> None:
        await asyncio.gather(
            patch_status(kube, "default", name, {}, {"group": {"members": 1}}),
            patch_status(kube, "default", name, None, {"conditions": []}),
        )

    async def every() -> None:
        await asyncio.gather(*(both(name) for name in names))

    asyncio.run(every())
    for name in names:
        assert set(status(kube, name)) == {"group", "conditions"}, name


def test_the_first_write_keeps_fields_whose_value_is_null(kube: KubernetesApi) -> None:
    # status.learning.lastAppliedTime is null until a recommendation is applied; a merge patch
    # creating /status would have dropped it (null deletes in a merge patch).
    create(kube, "orders")
    learning = {"action": "show", "lastAppliedTime": None}
    asyncio.run(patch_status(kube, "default", "orders", {}, {"learning": learning}))
    assert status(kube, "orders") == {"learning": learning}
