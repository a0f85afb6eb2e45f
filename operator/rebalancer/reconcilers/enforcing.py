"""Enforced rebalances: planning.triggers decides, a sidecar acts, the cause is recorded."""

from __future__ import annotations

import time
from typing import Any

import kopf

from rebalancer import metrics
from rebalancer.clients.enforcing import (
    UNSUPPORTED_STATUS,
    EnforceRequestFailed,
    EnforceResult,
    sidecar_addresses,
    sidecar_url,
)
from rebalancer.clients.kafka_errors import KafkaGatewayError
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.librdkafka_config import build_client_config
from rebalancer.clients.patching import checked_status
from rebalancer.clients.resolving import SecretUnavailable, read_secret_key, resolve_security
from rebalancer.planning.enforcement_writes import (
    EnforceWrite,
    SidecarAnswer,
    answered,
    awaiting_follow_up,
    declared_streams,
    no_sidecar,
    nothing_due,
    refused_pattern,
    requested,
    skipped,
    unreachable,
    unsupported,
)
from rebalancer.planning.notices import Notice, Retry
from rebalancer.planning.triggers import (
    TriggerDecision,
    TriggerInputs,
    Verdict,
    decide_enforcement,
    memory_from_status,
    new_matching_topics,
    policy_from_spec,
)
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex, refusal_of
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.structs.brokers import cluster_key
from rebalancer.structs.consumer_group import (
    declared_group_id,
    read_consumer_group,
)
from rebalancer.structs.enforce_policy import EnforceSpec
from rebalancer.structs.enforcement import pattern_takes_control_topics
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import ConsumerGroupSpec, ProtocolChoice, SecretKeyRef

TOKEN_FIELD = "spec.policy.enforce.sidecar.tokenSecretRef"


async def _matching_topics(
    deps: Dependencies, namespace: str, parsed: ConsumerGroupSpec
) -> frozenset[str]:
    assert parsed.subscription.pattern is not None
    security = await resolve_security(deps.kube, namespace, parsed.kafka)
    servers = list(parsed.kafka.bootstrap_servers)
    key = cluster_key(servers, security)
    gateway = deps.pool.acquire(key, build_client_config(servers, security))
    try:
        topics = await gateway.list_topics()
    finally:
        deps.pool.release(key)
    return frozenset(new_matching_topics(parsed.subscription.pattern, topics, ()))


async def _sidecar_urls(
    deps: Dependencies, namespace: str, parsed: ConsumerGroupSpec, policy: EnforceSpec
) -> list[str]:
    if policy.sidecar.url:
        return [policy.sidecar.url.rstrip("/")]
    addresses = await sidecar_addresses(
        deps.kube, namespace, parsed.workload.kind.value, parsed.workload.name
    )
    return [sidecar_url(address, policy.sidecar.port) for address in addresses]


async def _token(
    deps: Dependencies, namespace: str, policy: EnforceSpec
) -> tuple[str | None, EnforceWrite | None]:
    """The sidecars' token, or what to write when it cannot be read."""
    if policy.sidecar.token_secret is None:
        return None, EnforceWrite(
            notices=(Notice("EnforceNotConfigured", f"set {TOKEN_FIELD}", warning=True),)
        )
    ref = SecretKeyRef(policy.sidecar.token_secret, policy.sidecar.token_key)
    try:
        return await read_secret_key(deps.kube, namespace, ref, TOKEN_FIELD), None
    except SecretUnavailable as error:
        said = Notice("EnforceFailed", str(error), warning=True)
        return None, EnforceWrite(notices=(said,), retry=Retry(str(error), 30))


async def _follow_up(
    deps: Dependencies,
    namespace: str,
    parsed: ConsumerGroupSpec,
    previous: dict[str, Any],
) -> SidecarAnswer | None:
    """The final answer to a request the sidecar was still enforcing when the POST's wait ran
    out; without it status said "enforcing" forever after a rebalance that took over 5 s."""
    policy = parsed.policy.enforce
    request_id = awaiting_follow_up(previous)
    if request_id is None or policy.sidecar.token_secret is None:
        return None
    token, _ = await _token(deps, namespace, policy)
    if token is None:
        return None
    for url in await _sidecar_urls(deps, namespace, parsed, policy):
        try:
            return _answer(await deps.sidecars.status(url, token, request_id))
        except EnforceRequestFailed:
            continue
    return None


def _answer(result: EnforceResult) -> SidecarAnswer:
    return SidecarAnswer(result.status, result.message, result.generation, result.final)


async def enforce(
    deps: Dependencies,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    namespace: str,
    patch: kopf.Patch,
    claims: ClaimIndex | None = None,
) -> None:
    """One look at the group's enforcement triggers: a rebalance asked for, due or followed up."""
    name = str(body.metadata.name)
    group_id = declared_group_id(body)
    try:
        await _enforce(deps, body, spec, status, namespace, patch, claims)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "enforce", error, group_id)
        raise kopf.TemporaryError(f"enforcement: {error}", delay=30) from None
    if deps.denials.clear(namespace, name, "enforce") and group_id:
        deps.hub.wakeup(group_id).set()  # the observer takes the condition back


