"""Every status write passes clients/patching.checked_status: a key the status model does not
declare is left out with an error logged and counted (the rest of the write goes on), or, in
strict mode, the write raises before anything is sent."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from rebalancer import metrics
from rebalancer.clients import patching
from rebalancer.clients.patching import STRICT_STATUS_VARIABLE, checked_status, patch_status
from rebalancer.structs.status_patches import StatusCheck, StatusUndeclared

FIELD = "status.group.membres"


def dropped(field: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "rebalancer_status_fields_dropped_total", {"field": field}
    )
    return value or 0.0


class Unsent:
    """A Kubernetes API whose status PATCH records what it is sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.custom = self

    def patch_namespaced_custom_object_status(self, *args: Any, **_: Any) -> None:
        self.sent.append(args[-1])


@pytest.mark.status_violations_expected
def test_production_leaves_the_key_out_logs_and_counts_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(STRICT_STATUS_VARIABLE, raising=False)
    before = dropped(FIELD)
    with caplog.at_level(logging.ERROR, logger=patching.__name__):
        kept = checked_status("shop", "orders", {"group": {"members": 2, "membres": 2}})
    assert kept == {"group": {"members": 2}}
    assert dropped(FIELD) == before + 1
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert "shop/orders" in record.getMessage()
    assert FIELD in record.getMessage()


@pytest.mark.status_violations_expected
def test_strict_mode_raises_naming_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_STATUS_VARIABLE, "1")
    before = dropped(FIELD)
    with pytest.raises(StatusUndeclared, match=r"status\.group\.membres .*did you mean members"):
        checked_status("shop", "orders", {"group": {"membres": 2}})
    assert dropped(FIELD) == before


@pytest.mark.status_violations_expected
def test_patch_status_sends_only_declared_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STRICT_STATUS_VARIABLE, raising=False)
    api = Unsent()
    current = {"observedGeneration": 1}
    fields = {"observedGeneration": 2, "group": {"members": 2, "membres": 2}}
    asyncio.run(patch_status(api, "shop", "orders", current, fields))  # type: ignore[arg-type]
    assert api.sent == [
        [
            {"op": "add", "path": "/status/observedGeneration", "value": 2},
            {"op": "add", "path": "/status/group", "value": {"members": 2}},
        ]
    ]


@pytest.mark.status_violations_expected
def test_a_write_with_nothing_declared_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STRICT_STATUS_VARIABLE, raising=False)
    api = Unsent()
    asyncio.run(patch_status(api, "shop", "orders", None, {"bogus": 1}))  # type: ignore[arg-type]
    assert api.sent == []


@pytest.mark.status_violations_expected
def test_strict_mode_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_STATUS_VARIABLE, "1")
    api = Unsent()
    with pytest.raises(StatusUndeclared):
        asyncio.run(patch_status(api, "shop", "orders", None, {"group": {"members": "2"}}))  # type: ignore[arg-type]
    assert api.sent == []


@pytest.mark.status_violations_expected
def test_the_suite_sees_every_status_write(
    status_writes: list[StatusCheck], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/conftest.py fails any test whose status writes the model does not declare, even
    # when the code under test swallows the strict mode's exception.
    monkeypatch.delenv(STRICT_STATUS_VARIABLE, raising=False)
    api = Unsent()
    asyncio.run(patch_status(api, "shop", "orders", None, {"observedGeneration": 2}))  # type: ignore[arg-type]
    asyncio.run(patch_status(api, "shop", "orders", None, {"group": {"membres": 2}}))  # type: ignore[arg-type]
    assert [check.fields for check in status_writes] == [{"observedGeneration": 2}, {}]
    assert [str(v.path) for check in status_writes for v in check.violations] == [FIELD]
