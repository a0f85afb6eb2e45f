"""Events posted and awaited (clients/events.py), on the real control plane: in the API when
the call returns, as kopf would have written them, and handed to kopf's queue when refused."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kopf
import pytest

from rebalancer.clients.events import MAX_MESSAGE_LENGTH, post_event, shortened
from rebalancer.clients.kubernetes_api import KubernetesApi


def config_map(kube: KubernetesApi, namespace: str, name: str) -> kopf.Body:
    made = kube.core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    return body_of(made.metadata.name, namespace, made.metadata.uid)


def body_of(name: str, namespace: str, uid: str) -> kopf.Body:
    metadata = {"name": name, "namespace": namespace, "uid": uid}
    return kopf.Body(
        cast(kopf.RawBody, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    )


def events_about(kube: KubernetesApi, namespace: str, uid: str) -> list[Any]:
    found = kube.core.list_namespaced_event(namespace).items
    return [event for event in found if event.involved_object.uid == uid]


def test_the_event_is_in_the_api_when_the_post_returns(kube: KubernetesApi, ns: str) -> None:
    body = config_map(kube, ns, "posted")
    message = "rolling-update batch 2 of 3: gathering its pods"
    asyncio.run(post_event(kube, body, warning=False, reason="BatchOpening", message=message))
    asyncio.run(post_event(kube, body, warning=True, reason="RolloutFailed", message="late"))
    found = events_about(kube, ns, body.metadata.uid)
    by_reason = {event.reason: event for event in found}
    assert set(by_reason) == {"BatchOpening", "RolloutFailed"}, found
    opening = by_reason["BatchOpening"]
    assert (opening.type, opening.message) == ("Normal", message)
    assert opening.involved_object.kind == "ConfigMap" and opening.involved_object.name == "posted"
    assert opening.source.component == "kopf" and opening.metadata.name.startswith("kopf-event-")
    assert by_reason["RolloutFailed"].type == "Warning"


def test_a_refused_event_goes_to_kopfs_queue(
    kube: KubernetesApi, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = config_map(kube, ns, "refused")
    queued: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda _b, reason, message: queued.append((reason, message)))
    gone = body_of("refused", "no-such-namespace", str(body.metadata.uid))
    asyncio.run(post_event(kube, gone, warning=True, reason="RolloutFailed", message="why"))
    assert queued == [("RolloutFailed", "why")]


def test_a_long_message_keeps_its_start_and_end() -> None:
    message = "a" * 900 + "b" * 900
    short = shortened(message)
    assert len(short) <= MAX_MESSAGE_LENGTH
    assert short.startswith("a" * 500) and short.endswith("b" * 500) and "..." in short
    assert shortened("short") == "short"
