"""clients.enforcing: the operator's POST to a sidecar, and the topic watch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from test_sidecar_server import TOKEN, FakeEngine

from rebalancer.clients.enforcing import (
    EnforceRequestFailed,
    SidecarClient,
    TopicWatch,
    sidecar_addresses,
    sidecar_url,
)
from rebalancer.sidecar.limits import RateLimiter
from rebalancer.sidecar.server import TokenFile, build_app


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("10.0.0.7", "http://10.0.0.7:8091"),
        ("fd00::7", "http://[fd00::7]:8091"),
        ("orders-sidecar.shop.svc", "http://orders-sidecar.shop.svc:8091"),
    ],
)
def test_sidecar_url(host: str, url: str) -> None:
    assert sidecar_url(host) == url


async def test_client_gets_answers_and_clear_refusals(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = TestServer(build_app(FakeEngine(), TokenFile(token_file), RateLimiter(60, 2)))
    await server.start_server()
    client = SidecarClient(timeout=5)
    base = str(server.make_url("")).rstrip("/")
    try:
        result = await client.enforce(
            base, TOKEN, group_id="orders", request_id="token-1", reason="on-demand"
        )
        assert result.status == "enforced" and result.final and result.generation == 4
        with pytest.raises(EnforceRequestFailed) as refused:
            await client.enforce(base, "nope", group_id="orders", request_id="x", reason="")
        assert refused.value.status == 401 and not refused.value.retriable
        with pytest.raises(EnforceRequestFailed) as other:
            await client.enforce(base, TOKEN, group_id="payments", request_id="x", reason="")
        assert other.value.status == 409 and "payments" in str(other.value)
        with pytest.raises(EnforceRequestFailed) as limited:
            await client.enforce(base, TOKEN, group_id="orders", request_id="y", reason="")
        assert limited.value.status == 429 and limited.value.retriable
        assert limited.value.retry_after is not None
    finally:
        await client.close()
        await server.close()


async def test_client_reports_an_unreachable_sidecar() -> None:
    client = SidecarClient(timeout=1)
    try:
        with pytest.raises(EnforceRequestFailed) as failed:
            await client.enforce(
                "http://127.0.0.1:9", TOKEN, group_id="g", request_id="r", reason=""
            )
        assert failed.value.status == 0 and failed.value.retriable
    finally:
        await client.close()


class Done(Exception):
    """Ends the watch's endless loop after its first hand-over."""


class FakeGateway:
    def __init__(self) -> None:
        self.topics: dict[str, int] = {"orders.eu": 3, "payments": 1}

    async def list_topics(self) -> dict[str, int]:
        return dict(self.topics)


async def test_topic_watch_reports_each_new_matching_topic_once() -> None:
    gateway = FakeGateway()
    watch = TopicWatch(gateway, r"orders\..*")  # type: ignore[arg-type]
    assert await watch.poll() == ()  # the baseline
    gateway.topics.update({"orders.us": 3, "refunds": 1, "__rebalancer.orders": 1})
    assert await watch.poll() == ("orders.us",)
    assert await watch.poll() == ()
    seen: list[Any] = []
    gateway.topics["orders.jp"] = 1

    async def on_new(topics: tuple[str, ...]) -> None:
        seen.append(topics)
        raise Done

    with pytest.raises(Done):
        await watch.watch(0.01, on_new)
    assert seen == [("orders.jp",)]


class _Obj:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class FakeApps:
    def read_namespaced_stateful_set(self, name: str, namespace: str) -> _Obj:
        return _Obj(spec=_Obj(selector=_Obj(match_labels={"app": name})))


class FakeCore:
    def __init__(self) -> None:
        self.selectors: list[str] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> _Obj:
        self.selectors.append(label_selector)

        def pod(name: str, ip: str | None, ready: str, deleting: bool = False) -> _Obj:
            return _Obj(
                metadata=_Obj(name=name, deletion_timestamp="now" if deleting else None),
                status=_Obj(pod_ip=ip, conditions=[_Obj(type="Ready", status=ready)]),
            )

        return _Obj(
            items=[
                pod("orders-1", "10.0.0.2", "True"),
                pod("orders-0", "10.0.0.1", "True"),
                pod("orders-2", "10.0.0.3", "False"),
                pod("orders-3", None, "True"),
                pod("orders-4", "10.0.0.5", "True", deleting=True),
            ]
        )


async def test_sidecar_addresses_are_ready_pods_by_name() -> None:
    core = FakeCore()
    api = _Obj(apps=FakeApps(), core=core)
    addresses = await sidecar_addresses(api, "shop", "StatefulSet", "orders")  # type: ignore[arg-type]
    assert addresses == ["10.0.0.1", "10.0.0.2"]
    assert core.selectors == ["app=orders"]
