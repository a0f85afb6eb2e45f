"""`rebalancer lab`: the whole system on one machine, no cluster needed.

The `rebalancer` command finds this module through the `rebalancer.commands` entry point the
lab's distribution declares (lab/pyproject.toml); the operator's own package holds none of it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import time
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="run Kafka, a Kubernetes control plane, the operator and an example fleet here",
        description=(
            "Start Apache Kafka (KRaft, fetched from Maven Central once), Kubernetes' control "
            "plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, built from "
            "Kubernetes' Go modules once) with a kubeconfig for kubectl, the lab's kubelet, the "
            "operator, the example ConsumerGroup and StatefulSet from deploy/examples, a "
            "producer and real consumer pods; then show live what the operator sees until "
            "Ctrl-C, and stop everything it started."
        ),
    )
    default_state = Path(tempfile.gettempdir()) / "rebalancer-lab"
    parser.add_argument("--host", default="127.0.0.1", help="address every part listens on")
    parser.add_argument(
        "--broker-port",
        type=int,
        default=9092,
        help="Kafka port of a one-node lab (default 9092; a three-node lab picks free ports)",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        choices=[1, 3],
        default=1,
        help="Apache Kafka nodes: 1 combined broker and controller, or 3 (default 1)",
    )
    parser.add_argument(
        "--initial-rebalance-delay-ms",
        type=int,
        default=3000,
        help="the brokers' group.initial.rebalance.delay.ms (default 3000, Kafka's production "
        "default)",
    )
    parser.add_argument(
        "--reports-port", type=int, default=8090, help="operator's member-report port (8090)"
    )
    parser.add_argument(
        "--admission-port",
        type=int,
        default=9443,
        help="port of the operator's admission webhook, which refuses a ConsumerGroup whose "
        "group or workload another one manages (9443; 0 turns it off)",
    )
    parser.add_argument(
        "--prometheus-port",
        type=int,
        default=9090,
        help="port of the lab's Prometheus server, started when a prometheus binary is installed "
        "(default 9090; 0 turns it off)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=default_state,
        help=f"kubeconfig, logs and history go here (default {default_state})",
    )
    parser.add_argument("--consumers", type=int, default=3, help="consumer processes (default 3)")
    parser.add_argument("--partitions", type=int, default=12, help="topic partitions (default 12)")
    parser.add_argument(
        "--start-spread",
        type=float,
        default=2.0,
        help="seconds between consumer starts, like pods that start apart (default 2)",
    )
    parser.add_argument(
        "--rate", type=float, default=20.0, help="messages per second produced (default 20)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop by itself after this many seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--no-pods",
        dest="pods",
        action="store_false",
        help="start the consumers as plain processes instead of running the example "
        "StatefulSet's pods through the lab's kubelet",
    )
    parser.add_argument(
        "--jitter",
        default="uniform(0,3)",
        help="start-up delay of each pod: a number of seconds, fixed(s), uniform(a,b), "
        "exponential(mean), normal(mu,sigma) or cycle(s1,s2,...) (default uniform(0,3))",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print one status line per second instead of the live table (default when the "
        "output is not a terminal)",
    )
    parser.set_defaults(command_module=sys.modules[__name__])


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every `rebalancer` command loads this module to list it.
    from rich.console import Console
    from rich.live import Live

    from rebalancer_lab.display import LabView, read_view, render, summary_line
    from rebalancer_lab.running import Lab, LabConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s lab: %(message)s")
    config = LabConfig(
        state_dir=args.state_dir,
        host=args.host,
        broker_port=args.broker_port,
        brokers=args.brokers,
        initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        reports_port=args.reports_port,
        admission_port=args.admission_port or None,
        prometheus_port=args.prometheus_port or None,
        consumers=args.consumers,
        partitions=args.partitions,
        start_spread_seconds=args.start_spread,
        rate=args.rate,
    )
    console = Console()
    lab = Lab(config)

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    # `kill` or a closed terminal stops the lab as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    started = time.monotonic()
    try:
        lab.start(pods=args.pods, jitter=args.jitter if args.pods else None)
        api_client = lab.api_client
        assert api_client is not None and lab.kubeconfig is not None
        console.print(
            f"[bold]Lab is up.[/bold] Try: kubectl --kubeconfig {lab.kubeconfig} get consumergroups"
        )
        console.print(
            f"Metrics: {lab.metrics_url}"
            + (f"  Prometheus: {lab.prometheus_url}" if lab.prometheus_url else "")
        )
        plain = args.plain or not console.is_terminal
        title = f"ConsumerGroup {config.namespace}/{config.group_id}"

        def view() -> LabView:
            running = lab.running_consumers()
            return read_view(api_client, config.namespace, config.group_id, running)

        def expired() -> bool:
            return args.duration is not None and time.monotonic() - started > args.duration

        if plain:
            while not expired():
                print(summary_line(view()), flush=True)
                time.sleep(1)
        else:
            with Live(console=console, refresh_per_second=2) as live:
                while not expired():
                    live.update(render(view(), title))
                    time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping the lab ...")
    finally:
        # A second Ctrl-C or `kill` (a terminal and `make` both pass theirs on) must not cut
        # the stop short and leave brokers or a control plane behind.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        lab.stop()
    return 0
