"""The join gate against the real API server: opening, batch mates, timeout, bypass, faults.

The pods are parked (tests.reconcilers.rollouts.support): the tests run the gates themselves,
in process or as `rebalancer gate` processes with the admin's kubeconfig, and no kubelet runs
the pods.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.kube_clusters import SharedCluster
from tests.reconcilers.rollouts.support import create_pods, until

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator
from rebalancer.commands.gate import resolve_endpoint
from rebalancer.gate.verdicts import GateLimits, Verdict, decide
from rebalancer.gate.waiting import ApiEndpoint, wait_at_gate
from rebalancer.structs.gates import GATE_HELD_ANNOTATION, INSTANCE_ID_ANNOTATION
from rebalancer.structs.specs import WorkloadKind
from rebalancer_lab.api_faults import FaultyApi


def quiet(_message: str) -> None:
    return None


@pytest.fixture
def endpoint(cluster: SharedCluster) -> ApiEndpoint:
    """The API server as the admin's kubeconfig reaches it (TLS, client certificate)."""
    return resolve_endpoint(None, cluster.kubeconfig, {})


def annotate(kube: KubernetesApi, ns: str, pod: str, annotations: dict[str, str]) -> None:
    kube.core.patch_namespaced_pod(
        pod,
        ns,
        {"metadata": {"annotations": annotations}},
        _content_type="application/merge-patch+json",
        _preload_content=False,
    )


async def later(delay: float, action: object, *args: object) -> None:
    await asyncio.sleep(delay)
    await asyncio.to_thread(action, *args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("annotations", "waited", "silent", "limits", "verdict"),
    [
        ({"rebalancer.dev/gate": "open"}, 1000.0, 1000.0, GateLimits(10, 10), Verdict.OPEN),
        ({}, 11.0, 0.0, GateLimits(10, 0), Verdict.TIMEOUT),
        ({}, 5.0, 5.0, GateLimits(10, 4), Verdict.BYPASS),
        ({}, 5.0, 3.0, GateLimits(10, 4), Verdict.WAIT),
        ({}, 1e6, 1e6, GateLimits(0, 0), Verdict.WAIT),
    ],
)
def test_verdicts(
    annotations: dict[str, str], waited: float, silent: float, limits: GateLimits, verdict: Verdict
) -> None:
    assert decide(annotations, waited, silent, limits).verdict is verdict


def test_recheck_is_the_nearest_limit() -> None:
    assert decide({}, 5.0, 3.0, GateLimits(10, 4)).recheck_s == pytest.approx(1.0)
    assert decide({}, 5.0, 3.0, GateLimits(0, 0)).recheck_s is None


async def test_gate_opens_when_its_annotation_says_so(
    endpoint: ApiEndpoint, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    started = time.monotonic()
    opener = asyncio.create_task(
        later(0.6, annotate, kube, ns, "orders-0", {"rebalancer.dev/gate": "open"})
    )
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(20, 0), quiet)
    await opener
    assert outcome.verdict is Verdict.OPEN
    assert 0.5 < time.monotonic() - started < 3.0


async def test_a_pod_opened_before_its_gate_started_goes_at_once(
    endpoint: ApiEndpoint, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    opened = {"rebalancer.dev/gate": "open", "rebalancer.dev/gate-batch": "a/1"}
    annotate(kube, ns, "orders-0", opened)
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(5, 0), quiet)
    assert outcome.verdict is Verdict.OPEN
    assert "batch a/1" in outcome.message
    assert outcome.waited_s < 1.0


async def test_the_gate_times_out(endpoint: ApiEndpoint, kube: KubernetesApi, ns: str) -> None:
    create_pods(kube, ns, "orders-0")
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(1.0, 0), quiet)
    assert outcome.verdict is Verdict.TIMEOUT
    assert "gave up after 1 s" in outcome.message
    assert 1.0 <= outcome.waited_s < 2.0


async def test_the_gate_bypasses_itself_when_the_operator_is_absent(
    endpoint: ApiEndpoint, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(30, 1.0), quiet)
    assert outcome.verdict is Verdict.BYPASS
    assert "no sign of the operator" in outcome.message


async def test_holds_keep_the_gate_closed_until_it_opens(
    endpoint: ApiEndpoint, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")

    async def operator() -> None:
        for index in range(6):
            await asyncio.sleep(0.5)
            held = {GATE_HELD_ANNOTATION: f"2024-01-01T00:00:0{index}Z"}
            await asyncio.to_thread(annotate, kube, ns, "orders-0", held)
        await asyncio.to_thread(annotate, kube, ns, "orders-0", {"rebalancer.dev/gate": "open"})

    task = asyncio.create_task(operator())
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(30, 1.2), quiet)
    await task
    assert outcome.verdict is Verdict.OPEN
    assert outcome.waited_s > 3.0  # longer than the bypass time, held all along


