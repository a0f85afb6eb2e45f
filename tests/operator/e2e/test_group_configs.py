"""spec.policy.groupConfigs through the whole operator in the lab: the CRD takes the block and
its status, an out-of-bounds value is refused with the field and the fix, a valid one is set
live on the broker and read back with its source, each with its Event."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ResourceType,
)
from tests.operator.e2e.support import (
    apply,
    consumer_group,
    events_for,
    eventually,
    get_cg,
    kubectl,
    lab_context,
)

from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e


def group_configs_status(lab: Lab, name: str) -> dict[str, Any]:
    settings = (get_cg(lab, name).get("status") or {}).get("settings") or {}
    return dict(settings.get("perGroupConfigs") or {})


def with_group_configs(lab: Lab, name: str, group_id: str, configs: dict[str, Any]) -> str:
    body = consumer_group(name, lab.bootstrap, group_id=group_id)
    body["spec"]["policy"]["groupConfigs"] = configs
    return apply(lab, body)


def broker_configs(lab: Lab, group_id: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": lab.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group_id)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {key: (entry.value, int(entry.source)) for key, entry in entries.items()}


def reasons(lab: Lab, name: str) -> set[str]:
    return {str(event.get("reason")) for event in events_for(lab, name)}


def test_group_configs_are_refused_out_of_bounds_then_set_live(lab: Lab) -> None:
    name, group_id = "shop", f"shop-{uuid.uuid4().hex[:6]}"
    context = lab_context(lab, name)
    with_group_configs(lab, name, group_id, {"consumer": {"sessionTimeoutMs": 10000}})

    def refused() -> dict[str, Any] | None:
        status = group_configs_status(lab, name)
        return status if status.get("state") == "refused" else None

    status = eventually(refused, 60, "perGroupConfigs refused", context=context)
    assert "spec.policy.groupConfigs.consumer.sessionTimeoutMs (10000)" in status["message"]
    assert "fix: set a value from 45000 to 60000" in status["message"]
    eventually(lambda: "GroupConfigsRefused" in reasons(lab, name) or None, 30, "the Event")
    assert broker_configs(lab, group_id)["consumer.session.timeout.ms"][0] == "45000"

    with_group_configs(
        lab,
        name,
        group_id,
        {"consumer": {"sessionTimeoutMs": 50000}, "streams": {"initialRebalanceDelayMs": 8000}},
    )

    def applied() -> dict[str, Any] | None:
        status = group_configs_status(lab, name)
        return status if status.get("state") == "applied" else None

    status = eventually(applied, 60, "perGroupConfigs applied", context=context)
    assert status["configs"] == {
        "consumer.session.timeout.ms": {"value": "50000", "source": "group-config"},
        "streams.initial.rebalance.delay.ms": {"value": "8000", "source": "group-config"},
    }
    eventually(lambda: "GroupConfigsApplied" in reasons(lab, name) or None, 30, "the Event")
    live = broker_configs(lab, group_id)
    assert live["consumer.session.timeout.ms"][0] == "50000"
    assert live["streams.initial.rebalance.delay.ms"][0] == "8000"


def test_the_api_server_refuses_a_heartbeat_not_below_the_session(lab: Lab) -> None:
    body = consumer_group("bad-heartbeat", lab.bootstrap)
    body["spec"]["policy"]["groupConfigs"] = {
        "streams": {"sessionTimeoutMs": 45000, "heartbeatIntervalMs": 45000}
    }
    out = kubectl(lab, "apply", "-f", "-", stdin=yaml.safe_dump(body), check=False)
    assert "streams.heartbeatIntervalMs must be below streams.sessionTimeoutMs" in out, out
