"""`rebalancer operator`: run the kopf operator against a cluster (a real one, or the lab's)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS

if TYPE_CHECKING:
    from rebalancer.operator_settings import OperatorSettings, PeeringSettings, ShardingSettings

# kopf sends a keep-alive 5 to 10 s before the lifetime ends (at least every second): 10 s
# keeps a takeover under 15 s with a keep-alive every 1 to 5 s. Below 5 s a busy leader's
# keep-alive could come late and a standby would act beside it.
DEFAULT_PEERING_LIFETIME = 10
MIN_PEERING_LIFETIME = 5
# A shard Lease is renewed every 3 s and its holder stops acting 2 s before it expires: 5 s
# leaves no room for a late renewal, 10 s moves a dead replica's shards in at most 13 s.
DEFAULT_SHARD_LEASE_SECONDS = 10
MIN_SHARD_LEASE_SECONDS = 6


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
    _add_cluster_arguments(parser)
    _add_endpoint_arguments(parser)
    _add_pacing_arguments(parser)
    _add_gate_arguments(parser)
    _add_admission_arguments(parser)
    _add_peering_arguments(parser)
    _add_sharding_arguments(parser)
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


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the cluster and the namespaces watched."""
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


def _add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the member-report endpoint, the history and the liveness probe."""
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


def _add_pacing_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for how often status is refreshed and groups and workloads are looked at."""
    parser.add_argument(
        "--status-refresh-seconds",
        type=float,
        default=600.0,
        help="refresh the freshness stamp (status.group.observedAt) of a status in which "
        "nothing a user would see changed this often; a change is written at once "
        "(default: 600)",
    )
    parser.add_argument(
        "--quiet-observe-factor",
        type=float,
        default=1.0,
        help="look at a group that has not changed for three looks every "
        "observe.intervalSeconds times this; a rebalancing or rolling group is looked at "
        "every 2 s, and a member report wakes the observer at once (default: 1, every group "
        "at its own interval)",
    )
    parser.add_argument(
        "--rollout-resting-poll-seconds",
        type=float,
        default=10.0,
        help="how often the rollout planner looks at a workload while no rollout runs; a change "
        "to the workload's spec is seen at once through a watch (default: 10)",
    )


def _add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the join gate and sidecar added to pod templates."""
    parser.add_argument(
        "--gate-image",
        default=None,
        help="image of the join gate init container and of the enforcement sidecar the operator "
        "adds to pod templates "
        "(default: spec.policy.rollout.gateImage, else the published operator image)",
    )
    parser.add_argument(
        "--gate-bypass-after-seconds",
        type=int,
        default=DEFAULT_BYPASS_SECONDS,
        metavar="SECONDS",
        help="seconds a join gate waits without a sign of the operator before it lets its pod "
        "start, for ConsumerGroups that do not set spec.policy.rollout.bypassGateAfterSeconds "
        f"(default: {DEFAULT_BYPASS_SECONDS}; 0 never bypasses, else at least 30)",
    )


def _add_admission_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the validating admission webhook."""
    parser.add_argument(
        "--admission-port",
        type=int,
        default=None,
        help="serve the validating admission webhook that refuses a ConsumerGroup whose group "
        "or workload another ConsumerGroup already manages, over HTTPS on this port "
        "(default: off)",
    )
    parser.add_argument(
        "--admission-listen",
        default="0.0.0.0",
        help="address the admission webhook listens on (default: 0.0.0.0)",
    )
    parser.add_argument(
        "--admission-host",
        default=None,
        help="host name or address the API server calls the webhook at, for a configuration "
        "the operator writes itself and the self-signed certificate (default: 127.0.0.1)",
    )
    parser.add_argument(
        "--admission-cert",
        type=Path,
        default=None,
        help="PEM certificate of the webhook server, re-read when it changes; a ca.crt beside "
        "it is the caBundle (default: a self-signed one made at start with openssl)",
    )
    parser.add_argument(
        "--admission-key",
        type=Path,
        default=None,
        help="PEM private key of --admission-cert",
    )
    parser.add_argument(
        "--admission-configuration",
        default=None,
        metavar="NAME",
        help="create and keep current the ValidatingWebhookConfiguration NAME pointing at this "
        "operator (needs RBAC on validatingwebhookconfigurations; the chart installs its own "
        "instead; default: none)",
    )


