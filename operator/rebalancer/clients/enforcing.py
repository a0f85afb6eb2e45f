"""The operator's side of enforced rebalances: ask a sidecar, and watch for new topics.

A request goes to one sidecar of the group (a pod IP or a Service: any sidecar will do, the
request reaches the group's actor through the control topic). The request id comes from
planning.triggers and is stable, so retrying a POST after a timeout never enforces twice.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import aiohttp

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.triggers import new_matching_topics
from rebalancer.structs.errors import RebalancerError

logger = logging.getLogger(__name__)

DEFAULT_SIDECAR_PORT = 8091
FINAL_STATUSES = frozenset({"enforced", "failed", "expired"})
# The sidecar's answer when the group's protocol is one it cannot join (docs/enforcing.md).
UNSUPPORTED_STATUS = 422


class EnforceRequestFailed(RebalancerError):
    """The sidecar refused the request or could not be reached; `status` is the HTTP status
    (0 when there was no answer) and the message the sidecar's own words."""

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        # No answer, too many requests, or a sidecar that is starting or behind a proxy.
        self.retriable = status in (0, 429, 502, 503, 504)


@dataclass(frozen=True)
class EnforceResult:
    request_id: str
    status: str
    duplicate: bool
    actor: str | None
    message: str
    from_generation: int | None
    generation: int | None
    will_retry: bool

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES or (
            self.status == "in-progress" and not self.will_retry
        )


def sidecar_url(host: str, port: int = DEFAULT_SIDECAR_PORT) -> str:
    """The sidecar's base URL from a pod IP (v4 or v6) or a Service's DNS name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}"
    return f"http://[{address}]:{port}" if address.version == 6 else f"http://{address}:{port}"


def _result(body: dict[str, object]) -> EnforceResult:
    def integer(key: str) -> int | None:
        value = body.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return EnforceResult(
        request_id=str(body.get("requestId", "")),
        status=str(body.get("status", "")),
        duplicate=bool(body.get("duplicate")),
        actor=str(body["actor"]) if body.get("actor") else None,
        message=str(body.get("message") or ""),
        from_generation=integer("fromGeneration"),
        generation=integer("generation"),
        will_retry=bool(body.get("willRetry")),
    )


class SidecarClient:
    """POSTs enforcement requests; one aiohttp session for all sidecars of all groups."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Sidecars are reached inside the cluster; a proxy meant for the outside would only
            # get in the way.
            self._session = aiohttp.ClientSession(trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def enforce(
        self,
        base_url: str,
        token: str,
        *,
        group_id: str,
        request_id: str,
        reason: str,
        retry_when_stable: bool = False,
        wait_seconds: float = 5.0,
    ) -> EnforceResult:
        body = {
            "groupId": group_id,
            "requestId": request_id,
            "reason": reason[:512],
            "retryWhenStable": retry_when_stable,
            "waitSeconds": wait_seconds,
        }
        return await self._call("POST", f"{base_url}/v1/enforce", token, body, wait_seconds)

    async def status(self, base_url: str, token: str, request_id: str) -> EnforceResult:
        return await self._call("GET", f"{base_url}/v1/enforce/{request_id}", token, None, 0.0)

    async def _call(
        self, method: str, url: str, token: str, body: dict[str, object] | None, wait: float
    ) -> EnforceResult:
        session = await self._open()
        timeout = aiohttp.ClientTimeout(total=self.timeout + wait)
        try:
            async with session.request(
                method,
                url,
                json=body,
                headers={"Authorization": f"Bearer {token}"},
                timeout=timeout,
            ) as response:
                try:
                    answer = await response.json(content_type=None)
                except ValueError:
                    answer = {"error": (await response.text())[:300]}
                if response.status >= 400:
                    retry_after = response.headers.get("Retry-After")
                    message = answer.get("error") if isinstance(answer, dict) else None
                    raise EnforceRequestFailed(
                        f"the sidecar at {url} answered {response.status}: "
                        f"{message or response.reason}",
                        response.status,
                        float(retry_after) if retry_after and retry_after.isdigit() else None,
                    )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise EnforceRequestFailed(
                f"the sidecar at {url} did not answer: {error or type(error).__name__}"
            ) from None
        if not isinstance(answer, dict):
            raise EnforceRequestFailed(f"the sidecar at {url} answered with no JSON object")
        return _result(answer)


async def sidecar_addresses(api: KubernetesApi, namespace: str, kind: str, name: str) -> list[str]:
    """Pod IPs of the workload's ready pods, by pod name: where its sidecars listen.

    Any one will do (the request reaches the group's actor through the control topic); the
    caller tries them in order and stops at the first answer.
    """
    reader = (
        api.apps.read_namespaced_stateful_set
        if kind == "StatefulSet"
        else api.apps.read_namespaced_deployment
    )
    workload = await asyncio.to_thread(reader, name, namespace)
    labels = (workload.spec.selector.match_labels or {}) if workload.spec.selector else {}
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    pods = await asyncio.to_thread(api.core.list_namespaced_pod, namespace, label_selector=selector)
    ready: list[tuple[str, str]] = []
    for pod in pods.items:
        conditions = (pod.status.conditions or []) if pod.status else []
        is_ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        if is_ready and pod.status.pod_ip and pod.metadata.deletion_timestamp is None:
            ready.append((pod.metadata.name, pod.status.pod_ip))
    return [address for _, address in sorted(ready)]


class TopicWatch:
    """Lists topics through the admin gateway and tells which matching ones are new.

    The first look is the baseline: topics there when the watch starts are not new.
    """

    def __init__(self, gateway: AdminGateway, pattern: str) -> None:
        self.gateway = gateway
        self.pattern = pattern
        self.known: frozenset[str] | None = None

    def matching(self, topics: Iterable[str]) -> frozenset[str]:
        return frozenset(new_matching_topics(self.pattern, topics, ()))

    async def poll(self) -> tuple[str, ...]:
        topics = await self.gateway.list_topics()
        matching = self.matching(topics)
        if self.known is None:
            self.known = matching
            return ()
        new = tuple(sorted(matching - self.known))
        self.known = matching
        return new

    async def watch(
        self, every: float, on_new: Callable[[tuple[str, ...]], Awaitable[None]]
    ) -> None:
        """Poll forever, handing each non-empty set of new topics to `on_new`: for callers
        that want a loop rather than a timer of their own."""
        while True:
            new = await self.poll()
            if new:
                await on_new(new)
            await asyncio.sleep(every)
