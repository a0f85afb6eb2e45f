"""`rebalancer lab` where the lab is not installed: say where it comes from.

The lab (Apache Kafka, the Kubernetes control plane, the process kubelet and the example fleet) is
its own distribution, `rebalancer-lab` (lab/ in the repository), so that the operator's wheel and
image carry none of it. Installed, it replaces this command through the `rebalancer.commands`
entry point (rebalancer.cli).
"""

from __future__ import annotations

import argparse
import sys

INSTALL_HINT = (
    "rebalancer lab: the lab is its own distribution, rebalancer-lab, which this install leaves "
    "out; from a checkout of the repository install it with: pip install ./lab (make install "
    "does)"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="run Kafka, a Kubernetes control plane, the operator and an example fleet here "
        "(needs the rebalancer-lab distribution)",
        description=INSTALL_HINT,
        # Whatever the installed lab would take (its flags, --help) gets the same answer, not
        # an "unrecognized arguments" error: no argument here is parsed as an option.
        add_help=False,
        prefix_chars="\x01",
    )
    parser.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)
    parser.set_defaults(command_module=sys.modules[__name__])


def run(args: argparse.Namespace) -> int:
    print(INSTALL_HINT, file=sys.stderr)
    return 2
