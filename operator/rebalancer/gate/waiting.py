"""The gate's wait: list its own pod, then watch it until the operator opens it (or time is up).

Plain HTTP(S) with aiohttp rather than the kubernetes client: one pod, one watch, and full
control of reconnects and of the moment the gate returns, which is what batch mates starting
together depends on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from rebalancer.gate.verdicts import Decision, GateLimits, Verdict, decide
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.gates import GATE_ANNOTATION, GATE_HELD_ANNOTATION, GATE_OPEN

Log = Callable[[str], None]
# A watch asks the API server to end it after this long; the gate then watches again from
# where it was (servers close long watches anyway).
WATCH_SECONDS = 240
BACKOFF_CAP_SECONDS = 10.0


@dataclass(frozen=True)
class ApiEndpoint:
    """Where the Kubernetes API is and how to authenticate to it."""

    server: str
    token: str | None = field(default=None, repr=False)
    # Read again at every (re)connect: projected service-account tokens rotate.
    token_file: Path | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False

    def headers(self) -> dict[str, str]:
        token = self.token
        if self.token_file is not None:
            with contextlib.suppress(OSError):
                token = self.token_file.read_text(encoding="utf-8").strip() or token
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            return False
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


@dataclass(frozen=True)
class GateOutcome:
    verdict: Verdict  # OPEN, BYPASS or TIMEOUT; WAIT never comes back
    message: str
    waited_s: float
    gone: bool = False  # the pod was deleted or never existed
    # The API refused the gate's own requests (HTTP 401/403) until the end: a missing grant.
    refused: bool = False
    # The pod's annotations as the gate last saw them (the identity slot, for one).
    annotations: Mapping[str, str] = field(default_factory=dict)


class _Refused(RebalancerError):
    """The API server answered with an error status the gate cannot wait out by relisting."""

    def __init__(self, status: int, text: str, verb: str = "list") -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status
        self.text = text
        self.verb = verb  # what the gate asked: list or watch its pod


class _Gone(RebalancerError):
    """The watch's resourceVersion is too old: list again."""

    retriable = True


@dataclass
class _Watcher:
    endpoint: ApiEndpoint
    namespace: str
    pod: str
    limits: GateLimits
    log: Log
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    started: float = 0.0
    last_sign: float = 0.0
    held: str | None = None
    resource_version: str | None = None
    # The pod's annotations as last seen: a timeout or a bookmark brings none, and an opened
    # gate waiting for its batch's release moment must still know it is open.
    annotations: Mapping[str, str] = field(default_factory=dict)
    announced: bool = False

    @property
    def pod_path(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace)}/pods"

    def judge(self, annotations: Mapping[str, str] | None = None) -> Decision:
        if annotations is None:
            annotations = self.annotations
        self.annotations = annotations
        held = annotations.get(GATE_HELD_ANNOTATION)
        now = self.clock()
        if held is not None and held != self.held:
            # The operator's own clock is not trusted here: a change is what counts.
            self.held = held
            self.last_sign = now
        decision = decide(
            annotations, now - self.started, now - self.last_sign, self.limits, self.wall_clock()
        )
        opened = annotations.get(GATE_ANNOTATION) == GATE_OPEN
        if decision.verdict is Verdict.WAIT and opened and not self.announced:
            # When the open arrived, against the batch's moment: what a late start of batch
            # mates is to be traced back to.
            self.log(decision.message)
            self.announced = True
        return decision

    def recheck(self, decision: Decision) -> float:
        if decision.recheck_s is None:
            return float(WATCH_SECONDS)
        return max(decision.recheck_s, 0.05)

    async def list_pod(self, session: aiohttp.ClientSession) -> Decision:
        url = f"{self.endpoint.server}{self.pod_path}"
        params = {"fieldSelector": f"metadata.name={self.pod}"}
        async with session.get(
            url, params=params, headers=self.endpoint.headers(), ssl=self.endpoint.ssl_context()
        ) as response:
            if response.status != 200:
                raise _Refused(response.status, await response.text())
            body = await response.json()
        items = body.get("items") or []
        if not items:
            raise _Refused(404, f"pod {self.namespace}/{self.pod} not found")
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return self.judge(_annotations(items[0]))

    async def watch_pod(self, session: aiohttp.ClientSession) -> Decision:
        """Follow the pod's events until a verdict other than WAIT, or the stream ends."""
        url = f"{self.endpoint.server}{self.pod_path}"
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={self.pod}",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        decision = self.judge()
        async with session.get(
            url,
            params=params,
            headers=self.endpoint.headers(),
            ssl=self.endpoint.ssl_context(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
        ) as response:
            if response.status == 410:
                raise _Gone
            if response.status != 200:
                raise _Refused(response.status, await response.text(), "watch")
            while True:
                try:
                    line = await asyncio.wait_for(
                        response.content.readline(), timeout=self.recheck(decision)
                    )
                except TimeoutError:
                    decision = self.judge()
                    if decision.verdict is not Verdict.WAIT:
                        return decision
                    continue
                if not line:
                    return decision
                decision = self.event(json.loads(line))
                if decision.verdict is not Verdict.WAIT:
                    return decision

    def event(self, event: Mapping[str, Any]) -> Decision:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise _Refused(int(obj.get("code") or 500), str(obj.get("message")), "watch")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind == "DELETED":
            raise _Refused(404, f"pod {self.namespace}/{self.pod} was deleted")
        if kind == "BOOKMARK":
            return self.judge()
        return self.judge(_annotations(obj))


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    raw = (obj.get("metadata") or {}).get("annotations") or {}
    return {str(key): str(value) for key, value in raw.items()}


async def wait_at_gate(
    endpoint: ApiEndpoint,
    namespace: str,
    pod: str,
    limits: GateLimits,
    log: Log,
    clock: Callable[[], float] = time.monotonic,
) -> GateOutcome:
    """Hold until the pod's gate is opened, bypassed or timed out."""
    watcher = _Watcher(endpoint, namespace, pod, limits, log, clock)
    watcher.started = watcher.last_sign = clock()
    failures = 0
    reported: str | None = None
    # The last refusal's text, until a watch goes through (a list may pass while the watch that
    # follows it is refused).
    refusal: str | None = None
    connector = aiohttp.TCPConnector(limit=2)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=30)
    ) as session:
        while True:
            try:
                if watcher.resource_version is None:
                    decision = await watcher.list_pod(session)
                    if decision.verdict is Verdict.WAIT and failures == 0 and reported is None:
                        log(f"waiting for the operator to open {namespace}/{pod}")
                        reported = ""
                else:
                    decision = await watcher.watch_pod(session)
                    refusal = None  # watching works: whatever was refused is granted now
                failures = 0
            except _Gone:
                watcher.resource_version = None
                continue
            except (_Refused, aiohttp.ClientError, TimeoutError, OSError) as error:
                if isinstance(error, _Refused) and error.status == 404:
                    return GateOutcome(
                        Verdict.TIMEOUT, str(error), clock() - watcher.started, gone=True
                    )
                failures += 1
                watcher.resource_version = None
                text = _explain(error, namespace)
                refused = isinstance(error, _Refused) and error.status in (401, 403)
                refusal = text.removesuffix("; retrying") if refused else None
                if text != reported:
                    log(text)
                    reported = text
                decision = watcher.judge()
                if decision.verdict is Verdict.WAIT:
                    await asyncio.sleep(_backoff(failures, decision))
                    continue
            if decision.verdict is not Verdict.WAIT:
                return _outcome(decision, watcher, refusal, clock() - watcher.started)


