"""One pod's life on the lab's node, run by its own thread, as the kubelet's pod worker does.

Admit (a pod kube-scheduler bound to the node) -> wait the start-up jitter -> sandbox
(a pod IP of its own, addresses.py; volumes) -> init containers one by one to completion
(native sidecars, init containers with `restartPolicy: Always`, only until started) -> main
containers, supervised: probes, restarts with back-off per restartPolicy -> terminal phase, or
on deletion: preStop hooks, SIGTERM, SIGKILL at the end of the grace period, terminal status,
then the delete with grace 0 that lets the API server remove the pod.

Every change is written to the pod's status subresource, so watchers see what a kubelet shows.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..kube import objects
from ..kube.recording import EventRecorder
from ..kube.requesting import Api, RequestFailed, resource_path
from . import credentials
from .addresses import NODE_ADDRESS, PodAddresses, configured_pod_network
from .environment import (
    DEFAULT_IMAGES,
    ConfigMissing,
    PodDirectory,
    base_env,
    command_line,
    container_env,
    map_program,
    mount,
    prepare_volumes,
    reads_pod_metadata,
    refresh_downward_volumes,
    rewrite_paths,
)
from .forking import ForkServer
from .jitter import START_DELAY_REASON, Jitter
from .probing import Probe, ProbeContext, run_probe
from .processes import ContainerProcess, ProcessRegistry

Body = dict[str, Any]
logger = logging.getLogger(__name__)

OWNED_CONDITIONS = (
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
)
CONFIG_RETRY_SECONDS = 1.0
RETRY_SECONDS = 0.2
REMOVE_RETRY_MAX_SECONDS = 5.0
BACKOFF_RESET_SECONDS = 600.0


@dataclass
class KubeletSettings:
    state_dir: Path
    node_name: str = "lab"
    python: str = sys.executable
    images: Mapping[str, Sequence[str]] = field(default_factory=lambda: dict(DEFAULT_IMAGES))
    kubeconfig: Path | None = None
    backoff_base: float = 10.0
    backoff_max: float = 300.0
    tick: float = 0.1
    # Start `python -m rebalancer...` containers from a pre-warmed fork server (forking.py),
    # so a pod's start-up cost does not grow with the number of pods starting at once.
    fork_server: bool = True
    # Each pod reaches the API with a token of its own ServiceAccount (credentials.py) at this
    # API server, trusting this CA, instead of `kubeconfig`.
    service_account_server: str | None = None
    service_account_ca: Path | None = None
    # Where pod addresses come from (addresses.py); the node itself is 127.0.0.1.
    pod_network: str = field(default_factory=configured_pod_network)

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs" / "pods"


class _Gone(Exception):
    """The pod left the API while we were working on it."""


@dataclass
class Container:
    spec: Body
    kind: str  # init, sidecar (an init container with restartPolicy Always) or main
    process: ContainerProcess | None = None
    restart_count: int = 0
    state: Body = field(default_factory=dict)
    last_state: Body = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    started_at: float = 0.0
    next_start: float = 0.0
    crashes_in_row: int = 0
    finished: bool = False  # terminated and never to be started again
    exit_code: int | None = None
    kill_reason: str | None = None
    probes: dict[str, Probe] = field(default_factory=dict)
    probe_context: ProbeContext | None = None

    @property
    def name(self) -> str:
        return str(self.spec.get("name"))

    @property
    def running(self) -> bool:
        return self.process is not None and "running" in self.state

    def status(self) -> Body:
        ready = self.ready if self.kind != "init" else self.finished and self.exit_code == 0
        entry: Body = {
            "name": self.name,
            "image": str(self.spec.get("image") or ""),
            "imageID": "",
            "ready": bool(ready),
            "started": self.started if self.running else False,
            "restartCount": self.restart_count,
            "state": copy.deepcopy(self.state),
            "lastState": copy.deepcopy(self.last_state),
        }
        if self.process is not None and self.process.pid is not None:
            entry["containerID"] = f"lab://{self.process.pid}"
        return entry


class PodWorker:
    def __init__(
        self,
        api: Api,
        settings: KubeletSettings,
        jitter: Jitter,
        registry: ProcessRegistry,
        pod: Body,
        on_exit: Callable[[PodWorker], None],
        recorder: EventRecorder | None = None,
        forker: ForkServer | None = None,
        addresses: PodAddresses | None = None,
    ) -> None:
        self.api = api
        self.addresses = addresses or PodAddresses(settings.pod_network)
        # Given with the sandbox and kept for the pod's life, as a cluster's pod IP.
        self.pod_ip: str | None = None
        self.forker = forker
        self.recorder = recorder
        self.settings = settings
        self.jitter = jitter
        self.registry = registry
        self.pod = pod
        self.on_exit = on_exit
        meta = pod["metadata"]
        self.uid = str(meta.get("uid"))
        self.namespace = str(meta.get("namespace") or "default")
        self.name = str(meta.get("name"))
        self.directory = PodDirectory(
            settings.state_dir / "pods" / f"{self.namespace}_{self.name}_{self.uid}"
        )
        self.logs = settings.logs / f"{self.namespace}_{self.name}_{self.uid}"
        spec = pod.get("spec") or {}
        self.containers = [
            Container(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
            for c in spec.get("initContainers") or ()
        ] + [Container(c, "main") for c in spec.get("containers") or ()]
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.volumes: dict[str, Path] = {}
        self.kubeconfig = settings.kubeconfig
        self.sandbox = False
        self.initialized = not any(c.kind == "init" for c in self.containers)
        self.phase_override: str | None = None
        # The pod had ended before this worker saw it: its status is what the worker or kubelet
        # that ran it wrote, and this worker's containers, never started, have nothing to add.
        self.ended_before = False
        self.start_time: str | None = None
        self.terminating = objects.is_terminating(pod)
        self.gone = False
        self.shutting_down = False
        self.shutdown_grace: float | None = None
        self.sandbox_message: str | None = None
        self._downward_seen: tuple[Any, Any] = (None, None)
        self._unpublished = False
        self._published: Body = {}
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"pod-{self.namespace}/{self.name}", daemon=True
        )
        for c in self.containers:
            reason = (
                "PodInitializing"
                if len(self.containers) > len(spec.get("containers") or ())
                else "ContainerCreating"
            )
            c.state = {"waiting": {"reason": reason}}

    # Events from the kubelet ------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def update(self, pod: Body) -> None:
        if _version(pod) >= _version(self.pod):
            self.pod = pod
        if objects.is_terminating(pod):
            self.terminating = True
        self._wake.set()

    def removed(self) -> None:
        self.gone = True
        self.terminating = True
        self._wake.set()

    def shutdown(self, grace: float) -> None:
        self.shutting_down = True
        self.shutdown_grace = grace
        self.terminating = True
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # The worker -------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            if self._admit():
                self._live()
            # A finished pod stays until it is deleted, and then only this kubelet's delete with
            # grace 0 removes it. Its last status is written until the API takes it: no later
            # event of the pod need come to bring the write back.
            while not self.terminating:
                self._wake.wait(RETRY_SECONDS if self._unpublished else 60)
                self._wake.clear()
                if self._unpublished and not self.terminating:
                    self._publish()
        except _Gone:
            self.gone = True
        except Exception:
            logger.exception("pod %s/%s: kubelet worker failed", self.namespace, self.name)
        finally:
            try:
                self._terminate()
            except Exception:
                logger.exception("pod %s/%s: stopping failed", self.namespace, self.name)
            self.addresses.release(self.uid)
            try:
                self._finalize()
            except Exception:  # the pod may stay Terminating: say why
                logger.exception(
                    "pod %s/%s: final status or removal failed", self.namespace, self.name
                )
            self.on_exit(self)

    def _event(self, kind: str, reason: str, message: str, component: str = "kubelet") -> None:
        if self.recorder is not None:
            host = self.settings.node_name if component == "kubelet" else ""
            self.recorder.event(self.pod, kind, reason, message, component, host)

    def _path(self, subresource: str | None = None) -> str:
        return resource_path("v1", "pods", self.namespace, self.name, subresource)

    def _admit(self) -> bool:
        """Take the pod on; False if it is not to be run (it finished before)."""
        while True:
            try:
                return self._try_admit()
            except RequestFailed as exc:
                if exc.status < 500 and exc.status != 429:
                    raise
                failure: Exception = exc
            except OSError as exc:
                failure = exc
            # The API failing or unreachable for a moment: try again.
            logger.warning("pod %s/%s: not admitted yet: %s", self.namespace, self.name, failure)
            if self.terminating:
                return False
            self._wake.wait(RETRY_SECONDS)
            self._wake.clear()

    def _try_admit(self) -> bool:
        self.start_time = objects.now_text()
        if objects.pod_phase(self.pod) in ("Succeeded", "Failed"):
            # A finished pod (from an earlier worker or kubelet) is not run again.
            self.phase_override = objects.pod_phase(self.pod)
            self._published = copy.deepcopy(self.pod.get("status") or {})
            self.ended_before = True
            return False
        self._publish()
        return True

    def _catch_up(self) -> None:
        """The pod as the API has it now, for a container whose environment reads its labels or
        annotations. A kubelet starts the container after an init container's end on its next
        relist (a second by default), by which its pod watch holds what was written before that
        end; this kubelet starts it at once and could resolve the environment from a watch a
        moment behind (an identity slot written with the gate's open, read as empty)."""
        try:
            fresh = self.api.get(self._path())
        except (RequestFailed, OSError) as error:  # the watch's copy stands
            logger.warning("kubelet: reading %s before a start failed: %s", self.name, error)
            return
        if fresh is None or fresh["metadata"].get("uid") != self.uid:
            return  # gone: the worker's own loop finds out
        if _version(fresh) >= _version(self.pod):
            self.pod = fresh

    def _refresh(self) -> None:
        fresh = self.api.get(self._path())
        if fresh is None or fresh["metadata"].get("uid") != self.uid:
            raise _Gone()
        self.pod = fresh
        if objects.is_terminating(fresh):
            self.terminating = True

    def _live(self) -> None:
        meta = self.pod["metadata"]
        owners = meta.get("ownerReferences") or [{}]
        delay = self.jitter.delay_for(meta.get("annotations"), str(owners[0].get("uid") or ""))
        deadline = time.monotonic() + delay
        while not self.terminating and time.monotonic() < deadline:
            self._wake.wait(deadline - time.monotonic())
            self._wake.clear()
        if self.terminating:
            return
        # Recorded so that a run's spread of starts can be read back exactly, not guessed from
        # second-rounded container start stamps.
        self._event("Normal", START_DELAY_REASON, f"Waited {delay:.2f} s before starting (jitter)")
        self._make_sandbox()
        if self.terminating:
            return
        self.sandbox = True
        self._publish()
        self._supervise()

    def _make_sandbox(self) -> None:
        # A pod an earlier kubelet ran keeps its address if it is free.
        earlier = (self.pod.get("status") or {}).get("podIP")
        self.pod_ip = self.addresses.acquire(self.uid, preferred=earlier)
        while not self.terminating:
            try:
                self.volumes = prepare_volumes(
                    self.api, self._addressed(), self.directory, self.settings.state_dir / "claims"
                )
                self.kubeconfig = self._credentials()
                self.sandbox_message = None
                return
            except Exception as exc:
                # kube keeps such a pod in ContainerCreating and retries the mount.
                self.sandbox_message = f"MountVolume.SetUp failed: {exc}"
                self._event("Warning", "FailedMount", self.sandbox_message)
                for c in self.containers:
                    if "waiting" in c.state:
                        c.state = {
                            "waiting": {
                                "reason": "ContainerCreating",
                                "message": self.sandbox_message,
                            }
                        }
                self._publish()
                self._wake.wait(CONFIG_RETRY_SECONDS)
                self._wake.clear()

    def _credentials(self) -> Path | None:
        """The kubeconfig the containers get: their ServiceAccount's, the kubelet's default,
        or none for a pod that opts out of the token."""
        server = self.settings.service_account_server
        if server is None or self.settings.service_account_ca is None:
            return self.settings.kubeconfig
        if not credentials.mounts_token(self.pod):
            return None
        token = credentials.request_token(self.api, self.pod)
        return credentials.write_credentials(
            self.directory.root,
            token,
            self.namespace,
            server,
            self.settings.service_account_ca.read_bytes(),
        )

    # Supervision ------------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self.terminating:
            self._wake.clear()
            seen = (self.pod["metadata"].get("labels"), self.pod["metadata"].get("annotations"))
            if seen != self._downward_seen:
                self._downward_seen = seen
                refresh_downward_volumes(self._addressed(), self.directory)
            now = time.monotonic()
            for c in self.containers:
                if c.running:
                    self._check(c, now)
            self._advance(now)
            if self.phase_override is None and self._all_done():
                self.phase_override = self._finished_phase()
            self._publish()
            if self.phase_override is not None:
                self._stop_sidecars()
                # Its processes are gone: the address may serve another pod, as on a cluster.
                self.addresses.release(self.uid)
                self._publish()
                return
            self._wake.wait(self._next_wake(now))

    def _advance(self, now: float) -> None:
        """Start what may start now: the next init container, or the main containers."""
        for c in self.containers:
            if c.kind == "main":
                break
            if c.kind == "init" and c.finished and c.exit_code == 0:
                continue
            if not c.running and not c.finished and now >= c.next_start:
                self._start(c, now)
            if c.kind == "init" or not c.started:
                return  # init containers run one at a time; sidecars must have started
        if not self.initialized:
            self.initialized = True
        for c in self.containers:
            if c.kind == "main" and not c.running and not c.finished and now >= c.next_start:
                self._start(c, now)

    def _start(self, c: Container, now: float) -> None:
        rootfs = self.directory.rootfs(c.name)
        if reads_pod_metadata(c.spec):
            self._catch_up()
        try:
            own = container_env(self.api, self._addressed(), c.spec)
            mounts = mount(c.spec, self.volumes, rootfs)
            own = {k: rewrite_paths(v, mounts, rootfs) for k, v in own.items()}
            env = {**base_env(self.pod, self.kubeconfig, rootfs), **own}
            argv = command_line(
                c.spec,
                env,
                self.settings.python,
                self.settings.images,
                rewrite=lambda text: rewrite_paths(text, mounts, rootfs),
            )
        except ConfigMissing as exc:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
            self._event("Warning", "Failed", f"Error: {exc}")
            c.next_start = now + CONFIG_RETRY_SECONDS
            return
        except Exception as exc:
            c.state = {"waiting": {"reason": "CreateContainerError", "message": str(exc)}}
            self._event("Warning", "Failed", f"Error: {exc}")
            c.next_start = now + CONFIG_RETRY_SECONDS
            return
        working = str(c.spec.get("workingDir") or "")
        cwd = rootfs / working.lstrip("/") if working else rootfs
        log = self.logs / c.name / f"{c.restart_count}.log"
        process = ContainerProcess(
            argv, env, cwd, log, self.registry, on_exit=self._wake.set, forker=self.forker
        )
        try:
            process.start()
        except OSError as exc:
            c.process = None
            self._record_exit(c, 128, "StartError", now, message=str(exc))
            return
        c.process = process
        c.state = {"running": {"startedAt": objects.now_text()}}
        if c.restart_count == 0:
            image = c.spec.get("image") or ""
            self._event("Normal", "Pulled", f'Container image "{image}" already present on machine')
        self._event("Normal", "Created", f"Created container: {c.name}")
        self._event("Normal", "Started", f"Started container {c.name}")
        c.started_at = now
        c.exit_code = None
        c.kill_reason = None
        c.ready = False
        python = self.settings.python

        def probe_argv(argv: list[str]) -> list[str]:
            # Probes and hooks run "in the container": same programs, same mounts.
            return [rewrite_paths(a, mounts, rootfs) for a in map_program(argv, python)]

        c.probe_context = ProbeContext(c.spec, env, cwd, probe_argv, self.pod_ip or NODE_ADDRESS)
        c.probes = {
            kind: Probe(kind, c.spec[f"{kind}Probe"], now)
            for kind in ("startup", "liveness", "readiness")
            if c.spec.get(f"{kind}Probe") and c.kind != "init"
        }
        c.started = "startup" not in c.probes

    def _check(self, c: Container, now: float) -> None:
        assert c.process is not None
        code = c.process.poll()
        if code is not None:
            reason = c.kill_reason or ("Completed" if code == 0 else "Error")
            self._record_exit(c, code, reason, now)
            return
        context = c.probe_context
        assert context is not None
        startup = c.probes.get("startup")
        if startup is not None and not c.started:
            if startup.due(now):
                startup.record(self._probe(c, "Startup", startup.spec), time.monotonic())
                if startup.result is True:
                    c.started = True
                    for kind in ("liveness", "readiness"):
                        if kind in c.probes:
                            c.probes[kind] = Probe(kind, c.probes[kind].spec, time.monotonic())
                elif startup.result is False:
                    self._kill(c, "startup")
            return
        liveness = c.probes.get("liveness")
        if liveness is not None and liveness.due(now):
            liveness.record(self._probe(c, "Liveness", liveness.spec), time.monotonic())
            if liveness.result is False:
                self._kill(c, "liveness")
                return
        readiness = c.probes.get("readiness")
        if readiness is None:
            c.ready = True
        elif readiness.due(now):
            readiness.record(self._probe(c, "Readiness", readiness.spec), time.monotonic())
            c.ready = readiness.result is True

    def _probe(self, c: Container, kind: str, spec: Body) -> bool:
        assert c.probe_context is not None
        ok = run_probe(spec, c.probe_context)
        if not ok:
            self._event("Warning", "Unhealthy", f"{kind} probe failed")
        return ok

    def _kill(self, c: Container, probe: str) -> None:
        logger.info(
            "pod %s/%s: container %s failed its %s probe, killing it",
            self.namespace,
            self.name,
            c.name,
            probe,
        )
        assert c.process is not None
        c.kill_reason = "Error"
        self._event(
            "Normal", "Killing", f"Container {c.name} failed {probe} probe, will be restarted"
        )
        c.process.terminate()
        grace = float(self.pod["spec"].get("terminationGracePeriodSeconds") or 30)
        deadline = time.monotonic() + grace
        while c.process.poll() is None and time.monotonic() < deadline and not self.terminating:
            time.sleep(self.settings.tick)
        c.process.kill()
        code = c.process.poll()
        self._record_exit(c, 137 if code is None else code, "Error", time.monotonic())

    def _record_exit(
        self, c: Container, code: int, reason: str, now: float, message: str | None = None
    ) -> None:
        finished_at = objects.now_text()
        started_at = (c.state.get("running") or {}).get("startedAt") or finished_at
        terminated: Body = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": finished_at,
        }
        if message:
            terminated["message"] = message
        if c.process is not None:
            terminated["containerID"] = f"lab://{c.process.pid}"
        c.ready = False
        c.exit_code = code
        c.probes = {}
        policy = "Always" if c.kind == "sidecar" else self.restart_policy
        if c.kind == "init" and policy == "Always":
            policy = "OnFailure"  # kube: init containers of an Always pod restart on failure
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if self.terminating or not restart:
            c.state = {"terminated": terminated}
            c.finished = True
            if c.kind == "init" and code != 0:
                self.phase_override = "Failed"
            return
        if now - c.started_at >= BACKOFF_RESET_SECONDS:
            c.crashes_in_row = 0
        delay = min(self.settings.backoff_base * (2**c.crashes_in_row), self.settings.backoff_max)
        c.crashes_in_row += 1
        c.restart_count += 1
        c.last_state = {"terminated": terminated}
        c.next_start = now + delay
        self._event(
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {c.name} in "
            f"pod {self.name}_{self.namespace}({self.uid})",
        )
        c.state = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": (
                    f"back-off {delay:g}s restarting failed container={c.name} "
                    f"pod={self.name}_{self.namespace}({self.uid})"
                ),
            }
        }
        c.process = None

    def _all_done(self) -> bool:
        mains = [c for c in self.containers if c.kind == "main"]
        return self.initialized and all(c.finished for c in mains)

    def _finished_phase(self) -> str:
        codes = [c.exit_code for c in self.containers if c.kind != "sidecar" and c.finished]
        return "Succeeded" if all(code == 0 for code in codes) else "Failed"

    def _next_wake(self, now: float) -> float:
        moments = [now + (RETRY_SECONDS if self._unpublished else 1.0)]
        for c in self.containers:
            if c.running:
                moments += [p.next_at for p in c.probes.values()]
            elif not c.finished and c.next_start > now:
                # A back-off or a retry still to come. A container that could have started
                # but did not is waiting for the one before it, whose exit wakes the worker:
                # counting its past next_start here made every gated pod's worker spin for as
                # long as its gate held it.
                moments.append(c.next_start)
        return max(0.0, min(moments) - time.monotonic())

    def _stop_sidecars(self) -> None:
        sidecars = [c for c in self.containers if c.kind == "sidecar" and c.running]
        self._stop_group(sidecars, time.monotonic() + self._grace())

    # Termination ------------------------------------------------------------------------------

    def _grace(self) -> float:
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:  # not deleted: the kubelet itself stops the pod (a shutdown)
            grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        value = 30.0 if grace is None else float(grace)
        if self.shutdown_grace is not None:
            value = min(value, self.shutdown_grace)
        return value

    def _terminate(self) -> None:
        running = [c for c in self.containers if c.running]
        for c in self.containers:
            c.ready = False
        if not running:
            return
        if not self.gone and not self.shutting_down:
            with contextlib.suppress(Exception):
                self._publish()
        deadline = time.monotonic() + self._grace()
        # Main (and plain init) containers first, then sidecars in reverse order, as kube.
        self._stop_group([c for c in running if c.kind != "sidecar"], deadline, hooks=True)
        self._stop_group([c for c in reversed(running) if c.kind == "sidecar"], deadline)

    def _stop_group(self, group: list[Container], deadline: float, hooks: bool = False) -> None:
        if hooks:
            for c in group:
                self._pre_stop(c, deadline)
        for c in group:
            assert c.process is not None
            if not self.shutting_down:
                self._event("Normal", "Killing", f"Stopping container {c.name}")
            c.process.terminate()
        while any(c.process is not None and c.process.poll() is None for c in group):
            if time.monotonic() >= deadline:
                break
            time.sleep(self.settings.tick / 2)
        for c in group:
            assert c.process is not None
            c.process.kill()
            code = c.process.poll()
            self._record_exit(
                c,
                137 if code is None else code,
                "Completed" if code == 0 else "Error",
                time.monotonic(),
            )

    def _pre_stop(self, c: Container, deadline: float) -> None:
        hook = ((c.spec.get("lifecycle") or {}).get("preStop")) or {}
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not hook:
            return
        if "sleep" in hook:
            time.sleep(min(remaining, float(hook["sleep"].get("seconds") or 0)))
        elif "exec" in hook and c.probe_context is not None:
            run_probe({"exec": hook["exec"], "timeoutSeconds": remaining}, c.probe_context)
        elif "httpGet" in hook and c.probe_context is not None:
            run_probe({"httpGet": hook["httpGet"], "timeoutSeconds": remaining}, c.probe_context)

    def _finalize(self) -> None:
        """Terminal status, then let the API remove a deleted pod."""
        if self.gone or self.shutting_down:
            return
        deleted = objects.is_terminating(self.pod)
        if deleted and self.phase_override is None and self.sandbox:
            self.phase_override = self._finished_phase()
        if not self.ended_before:
            with contextlib.suppress(_Gone):
                self._publish()
        if not deleted:
            return  # the worker failed: the pod stays, and its next event brings a new worker
        self._remove()

    def _remove(self) -> None:
        """A kubelet's final word on a deleted pod: the API may now remove it. Tried until the
        API takes it, as only this worker knows the pod's processes are gone: a real API
        server keeps the pod Terminating until then, and no later event of it need come."""
        wait = RETRY_SECONDS
        while not self.gone and not self.shutting_down:
            try:
                self.api.delete(
                    self._path(), grace_period_seconds=0, propagation=None, uid=self.uid
                )
                logger.info("pod %s/%s: removed", self.namespace, self.name)
                return
            except RequestFailed as exc:
                # 404: removed already; 409: the uid precondition failed, the name is another
                # pod's now. Anything else is tried again: a kube-apiserver just restarted
                # answers the node 403 until its node authorizer's caches have synced (16 s
                # measured under load), and a pod left Terminating holds a StatefulSet's
                # ordinal and a Deployment's rollout for good.
                if exc.status in (404, 409):
                    logger.info("pod %s/%s: not removed: %s", self.namespace, self.name, exc)
                    return
                failure: Exception = exc
            except OSError as exc:
                failure = exc
            logger.warning("pod %s/%s: not removed yet: %s", self.namespace, self.name, failure)
            self._wake.wait(wait)
            self._wake.clear()
            wait = min(2 * wait, REMOVE_RETRY_MAX_SECONDS)
        if not self.shutting_down:
            logger.info("pod %s/%s: removal left to its DELETED event", self.namespace, self.name)

    # Status -----------------------------------------------------------------------------------

    def _publish(self) -> None:
        if self.gone:
            raise _Gone()
        status = self._status()
        if status == self._published:
            return
        self._unpublished = False
        for _ in range(10):
            body = {**self.pod, "status": status}
            try:
                self.pod = self.api.replace(self._path("status"), body)
                self._published = status
                return
            except RequestFailed as exc:
                if exc.status == 404:
                    raise _Gone() from exc
                if exc.status != 409:
                    # The processes matter more than one status write: it is tried again
                    # on the next pass.
                    self._unpublished = True
                    logger.warning(
                        "pod %s/%s: status not written: %s", self.namespace, self.name, exc
                    )
                    return
                self._refresh()
                status = self._status()
            except OSError as exc:  # the API unreachable for a moment
                self._unpublished = True
                logger.warning("pod %s/%s: status not written: %s", self.namespace, self.name, exc)
                return

    def _phase(self) -> str:
        if self.phase_override is not None:
            return self.phase_override
        if not self.sandbox or not self.initialized:
            return "Pending"
        mains = [c for c in self.containers if c.kind == "main"]
        if any(c.running or c.restart_count or c.finished for c in mains):
            return "Running"
        return "Pending"

    def _status(self) -> Body:
        now = objects.now_text()
        previous = list(self._published.get("conditions") or [])
        phase = self._phase()
        mains = [c for c in self.containers if c.kind == "main"]
        inits = [c for c in self.containers if c.kind != "main"]
        unready = [c.name for c in self.containers if c.kind != "init" and not c.ready]
        incomplete = [
            c.name
            for c in inits
            if not (c.finished and c.exit_code == 0) and not (c.kind == "sidecar" and c.started)
        ]
        completed = phase in ("Succeeded", "Failed")
        conditions = objects.set_condition(previous, "PodScheduled", "True", now=now)
        conditions = objects.set_condition(
            conditions, "PodReadyToStartContainers", "True" if self.sandbox else "False", now=now
        )
        if self.initialized or not incomplete:
            conditions = objects.set_condition(conditions, "Initialized", "True", now=now)
        else:
            conditions = objects.set_condition(
                conditions,
                "Initialized",
                "False",
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(incomplete)}]",
                now=now,
            )
        if completed:
            ready, reason, message = False, "PodCompleted", None
        elif unready or not self.initialized:
            ready, reason = False, "ContainersNotReady"
            message = f"containers with unready status: [{' '.join(unready)}]"
        else:
            ready, reason, message = True, None, None
        conditions = objects.set_condition(
            conditions, "ContainersReady", "True" if ready else "False", reason, message, now=now
        )
        gates_ok, gate_message = self._gates()
        if ready and not gates_ok:
            conditions = objects.set_condition(
                conditions, "Ready", "False", "ReadinessGatesNotReady", gate_message, now=now
            )
        else:
            conditions = objects.set_condition(
                conditions, "Ready", "True" if ready else "False", reason, message, now=now
            )
        foreign = [
            c
            for c in (self.pod.get("status") or {}).get("conditions") or ()
            if c.get("type") not in OWNED_CONDITIONS
        ]
        status: Body = {
            "phase": phase,
            "conditions": [*conditions_in_order(conditions), *foreign],
            "hostIP": NODE_ADDRESS,
            "hostIPs": [{"ip": NODE_ADDRESS}],
        }
        # The API server sets it at creation and refuses a change: written back as it is.
        qos = (self.pod.get("status") or {}).get("qosClass")
        if qos is not None:
            status["qosClass"] = qos
        if self.sandbox and self.pod_ip is not None:
            status["podIP"] = self.pod_ip
            status["podIPs"] = [{"ip": self.pod_ip}]
        if self.start_time:
            status["startTime"] = self.start_time
        if inits:
            status["initContainerStatuses"] = [c.status() for c in inits]
        status["containerStatuses"] = [c.status() for c in mains]
        return status

    def _addressed(self) -> Body:
        """The pod as the downward API sees it: with its addresses from the moment they are
        given, not only once the status carrying them is written back."""
        status = dict(self.pod.get("status") or {})
        status["hostIP"], status["hostIPs"] = NODE_ADDRESS, [{"ip": NODE_ADDRESS}]
        if self.pod_ip is not None:
            status["podIP"], status["podIPs"] = self.pod_ip, [{"ip": self.pod_ip}]
        return {**self.pod, "status": status}

    def _gates(self) -> tuple[bool, str | None]:
        for gate in (self.pod.get("spec") or {}).get("readinessGates") or ():
            kind = gate.get("conditionType")
            cond = objects.condition(self.pod, str(kind))
            if cond is None:
                return (
                    False,
                    f'corresponding condition of pod readiness gate "{kind}" does not exist.',
                )
            if cond.get("status") != "True":
                status = cond.get("status")
                return (
                    False,
                    f'the status of pod readiness gate "{kind}" is not "True", but {status}',
                )
        return True, None


def conditions_in_order(conditions: list[Body]) -> list[Body]:
    order = {kind: index for index, kind in enumerate(OWNED_CONDITIONS)}
    return sorted(conditions, key=lambda c: order.get(str(c.get("type")), len(order)))


def _version(pod: Body) -> int:
    text = str(pod.get("metadata", {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else 0
