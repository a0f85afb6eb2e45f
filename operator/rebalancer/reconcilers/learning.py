"""Closing the loop: the learning job's recommendation, shown or applied per policy; and the
pod records of the history the job learns from."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import kopf

from rebalancer.clients.patching import patch_policy
from rebalancer.clients.recording import day_of
from rebalancer.clients.rolling import read_workload
from rebalancer.planning.history_pods import PodRecordContext, PodTracking, track_pods
from rebalancer.planning.history_records import RecordedJoin
from rebalancer.planning.recommendation_policies import (
    applied_at,
    as_applied,
    nothing_to_apply,
    policy_patch,
    settings_in_force,
)
from rebalancer.planning.recommendations import (
    LearningAction,
    decide_learning,
    render_learning_status,
)
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.structs.consumer_group import written_status
from rebalancer.structs.history import RebalanceEvent
from rebalancer.structs.specs import ConsumerGroupSpec
from rebalancer.structs.times import format_rfc3339

logger = logging.getLogger(__name__)
# The workload's pods are listed at most this often, for the pod records (an observation
# in between only checks that the workload exists, as it did before).
POD_LOOK_SECONDS = 5.0


async def learning_status(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    spec: ConsumerGroupSpec,
    remembered: float | None = None,
) -> tuple[dict[str, Any], float | None]:
    """status.learning after reading the latest recommendation, applying it when due, and the
    time of the last apply. `remembered` is the last apply this process made: the body's status
    may not show it yet, and the interval must hold even then."""
    status = written_status(body)
    recommendation = await deps.recommender.read(namespace, name)
    known = [stamp for stamp in (applied_at(status), remembered) if stamp is not None]
    last = max(known) if known else None
    now = time.time()
    own_delay = recommendation is not None and recommendation.delay_is_the_groups
    decision = decide_learning(
        spec.policy.learning, recommendation, settings_in_force(spec, status, own_delay), last, now
    )
    if decision.action is LearningAction.APPLY:
        patch = policy_patch(decision, spec, own_delay)
        if patch:
            decision = as_applied(decision, patch)
            await patch_policy(deps.kube, namespace, name, patch)
            kopf.info(body, reason="RecommendationApplied", message=decision.message)
            last = now
        else:
            decision = nothing_to_apply(decision, own_delay)
    rendered = render_learning_status(
        decision, recommendation, format_rfc3339(last) if last else None
    )
    return rendered, last


@dataclass
class PodWatch:
    """One group's pod-start and pod-stop records (planning.history_pods), from the workload
    the observer reads anyway: each look reads the workload and lists its pods, which also
    answers whether it exists. The first look of a process checks the store for the keys it
    would write, so an operator that restarts writes no fact twice."""

    tracking: PodTracking = field(default_factory=PodTracking)
    looked_at: float | None = None  # time.monotonic() of the last look

    async def look(
        self,
        deps: Dependencies,
        namespace: str,
        spec: ConsumerGroupSpec,
        *,
        context: PodRecordContext,
        joins: Sequence[RecordedJoin],
    ) -> tuple[list[RebalanceEvent], int | None]:
        """(pod records to write, the workload's spec.replicas; None: it does not exist)."""
        kind, name = spec.workload.kind, spec.workload.name
        due = self.looked_at is None or time.monotonic() - self.looked_at >= POD_LOOK_SECONDS
        # No store, nothing to write: the pod list would be requests for nothing.
        recording = spec.policy.history_enabled and deps.recorder.root is not None
        if not recording or not due:
            replicas = await deps.workloads.replicas(deps.kube, namespace, kind.value, name)
            if not recording:
                return [], replicas
            events, self.tracking = track_pods(
                self.tracking, None, now=time.time(), context=context, joins=joins
            )
            return events, replicas
        workload = await read_workload(deps.kube, namespace, kind, name)
        self.looked_at = time.monotonic()
        first = not self.tracking.looked
        pods = () if workload is None else workload.pods
        stopped = dict(deps.hub.book(spec.group_id).stopped_at)
        events, self.tracking = track_pods(
            self.tracking, pods, now=time.time(), context=context, joins=joins, stopped=stopped
        )
        if first:
            events = await self._unwritten(deps, namespace, events)
        return events, None if workload is None else workload.replicas

    async def _unwritten(
        self, deps: Dependencies, namespace: str, events: list[RebalanceEvent]
    ) -> list[RebalanceEvent]:
        """Drop what an earlier process wrote already: the facts of a first look are all that
        can have been (each later fact happens after this look)."""
        candidates = [*events, *self.tracking.waiting]
        if not candidates:
            return events
        days = {day_of(event.detected_at) for event in candidates}
        try:
            written = await deps.recorder.recorded_keys(namespace, days)
        except Exception as error:  # the store may be away: readers drop repeats anyway
            logger.warning("%s: reading the history's record keys failed: %s", namespace, error)
            return events
        if not written:
            return events
        waiting = tuple(e for e in self.tracking.waiting if e.record_key not in written)
        self.tracking = replace(self.tracking, waiting=waiting)
        return [event for event in events if event.record_key not in written]
