"""Two handlers writing the status of a new ConsumerGroup, both from its empty snapshot, keep
each other's fields (found by bench/scale.py: the create handler's write wiped status.group).

Against the session's kube-apiserver (`tests/kube_clusters.py`), a namespace per test: the
writers' JSON patches meet the real API server's patch and conflict handling, not a copy of it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.patching import patch_status

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"


def create(kube: KubernetesApi, ns: str, name: str) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": name},
        },
    }
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def status(kube: KubernetesApi, ns: str, name: str) -> dict[str, object]:
    got = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
    return dict(got.get("status") or {})


def test_two_writers_from_an_empty_snapshot_keep_both_fields(kube: KubernetesApi, ns: str) -> None:
    create(kube, ns, "orders")
    # The observer writes first, then the create handler, both from the empty snapshot.
    asyncio.run(patch_status(kube, ns, "orders", {}, {"group": {"members": 2}}))
    asyncio.run(patch_status(kube, ns, "orders", {}, {"observedGeneration": 1}))
    assert status(kube, ns, "orders") == {"group": {"members": 2}, "observedGeneration": 1}


def test_concurrent_first_writes_keep_every_field(kube: KubernetesApi, ns: str) -> None:
    names = [f"group-{index}" for index in range(20)]
    for name in names:
        create(kube, ns, name)

    async def both(name: str) -> None:
        await asyncio.gather(
            patch_status(kube, ns, name, {}, {"group": {"members": 1}}),
            patch_status(kube, ns, name, None, {"conditions": []}),
        )

    async def every() -> None:
        await asyncio.gather(*(both(name) for name in names))

    asyncio.run(every())
    for name in names:
        assert set(status(kube, ns, name)) == {"group", "conditions"}, name


def test_the_first_write_keeps_fields_whose_value_is_null(kube: KubernetesApi, ns: str) -> None:
    # status.learning.lastAppliedTime is null until a recommendation is applied; a merge patch
    # creating /status would have dropped it (null deletes in a merge patch).
    create(kube, ns, "orders")
    learning = {"action": "show", "lastAppliedTime": None}
    asyncio.run(patch_status(kube, ns, "orders", {}, {"learning": learning}))
    assert status(kube, ns, "orders") == {"learning": learning}


def test_a_first_write_from_an_empty_snapshot_is_one_request(
    kube: KubernetesApi, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A JSON patch to a missing /status is refused (422): the first write of every new
    # ConsumerGroup cost three requests (bench/scale.py: 5.7 status PATCHes per new group).
    create(kube, ns, "orders")
    sent: list[str] = []
    patch = kube.custom.patch_namespaced_custom_object_status

    def counted(*args: Any, **kwargs: Any) -> Any:
        sent.append(str(kwargs.get("_content_type")))
        return patch(*args, **kwargs)

    monkeypatch.setattr(kube.custom, "patch_namespaced_custom_object_status", counted)
    asyncio.run(patch_status(kube, ns, "orders", {}, {"group": {"members": 2}}))
    asyncio.run(patch_status(kube, ns, "orders", None, {"observedGeneration": 1}))
    assert len(sent) == 2, sent
    assert status(kube, ns, "orders") == {
        "group": {"members": 2},
        "observedGeneration": 1,
    }
    # Written from a snapshot that has a status, a field is replaced whole, as before.
    current = status(kube, ns, "orders")
    asyncio.run(patch_status(kube, ns, "orders", current, {"group": {"state": "Empty"}}))
    assert status(kube, ns, "orders")["group"] == {"state": "Empty"}
