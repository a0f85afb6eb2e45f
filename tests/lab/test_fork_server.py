"""The kubelet's fork server: a forked container behaves as one started on its own would."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.lab.support import Lab, alive, container, pid_of, pod, wait_for

from rebalancer.structs.gates import GATE_ANNOTATION, GATE_OPEN
from rebalancer_lab.kube.requesting import resource_path
from rebalancer_lab.kubelet.forking import ForkServer
from rebalancer_lab.kubelet.processes import ContainerProcess
from rebalancer_lab.manifests import gate_rbac

PROBE = textwrap.dedent(
    """
    import os, signal, sys, time

    mode = sys.argv[1]
    if mode == "exit":
        print("argv", sys.argv[1:], "cwd", os.getcwd())
        print("to stderr", file=sys.stderr)
        raise SystemExit(int(sys.argv[2]))
    if mode == "env":
        print("GREETING", os.environ.get("GREETING"), "SERVER_ONLY", os.environ.get("SERVER_ONLY"))
    if mode == "crash":
        raise RuntimeError("boom")
    if mode == "graceful":
        def stop(*_):
            print("got SIGTERM")
            time.sleep(0.3)
            print("closed cleanly")
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode in ("graceful", "stubborn"):
        print("ready")
        while True:
            time.sleep(0.05)
    """
)


@pytest.fixture
def forker(tmp_path: Path) -> Iterator[ForkServer]:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "fork_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(modules), "SERVER_ONLY": "yes"}
    server = ForkServer(
        sys.executable,
        tmp_path / "server.log",
        preload=("json",),
        prefixes=("fork_probe",),
        env=env,
    )
    yield server
    server.stop()


def start(forker: ForkServer, tmp_path: Path, *args: str, **env: str) -> ContainerProcess:
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": forker.env["PYTHONPATH"], **env}
    process = ContainerProcess(
        [sys.executable, "-m", "fork_probe", *args],
        base,
        tmp_path / "rootfs",
        tmp_path / "logs" / "0.log",
        forker=forker,
    )
    process.start()
    assert process.forked, "the command should have been forked, not started on its own"
    return process


def finished(process: ContainerProcess, timeout: float = 10.0) -> int:
    return wait_for(lambda: (code := process.poll()) is not None and (code,), timeout)[0]


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "logs" / "0.log").read_text()


def test_exit_code_argv_cwd_and_both_streams_reach_the_container(
    forker: ForkServer, tmp_path: Path
) -> None:
    process = start(forker, tmp_path, "exit", "3")

    assert finished(process) == 3
    log = log_of(tmp_path)
    assert "argv ['exit', '3']" in log
    assert f"cwd {tmp_path / 'rootfs'}" in log
    assert "to stderr" in log


def test_the_child_sees_the_containers_environment_only(forker: ForkServer, tmp_path: Path) -> None:
    process = start(forker, tmp_path, "env", GREETING="hello")

    assert finished(process) == 0
    assert "GREETING hello SERVER_ONLY None" in log_of(tmp_path)


def test_an_uncaught_exception_exits_1_with_its_traceback(
    forker: ForkServer, tmp_path: Path
) -> None:
    process = start(forker, tmp_path, "crash")

    assert finished(process) == 1
    log = log_of(tmp_path)
    assert "RuntimeError: boom" in log
    assert "_Become" not in log  # no trace of the server's own machinery


def test_sigterm_reaches_the_childs_handler_which_may_finish_in_its_grace(
    forker: ForkServer, tmp_path: Path
) -> None:
    process = start(forker, tmp_path, "graceful")
    wait_for(lambda: "ready" in log_of(tmp_path), what="the child's handler installed")
    assert os.getsid(process.pid or 0) == process.pid  # a session (and group) of its own

    process.terminate()

    assert finished(process) == 0
    assert "got SIGTERM" in log_of(tmp_path)
    assert "closed cleanly" in log_of(tmp_path)


def test_a_child_ignoring_sigterm_is_killed_with_137(forker: ForkServer, tmp_path: Path) -> None:
    process = start(forker, tmp_path, "stubborn")
    wait_for(lambda: "ready" in log_of(tmp_path), what="the child running")
    process.terminate()
    time.sleep(0.5)
    assert process.poll() is None

    process.kill()

    assert process.poll() == 128 + signal.SIGKILL
    assert not alive(process.pid or 0)


def test_other_commands_are_started_on_their_own(forker: ForkServer, tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": forker.env["PYTHONPATH"]}
    assert forker.module_of([sys.executable, "-m", "fork_probe"], env) == "fork_probe"
    assert forker.module_of([sys.executable, "-m", "json.tool"], env) is None
    assert forker.module_of([sys.executable, "-c", "pass"], env) is None
    assert forker.module_of(["/bin/sh", "-m", "fork_probe"], env) is None
    other = {**env, "PYTHONPATH": "/elsewhere"}
    assert forker.module_of([sys.executable, "-m", "fork_probe"], other) is None


def test_the_lab_forks_its_own_consumers_gates_and_sidecars(tmp_path: Path) -> None:
    # The example consumer lives in the lab's package, the gate and sidecar in the operator's:
    # all three start together in a rollout, so all three must skip their own imports.
    server = ForkServer(sys.executable, tmp_path / "server.log", env=dict(os.environ))
    env = {"PATH": os.environ["PATH"]}
    for module in ("rebalancer_lab.consumer", "rebalancer.cli"):
        assert server.module_of([sys.executable, "-m", module], env) == module
    assert server.module_of([sys.executable, "-m", "rebalancer_labs.other"], env) is None


def test_a_started_server_has_its_imports_done_before_the_first_container(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "fork_probe.py").write_text(PROBE)
    (modules / "slow_import.py").write_text("import time\ntime.sleep(1.5)\n")
    env = {**os.environ, "PYTHONPATH": str(modules)}
    server = ForkServer(
        sys.executable,
        tmp_path / "server.log",
        preload=("slow_import",),
        prefixes=("fork_probe",),
        env=env,
    )
    try:
        server.start()
        time.sleep(2.5)
        began = time.monotonic()
        child = server.spawn("fork_probe", ["exit", "0"], env, tmp_path, tmp_path / "a.log")

        assert child.wait(timeout=10) == 0
        assert time.monotonic() - began < 1.0, "the first container waited for the preload"
    finally:
        server.stop()


def test_a_gate_pod_runs_forked_and_goes_on_when_its_gate_opens(lab: Lab) -> None:
    # The pod acts as its ServiceAccount: it gets what the chart gives a gated fleet's.
    for document in gate_rbac(lab.namespace):
        kind = "roles" if document["kind"] == "Role" else "rolebindings"
        lab.api.create(resource_path("rbac.authorization.k8s.io/v1", kind, lab.namespace), document)
    gate = container(
        "gate",
        ["python", "-m", "rebalancer", "gate", "--timeout", "60"],
        env=[
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
        ],
    )
    lab.create(pod("gated", container(), initContainers=[gate]))

    def gate_pid() -> int | None:
        statuses = (lab.get("gated").get("status") or {}).get("initContainerStatuses") or [{}]
        return pid_of(statuses[0]) if "running" in statuses[0].get("state", {}) else None

    pid = wait_for(gate_pid, what="the gate running")
    assert lab.kubelet.kubelet is not None and lab.kubelet.kubelet.forker is not None
    parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1]
    assert int(parent) != os.getpid(), "the gate should be a child of the fork server"

    annotations = {"metadata": {"annotations": {GATE_ANNOTATION: GATE_OPEN}}}
    lab.api.patch(lab.path("pods", "gated"), annotations)

    def main_running() -> bool:
        status = lab.get("gated").get("status") or {}
        inits = status.get("initContainerStatuses") or [{}]
        mains = status.get("containerStatuses") or [{}]
        exited = (inits[0].get("state") or {}).get("terminated") or {}
        return exited.get("exitCode") == 0 and "running" in (mains[0].get("state") or {})

    wait_for(main_running, timeout=20, what="the gate exiting 0 and the main container running")


def test_a_dead_server_takes_its_children_along_and_the_next_container_gets_a_new_one(
    forker: ForkServer, tmp_path: Path
) -> None:
    orphan = start(forker, tmp_path, "stubborn")
    wait_for(lambda: "ready" in log_of(tmp_path), what="the child running")
    server = forker._process
    assert server is not None
    server.kill()

    assert finished(orphan) == 128 + signal.SIGKILL
    assert not alive(orphan.pid or 0)
    again = start(forker, tmp_path, "exit", "0")
    assert finished(again) == 0
    assert forker._process is not server
