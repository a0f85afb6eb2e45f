"""The lab's kubelet on the real control plane: pods bound to its node run as real processes,
and their status says so, as a kubelet reports it."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.lab.conftest import OwnKubelet
from tests.lab.support import (
    Lab,
    PodWatch,
    alive,
    container,
    flag_probe,
    is_ready,
    pid_of,
    pod,
    python_script,
    wait_for,
)

from rebalancer_lab.kube.objects import condition
from rebalancer_lab.kubelet import DELAY_ANNOTATION


def running_pid(lab: Lab, name: str) -> int:
    def probe() -> int | None:
        statuses = lab.get(name)["status"].get("containerStatuses") or [{}]
        return pid_of(statuses[0]) if "running" in statuses[0].get("state", {}) else None

    return wait_for(probe, what=f"{name}'s container running")


def delete(lab: Lab, name: str) -> None:
    lab.api.delete(lab.path("pods", name))


def test_a_pod_runs_as_a_process_and_reports_running_and_ready(lab: Lab) -> None:
    lab.create(
        pod(
            "web",
            container(
                command=python_script("print('serving', flush=True); import time; time.sleep(600)")
            ),
        )
    )

    body = wait_for(
        lambda: (
            (b := lab.get("web"))
            and b["status"].get("phase") == "Running"
            and condition(b, "Ready")["status"] == "True"
            and b
        ),
        what="web Ready",
    )
    assert body["spec"]["nodeName"] == "lab"
    # An address of its own, on the loopback network; the node is 127.0.0.1.
    assert body["status"]["podIP"].startswith("127.") and body["status"]["podIP"] != "127.0.0.1"
    assert body["status"]["podIPs"] == [{"ip": body["status"]["podIP"]}]
    assert body["status"]["hostIP"] == "127.0.0.1"
    # A real API server keeps a deleted pod until its kubelet deletes it with grace 0: the
    # kubelet needs no finalizer of its own.
    assert not body["metadata"].get("finalizers")
    types = {c["type"]: c["status"] for c in body["status"]["conditions"]}
    assert types == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    (status,) = body["status"]["containerStatuses"]
    assert status["ready"] and status["started"] and "running" in status["state"]
    assert alive(pid_of(status))
    wait_for(lambda: "serving" in lab.logs("web", "main"), what="the container's log")


def test_env_has_the_downward_api_config_maps_secrets_and_mounted_files(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REBALANCER_TEST_LEAK", "1")
    lab.api.create(
        lab.path("configmaps"),
        {
            "metadata": {"name": "settings"},
            "data": {"mode": "fast", "app.yaml": "threads: 4\n", "LEVEL": "debug"},
        },
    )
    lab.api.create(
        lab.path("secrets"),
        {
            "metadata": {"name": "creds"},
            "stringData": {"password": "s3cret", "token": "t0k"},
        },
    )
    script = (
        "import json, os, sys; "
        "files = {p: open(p).read() for p in sys.argv[1:]}; "
        "print(json.dumps({'env': dict(os.environ), 'files': files, 'argv': sys.argv[1:]}),"
        " flush=True); import time; time.sleep(600)"
    )
    main = container(
        command=["python", "-c", script],
        args=["/etc/app/app.yaml", "/etc/creds/pw", "$(CONFIG_DIR)/app.yaml"],
        env=[
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
            {
                "name": "PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
            },
            {
                "name": "ABSENT",
                "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}},
            },
            {"name": "GREETING", "value": "hello $(POD_NAME), $$(POD_NAME) stays"},
            {"name": "CONFIG_DIR", "value": "/etc/app"},
        ],
        envFrom=[
            {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
            {"secretRef": {"name": "creds"}},
        ],
        volumeMounts=[
            {"name": "config", "mountPath": "/etc/app"},
            {"name": "secret", "mountPath": "/etc/creds"},
        ],
    )
    body = pod(
        "env-demo",
        main,
        volumes=[
            {"name": "config", "configMap": {"name": "settings"}},
            {
                "name": "secret",
                "secret": {"secretName": "creds", "items": [{"key": "password", "path": "pw"}]},
            },
        ],
    )
    body["metadata"]["labels"]["team"] = "payments"
    created = lab.create(body)

    output = wait_for(lambda: lab.logs("env-demo", "main"), what="the dump of the env")
    dumped = json.loads(output.splitlines()[0])
    env, files = dumped["env"], dumped["files"]
    assert env["POD_NAME"] == "env-demo"
    assert env["HOSTNAME"] == "env-demo"
    assert env["POD_NAMESPACE"] == lab.namespace
    assert env["POD_UID"] == created["metadata"]["uid"]
    assert env["POD_IP"] == lab.get("env-demo")["status"]["podIP"] != "127.0.0.1"
    assert env["TEAM"] == "payments"
    assert env["MODE"] == "fast"
    assert env["PASSWORD"] == "s3cret"
    assert "ABSENT" not in env
    assert env["GREETING"] == "hello env-demo, $(POD_NAME) stays"
    assert env["CFG_mode"] == "fast" and env["CFG_LEVEL"] == "debug"
    assert env["token"] == "t0k"
    root = env["REBALANCER_LAB_ROOT"]
    assert Path(env["KUBECONFIG"]).exists()
    # Mount paths in args and env values point into the container's root.
    assert env["CONFIG_DIR"] == f"{root}/etc/app"
    assert dumped["argv"] == [
        f"{root}/etc/app/app.yaml",
        f"{root}/etc/creds/pw",
        f"{root}/etc/app/app.yaml",
    ]
    assert files[f"{root}/etc/app/app.yaml"] == "threads: 4\n"
    assert files[f"{root}/etc/creds/pw"] == "s3cret"
    assert "REBALANCER_TEST_LEAK" not in env, "the lab's own environment leaked into a pod"


def test_a_missing_secret_holds_the_container_until_it_exists(lab: Lab) -> None:
    main = container(
        env=[{"name": "P", "valueFrom": {"secretKeyRef": {"name": "later", "key": "p"}}}]
    )
    lab.create(pod("waits", main))

    def waiting_reason() -> str | None:
        statuses = lab.get("waits")["status"].get("containerStatuses") or []
        return statuses and statuses[0]["state"].get("waiting", {}).get("reason")

    wait_for(lambda: waiting_reason() == "CreateContainerConfigError", what="config error")
    assert lab.phase_of("waits") == "Pending"
    lab.api.create(lab.path("secrets"), {"metadata": {"name": "later"}, "stringData": {"p": "x"}})
    wait_for(lambda: lab.phase_of("waits") == "Running", what="Running once the Secret exists")


def test_init_containers_run_to_completion_in_order_before_the_main_container(lab: Lab) -> None:
    def step(word: str, then: str = "") -> list[str]:
        return ["sh", "-c", f"echo {word} >> /work/order; sleep 0.2; {then}"]

    body = pod(
        "ordered",
        container(
            command=step("main", "sleep 600"), volumeMounts=[{"name": "work", "mountPath": "/work"}]
        ),
        initContainers=[
            container(
                "first", step("first"), volumeMounts=[{"name": "work", "mountPath": "/work"}]
            ),
            container(
                "second", step("second"), volumeMounts=[{"name": "work", "mountPath": "/work"}]
            ),
        ],
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    with PodWatch(lab) as watch:
        lab.create(body)
        wait_for(lambda: lab.phase_of("ordered") == "Running", what="Running")
    order = (lab.volume("ordered", "work") / "order").read_text().split()
    assert order == ["first", "second", "main"]
    # While init containers ran, the pod was Pending and not Initialized.
    during = [
        e.pod
        for e in watch.events
        if any(
            "terminated" not in c["state"]
            for c in e.pod["status"].get("initContainerStatuses") or [{"state": {}}]
        )
    ]
    assert during
    assert {p["status"]["phase"] for p in during} == {"Pending"}
    assert {
        condition(p, "Initialized")["status"]
        for p in during
        if condition(p, "Initialized") is not None
    } == {"False"}
    final = lab.get("ordered")["status"]
    assert [s["state"]["terminated"]["reason"] for s in final["initContainerStatuses"]] == [
        "Completed",
        "Completed",
    ]


def test_a_failing_init_container_keeps_the_pod_pending_and_restarts_with_backoff(
    lab: Lab,
) -> None:
    body = pod("stuck", container(), initContainers=[container("setup", ["sh", "-c", "exit 3"])])
    lab.create(body)

    def restarts() -> int:
        statuses = lab.get("stuck")["status"].get("initContainerStatuses") or [{}]
        return int(statuses[0].get("restartCount") or 0)

    wait_for(lambda: restarts() >= 2, what="init container restarts")
    status = lab.get("stuck")["status"]
    assert status["phase"] == "Pending"
    init = status["initContainerStatuses"][0]
    assert init["lastState"]["terminated"]["exitCode"] == 3
    main = status["containerStatuses"][0]
    assert main["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(lab.get("stuck"), "Initialized")["status"] == "False"


def test_a_failing_init_container_fails_a_pod_that_never_restarts(lab: Lab) -> None:
    body = pod(
        "doomed",
        container(),
        restartPolicy="Never",
        initContainers=[container("setup", ["sh", "-c", "exit 1"])],
    )
    lab.create(body)
    wait_for(lambda: lab.phase_of("doomed") == "Failed", what="phase Failed")
    init = lab.get("doomed")["status"]["initContainerStatuses"][0]
    assert init["state"]["terminated"]["exitCode"] == 1
    assert init["restartCount"] == 0


def test_restart_policies_decide_restarts_and_the_final_phase(lab: Lab) -> None:
    exit_with = {"crashes": 3, "done": 0, "broken": 2, "retried": 0}
    policies = {"crashes": "Always", "done": "Never", "broken": "Never", "retried": "OnFailure"}
    for name, code in exit_with.items():
        lab.create(
            pod(
                name,
                container(command=["sh", "-c", f"sleep 0.1; exit {code}"]),
                restartPolicy=policies[name],
            )
        )

    wait_for(lambda: lab.phase_of("done") == "Succeeded", what="done Succeeded")
    wait_for(lambda: lab.phase_of("broken") == "Failed", what="broken Failed")
    wait_for(lambda: lab.phase_of("retried") == "Succeeded", what="retried Succeeded")
    wait_for(
        lambda: lab.get("crashes")["status"]["containerStatuses"][0]["restartCount"] >= 2,
        what="crashes restarted",
    )
    crashes = lab.get("crashes")["status"]
    assert crashes["phase"] == "Running"
    assert crashes["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3
    broken = lab.get("broken")["status"]["containerStatuses"][0]
    assert broken["state"]["terminated"]["exitCode"] == 2
    assert broken["restartCount"] == 0


def test_an_exec_readiness_probe_decides_readiness(lab: Lab, tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    lab.create(pod("probed", container(readinessProbe=flag_probe(flags))))

    wait_for(lambda: lab.phase_of("probed") == "Running", what="Running")
    time.sleep(0.5)
    body = lab.get("probed")
    assert condition(body, "Ready")["status"] == "False"
    assert condition(body, "ContainersReady")["reason"] == "ContainersNotReady"
    (flags / "probed").touch()
    wait_for(
        lambda: condition(lab.get("probed"), "Ready")["status"] == "True",
        what="Ready once the probe passes",
    )
    (flags / "probed").unlink()
    wait_for(
        lambda: condition(lab.get("probed"), "Ready")["status"] == "False",
        what="unready once the probe fails",
    )


def test_startup_and_liveness_probes(lab: Lab, tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    startup = {
        "exec": {"command": ["sh", "-c", f"test -e {flags}/started"]},
        "periodSeconds": 1,
        "failureThreshold": 30,
    }
    liveness = {
        "exec": {"command": ["sh", "-c", f"test ! -e {flags}/sick"]},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    lab.create(pod("slow", container(startupProbe=startup, livenessProbe=liveness)))

    wait_for(lambda: lab.phase_of("slow") == "Running", what="Running")
    time.sleep(0.3)
    status = lab.get("slow")["status"]["containerStatuses"][0]
    assert status["started"] is False and status["ready"] is False
    (flags / "started").touch()
    wait_for(lambda: lab.get("slow")["status"]["containerStatuses"][0]["ready"], what="ready")
    (flags / "sick").touch()
    wait_for(
        lambda: lab.get("slow")["status"]["containerStatuses"][0]["restartCount"] >= 1,
        what="a restart after the liveness probe failed",
    )


def test_delete_sends_sigterm_and_removes_the_pod_once_the_process_ends(lab: Lab) -> None:
    script = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    print('got SIGTERM', flush=True); time.sleep(1); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    lab.create(pod("graceful", container(command=["python", "-c", script])))
    wait_for(lambda: "up" in lab.logs("graceful", "main"), what="the process up")
    pid = running_pid(lab, "graceful")

    with PodWatch(lab) as watch:
        started = time.monotonic()
        delete(lab, "graceful")
        terminating = lab.get("graceful")
        assert terminating["metadata"]["deletionTimestamp"]
        wait_for(lambda: lab.find("graceful") is None, what="the pod removed")
        removed_after = time.monotonic() - started
    assert removed_after >= 0.9, "removed before the process had finished"
    assert "got SIGTERM" in lab.logs("graceful", "main")
    assert not alive(pid)
    last = [e.pod for e in watch.events if e.type == "MODIFIED"][-1]
    assert condition(last, "Ready")["status"] == "False"
    assert last["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert last["status"]["phase"] == "Succeeded"


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(lab: Lab) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(600)"
    )
    lab.create(
        pod(
            "stubborn", container(command=["python", "-c", script]), terminationGracePeriodSeconds=1
        )
    )
    wait_for(lambda: "up" in lab.logs("stubborn", "main"), what="the process up")
    pid = running_pid(lab, "stubborn")

    with PodWatch(lab) as watch:
        started = time.monotonic()
        delete(lab, "stubborn")
        wait_for(lambda: lab.find("stubborn") is None, what="the pod removed")
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 3
    assert not alive(pid)
    last = [e.pod for e in watch.events if e.type == "MODIFIED"][-1]
    terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137
    assert last["status"]["phase"] == "Failed"


def test_other_finalizers_keep_a_deleted_pod_until_they_are_removed(lab: Lab) -> None:
    body = pod("held", container())
    body["metadata"]["finalizers"] = ["example.com/hold"]
    lab.create(body)
    wait_for(lambda: lab.phase_of("held") == "Running", what="Running")
    pid = running_pid(lab, "held")

    delete(lab, "held")
    wait_for(lambda: not alive(pid), what="the process stopped")

    # The kubelet reports the end and deletes the pod with grace 0, which the API server
    # records as the pod's grace period; the other finalizer still holds the pod.
    wait_for(
        lambda: lab.get("held")["metadata"].get("deletionGracePeriodSeconds") == 0,
        what="the kubelet's final delete",
    )
    # That delete is an event of a pod the kubelet no longer runs: it must leave the status
    # of the end as it is (a new worker once rewrote it as never started).
    time.sleep(1)
    held = lab.get("held")
    assert "terminated" in held["status"]["containerStatuses"][0]["state"], held["status"]
    assert held["metadata"]["finalizers"] == ["example.com/hold"]
    assert held["status"]["phase"] in ("Succeeded", "Failed")
    lab.api.patch(lab.path("pods", "held"), {"metadata": {"finalizers": None}})
    wait_for(lambda: lab.find("held") is None, what="the pod removed")


def test_start_up_jitter_delays_each_pod(own_kubelet: OwnKubelet) -> None:
    lab = own_kubelet(jitter="fixed(1.5)")
    created = time.monotonic()
    lab.create(pod("late", container()))
    body = pod("annotated", container())
    body["metadata"]["annotations"] = {DELAY_ANNOTATION: "0"}
    lab.create(body)

    wait_for(lambda: lab.phase_of("annotated") == "Running", what="annotated Running")
    assert time.monotonic() - created < 1.4, "the annotation overrides the distribution"
    assert lab.phase_of("late") == "Pending"
    late = lab.get("late")
    assert late["spec"]["nodeName"] == lab.node
    assert (
        late["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    )
    wait_for(lambda: lab.phase_of("late") == "Running", what="late Running")
    assert time.monotonic() - created >= 1.5


def test_stop_leaves_no_process_behind(own_kubelet: OwnKubelet) -> None:
    lab = own_kubelet(stop_grace=1.0)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    lab.create(pod("plain", container()))
    lab.create(pod("stubborn", container(command=["python", "-c", stubborn])))
    # A shell whose child would outlive it without a process-group kill.
    lab.create(pod("forks", container(command=["sh", "-c", "sleep 600 & sleep 600"])))
    pids = [running_pid(lab, name) for name in ("plain", "stubborn", "forks")]
    children_file = Path(f"/proc/{pids[2]}/task/{pids[2]}/children")
    children = wait_for(
        lambda: [int(p) for p in children_file.read_text().split()], what="the shell's child"
    )

    started = time.monotonic()
    lab.kubelet.stop()
    assert time.monotonic() - started < 5
    survivors = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in [*pids, *children] if alive(p)}
    assert not survivors, survivors


def test_a_native_sidecar_starts_before_and_stops_after_the_main_container(lab: Lab) -> None:
    def traced(word: str) -> list[str]:
        return [
            "sh",
            "-c",
            f"echo start-{word} >> /work/trace; "
            f"trap 'echo stop-{word} >> /work/trace; exit 0' TERM; "
            "while true; do sleep 0.05; done",
        ]

    mount = [{"name": "work", "mountPath": "/work"}]
    body = pod(
        "with-sidecar",
        container(command=traced("main"), volumeMounts=mount),
        initContainers=[
            container(
                "proxy",
                traced("proxy"),
                volumeMounts=mount,
                restartPolicy="Always",
                startupProbe={
                    "exec": {"command": ["grep", "-q", "start-proxy", "/work/trace"]},
                    "periodSeconds": 1,
                },
            )
        ],
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    lab.create(body)
    wait_for(lambda: is_ready(lab.get("with-sidecar")), what="Ready with its sidecar")
    status = lab.get("with-sidecar")["status"]
    assert "running" in status["initContainerStatuses"][0]["state"]
    assert status["initContainerStatuses"][0]["ready"]
    trace = lab.volume("with-sidecar", "work") / "trace"

    delete(lab, "with-sidecar")
    wait_for(lambda: lab.find("with-sidecar") is None, what="the pod removed")
    assert trace.read_text().split() == ["start-proxy", "start-main", "stop-main", "stop-proxy"]


def test_downward_api_files_follow_label_and_annotation_changes(lab: Lab) -> None:
    volume = {
        "name": "info",
        "downwardAPI": {
            "items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            ]
        },
    }
    body = pod(
        "labelled",
        container(volumeMounts=[{"name": "info", "mountPath": "/info"}]),
        volumes=[volume],
    )
    body["metadata"]["annotations"] = {"gate": "closed"}
    lab.create(body)
    wait_for(lambda: lab.phase_of("labelled") == "Running", what="Running")
    files = lab.volume("labelled", "info")
    assert (files / "name").read_text() == "labelled"
    assert (files / "annotations").read_text() == 'gate="closed"'

    lab.api.patch(lab.path("pods", "labelled"), {"metadata": {"annotations": {"gate": "open"}}})
    wait_for(lambda: (files / "annotations").read_text() == 'gate="open"', what="the new value")


def test_a_pod_held_by_its_init_container_costs_the_kubelet_no_cpu(lab: Lab) -> None:
    """A join gate holds its pod for minutes: the pod's worker must sleep meanwhile, not spin."""

    lab.create(
        pod(
            "held",
            container(),
            initContainers=[container("hold", python_script("import time; time.sleep(600)"))],
        )
    )

    def holding() -> bool:
        statuses = lab.get("held")["status"].get("initContainerStatuses") or [{}]
        return "running" in (statuses[0].get("state") or {})

    wait_for(holding, what="the init container running")
    # The pod's own worker thread: the session's kubelet runs in this process with other
    # tests' pods (some still stopping), so the process's CPU would measure them too.
    worker = worker_thread(f"pod-{lab.namespace}/held")
    before = thread_cpu_seconds(worker)
    time.sleep(3.0)
    used = thread_cpu_seconds(worker) - before
    assert used < 0.6, f"the pod's worker used {used:.2f} s of CPU in 3 s while it was held"