async def _enforce(
    deps: Dependencies,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    namespace: str,
    patch: kopf.Patch,
    claims: ClaimIndex | None = None,
) -> None:
    """Read what the triggers need, decide (planning.triggers, planning.enforcement_writes),
    then write status, Events and metrics, asking a sidecar when a rebalance is due."""
    try:
        parsed = read_consumer_group(body, namespace=namespace).spec
    except SpecInvalid:
        return  # the change handler has reported it
    policy = parsed.policy.enforce
    streams = parsed.policy.protocol is ProtocolChoice.STREAMS
    if not policy.enabled and not streams:
        return
    if refusal_of(body, namespace, claims, deps.hub) is not None:
        return  # not this resource's group or workload to act on: the observer says so
    previous = dict(status.get("enforcement") or {})
    if streams:
        _write(deps, body, namespace, parsed.group_id, patch, declared_streams(previous))
        return
    pattern = parsed.subscription.pattern
    if pattern and pattern_takes_control_topics(pattern, parsed.group_id):
        _write(deps, body, namespace, parsed.group_id, patch, refused_pattern(previous, pattern))
        return
    matching = None
    if pattern and policy.on_topic_creation:
        try:
            matching = await _matching_topics(deps, namespace, parsed)
        except (SecretUnavailable, KafkaGatewayError) as error:
            raise kopf.TemporaryError(str(error), delay=30) from None
    now = time.time()
    inputs = TriggerInputs(
        now=now,
        group_state=(status.get("group") or {}).get("state"),
        matching_topics=matching,
        finished_rollout=(status.get("rollout") or {}).get("completedRevision"),
    )
    memory = memory_from_status(previous.get("memory"))
    decision = decide_enforcement(policy_from_spec(policy), memory, inputs, parsed.group_id)
    if decision.verdict is Verdict.NOTHING:
        answer = await _follow_up(deps, namespace, parsed, previous)
        write = nothing_due(previous, decision, answer)
    elif decision.verdict is Verdict.SKIP_IN_PROGRESS:
        write = skipped(requested(previous, decision, now), decision)
    else:
        write = await _request(deps, namespace, parsed, previous, decision, now)
    _write(deps, body, namespace, parsed.group_id, patch, write)


async def _request(
    deps: Dependencies,
    namespace: str,
    parsed: ConsumerGroupSpec,
    previous: dict[str, Any],
    decision: TriggerDecision,
    now: float,
) -> EnforceWrite:
    """Send the decided request to a sidecar; what to write of its answer (or of why there
    was none)."""
    policy = parsed.policy.enforce
    token, unread = await _token(deps, namespace, policy)
    if token is None:
        return unread or EnforceWrite()
    # Expected before asking: the observer may see the new generation before the sidecar answers.
    deps.hub.expect_cause(parsed.group_id, decision.cause_text, time.time())
    record = requested(previous, decision, now)
    failure = no_sidecar(policy.sidecar.inject)
    refused = False
    # Any sidecar will do: the request reaches the acting one through the control topic.
    for url in await _sidecar_urls(deps, namespace, parsed, policy):
        try:
            result = await deps.sidecars.enforce(
                url,
                token,
                group_id=parsed.group_id,
                request_id=decision.request_id or "",
                reason=decision.message,
                retry_when_stable=decision.retry_when_stable,
                wait_seconds=5.0,
            )
        except EnforceRequestFailed as error:
            failure = str(error)
            refused = error.status == UNSUPPORTED_STATUS
            if not error.retriable:
                break
        else:
            return answered(record, decision, _answer(result))
    if refused:
        return unsupported(previous, record, failure)
    return unreachable(previous, record, decision, failure)


def _write(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    group_id: str,
    patch: kopf.Patch,
    write: EnforceWrite,
) -> None:
    """Carry out what planning.enforcement_writes decided, in its order."""
    if write.counted is not None:
        metrics.record_enforcement(namespace, str(body.metadata.name), group_id, write.counted)
    for notice in write.notices:
        post = kopf.warn if notice.warning else kopf.info
        post(body, reason=notice.reason, message=notice.message)
    if write.expectation_dropped:
        deps.hub.take_expected(group_id, float("inf"))
    if write.enforcement is not None:
        # kopf sends this patch; it passes the same check as every other status write.
        patch.status.update(
            checked_status(namespace, str(body.metadata.name), {"enforcement": write.enforcement})
        )
    if write.wake_observer:
        deps.hub.wakeup(group_id).set()  # the observer writes the condition
    if write.retry is not None:
        raise kopf.TemporaryError(write.retry.message, delay=write.retry.delay)
