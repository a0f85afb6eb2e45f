"""The `rebalancer` command: one subcommand per module in `rebalancer.commands`.

A distribution installed beside this one may provide a subcommand through the
`rebalancer.commands` entry point group (the lab does: lab/pyproject.toml); it takes the place of
the module of the same name here, which then only says how to install it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Protocol, cast

from rebalancer import __version__

# Installed distributions' subcommands: entry points naming a module like those below.
PLUGIN_GROUP = "rebalancer.commands"
# Each name is a module in rebalancer.commands exposing add_parser() and run().
SUBCOMMANDS: tuple[str, ...] = ("operator", "lab", "simulate", "learn", "sidecar", "gate")


class _Command(Protocol):
    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(name: str, plugins: dict[str, str]) -> _Command | None:
    if name in plugins:
        return cast(_Command, importlib.import_module(plugins[name]))
    try:
        module = importlib.import_module(f"rebalancer.commands.{name}")
    except ModuleNotFoundError as error:
        if error.name == f"rebalancer.commands.{name}":
            return None
        raise
    return cast(_Command, module)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalancer",
        description="Tune and enforce Kafka consumer-group rebalances on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"rebalancer {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    plugins = {entry.name: entry.value for entry in entry_points(group=PLUGIN_GROUP)}
    for name in SUBCOMMANDS:
        command = _load(name, plugins)
        if command is not None:
            command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = cast(_Command, args.command_module).run
    return run(args)
