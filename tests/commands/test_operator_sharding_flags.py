"""`rebalancer operator --shards`: refused, naming the flag and the fix, where it cannot work;
read into the sharding settings where it can."""

from __future__ import annotations

import argparse

import pytest

from rebalancer.cli import main
from rebalancer.commands import operator


@pytest.mark.parametrize(
    ("flags", "told"),
    [
        (["--shards", "0"], "--shards 0 must be at least 1"),
        (["--shards", "4", "--peering", "rebalancer"], "--shards and --peering do not go together"),
        (["--shards", "4", "--shard-lease-seconds", "3"], "--shard-lease-seconds 3 must be at"),
        (
            ["--shards", "4", "--admission-configuration", "rebalancer.example.com"],
            "with --shards let the chart install the configuration",
        ),
    ],
)
def test_sharding_flags_that_cannot_work_are_refused(
    flags: list[str], told: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["operator", *flags]) == 2
    assert told in capsys.readouterr().err


def parsed(flags: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    operator.add_parser(parser.add_subparsers())
    return parser.parse_args(["operator", *flags])


def test_a_pod_shares_its_name_namespace_and_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "rebalancer-7d9-abc")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    monkeypatch.setenv("POD_IP", "10.1.2.3")
    settings = operator._operator_settings(parsed(["--shards", "8", "--reports-port", "9000"]))
    sharding = settings.sharding
    assert sharding is not None and settings.peering is None
    assert sharding.shards == 8
    assert sharding.identity == "rebalancer-7d9-abc"
    assert sharding.namespace == "ops"
    assert sharding.reports_url == "http://10.1.2.3:9000"
    assert sharding.lease_seconds == 10


def test_without_shards_there_is_no_sharding() -> None:
    assert operator._operator_settings(parsed([])).sharding is None
