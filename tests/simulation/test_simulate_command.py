"""`rebalancer simulate` through the real command line."""

from __future__ import annotations

import argparse
import json

import pytest

from rebalancer.cli import build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["simulate", *argv])
    return code, capsys.readouterr().out


def test_table_lists_rebalances_and_time_to_stable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "--members", "4", "--start-spread", "1500", "--delay-ms", "0")
    assert code == 0
    assert "initial-join" in out
    assert "member-join" in out
    assert "rebalances:      2" in out
    assert "time to Stable:" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys,
        "--members", "6",
        "--start-spread", "2000",
        "--distribution", "uniform",
        "--assignor", "cooperative-sticky",
        "--static",
        "--partitions", "24",
        "--seed", "3",
        "--json",
    )  # fmt: skip
    assert code == 0
    body = json.loads(out)
    assert body["rebalance_count"] == 1 == len(body["rebalances"])
    assert body["rebalances"][0]["cause"] == "initial-join"
    assert len(body["rebalances"][0]["members"]) == 6
    assert body["join_window_s"] == 3.0
    assert body["time_to_stable_s"] > 3.0


@pytest.mark.parametrize(("notice", "rebalances"), [("fixed", 2), ("enforced", 2)])
def test_kafka_7126_preset(
    capsys: pytest.CaptureFixture[str], notice: str, rebalances: int
) -> None:
    code, out = run(
        capsys, "--scenario", "kafka-7126", "--members", "20", "--topic-notice", notice, "--json"
    )
    assert code == 0
    body = json.loads(out)
    assert body["rebalance_count"] == rebalances
    assert body["members"] == 20


def test_redpanda_profile_times_joins_like_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys,
        "--profile", "redpanda",
        "--members", "6",
        "--start-spread", "2000",
        "--delay-ms", "3000",
        "--json",
    )  # fmt: skip
    assert code == 0
    body = json.loads(out)
    assert body["profile"] == "redpanda"
    assert body["join_window_s"] == 3.0
    assert body["rebalance_count"] == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--members", "0"],
        ["--start-spread", "-5"],
        ["--heartbeat-interval-ms", "50000"],
    ],
)
def test_bad_values_exit_with_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code = main(["simulate", *argv])
    assert code == 2
    assert "rebalancer simulate:" in capsys.readouterr().err


def test_every_flag_has_help() -> None:
    parser = build_parser()
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    simulate_parser = subparsers.choices["simulate"]
    for action in simulate_parser._actions:
        assert action.help, action.option_strings
