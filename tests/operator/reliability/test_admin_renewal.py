"""A pooled admin client renewed for all its users at once, after it stopped getting answers;
and in the lab, the renewal firing after a broker restart, with observation back at once."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    eventually,
    get_cg,
    statefulset,
)

from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.planning.backoff import backoff_delay
from rebalancer.reconcilers.observing import RENEW_AFTER_FAILURES
from rebalancer.structs.times import parse_rfc3339
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

RENEWED = "reconnected the Kafka admin client for"
RETRYING = re.compile(r"retrying in (\d+)s")
NAME = "renewed"


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


def renewal_times(lab: Lab) -> list[float]:
    """When the operator renewed an admin client, from its log (local time, as logging writes)."""
    assert lab.operator is not None
    lines = lab.operator.log_path.read_text(errors="replace").splitlines()
    return [
        time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000
        for line in lines
        if RENEWED in line
    ]


def renewals(lab: Lab) -> int:
    return len(renewal_times(lab))


def observed_after(lab: Lab, moment: float) -> dict[str, Any] | None:
    """The ConsumerGroup once status.group was written after `moment`, the group whole, Ready,
    and nothing degraded."""
    body = get_cg(lab, NAME)
    group = body.get("status", {}).get("group") or {}
    stamp = group.get("observedAt")
    if not isinstance(stamp, str) or parse_rfc3339(stamp) <= moment:
        return None
    if group.get("members") != 2 or condition(body, "Degraded").get("status") == "True":
        return None
    return body if condition(body, "Ready").get("status") == "True" else None


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_the_admin_client_is_renewed_after_a_broker_restart(lab: Lab) -> None:
    asyncio.run(ensure_topic(lab.bootstrap, NAME, 4))
    apply(lab, statefulset(f"{NAME}-consumer"), consumer_group(NAME, lab.bootstrap))
    for index in (0, 1):
        lab.start_consumer(index, group_id=NAME, prefix=f"{NAME}-consumer")
    eventually(lambda: observed_after(lab, 0), 90, f"{NAME}: 2 members observed")
    before = renewals(lab)
    assert lab.broker is not None
    lab.broker.stop()
    # The backoff is in the message: from the RENEW_AFTER_FAILURES-th unanswered observation on,
    # the next one asks with a new client.
    enough = backoff_delay(RENEW_AFTER_FAILURES)

    def failed_enough() -> dict[str, Any] | None:
        found = condition(get_cg(lab, NAME), "Degraded")
        retry = RETRYING.search(str(found.get("message")))
        unreachable = found.get("reason") == "KafkaUnreachable"
        return found if unreachable and retry and float(retry[1]) >= enough else None

    eventually(failed_enough, 90, f"{RENEW_AFTER_FAILURES} unanswered observations")
    # Memory storage: the broker comes back empty, as after losing its disks.
    lab.broker.start()
    back = time.time()
    asyncio.run(ensure_topic(lab.bootstrap, NAME, 4))
    eventually(lambda: renewals(lab) > before, 60, "the operator to renew its admin client")
    body = eventually(lambda: observed_after(lab, back), 60, f"{NAME} observed again")
    observed_at = parse_rfc3339(body["status"]["group"]["observedAt"])
    renewed = renewal_times(lab)[before:]
    print(
        f"renewals {len(renewed)}, the first {renewed[0] - back:+.1f} s from the restart; "
        f"observed again {observed_at - back:.1f} s after it"
    )
    # The observation that saw the group again was made with a renewed client.
    assert renewed[0] <= observed_at, (renewed, observed_at)