async def test_the_gate_rewatches_after_dropped_streams_and_errors(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    messages: list[str] = []
    with FaultyApi(cluster.plane) as faulty:

        async def trouble() -> None:
            # Once the gate watches through the proxy: cut the watch, fail what comes next.
            await until(faulty.drop_watches, "the gate's watch", 10)
            faulty.inject(status=503, method="GET", path_regex="/pods", times=3)
            faulty.drop_watches()
            await asyncio.sleep(1.0)
            await asyncio.to_thread(annotate, kube, ns, "orders-0", {"rebalancer.dev/gate": "open"})

        task = asyncio.create_task(trouble())
        outcome = await wait_at_gate(
            ApiEndpoint(faulty.url), ns, "orders-0", GateLimits(20, 0), messages.append
        )
        await task
        assert not faulty.active(), "the gate did not meet all three errors"
    assert outcome.verdict is Verdict.OPEN
    assert any("HTTP 503" in message and "retrying" in message for message in messages)


async def test_a_deleted_pod_ends_the_wait(
    endpoint: ApiEndpoint, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    deleter = asyncio.create_task(later(0.5, kube.core.delete_namespaced_pod, "orders-0", ns))
    outcome = await wait_at_gate(endpoint, ns, "orders-0", GateLimits(20, 0), quiet)
    await deleter
    assert outcome.gone
    assert "deleted" in outcome.message


def gate_process(cluster: SharedCluster, ns: str, pod: str, *extra: str) -> subprocess.Popen[str]:
    """`rebalancer gate` for `pod`, reaching the API server with the admin's kubeconfig."""
    env = {k: v for k, v in os.environ.items() if k != "REBALANCER_API_SERVER"}
    env.update(POD_NAME=pod, POD_NAMESPACE=ns, KUBECONFIG=str(cluster.kubeconfig))
    return subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "gate", *extra],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def wait_for_line(process: subprocess.Popen[str], words: str, timeout: float = 20.0) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if words in line:
            return line
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"no {words!r} from the gate")


def logged_at(line: str) -> float:
    stamp = line.split(" ", 1)[0]
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_batch_mates_leave_their_gates_within_milliseconds(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    """Six `rebalancer gate` processes that started at different times; one OpenGate."""
    names = [f"orders-{index}" for index in range(6)]
    create_pods(kube, ns, *names)
    processes = []
    for name in names:
        processes.append(gate_process(cluster, ns, name, "--timeout", "60"))
        await asyncio.sleep(0.3)  # the pods reach their gates at different moments
    for process in processes:
        wait_for_line(process, "waiting for the operator")
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "orders")
    await actuator.open_gates("r1/1", names)
    lines = [
        wait_for_line(process, "gate opened by the operator (batch r1/1)") for process in processes
    ]
    codes = [process.wait(timeout=20) for process in processes]
    assert codes == [0] * 6
    moments = [logged_at(line) for line in lines]
    assert max(moments) - min(moments) < 0.25


