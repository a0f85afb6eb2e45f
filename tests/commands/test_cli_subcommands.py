"""`rebalancer`'s subcommands: its own, and the lab's from the distribution that provides it."""

from __future__ import annotations

import json
import subprocess
import sys

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


# What each named subcommand must not import: another subcommand's machinery.
_IMPORTS = (
    "import json, sys\n"
    "from rebalancer import cli\n"
    "try:\n"
    "    cli.main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)


def _modules_after(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS, *argv], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_gate_loads_its_own_subcommand_only() -> None:
    # The gate starts in every gated pod before the consumer does: the sidecar's Kafka client
    # and agent, the simulator and the lab are not its business.
    loaded = _modules_after("gate", "--help")
    assert "rebalancer.commands.gate" in loaded
    for other in ("rebalancer.commands.sidecar", "rebalancer.sidecar.agent", "aiokafka"):
        assert other not in loaded
    assert "rebalancer.commands.simulate" not in loaded
    assert "rebalancer_lab.command" not in loaded


def test_help_and_a_misspelt_name_still_list_every_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.chosen_subcommand(["--help"]) is None
    assert cli.chosen_subcommand(["gates", "--pod", "x"]) is None
    assert cli.chosen_subcommand(["--version", "gate"]) == "gate"
    with pytest.raises(SystemExit):
        cli.main(["gates"])
    error = capsys.readouterr().err
    assert "invalid choice: 'gates'" in error
    for name in cli.SUBCOMMANDS:
        assert name in error
