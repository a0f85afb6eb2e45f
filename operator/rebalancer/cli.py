"""The `rebalancer` command: one subcommand per module in `rebalancer.commands`.

A distribution installed beside this one may provide a subcommand through the
`rebalancer.commands` entry point group (the lab does: lab/pyproject.toml); it takes the place of
the module of the same name here, which then only says how to install it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser, or `only` that one's: a subcommand's module imports what it
    runs (the sidecar's Kafka client, the simulator), and the gate, which starts in every gated
    pod before its consumer, should pay for its own imports only."""
    parser = argparse.ArgumentParser(
        prog="rebalancer",
        description="Tune and enforce Kafka consumer-group rebalances on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"rebalancer {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    plugins = {entry.name: entry.value for entry in entry_points(group=PLUGIN_GROUP)}
    for name in SUBCOMMANDS if only is None else (only,):
        command = _load(name, plugins)
        if command is not None:
            command.add_parser(subparsers)
    return parser


def chosen_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names, if it names one: its first word that is not an option (the
    top-level options take no value). None for `--help`, `--version` or a misspelt name, which
    the whole parser answers (listing every subcommand)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=chosen_subcommand(words))
    args = parser.parse_args(words)
    run = cast(_Command, args.command_module).run
    return run(args)
