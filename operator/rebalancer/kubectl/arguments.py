"""The `kubectl rebalancer` command line, parsed into one typed request.

Flags follow kubectl's: `-n/--namespace`, `-A/--all-namespaces`, `--kubeconfig`, `--context`,
`-w/--watch`, accepted before or after the verb (kubectl passes every word after the plugin's
name to the plugin, so `kubectl rebalancer -n shop get` and `kubectl rebalancer get -n shop` are
both typed).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

PROG = "kubectl rebalancer"


class Verb(StrEnum):
    GET = "get"
    HISTORY = "history"
    WHY = "why"
    ENFORCE = "enforce"
    PAUSE = "pause"
    RESUME = "resume"


_HELP: dict[Verb, str] = {
    Verb.GET: "list managed ConsumerGroups: state, members, generation, rollout phase and batch",
    Verb.HISTORY: "the group's last rebalances and their causes (the operator's Rebalance Events)",
    Verb.WHY: "the group's last rebalance explained: its cause, who joined and who left",
    Verb.ENFORCE: "request one enforced rebalance (spec.policy.enforce.requestToken)",
    Verb.PAUSE: "pause the group's rollout (spec.policy.rollout.paused: true)",
    Verb.RESUME: "resume a paused rollout (paused: false) or a failed one "
    "(a new rebalancer.dev/resume-rollout annotation)",
}

DEFAULT_INTERVAL_SECONDS = 2.0
DEFAULT_HISTORY_LIMIT = 10
DEFAULT_BASELINE_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Connection:
    """Which cluster and namespace, as kubectl would choose them (None: kubectl's default)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Request:
    verb: Verb
    connection: Connection
    group: str | None = None
    all_namespaces: bool = False
    watch: bool = False
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    limit: int = DEFAULT_HISTORY_LIMIT
    timeout_seconds: float = DEFAULT_BASELINE_TIMEOUT_SECONDS


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _add_connection(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # A verb's copies default to SUPPRESS, so that a flag given before the verb is not reset
    # by the verb's own default.
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "-n", "--namespace", default=default, help="the namespace (default: the context's)"
    )
    parser.add_argument(
        "--kubeconfig", default=default, help="the kubeconfig file (default: $KUBECONFIG)"
    )
    parser.add_argument("--context", default=default, help="the kubeconfig context to use")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="See and steer the ConsumerGroups that Rebalancer manages.",
    )
    _add_connection(parser, top=True)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb in Verb:
        sub = verbs.add_parser(verb.value, help=_HELP[verb], description=_HELP[verb])
        _add_connection(sub, top=False)
        if verb is Verb.GET:
            sub.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
            sub.add_argument("-w", "--watch", action="store_true", help="refresh until interrupted")
            sub.add_argument(
                "--interval",
                type=_positive_float,
                default=DEFAULT_INTERVAL_SECONDS,
                help="seconds between refreshes with --watch (default %(default)s)",
            )
        else:
            sub.add_argument("group", metavar="GROUP", help="the ConsumerGroup's name")
        if verb is Verb.HISTORY:
            sub.add_argument(
                "--limit",
                type=_positive_int,
                default=DEFAULT_HISTORY_LIMIT,
                help="rebalances to show, newest last (default %(default)s)",
            )
        if verb is Verb.ENFORCE:
            sub.add_argument(
                "--timeout",
                type=_positive_float,
                default=DEFAULT_BASELINE_TIMEOUT_SECONDS,
                help="seconds to wait for the operator to take a first token as its baseline "
                "(default %(default)s)",
            )
    return parser


def parse_request(argv: Sequence[str]) -> Request:
    """The request `argv` makes; argparse's usage error (SystemExit 2) when it makes none."""
    args = build_parser().parse_args(list(argv))
    return Request(
        verb=Verb(args.verb),
        connection=Connection(
            kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace
        ),
        group=getattr(args, "group", None),
        all_namespaces=getattr(args, "all_namespaces", False),
        watch=getattr(args, "watch", False),
        interval_seconds=getattr(args, "interval", DEFAULT_INTERVAL_SECONDS),
        limit=getattr(args, "limit", DEFAULT_HISTORY_LIMIT),
        timeout_seconds=getattr(args, "timeout", DEFAULT_BASELINE_TIMEOUT_SECONDS),
    )
