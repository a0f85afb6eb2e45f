"""A config change the broker accepted is read back until it shows: a broker's metadata takes
the controller's committed change a moment later, and a describe at once may read the old
value (seen on Apache Kafka 4.4 in CI)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from rebalancer.clients import broker_configs
from rebalancer.structs.broker_configs import ApplyState

DELAY = "streams.initial.rebalance.delay.ms"


class LaggingAdmin:
    """Alters are accepted; the first `stale` describes read the old value."""

    def __init__(self, stale: int) -> None:
        self.stale = stale
        self.describes = 0

    def incremental_alter_configs(self, resources: Any, **_: Any) -> dict[Any, Future[Any]]:
        return {resources[0]: _done(None)}

    def describe_configs(self, resources: Any, **_: Any) -> dict[Any, Future[Any]]:
        self.describes += 1
        value = "3000" if self.describes <= self.stale else "6000"
        return {resources[0]: _done({DELAY: SimpleNamespace(value=value)})}


def _done(result: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


class Gateway:
    request_timeout = 5.0

    def __init__(self, admin: LaggingAdmin) -> None:
        self.admin = admin

    async def call(
        self, operation: str, request: Callable[[Any], Future[Any]], *, acl: str | None = None
    ) -> Any:
        return request(self.admin).result()


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_configs, "READ_BACK_PAUSE_SECONDS", 0.0)


async def test_a_change_read_back_stale_at_first_is_applied_once_it_shows() -> None:
    admin = LaggingAdmin(stale=2)
    outcome = await broker_configs.alter_group_configs(
        Gateway(admin),  # type: ignore[arg-type]
        "orders",
        {DELAY: "6000"},
    )
    assert outcome.state is ApplyState.APPLIED, outcome.message
    assert admin.describes == 3


async def test_a_change_that_never_shows_is_failed_with_what_the_broker_reads() -> None:
    admin = LaggingAdmin(stale=1000)
    outcome = await broker_configs.alter_group_configs(
        Gateway(admin),  # type: ignore[arg-type]
        "orders",
        {DELAY: "6000"},
    )
    assert outcome.state is ApplyState.FAILED
    assert "'3000', not '6000'" in outcome.message
    assert admin.describes == broker_configs.READ_BACK_ATTEMPTS
