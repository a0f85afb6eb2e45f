"""The operator's own permissions, asked of the API server (SelfSubjectAccessReview, what
`kubectl auth can-i` asks), and the ConsumerGroup conditions that name what is missing.

kopf makes the requests every ConsumerGroup needs (list, watch, patch) and posts the Events; it
retries a refused one for about a minute and then only logs it. Asking first lets the operator
say at start, in its log and in each ConsumerGroup's status, which grant is missing and where
the chart grants it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.planning.permissions import (
    WORKLOAD_WATCH_NEEDS,
    Denial,
    DenialBook,
    Need,
    denial_conditions,
    denial_of,
    needs,
    workload_watch_needs,
)
from rebalancer.structs.conditions import merge_conditions
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.times import format_rfc3339

logger = logging.getLogger(__name__)
# While something the operator always needs is missing, the check runs again this often, so a
# grant added later clears the condition without a restart.
RECHECK_SECONDS = 30.0


class ReviewUnavailable(RebalancerError):
    """The API server would not answer a SelfSubjectAccessReview (the check is skipped)."""


def _allowed(api: KubernetesApi, verb: str, resource: str, group: str, namespace: str) -> Any:
    plural, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "resource": plural, "group": group}
    if subresource:
        attributes["subresource"] = subresource
    if namespace:
        attributes["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    authorization = client.AuthorizationV1Api(api.api_client)
    answer = authorization.create_self_subject_access_review(review, _preload_content=False)
    return json.loads(answer.data).get("status") or {}


async def missing_permissions(
    api: KubernetesApi,
    namespaces: Sequence[str],
    account: str | None = None,
    peering: bool = False,
) -> list[tuple[str | None, Need, Denial]]:
    """What the operator may not do of what it always needs: (namespace, need, denial), the
    namespace being a watched one, "" when it watches all, None for cluster-scoped grants.
    Raises ReviewUnavailable when the API server refuses the review itself (a cluster that took
    self-reviews away from service accounts)."""
    return await _missing(api, needs(namespaces, peering), account)


async def _missing(
    api: KubernetesApi, wanted: Sequence[tuple[Need, str | None]], account: str | None
) -> list[tuple[str | None, Need, Denial]]:
    found: list[tuple[str | None, Need, Denial]] = []
    for need, namespace in wanted:
        try:
            status = await asyncio.to_thread(
                _allowed, api, need.verb, need.resource, need.group, namespace or ""
            )
        except ApiException as error:
            if error.status != 403:
                raise
            raise ReviewUnavailable("the API server refused a SelfSubjectAccessReview") from None
        if not status.get("allowed"):
            found.append((namespace, need, denial_of(need, namespace, account)))
    return found


async def followable_workloads(
    api: KubernetesApi, namespaces: Sequence[str]
) -> tuple[list[str], list[Denial]]:
    """The workload plurals the operator may list and watch wherever it watches, and what it
    may not (each denial once). A review that cannot be had (refused, the API away) follows
    nothing, said in the log: a watch that turns out refused would stop the operator, and the
    rollout planner's poll sees every change anyway."""
    followable: list[str] = []
    denied: list[Denial] = []
    account: str | None = None
    for plural in WORKLOAD_WATCH_NEEDS:
        try:
            account = account or await who_am_i(api)
            found = await _missing(api, workload_watch_needs(plural, namespaces), account)
        except Exception as error:  # never a reason to stop the operator at start
            logger.warning(
                "workloads are not followed (their changes are seen at the rollout planner's "
                "next look): the operator's permission to watch them could not be checked: %s",
                str(error).splitlines()[0] if str(error) else type(error).__name__,
            )
            return [], []
        if found:
            denied.extend(denial for _, _, denial in found)
        else:
            followable.append(plural)
    return followable, denied


async def who_am_i(api: KubernetesApi) -> str | None:
    """The operator's identity as the API server sees it (SelfSubjectReview), if it answers."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    authentication = client.AuthenticationV1Api(api.api_client)
    try:
        answer = await asyncio.to_thread(
            authentication.create_self_subject_review, review, _preload_content=False
        )
    except ApiException:
        return None
    user = ((json.loads(answer.data).get("status") or {}).get("userInfo") or {}).get("username")
    return str(user) if user else None


async def mark_groups(api: KubernetesApi, namespace: str, denials: Sequence[Denial]) -> int:
    """Write the Degraded condition naming `denials` into every ConsumerGroup of `namespace`
    ("" for all) whose status does not say so yet; the number written.

    For when kopf cannot hand the groups to the observer (it cannot add its finalizer, or does
    not see them without watch): the observer writes the same condition when it runs."""
    conditions = denial_conditions(denials)
    if not conditions:
        return 0
    try:
        if namespace:
            listed = await asyncio.to_thread(
                api.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL
            )
        else:
            listed = await asyncio.to_thread(
                api.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL
            )
    except ApiException:
        return 0  # cannot list them: the log is all there is
    written = 0
    for item in listed.get("items") or []:
        status = dict(item.get("status") or {})
        current = {c.get("type"): c for c in status.get("conditions") or []}
        wanted = conditions[0]
        present = current.get(wanted.type.value) or {}
        if present.get("reason") == wanted.reason and present.get("message") == wanted.message:
            continue
        merged = merge_conditions(
            status.get("conditions") or [],
            conditions,
            now=format_rfc3339(time.time()),
            generation=(item.get("metadata") or {}).get("generation"),
        )
        meta = item.get("metadata") or {}
        try:
            await patch_status(api, meta["namespace"], meta["name"], status, {"conditions": merged})
        except (ApiException, ResourceGone):
            continue  # refused too (the log names that), or deleted meanwhile
        written += 1
    return written


async def follow_permissions(
    api: KubernetesApi, namespaces: Sequence[str], book: DenialBook, peering: bool = False
) -> None:
    """Check what every ConsumerGroup needs; while anything is missing, say so and check again."""
    account = await who_am_i(api)
    reported: set[Denial] = set()
    while True:
        try:
            found = await missing_permissions(api, namespaces, account, peering)
        except ReviewUnavailable as error:
            logger.info("the operator's permissions were not checked: %s", error)
            return
        except Exception as error:  # the API may be away; the requests themselves will say
            logger.warning("checking the operator's permissions failed: %s", error)
            await asyncio.sleep(RECHECK_SECONDS)
            continue
        denials = {denial for _, _, denial in found}
        for _, need, denial in found:
            if denial not in reported:
                logger.error("%s (%s)", denial.message(), need.why)
        for denial in reported - denials:
            logger.info("granted now: %s", denial.permission)
        reported = denials
        by_namespace: dict[str, list[Denial]] = {}
        for namespace, _, denial in found:
            if namespace is not None:
                by_namespace.setdefault(namespace, []).append(denial)
        book.set_namespaces(by_namespace)
        for namespace, listed in by_namespace.items():
            await mark_groups(api, namespace, listed)
        if not found:
            return
        await asyncio.sleep(RECHECK_SECONDS)
