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
from rebalancer.clients.resolving import SecretUnavailable, read_secret_key, resolve_security
from rebalancer.planning.enforce_conditions import REASON as UNSUPPORTED_REASON
from rebalancer.planning.enforce_conditions import UNSUPPORTED
from rebalancer.planning.triggers import (
    TriggerDecision,
    TriggerInputs,
    Verdict,
    decide_enforcement,
    memory_from_status,
    memory_to_status,
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
from rebalancer.structs.specs import ConsumerGroupSpec, SecretKeyRef
from rebalancer.structs.times import format_rfc3339

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


# Answers a sidecar gives while the rebalance is still under way; the final one comes later.
UNSETTLED = {"accepted", "enforcing"}


async def _follow_up(
    deps: Dependencies,
    namespace: str,
    parsed: ConsumerGroupSpec,
    policy: EnforceSpec,
    previous: dict[str, Any],
    body: kopf.Body,
) -> dict[str, Any]:
    """The final answer to a request the sidecar was still enforcing when the POST's wait ran
    out; without it status said "enforcing" forever after a rebalance that took over 5 s."""
    request_id = previous.get("lastRequestId")
    if previous.get("lastStatus") not in UNSETTLED or not request_id:
        return {}
    if policy.sidecar.token_secret is None:
        return {}
    ref = SecretKeyRef(policy.sidecar.token_secret, policy.sidecar.token_key)
    try:
        token = await read_secret_key(deps.kube, namespace, ref, TOKEN_FIELD)
    except SecretUnavailable:
        return {}
    for url in await _sidecar_urls(deps, namespace, parsed, policy):
        try:
            result = await deps.sidecars.status(url, token, str(request_id))
        except EnforceRequestFailed:
            continue
        if result.status == previous.get("lastStatus"):
            return {}
        if result.final:
            name = str(body.metadata.name)
            metrics.record_enforcement(namespace, name, parsed.group_id, result.status)
        kopf.info(
            body,
            reason="RebalanceEnforced" if result.status == "enforced" else "EnforceRequested",
            message=f"{previous.get('lastCause')}: {result.status} {result.message}".strip(),
        )
        return {"lastStatus": result.status, "lastGeneration": result.generation}
    return {}


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
    try:
        parsed = read_consumer_group(body, namespace=namespace).spec
    except SpecInvalid:
        return  # the change handler has reported it
    policy = parsed.policy.enforce
    if not policy.enabled:
        return
    if refusal_of(body, namespace, claims, deps.hub) is not None:
        return  # not this resource's group or workload to act on: the observer says so
    previous = dict(status.get("enforcement") or {})
    pattern = parsed.subscription.pattern
    if pattern and pattern_takes_control_topics(pattern, parsed.group_id):
        if previous.get("lastStatus") != "refused":
            kopf.warn(
                body,
                reason="PatternTakesControlTopics",
                message=f"spec.subscription.pattern {pattern!r} matches the sidecars' "
                "__rebalancer.* control topics; narrow the pattern",
            )
            patch.status["enforcement"] = {**previous, "lastStatus": "refused"}
        return
    matching = None
    if pattern and policy.on_topic_creation:
        try:
            matching = await _matching_topics(deps, namespace, parsed)
        except (SecretUnavailable, KafkaGatewayError) as error:
            raise kopf.TemporaryError(str(error), delay=30) from None
    inputs = TriggerInputs(
        now=time.time(),
        group_state=(status.get("group") or {}).get("state"),
        matching_topics=matching,
        finished_rollout=(status.get("rollout") or {}).get("completedRevision"),
    )
    decision = decide_enforcement(
        policy_from_spec(policy),
        memory_from_status(previous.get("memory")),
        inputs,
        parsed.group_id,
    )
    # "message" belongs to the request it explains: None removes it (status is merge-patched).
    record: dict[str, Any] = {
        **previous,
        "memory": memory_to_status(decision.memory),
        "message": None,
    }
    if decision.verdict is Verdict.NOTHING:
        record.update(await _follow_up(deps, namespace, parsed, policy, previous, body))
        # Nothing new was asked: the last request's explanation stands.
        if "message" in previous:
            record["message"] = previous["message"]
        else:
            record.pop("message")
        if record != previous:
            patch.status["enforcement"] = record
        return
    record.update(
        lastRequestId=decision.request_id,
        lastCause=decision.cause_text,
        lastTime=format_rfc3339(time.time()),
    )
    if decision.verdict is Verdict.SKIP_IN_PROGRESS:
        kopf.info(body, reason="EnforceSkipped", message=decision.message)
        metrics.record_enforcement(namespace, str(body.metadata.name), parsed.group_id, "skipped")
        patch.status["enforcement"] = {**record, "lastStatus": "skipped-in-progress"}
        return
    await _request(deps, body, namespace, parsed, previous, record, decision, patch)


async def _request(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    parsed: ConsumerGroupSpec,
    previous: dict[str, Any],
    record: dict[str, Any],
    decision: TriggerDecision,
    patch: kopf.Patch,
) -> None:
    """Send the decided request to a sidecar and record its answer (or why there was none)."""
    policy = parsed.policy.enforce
    if policy.sidecar.token_secret is None:
        kopf.warn(body, reason="EnforceNotConfigured", message=f"set {TOKEN_FIELD}")
        return
    ref = SecretKeyRef(policy.sidecar.token_secret, policy.sidecar.token_key)
    try:
        token = await read_secret_key(deps.kube, namespace, ref, TOKEN_FIELD)
    except SecretUnavailable as error:
        kopf.warn(body, reason="EnforceFailed", message=str(error))
        raise kopf.TemporaryError(str(error), delay=30) from None
    # Expected before asking: the observer may see the new generation before the sidecar answers.
    deps.hub.expect_cause(parsed.group_id, decision.cause_text, time.time())
    result: EnforceResult | None = None
    unsupported = False
    failure = (
        "no ready pod's sidecar to ask yet (with sidecar.inject, status.settings.sidecar.rolledOut "
        "says when every pod has one)"
        if policy.sidecar.inject
        else "no sidecar to ask: set spec.policy.enforce.sidecar.url, run the sidecar in the pods "
        "or set spec.policy.enforce.sidecar.inject: true"
    )
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
            break
        except EnforceRequestFailed as error:
            failure = str(error)
            unsupported = error.status == UNSUPPORTED_STATUS
            if not error.retriable:
                break
    if result is None and unsupported:
        # The sidecar cannot join the group's protocol: asking again changes nothing, so the
        # trigger is used up (memory advances) and Degraded says why until a request succeeds.
        if previous.get("lastStatus") != UNSUPPORTED:
            kopf.warn(body, reason=UNSUPPORTED_REASON, message=failure)
        name = str(body.metadata.name)
        metrics.record_enforcement(namespace, name, parsed.group_id, "unsupported")
        deps.hub.take_expected(parsed.group_id, float("inf"))
        patch.status["enforcement"] = {**record, "lastStatus": UNSUPPORTED, "message": failure}
        deps.hub.wakeup(parsed.group_id).set()  # the observer writes the condition
        return
    if result is None:
        deps.hub.take_expected(parsed.group_id, float("inf"))
        # Counted once per request: its retries (same id, status already failed) are not new.
        retried = previous.get("lastRequestId") == decision.request_id
        if not (retried and previous.get("lastStatus") == "failed"):
            name = str(body.metadata.name)
            metrics.record_enforcement(namespace, name, parsed.group_id, "unreachable")
        kopf.warn(body, reason="EnforceFailed", message=failure)
        # Memory is not advanced: the same request id is sent again and sidecars de-duplicate it.
        # Status says the request failed: left as it was, it showed the previous request's
        # outcome as if it were this one's.
        failed = {
            **record,
            "memory": previous.get("memory"),
            "lastStatus": "failed",
            "message": failure,
        }
        failed.pop("lastGeneration", None)
        patch.status["enforcement"] = {k: v for k, v in failed.items() if v is not None}
        raise kopf.TemporaryError(failure, delay=15)
    if result.final:
        # An answer still under way is counted by the follow-up that sees its end.
        metrics.record_enforcement(
            namespace, str(body.metadata.name), parsed.group_id, result.status
        )
    enforced = result.status == "enforced"
    kopf.info(
        body,
        reason="RebalanceEnforced" if enforced else "EnforceRequested",
        message=f"{decision.cause_text}: {result.status} {result.message}".strip(),
    )
    patch.status["enforcement"] = {
        **record,
        "lastStatus": result.status,
        "lastGeneration": result.generation,
    }
