"""`rebalancer operator`: run the kopf operator against a cluster (a real one, or the lab's)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "operator",
        help="run the operator",
        description=(
            "Run the Rebalancer operator: it watches ConsumerGroup resources, observes each "
            "group on its Kafka cluster, accepts member reports and writes status and Events. "
            "Inside a pod it uses the in-cluster service account; elsewhere a kubeconfig."
        ),
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig file to use (default: in-cluster config in a pod, else $KUBECONFIG "
        "or ~/.kube/config)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        dest="namespaces",
        help="watch only this namespace; repeat for several (default: all namespaces)",
    )
    parser.add_argument(
        "--reports-host",
        default="0.0.0.0",
        help="address of the member-report endpoint (default: 0.0.0.0)",
    )
    parser.add_argument(
        "--reports-port",
        type=int,
        default=8090,
        help="port of the member-report endpoint POST /v1/reports (default: 8090)",
    )
    parser.add_argument(
        "--history-dir",
        default=None,
        help="directory or fsspec URL (s3://..., with its filesystem package installed) where "
        "rebalance history is written as Parquet (default: not recorded)",
    )
    parser.add_argument(
        "--recommendations-dir",
        default=None,
        help="where `rebalancer learn` writes recommendations.json "
        "(default: <history-dir>/_recommendations)",
    )
    parser.add_argument(
        "--liveness",
        default=None,
        metavar="URL",
        help="kopf liveness endpoint, for example http://0.0.0.0:8080/healthz (default: off)",
    )
    parser.add_argument(
        "--status-refresh-seconds",
        type=float,
        default=60.0,
        help="rewrite an unchanged status at most this often (default: 60)",
    )
    parser.add_argument(
        "--gate-image",
        default=None,
        help="image of the join gate init container and of the enforcement sidecar the operator "
        "adds to pod templates "
        "(default: spec.policy.rollout.gateImage, else the published operator image)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )
    parser.epilog = (
        "Environment: REBALANCER_REPORT_TOKEN or REBALANCER_REPORT_TOKEN_FILE sets the bearer "
        "token members must send with reports (default: none required)."
    )
    parser.set_defaults(command_module=sys.modules[__name__])


def run(args: argparse.Namespace) -> int:
    import kopf

    import rebalancer.handlers.enforcing
    import rebalancer.handlers.groups
    import rebalancer.handlers.rollouts
    import rebalancer.handlers.settings
    import rebalancer.handlers.startup  # noqa: F401  (registers the handlers)
    from rebalancer.settings import OperatorSettings, token_from_environment

    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    settings = OperatorSettings(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(args.namespaces),
        reports_host=args.reports_host,
        reports_port=args.reports_port,
        report_token=token_from_environment(),
        history_dir=args.history_dir,
        recommendations_dir=args.recommendations_dir
        or (f"{args.history_dir.rstrip('/')}/_recommendations" if args.history_dir else None),
        liveness_url=args.liveness,
        status_refresh_seconds=args.status_refresh_seconds,
        gate_image=args.gate_image,
    )
    memo = kopf.Memo(settings=settings)
    kopf.run(
        standalone=True,
        clusterwide=settings.clusterwide,
        namespaces=list(settings.namespaces),
        memo=memo,
        liveness_endpoint=settings.liveness_url,
    )
    return 0
