"""A pooled admin client renewed for all its users at once, after it stopped getting answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.clients.kafka_admin import AdminPool


class FakeGateway:
    def __init__(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_renewal_replaces_the_shared_client_once() -> None:
    made: list[FakeGateway] = []

    def factory(config: Mapping[str, str]) -> Any:
        made.append(FakeGateway(config))
        return made[-1]

    pool = AdminPool(factory)
    config = {"bootstrap.servers": "k:9092"}
    first = pool.acquire("k", config)
    assert pool.acquire("k", config) is first
    # Both users of the wedged client ask; the second gets the client the first made.
    fresh = pool.renew("k", first, config)
    assert fresh is not first and first.closed and not fresh.closed
    assert pool.renew("k", first, config) is fresh
    assert len(made) == 2 and pool.users("k") == 2
    assert pool.acquire("k", config) is fresh
    for _ in range(3):
        pool.release("k")
    assert fresh.closed and pool.users("k") == 0
