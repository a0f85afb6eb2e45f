"""The gate's wait against a stand-in for the Kubernetes API: the verdicts it returns, and a
refusal that lasts until the end named in the outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from rebalancer.gate.verdicts import GateLimits, Verdict
from rebalancer.gate.waiting import ApiEndpoint, wait_at_gate


@pytest.fixture
async def api() -> AsyncIterator[tuple[ApiEndpoint, dict[str, Any]]]:
    """An API answering a list of the pod with `answer["status"]` and `answer["annotations"]`."""
    answer: dict[str, Any] = {"status": 200, "annotations": {}, "lists": 0}

    async def pods(request: web.Request) -> web.Response:
        answer["lists"] += 1
        if answer["status"] != 200:
            return web.Response(status=answer["status"], text='forbidden: User "gate" cannot')
        pod = {"metadata": {"name": "orders-0", "annotations": answer["annotations"]}}
        return web.json_response({"metadata": {"resourceVersion": ""}, "items": [pod]})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/shop/pods", pods)
    server = TestServer(app)
    await server.start_server()
    try:
        yield ApiEndpoint(str(server.make_url("")).rstrip("/")), answer
    finally:
        await server.close()


async def test_an_open_gate_lets_the_pod_go_with_its_annotations(
    api: tuple[ApiEndpoint, dict[str, Any]],
) -> None:
    endpoint, answer = api
    answer["annotations"] = {"rebalancer.dev/gate": "open", "other": "x"}
    outcome = await wait_at_gate(endpoint, "shop", "orders-0", GateLimits(10, 0), lambda _: None)
    assert outcome.verdict is Verdict.OPEN
    assert not outcome.refused and not outcome.gone
    assert outcome.annotations == answer["annotations"]


async def test_a_refusal_until_the_bypass_is_named_in_the_outcome(
    api: tuple[ApiEndpoint, dict[str, Any]],
) -> None:
    endpoint, answer = api
    answer["status"] = 403
    logged: list[str] = []
    outcome = await wait_at_gate(endpoint, "shop", "orders-0", GateLimits(30, 1.0), logged.append)
    assert outcome.verdict is Verdict.BYPASS
    assert outcome.refused
    assert ", refused all along: " in outcome.message
    assert 1.0 <= outcome.waited_s < 5.0
    # Retried with a back-off, and the same refusal logged once.
    assert answer["lists"] >= 2
    assert len([line for line in logged if "retrying" in line]) == 1


async def test_a_pod_that_is_not_there_ends_the_wait(
    api: tuple[ApiEndpoint, dict[str, Any]],
) -> None:
    endpoint, answer = api
    answer["status"] = 404
    outcome = await wait_at_gate(endpoint, "shop", "orders-0", GateLimits(30, 0), lambda _: None)
    assert outcome.verdict is Verdict.TIMEOUT and outcome.gone
