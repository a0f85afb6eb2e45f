"""`rebalancer`'s subcommands: its own, and the lab's from the distribution that provides it."""

from __future__ import annotations

import pytest

from rebalancer import cli
from rebalancer.commands import lab as lab_stub


def test_the_installed_lab_provides_rebalancer_lab() -> None:
    # The test environment installs ./lab beside the operator (make install).
    args = cli.build_parser().parse_args(["lab", "--brokers", "3", "--consumers", "5"])
    assert args.command_module.__name__ == "rebalancer_lab.command"
    assert (args.brokers, args.consumers) == (3, 5)


def test_without_the_lab_rebalancer_lab_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    # The lab's own flags reach the stub without an argument error.
    status = cli.main(["lab", "--brokers", "3", "--state-dir", "/tmp/x"])
    assert status == 2
    assert capsys.readouterr().err.strip() == lab_stub.INSTALL_HINT
    assert "pip install ./lab" in lab_stub.INSTALL_HINT


def test_the_operators_subcommands_need_no_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    parser = cli.build_parser()
    args = parser.parse_args(["simulate"])
    assert args.command_module.__name__ == "rebalancer.commands.simulate"
