"""`rebalancer sidecar`: the enforced-rebalance agent next to a consumer (docs/enforcing.md)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from aiohttp import web

from rebalancer.clients.kafka_errors import KafkaGatewayError
from rebalancer.sidecar.agent import SidecarAgent, describe_settings
from rebalancer.sidecar.limits import RateLimiter
from rebalancer.sidecar.server import TokenFile, build_app
from rebalancer.sidecar.settings import DEFAULT_PORT, SidecarSettings, load_settings
from rebalancer.structs.kafka_properties import SettingsError

logger = logging.getLogger("rebalancer.sidecar")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sidecar",
        help="enforce rebalances of the application's consumer group on request",
        description=(
            "Join the application's consumer group as a member that consumes nothing of the "
            "application's topics, and serve POST /v1/enforce: an authenticated request makes "
            "the group rebalance once (cooperative-sticky members keep their partitions). "
            "Kafka settings come from the same KAFKA_* variables as the application "
            "(KAFKA_BOOTSTRAP_SERVERS, KAFKA_GROUP_ID, KAFKA_SESSION_TIMEOUT_MS, "
            "KAFKA_PARTITION_ASSIGNMENT_STRATEGY, KAFKA_GROUP_PROTOCOL, KAFKA_SECURITY_PROTOCOL, "
            "KAFKA_SASL_*, KAFKA_SSL_*) or a KAFKA_CONFIG_FILE."
        ),
    )
    parser.add_argument("--bootstrap", help="bootstrap servers (default KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument("--group-id", help="the application's group.id (default KAFKA_GROUP_ID)")
    parser.add_argument(
        "--config-file", help="librdkafka properties file, e.g. security (or KAFKA_CONFIG_FILE)"
    )
    parser.add_argument(
        "--token-file",
        help="file holding the bearer token, mounted from a Secret "
        "(or REBALANCER_SIDECAR_TOKEN_FILE); required",
    )
    parser.add_argument(
        "--listen",
        help=f"host:port to serve on (or REBALANCER_SIDECAR_LISTEN; default 127.0.0.1:"
        f"{DEFAULT_PORT}: only the pod itself can reach it)",
    )
    parser.add_argument(
        "--rate-per-minute",
        type=float,
        help="enforcement requests taken per minute (or REBALANCER_SIDECAR_RATE_PER_MINUTE; "
        "default 6)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        help="requests taken back to back before the rate applies (or REBALANCER_SIDECAR_BURST; "
        "default 3)",
    )
    parser.add_argument("--pod-name", help="this pod's name (default POD_NAME, else the host name)")
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    parser.set_defaults(command_module=sys.modules[__name__])


async def serve(settings: SidecarSettings) -> int:
    tokens = TokenFile(settings.token_file)
    if tokens.current() is None:
        print(
            f"rebalancer sidecar: the token file {settings.token_file} is missing or empty; "
            "mount the token Secret there",
            file=sys.stderr,
        )
        return 2
    try:
        agent = await SidecarAgent.start(settings)
    except KafkaGatewayError as error:
        print(f"rebalancer sidecar: cannot prepare the control topics: {error}", file=sys.stderr)
        return 1
    app = build_app(agent, tokens, RateLimiter(settings.rate_per_minute, settings.burst))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.listen_host, settings.listen_port)
    try:
        await site.start()
    except OSError as error:
        print(
            f"rebalancer sidecar: cannot listen on {settings.listen_host}:"
            f"{settings.listen_port}: {error.strerror}",
            file=sys.stderr,
        )
        await runner.cleanup()
        await agent.stop()
        return 1
    logger.info("sidecar ready: %s", describe_settings(settings))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    logger.info("stopping: leaving the group")
    await runner.cleanup()
    await agent.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        settings = load_settings(
            bootstrap=args.bootstrap,
            group_id=args.group_id,
            config_file=args.config_file,
            token_file=args.token_file,
            listen=args.listen,
            rate_per_minute=args.rate_per_minute,
            burst=args.burst,
            pod_name=args.pod_name,
        )
    except SettingsError as error:
        print(f"rebalancer sidecar: {error}", file=sys.stderr)
        return 2
    return asyncio.run(serve(settings))
