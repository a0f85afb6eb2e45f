"""The `rebalancer` command: one subcommand per module in `rebalancer.commands`."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Protocol, cast

from rebalancer import __version__

# Each name is a module in rebalancer.commands exposing add_parser() and run().
SUBCOMMANDS: tuple[str, ...] = ("operator", "lab", "simulate", "learn", "sidecar", "gate")


class _Command(Protocol):
    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(name: str) -> _Command | None:
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
    for name in SUBCOMMANDS:
        command = _load(name)
        if command is not None:
            command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = cast(_Command, args.command_module).run
    return run(args)