def worker_thread(name: str) -> int:
    [thread] = [t for t in threading.enumerate() if t.name == name]
    assert thread.native_id is not None
    return thread.native_id


def thread_cpu_seconds(native_id: int) -> float:
    """User and system CPU time of one thread of this process (/proc's utime and stime)."""
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[-1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (proc(5)).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reporter(event: dict) -> str:
    # The scheduler writes events.k8s.io Events, which name their reporter only there.
    return str(event.get("reportingComponent") or (event.get("source") or {}).get("component"))


def test_the_kubelet_records_what_it_did_as_events(lab: Lab) -> None:
    lab.create(pod("noted", container()))
    wait_for(lambda: lab.phase_of("noted") == "Running", what="Running")

    def reasons() -> dict[tuple[str, str], str]:
        events = lab.api.list(lab.path("events"))["items"]
        return {(reporter(e), e["reason"]): e["message"] for e in events}

    seen = wait_for(
        lambda: (r := reasons()) and ("kubelet", "Started") in r and r, what="the kubelet's events"
    )
    # The scheduler bound the pod; the kubelet started it.
    assert seen[("default-scheduler", "Scheduled")].endswith(" to lab")
    pulled = 'Container image "example/app:1" already present on machine'
    assert seen[("kubelet", "Pulled")] == pulled
    assert seen[("kubelet", "Created")] == "Created container: main"
    assert seen[("kubelet", "Started")] == "Started container main"


def test_a_container_after_an_init_container_reads_the_pods_latest_annotations(
    own_kubelet: OwnKubelet,
) -> None:
    # An identity slot is written with the gate's open, moments before the gate ends and the
    # consumer starts; the kubelet's pod watch may not have it yet. Here the watch is held
    # back on purpose: the consumer must still start with the slot.
    lab = own_kubelet()
    work = [{"name": "work", "mountPath": "/work"}]
    slot = {"fieldRef": {"fieldPath": "metadata.annotations['example.dev/slot']"}}
    body = pod(
        "slotted",
        container(
            command=["sh", "-c", 'echo "slot=$SLOT" > /work/seen; sleep 600'],
            env=[{"name": "SLOT", "valueFrom": slot}],
            volumeMounts=work,
        ),
        initContainers=[
            container(
                "gate",
                ["sh", "-c", "while [ ! -e /work/open ]; do sleep 0.05; done"],
                volumeMounts=work,
            )
        ],
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    lab.create(body)
    assert lab.kubelet.kubelet is not None
    kubelet = lab.kubelet.kubelet
    worker = wait_for(
        lambda: next((w for w in kubelet.workers.values() if w.name == "slotted"), None),
        what="the pod's worker",
    )
    wait_for(lambda: "running" in gate_state(lab.get("slotted")), what="the gate running, as told")
    volume = lab.volume("slotted", "work")  # made before the gate started
    worker.update = lambda pod: None  # type: ignore[method-assign]  # the watch falls behind
    lab.api.patch(
        lab.path("pods", "slotted"), {"metadata": {"annotations": {"example.dev/slot": "7"}}}
    )
    (volume / "open").touch()
    seen = wait_for(
        lambda: (volume / "seen").exists() and (volume / "seen").read_text().strip(),
        what="the main container's environment",
    )
    assert seen == "slot=7"


def gate_state(body: dict[str, Any]) -> dict[str, Any]:
    statuses = body["status"].get("initContainerStatuses") or [{}]
    return dict(statuses[0].get("state") or {})
