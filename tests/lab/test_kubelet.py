"""The lab's kubelet: pods in the API run as real processes, and their status says so."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest
from tests.lab.conftest import MakeCluster
from tests.lab.support import (
    PODS,
    PodWatch,
    alive,
    container,
    flag_probe,
    pid_of,
    pod,
    python_script,
    wait_for,
)

from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.kube.objects import condition
from rebalancer.lab.kube.requesting import Api
from rebalancer.lab.kubelet import DELAY_ANNOTATION, FINALIZER


def get(api: Api, name: str) -> dict:
    found = api.get(f"{PODS}/{name}")
    assert found is not None, f"pod {name} is gone"
    return found


def phase_of(api: Api, name: str) -> str | None:
    found = api.get(f"{PODS}/{name}")
    return None if found is None else found["status"].get("phase")


def running_pid(api: Api, name: str) -> int:
    def probe() -> int | None:
        statuses = get(api, name)["status"].get("containerStatuses") or [{}]
        return pid_of(statuses[0]) if "running" in statuses[0].get("state", {}) else None

    return wait_for(probe, what=f"{name}'s container running")


def logs(state: Path, pod_name: str, container_name: str) -> str:
    files = sorted(state.glob(f"logs/pods/default_{pod_name}_*/{container_name}/*.log"))
    return "".join(f.read_text() for f in files)


def test_a_pod_runs_as_a_process_and_reports_running_and_ready(
    api: Api, cluster: LabCluster, state: Path
) -> None:
    api.create(
        PODS,
        pod(
            "web",
            container(
                command=python_script("print('serving', flush=True); import time; time.sleep(600)")
            ),
        ),
    )

    body = wait_for(
        lambda: (
            (b := get(api, "web"))
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
    assert FINALIZER in body["metadata"]["finalizers"]
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
    wait_for(lambda: "serving" in logs(state, "web", "main"), what="the container's log")


def test_env_has_the_downward_api_config_maps_secrets_and_mounted_files(
    api: Api, cluster: LabCluster, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REBALANCER_TEST_LEAK", "1")
    api.create(
        "/api/v1/namespaces/default/configmaps",
        {
            "metadata": {"name": "settings"},
            "data": {"mode": "fast", "app.yaml": "threads: 4\n", "LEVEL": "debug"},
        },
    )
    api.create(
        "/api/v1/namespaces/default/secrets",
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
    created = api.create(PODS, body)

    output = wait_for(lambda: logs(state, "env-demo", "main"), what="the dump of the env")
    dumped = json.loads(output.splitlines()[0])
    env, files = dumped["env"], dumped["files"]
    assert env["POD_NAME"] == "env-demo"
    assert env["HOSTNAME"] == "env-demo"
    assert env["POD_NAMESPACE"] == "default"
    assert env["POD_UID"] == created["metadata"]["uid"]
    assert env["POD_IP"] == get(api, "env-demo")["status"]["podIP"] != "127.0.0.1"
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


def test_a_missing_secret_holds_the_container_until_it_exists(
    api: Api, cluster: LabCluster
) -> None:
    main = container(
        env=[{"name": "P", "valueFrom": {"secretKeyRef": {"name": "later", "key": "p"}}}]
    )
    api.create(PODS, pod("waits", main))

    def waiting_reason() -> str | None:
        statuses = get(api, "waits")["status"].get("containerStatuses") or []
        return statuses and statuses[0]["state"].get("waiting", {}).get("reason")

    wait_for(lambda: waiting_reason() == "CreateContainerConfigError", what="config error")
    assert phase_of(api, "waits") == "Pending"
    api.create(
        "/api/v1/namespaces/default/secrets",
        {"metadata": {"name": "later"}, "stringData": {"p": "x"}},
    )
    wait_for(lambda: phase_of(api, "waits") == "Running", what="Running once the Secret exists")


def test_init_containers_run_to_completion_in_order_before_the_main_container(
    api: Api, cluster: LabCluster, state: Path
) -> None:
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
    with PodWatch(api) as watch:
        api.create(PODS, body)
        wait_for(lambda: phase_of(api, "ordered") == "Running", what="Running")
    order = next(state.glob("pods/default_ordered_*/volumes/work/order")).read_text().split()
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
        condition(p, "Initialized")["status"] for p in during if p["status"].get("conditions")
    } == {"False"}
    final = get(api, "ordered")["status"]
    assert [s["state"]["terminated"]["reason"] for s in final["initContainerStatuses"]] == [
        "Completed",
        "Completed",
    ]


def test_a_failing_init_container_keeps_the_pod_pending_and_restarts_with_backoff(
    api: Api, cluster: LabCluster
) -> None:
    body = pod("stuck", container(), initContainers=[container("setup", ["sh", "-c", "exit 3"])])
    api.create(PODS, body)

    def restarts() -> int:
        statuses = get(api, "stuck")["status"].get("initContainerStatuses") or [{}]
        return int(statuses[0].get("restartCount") or 0)

    wait_for(lambda: restarts() >= 2, what="init container restarts")
    status = get(api, "stuck")["status"]
    assert status["phase"] == "Pending"
    init = status["initContainerStatuses"][0]
    assert init["lastState"]["terminated"]["exitCode"] == 3
    main = status["containerStatuses"][0]
    assert main["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(get(api, "stuck"), "Initialized")["status"] == "False"


def test_a_failing_init_container_fails_a_pod_that_never_restarts(
    api: Api, cluster: LabCluster
) -> None:
    body = pod(
        "doomed",
        container(),
        restartPolicy="Never",
        initContainers=[container("setup", ["sh", "-c", "exit 1"])],
    )
    api.create(PODS, body)
    wait_for(lambda: phase_of(api, "doomed") == "Failed", what="phase Failed")
    init = get(api, "doomed")["status"]["initContainerStatuses"][0]
    assert init["state"]["terminated"]["exitCode"] == 1
    assert init["restartCount"] == 0


def test_restart_policies_decide_restarts_and_the_final_phase(
    api: Api, cluster: LabCluster
) -> None:
    exit_with = {"crashes": 3, "done": 0, "broken": 2, "retried": 0}
    policies = {"crashes": "Always", "done": "Never", "broken": "Never", "retried": "OnFailure"}
    for name, code in exit_with.items():
        api.create(
            PODS,
            pod(
                name,
                container(command=["sh", "-c", f"sleep 0.1; exit {code}"]),
                restartPolicy=policies[name],
            ),
        )

    wait_for(lambda: phase_of(api, "done") == "Succeeded", what="done Succeeded")
    wait_for(lambda: phase_of(api, "broken") == "Failed", what="broken Failed")
    wait_for(lambda: phase_of(api, "retried") == "Succeeded", what="retried Succeeded")
    wait_for(
        lambda: get(api, "crashes")["status"]["containerStatuses"][0]["restartCount"] >= 2,
        what="crashes restarted",
    )
    crashes = get(api, "crashes")["status"]
    assert crashes["phase"] == "Running"
    assert crashes["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3
    broken = get(api, "broken")["status"]["containerStatuses"][0]
    assert broken["state"]["terminated"]["exitCode"] == 2
    assert broken["restartCount"] == 0


def test_an_exec_readiness_probe_decides_readiness(
    api: Api, cluster: LabCluster, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    api.create(PODS, pod("probed", container(readinessProbe=flag_probe(flags))))

    wait_for(lambda: phase_of(api, "probed") == "Running", what="Running")
    time.sleep(0.5)
    body = get(api, "probed")
    assert condition(body, "Ready")["status"] == "False"
    assert condition(body, "ContainersReady")["reason"] == "ContainersNotReady"
    (flags / "probed").touch()
    wait_for(
        lambda: condition(get(api, "probed"), "Ready")["status"] == "True",
        what="Ready once the probe passes",
    )
    (flags / "probed").unlink()
    wait_for(
        lambda: condition(get(api, "probed"), "Ready")["status"] == "False",
        what="unready once the probe fails",
    )


def test_startup_and_liveness_probes(api: Api, cluster: LabCluster, tmp_path: Path) -> None:
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
    api.create(PODS, pod("slow", container(startupProbe=startup, livenessProbe=liveness)))

    wait_for(lambda: phase_of(api, "slow") == "Running", what="Running")
    time.sleep(0.3)
    status = get(api, "slow")["status"]["containerStatuses"][0]
    assert status["started"] is False and status["ready"] is False
    (flags / "started").touch()
    wait_for(lambda: get(api, "slow")["status"]["containerStatuses"][0]["ready"], what="ready")
    (flags / "sick").touch()
    wait_for(
        lambda: get(api, "slow")["status"]["containerStatuses"][0]["restartCount"] >= 1,
        what="a restart after the liveness probe failed",
    )


def test_delete_sends_sigterm_and_removes_the_pod_once_the_process_ends(
    api: Api, cluster: LabCluster, state: Path
) -> None:
    script = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    print('got SIGTERM', flush=True); time.sleep(1); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    api.create(PODS, pod("graceful", container(command=["python", "-c", script])))
    wait_for(lambda: "up" in logs(state, "graceful", "main"), what="the process up")
    pid = running_pid(api, "graceful")

    with PodWatch(api) as watch:
        started = time.monotonic()
        api.delete(f"{PODS}/graceful")
        terminating = get(api, "graceful")
        assert terminating["metadata"]["deletionTimestamp"]
        wait_for(lambda: api.get(f"{PODS}/graceful") is None, what="the pod removed")
        removed_after = time.monotonic() - started
    assert removed_after >= 0.9, "removed before the process had finished"
    assert "got SIGTERM" in logs(state, "graceful", "main")
    assert not alive(pid)
    last = [e.pod for e in watch.events if e.type == "MODIFIED"][-1]
    assert condition(last, "Ready")["status"] == "False"
    assert last["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert last["status"]["phase"] == "Succeeded"


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    api: Api, cluster: LabCluster, state: Path
) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(600)"
    )
    api.create(
        PODS,
        pod(
            "stubborn", container(command=["python", "-c", script]), terminationGracePeriodSeconds=1
        ),
    )
    wait_for(lambda: "up" in logs(state, "stubborn", "main"), what="the process up")
    pid = running_pid(api, "stubborn")

    with PodWatch(api) as watch:
        started = time.monotonic()
        api.delete(f"{PODS}/stubborn")
        wait_for(lambda: api.get(f"{PODS}/stubborn") is None, what="the pod removed")
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 3
    assert not alive(pid)
    last = [e.pod for e in watch.events if e.type == "MODIFIED"][-1]
    terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137
    assert last["status"]["phase"] == "Failed"


def test_other_finalizers_keep_a_deleted_pod_until_they_are_removed(
    api: Api, cluster: LabCluster
) -> None:
    body = pod("held", container())
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.create(PODS, body)
    wait_for(lambda: phase_of(api, "held") == "Running", what="Running")
    pid = running_pid(api, "held")

    api.delete(f"{PODS}/held")
    wait_for(lambda: not alive(pid), what="the process stopped")
    wait_for(
        lambda: FINALIZER not in get(api, "held")["metadata"]["finalizers"],
        what="the kubelet's finalizer released",
    )
    assert get(api, "held")["metadata"]["finalizers"] == ["example.com/hold"]
    api.patch(f"{PODS}/held", {"metadata": {"finalizers": None}})
    wait_for(lambda: api.get(f"{PODS}/held") is None, what="the pod removed")


def test_start_up_jitter_delays_each_pod(api: Api, make_cluster: MakeCluster) -> None:
    make_cluster(jitter="fixed(1.5)")
    created = time.monotonic()
    api.create(PODS, pod("late", container()))
    body = pod("annotated", container())
    body["metadata"]["annotations"] = {DELAY_ANNOTATION: "0"}
    api.create(PODS, body)

    wait_for(lambda: phase_of(api, "annotated") == "Running", what="annotated Running")
    assert time.monotonic() - created < 1.4, "the annotation overrides the distribution"
    assert phase_of(api, "late") == "Pending"
    late = get(api, "late")
    assert late["spec"]["nodeName"] == "lab"
    assert (
        late["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    )
    wait_for(lambda: phase_of(api, "late") == "Running", what="late Running")
    assert time.monotonic() - created >= 1.5


def test_stop_leaves_no_process_behind(api: Api, make_cluster: MakeCluster) -> None:
    cluster = make_cluster(stop_grace=1.0)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    api.create(PODS, pod("plain", container()))
    api.create(PODS, pod("stubborn", container(command=["python", "-c", stubborn])))
    # A shell whose child would outlive it without a process-group kill.
    api.create(PODS, pod("forks", container(command=["sh", "-c", "sleep 600 & sleep 600"])))
    pids = [running_pid(api, name) for name in ("plain", "stubborn", "forks")]
    children_file = Path(f"/proc/{pids[2]}/task/{pids[2]}/children")
    children = wait_for(
        lambda: [int(p) for p in children_file.read_text().split()], what="the shell's child"
    )

    started = time.monotonic()
    cluster.stop()
    assert time.monotonic() - started < 5
    survivors = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in [*pids, *children] if alive(p)}
    assert not survivors, survivors


def test_a_native_sidecar_starts_before_and_stops_after_the_main_container(
    api: Api, cluster: LabCluster, state: Path
) -> None:
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
    api.create(PODS, body)
    wait_for(lambda: is_ready_pod(get(api, "with-sidecar")), what="Ready with its sidecar")
    status = get(api, "with-sidecar")["status"]
    assert "running" in status["initContainerStatuses"][0]["state"]
    assert status["initContainerStatuses"][0]["ready"]

    api.delete(f"{PODS}/with-sidecar")
    wait_for(lambda: api.get(f"{PODS}/with-sidecar") is None, what="the pod removed")
    trace = next(state.glob("pods/default_with-sidecar_*/volumes/work/trace")).read_text()
    assert trace.split() == ["start-proxy", "start-main", "stop-main", "stop-proxy"]


def is_ready_pod(body: dict) -> bool:
    cond = condition(body, "Ready")
    return bool(cond and cond["status"] == "True")


def test_downward_api_files_follow_label_and_annotation_changes(
    api: Api, cluster: LabCluster, state: Path
) -> None:
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
    api.create(PODS, body)
    wait_for(lambda: phase_of(api, "labelled") == "Running", what="Running")
    files = next(state.glob("pods/default_labelled_*/volumes/info"))
    assert (files / "name").read_text() == "labelled"
    assert (files / "annotations").read_text() == 'gate="closed"'

    api.patch(f"{PODS}/labelled", {"metadata": {"annotations": {"gate": "open"}}})
    wait_for(lambda: (files / "annotations").read_text() == 'gate="open"', what="the new value")


def test_a_pod_held_by_its_init_container_costs_the_kubelet_no_cpu(
    api: Api, cluster: LabCluster, state: Path
) -> None:
    """A join gate holds its pod for minutes: the pod's worker must sleep meanwhile, not spin."""

    api.create(
        PODS,
        pod(
            "held",
            container(),
            initContainers=[container("hold", python_script("import time; time.sleep(600)"))],
        ),
    )

    def holding() -> bool:
        statuses = get(api, "held")["status"].get("initContainerStatuses") or [{}]
        return "running" in (statuses[0].get("state") or {})

    wait_for(holding, what="the init container running")
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(3.0)
    after = resource.getrusage(resource.RUSAGE_SELF)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert used < 0.6, f"the kubelet used {used:.2f} s of CPU in 3 s while the pod was held"