def _add_peering_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for leader election among replicas."""
    parser.add_argument(
        "--peering",
        default=None,
        metavar="NAME",
        help="elect a leader among replicas through the ClusterKopfPeering NAME: only the "
        "leader acts, the others wait paused and take over when it stops (the chart sets it; "
        "default: none, one replica runs alone)",
    )
    parser.add_argument(
        "--peering-lifetime",
        type=int,
        default=DEFAULT_PEERING_LIFETIME,
        metavar="SECONDS",
        help="seconds after its last keep-alive a silent leader counts as dead and a standby "
        f"takes over (default: {DEFAULT_PEERING_LIFETIME}; at least {MIN_PEERING_LIFETIME})",
    )


def _add_sharding_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for sharing the ConsumerGroups out among replicas (docs/sharding.md)."""
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        metavar="N",
        help="share the ConsumerGroups out among replicas in N shards, each held by one replica "
        "through a Lease; every replica serves the groups of the shards it holds (instead of "
        "--peering; default: off, one replica serves every group)",
    )
    parser.add_argument(
        "--shard-namespace",
        default=None,
        metavar="NAMESPACE",
        help="namespace of the shard Leases (default: the pod's, POD_NAMESPACE, else default)",
    )
    parser.add_argument(
        "--shard-lease-prefix",
        default="rebalancer",
        metavar="PREFIX",
        help="the Leases are named PREFIX-shard-<i> and PREFIX-member-<replica> "
        "(default: rebalancer; the chart uses the release's name)",
    )
    parser.add_argument(
        "--shard-lease-seconds",
        type=int,
        default=DEFAULT_SHARD_LEASE_SECONDS,
        metavar="SECONDS",
        help="seconds after its last renewal a shard Lease is free for another replica "
        f"(default: {DEFAULT_SHARD_LEASE_SECONDS}; at least {MIN_SHARD_LEASE_SECONDS})",
    )
    parser.add_argument(
        "--advertise-reports-url",
        default=None,
        metavar="URL",
        help="where the other replicas pass member reports on to this one (default: "
        "http://$POD_IP:<reports-port> in a pod, else http://127.0.0.1:<reports-port>)",
    )