def _backoff(failures: int, decision: Decision) -> float:
    """Seconds before the next try after `failures` in a row; no later than the moment the
    verdict can change by the clock alone (a bypass or timeout due meanwhile)."""
    pause: float = min(0.5 * 2 ** min(failures - 1, 5), BACKOFF_CAP_SECONDS)
    if decision.recheck_s is not None:
        pause = min(pause, max(decision.recheck_s, 0.05))
    return pause


def _outcome(
    decision: Decision, watcher: _Watcher, refusal: str | None, waited: float
) -> GateOutcome:
    """The gate's verdict; a refusal that lasted until a bypass or timeout is named in it."""
    seen = dict(watcher.annotations)
    if refusal is not None and decision.verdict is not Verdict.OPEN:
        message = f"{decision.message}, refused all along: {refusal}"
        return GateOutcome(decision.verdict, message, waited, refused=True, annotations=seen)
    return GateOutcome(decision.verdict, decision.message, waited, annotations=seen)


def _explain(error: BaseException, namespace: str) -> str:
    if isinstance(error, _Refused) and error.status == 403:
        return f"{refusal_message(error.verb, namespace, _user(error.text))}; retrying"
    if isinstance(error, _Refused) and error.status == 401:
        return (
            f"the API did not accept the gate's credentials ({error}); the pod needs its "
            "service account token (automountServiceAccountToken); retrying"
        )
    return f"cannot reach the Kubernetes API ({type(error).__name__}: {error}); retrying"


def refusal_message(verb: str, namespace: str, user: str | None) -> str:
    """What a 403 means for the gate: which grant its ServiceAccount lacks, and the chart value
    that grants it (gate.serviceAccounts: a Role with list and watch on pods)."""
    account = None
    if user and user.startswith("system:serviceaccount:"):
        account_namespace, _, name = user.removeprefix("system:serviceaccount:").partition(":")
        account = f"{{namespace: {account_namespace}, name: {name}}}"
    who = f"the pod's ServiceAccount ({user})" if user else "the pod's ServiceAccount"
    listed = f"list {account} in" if account else "list the pod's ServiceAccount in"
    return (
        f"{who} may not {verb} pods in namespace {namespace}, which the gate needs to watch "
        f"its pod: grant it (charts/rebalancer: {listed} gate.serviceAccounts, which binds a "
        "Role with list and watch on pods; or grant those yourself)"
    )


def _user(text: str) -> str | None:
    """The user a 403's Status names (`User "system:serviceaccount:ns:name"`)."""
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = text
    found = re.search(r'User "([^"]+)"', str(message))
    return found.group(1) if found else None