def test_the_command_exits_1_on_timeout_and_2_without_a_pod_name(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    create_pods(kube, ns, "orders-0")
    process = gate_process(cluster, ns, "orders-0", "--timeout", "1")
    assert process.wait(timeout=30) == 1
    assert process.stderr is not None
    assert "gave up after" in process.stderr.read()
    env = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    done = subprocess.run(
        [sys.executable, "-m", "rebalancer", "gate", "--kubeconfig", str(cluster.kubeconfig)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "set POD_NAME and POD_NAMESPACE from the downward API" in done.stderr


def test_the_command_exits_3_for_a_pod_that_is_not_there(cluster: SharedCluster, ns: str) -> None:
    process = gate_process(cluster, ns, "nobody-0", "--timeout", "10")
    assert process.wait(timeout=30) == 3


def test_endpoint_from_the_environment(cluster: SharedCluster) -> None:
    plain = resolve_endpoint(None, None, {"REBALANCER_API_SERVER": "http://127.0.0.1:1/"})
    assert plain == ApiEndpoint("http://127.0.0.1:1")
    from_file = resolve_endpoint(None, None, {"KUBECONFIG": str(cluster.kubeconfig)})
    assert from_file.server == cluster.plane.server
    # The admin's kubeconfig authenticates with a client certificate, checked against its CA.
    assert from_file.cert_file and from_file.key_file and from_file.ca_file
    assert from_file.token is None and not from_file.insecure
    in_cluster = resolve_endpoint(
        None, None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert in_cluster.server == "https://10.0.0.1:443"
    assert in_cluster.token_file == Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


async def test_a_batch_opens_in_one_wave_even_when_the_default_executor_is_busy(
    kube: KubernetesApi, ns: str
) -> None:
    """Other handlers may hold every thread of asyncio's default executor; the batch's patches
    must not queue behind them."""
    names = [f"wave-{index}" for index in range(12)]
    create_pods(kube, ns, *names)
    loop = asyncio.get_running_loop()
    # Twice what asyncio's default executor holds (min(32, cores + 4) threads): every thread
    # busy for 2 s, and as many again queued behind them.
    threads = min(32, (os.cpu_count() or 1) + 4)
    busy = [loop.run_in_executor(None, time.sleep, 2.0) for _ in range(2 * threads)]
    await asyncio.sleep(0.05)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "wave")

    started = time.monotonic()
    await actuator.open_gates("w1/1", names)
    took = time.monotonic() - started

    assert took < 1.5, f"opening 12 gates took {took:.2f} s behind a busy default executor"
    for name in names:
        pod = kube.core.read_namespaced_pod(name, ns)
        assert pod.metadata.annotations["rebalancer.dev/gate"] == "open"
    await asyncio.gather(*busy)


@pytest.mark.parametrize(
    ("open_at", "wall_now", "verdict", "recheck"),
    [
        ("1000.5", 1000.0, Verdict.WAIT, 0.5),  # opened, the batch's moment is ahead
        ("1000.0", 1000.0, Verdict.OPEN, None),  # the moment has come
        ("999.0", 1000.0, Verdict.OPEN, None),  # a late patch: go at once
        ("1030.0", 1000.0, Verdict.OPEN, None),  # further ahead than clocks can disagree
        ("soon", 1000.0, Verdict.OPEN, None),  # unreadable: an open gate is open
        ("nan", 1000.0, Verdict.OPEN, None),
    ],
)
def test_an_open_gate_waits_for_its_batchs_release_moment(
    open_at: str, wall_now: float, verdict: Verdict, recheck: float | None
) -> None:
    annotations = {"rebalancer.dev/gate": "open", "rebalancer.dev/gate-open-at": open_at}
    decision = decide(annotations, 5.0, 5.0, GateLimits(10, 0), wall_now)
    assert decision.verdict is verdict
    if recheck is not None:
        assert decision.recheck_s == pytest.approx(recheck)


async def test_gates_opened_seconds_apart_let_go_together_at_the_release_moment(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    """A slow API delivers a batch's patches over a second or more; the gates still go at the
    one moment the operator wrote."""
    names = ["late-0", "late-1", "late-2"]
    create_pods(kube, ns, *names)
    processes = [gate_process(cluster, ns, name, "--timeout", "60") for name in names]
    for process in processes:
        wait_for_line(process, "waiting for the operator")
    moment = time.time() + 2.5
    for name in names:
        annotate(
            kube,
            ns,
            name,
            {
                "rebalancer.dev/gate": "open",
                "rebalancer.dev/gate-batch": "r1/1",
                "rebalancer.dev/gate-open-at": f"{moment:.3f}",
            },
        )
        await asyncio.sleep(0.8)  # the next pod's patch comes this much later
    lines = [wait_for_line(process, "gate opened by the operator") for process in processes]
    assert [process.wait(timeout=20) for process in processes] == [0, 0, 0]
    moments = [logged_at(line) for line in lines]
    assert max(moments) - min(moments) < 0.25
    assert min(moments) >= moment - 0.05


def test_a_gate_that_holds_the_join_writes_its_files_and_stays_until_stopped(
    cluster: SharedCluster, kube: KubernetesApi, ns: str, tmp_path: Path
) -> None:
    """A native sidecar's gate: the consumer beside it starts at once and waits for the file;
    the gate must not exit, or its pod's kubelet would restart it."""
    create_pods(kube, ns, "orders-0")
    process = gate_process(cluster, ns, "orders-0", "--timeout", "60", "--hold-join", str(tmp_path))
    wait_for_line(process, "waiting for the operator")
    assert not (tmp_path / "open").exists()
    annotate(kube, ns, "orders-0", {INSTANCE_ID_ANNOTATION: "orders-slot-3"})
    annotate(kube, ns, "orders-0", {"rebalancer.dev/gate": "open"})
    wait_for_line(process, "the consumer may join")
    assert (tmp_path / "open").read_text() == "open\n"
    assert (tmp_path / "instance-id").read_text() == "orders-slot-3"
    time.sleep(0.5)
    assert process.poll() is None, "a join-holding gate exited after it opened"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
