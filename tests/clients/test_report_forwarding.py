"""With sharding, a member report accepted by one replica is passed on to every other live
replica (the group may be served by any), with its bearer token, and no further. Two real
report endpoints on loopback; the peers are what the member Leases of the last round said."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import aiohttp
from kubernetes import client
from tests.clients.test_unclaimed_reports import _report
from tests.polling import eventually_async

from rebalancer.clients.forwarding import ReportForwarder
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.receiving import ReportHub, ReportServer
from rebalancer.clients.sharding import REPORTS_URL_ANNOTATION, ShardHolder
from rebalancer.operator_settings import ShardingSettings

TOKEN = "s3cret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def member(identity: str, url: str, renewed_ago: float = 1.0) -> dict[str, Any]:
    renewed = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - renewed_ago))
    return {
        "metadata": {"name": f"r-member-{identity}", "annotations": {REPORTS_URL_ANNOTATION: url}},
        "spec": {"holderIdentity": identity, "renewTime": renewed, "leaseDurationSeconds": 10},
    }


def holder(identity: str, members: dict[str, dict[str, Any]]) -> ShardHolder:
    api = client.ApiClient()  # never called: the members are given as a round read them
    kube = KubernetesApi(
        core=client.CoreV1Api(api),
        apps=client.AppsV1Api(api),
        custom=client.CustomObjectsApi(api),
        api_client=api,
    )
    settings = ShardingSettings(shards=2, namespace="ops", prefix="r", identity=identity)
    one = ShardHolder(kube, settings)
    one._members = members
    return one


async def test_a_report_reaches_the_live_peers_once() -> None:
    ports = [free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    members = {
        "a": member("a", urls[0]),
        "b": member("b", urls[1]),
        "c": member("c", urls[2], renewed_ago=30.0),  # expired: not passed to
    }
    hubs = [ReportHub() for _ in range(3)]
    forwarders = [ReportForwarder(holder(name, members)) for name in "abc"]
    servers = [
        ReportServer(hub, "127.0.0.1", port, TOKEN) for hub, port in zip(hubs, ports, strict=True)
    ]
    for hub, forwarder in zip(hubs, forwarders, strict=True):
        hub.forward = forwarder.pass_on
    for server in servers:
        await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            sent = await session.post(
                f"{urls[0]}/v1/reports",
                json=_report("orders"),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert sent.status == 202
        await eventually_async(lambda: hubs[1].accepted == 1, "the live peer has the report", 5)
        await asyncio.sleep(0.5)  # room for a pass back or on, which must not come
        assert [hub.accepted for hub in hubs] == [1, 1, 0]
        assert set(hubs[1].book("orders").latest) == {"orders-0"}
        assert hubs[1].rejected == 0  # the token went along
    finally:
        for server in servers:
            await server.stop()
        for forwarder in forwarders:
            await forwarder.close()