def run(args: argparse.Namespace) -> int:
    problem = _flag_problem(args)
    if problem is not None:
        print(f"rebalancer operator: {problem}", file=sys.stderr)
        return 2
    import kopf

    # Importing the handler modules registers their handlers with kopf.
    import rebalancer.handlers.enforcing
    import rebalancer.handlers.groups
    import rebalancer.handlers.ownership
    import rebalancer.handlers.rollouts
    import rebalancer.handlers.settings
    import rebalancer.handlers.startup

    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    settings = _operator_settings(args)
    peering = settings.peering
    memo = kopf.Memo(settings=settings)
    if settings.admission is not None:
        # Only then: kopf stops an operator with admission handlers and no webhook server.
        # Without --admission-port the run-time ownership checks still hold.
        rebalancer.handlers.ownership.register_webhook()
    kopf.run(
        standalone=peering is None,
        peering_name=None if peering is None else peering.name,
        priority=None if peering is None else peering.priority,
        # kopf's own identity would be its host name: a pod's name, the entry the pod's label
        # and the logs name, unless the pod sets POD_ID.
        identity=None if peering is None else cast(Any, peering.identity),
        clusterwide=settings.clusterwide,
        namespaces=list(settings.namespaces),
        memo=memo,
        liveness_endpoint=settings.liveness_url,
        # A new or changed spec's handlers (validate, settings) run in one cycle: kopf's default
        # runs one per cycle and records its progress in between, a PATCH more for each.
        lifecycle=kopf.lifecycles.all_at_once,
    )
    return 0


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags, naming the flag and the values it takes; None when they
    hold together."""
    bypass = args.gate_bypass_after_seconds
    if bypass < 0 or 0 < bypass < 30:
        # Below 30 s a gate could let go between two refreshes of a busy operator.
        return (
            f"--gate-bypass-after-seconds {bypass} must be 0 (never bypass) "
            "or at least 30 (the chart's gate.bypassAfterSeconds)"
        )
    if args.quiet_observe_factor < 1 or args.status_refresh_seconds <= 0:
        return (
            f"--quiet-observe-factor {args.quiet_observe_factor} must be at "
            f"least 1 and --status-refresh-seconds {args.status_refresh_seconds} above 0 (the "
            "chart's operator.quietObserveFactor and operator.statusRefreshSeconds)"
        )
    if args.peering_lifetime < MIN_PEERING_LIFETIME:
        return (
            f"--peering-lifetime {args.peering_lifetime} must be at least "
            f"{MIN_PEERING_LIFETIME} (seconds; the chart's leaderElection.lifetimeSeconds)"
        )
    sharding = _sharding_problem(args)
    if sharding is not None:
        return sharding
    if (args.admission_cert is None) != (args.admission_key is None):
        return (
            "--admission-cert and --admission-key go together; pass both, "
            "or neither for a self-signed certificate"
        )
    configuration = args.admission_configuration
    if configuration is not None and "." not in configuration:
        # The webhook is named ownership.<NAME>; the API server wants three dot-separated
        # segments there, and kopf would stop the operator at start on its refusal.
        return (
            f"--admission-configuration {configuration!r} must be a "
            "domain name with a dot, for example rebalancer.example.com"
        )
    return None


def _sharding_problem(args: argparse.Namespace) -> str | None:
    if args.shards is None:
        return None
    if args.shards < 1:
        return f"--shards {args.shards} must be at least 1 (the chart's sharding.shards)"
    if args.peering is not None:
        # Peering pauses every replica but one: the shards would all be served by it.
        return (
            "--shards and --peering do not go together: with --shards every replica serves "
            "its shards and the holder of shard 0 leads; drop --peering (the chart's "
            "leaderElection.enabled is ignored when sharding.enabled is true)"
        )
    if args.shard_lease_seconds < MIN_SHARD_LEASE_SECONDS:
        return (
            f"--shard-lease-seconds {args.shard_lease_seconds} must be at least "
            f"{MIN_SHARD_LEASE_SECONDS} (the chart's sharding.leaseSeconds)"
        )
    if args.admission_configuration is not None:
        return (
            "--admission-configuration points the webhook at one replica; with --shards let "
            "the chart install the configuration (it calls the Service) and drop the flag"
        )
    return None


def _operator_settings(args: argparse.Namespace) -> OperatorSettings:
    """The settings the handlers read from kopf's memo, from flags already checked."""
    from rebalancer.operator_settings import (
        AdmissionSettings,
        OperatorSettings,
        token_from_environment,
    )

    admission = None
    if args.admission_port is not None:
        admission = AdmissionSettings(
            port=args.admission_port,
            listen=args.admission_listen,
            host=args.admission_host,
            certfile=args.admission_cert,
            keyfile=args.admission_key,
            configuration=args.admission_configuration,
        )
    peering = None
    if args.peering is not None:
        peering = _peering_settings(args.peering, args.peering_lifetime)
    return OperatorSettings(
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
        quiet_observe_factor=args.quiet_observe_factor,
        rollout_resting_poll_seconds=args.rollout_resting_poll_seconds,
        gate_image=args.gate_image,
        gate_bypass_after_seconds=args.gate_bypass_after_seconds,
        admission=admission,
        peering=peering,
        sharding=None if args.shards is None else _sharding_settings(args),
    )


def _sharding_settings(args: argparse.Namespace) -> ShardingSettings:
    """This replica's part in the sharding: named as in the peering (the pod's name)."""
    import os

    from rebalancer.operator_settings import ShardingSettings

    pod_name = os.environ.get("POD_NAME") or None
    pod_namespace = os.environ.get("POD_NAMESPACE") or None
    pod_ip = os.environ.get("POD_IP") or "127.0.0.1"
    return ShardingSettings(
        shards=args.shards,
        namespace=args.shard_namespace or pod_namespace or "default",
        prefix=args.shard_lease_prefix,
        identity=_identity(pod_name),
        lease_seconds=args.shard_lease_seconds,
        reports_url=args.advertise_reports_url or f"http://{pod_ip}:{args.reports_port}",
        pod_name=pod_name,
        pod_namespace=pod_namespace,
    )


def _identity(pod_name: str | None) -> str:
    import os
    import socket

    return pod_name or f"{socket.gethostname()}/{os.getpid()}"


def _peering_settings(name: str, lifetime: int) -> PeeringSettings:
    """This replica's place in the election: named after its pod (POD_NAME, POD_NAMESPACE from
    the downward API), else after the host and process; ranked by its start time."""
    import os
    import random
    import time

    from rebalancer.operator_settings import PeeringSettings
    from rebalancer.planning.leadership import priority_for_start

    pod_name = os.environ.get("POD_NAME") or None
    pod_namespace = os.environ.get("POD_NAMESPACE") or None
    return PeeringSettings(
        name=name,
        lifetime_seconds=lifetime,
        identity=_identity(pod_name),
        priority=priority_for_start(time.time(), random.randrange(1000)),
        pod_name=pod_name,
        pod_namespace=pod_namespace,
    )
