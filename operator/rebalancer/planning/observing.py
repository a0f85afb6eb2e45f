"""Merge what the broker says and what members report into one snapshot.

The broker is trusted for state, members and assignment when it knows them; members' reports
give the generation (member epoch under KIP-848). Without reports the broker's own answers give
it where they carry it (the operator's batched reads; librdkafka's describe carries neither):
a KIP-848 group's epoch, and a classic group's generation from its members' subscriptions, which
name the generation each member's last JoinGroup came from (KIP-792). Each figure carries its
source so users can judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.reports import MemberReport, ReportEvent
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source

_REBALANCING_EVENTS = {ReportEvent.REVOKED, ReportEvent.LOST}


def _state_from_reports(reports: Sequence[MemberReport]) -> GroupState:
    if not reports:
        return GroupState.EMPTY
    generations = {report.generation for report in reports}
    if any(report.event in _REBALANCING_EVENTS for report in reports) or len(generations) > 1:
        return GroupState.PREPARING_REBALANCE
    return GroupState.STABLE


def combine_observation(
    view: BrokerGroupView | None,
    reports: Sequence[MemberReport],
    total_partitions: int | None,
    now: float,
) -> GroupSnapshot:
    sources: dict[str, Source] = {}
    state, sources["state"] = _combined_state(view, reports)
    # Enforcement sidecars (client.id <pod>-sidecar) are members on the broker but not the
    # application's: counted, they would double the members and add the control partitions.
    members = [m for m in (view.members if view else ()) if not m.client_id.endswith("-sidecar")]
    if view is not None and view.members_known and members:
        details, owned = _members_from_broker(members, reports)
        sources["members"] = Source.BROKER
        sources["assignment"] = Source.BROKER
    elif reports:
        details, owned = _members_from_reports(reports)
        sources["members"] = Source.MEMBER_REPORTS
        sources["assignment"] = Source.MEMBER_REPORTS
    else:
        details, owned = [], set()
        known_empty = view is not None and view.state in (GroupState.EMPTY, GroupState.DEAD)
        sources["members"] = Source.BROKER if known_empty else Source.NONE

    reported_generations = [report.generation for report in reports if report.generation >= 0]
    generation = max(reported_generations) if reported_generations else None
    sources["generation"] = Source.MEMBER_REPORTS if generation is not None else Source.NONE
    if generation is None:
        generation = broker_generation(view)
        sources["generation"] = Source.BROKER if generation is not None else Source.NONE

    lags = [report.lag for report in reports if report.lag is not None]
    lag = sum(lags) if lags else None
    sources["lag"] = Source.MEMBER_REPORTS if lag is not None else Source.NONE

    # KIP-848: members still moving to the coordinator's target assignment (only the broker says).
    targets_known = [m for m in members if m.target_partitions is not None]
    reconciling = sum(m.reconciling for m in targets_known) if targets_known else None
    assigned = len(owned) if details else (0 if sources["members"] is Source.BROKER else None)
    return GroupSnapshot(
        state=state,
        protocol=_combined_protocol(view, reports),
        assignor=_combined_assignor(view, reports),
        generation=generation,
        members=len(details),
        member_details=tuple(sorted(details, key=lambda m: m.host)),
        assigned_partitions=assigned,
        total_partitions=total_partitions,
        lag=lag,
        observed_at=now,
        sources=sources,
        coordinator=view.coordinator_id if view is not None else None,
        members_reconciling=reconciling,
    )


# A classic group's generation is already the new one once every member has rejoined.
_JOINED_STATES = frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE})


def broker_generation(view: BrokerGroupView | None) -> int | None:
    """The group's generation as its broker's describe shows it, None where it does not.

    A KIP-848 group's epoch is in the describe. A classic group's is one past the newest
    generation its members joined from, once they have all rejoined: every member that was in
    the previous generation names it in its subscription. When every member joined afresh (a
    cold start, static members all replaced) nothing names it."""
    if view is None:
        return None
    if view.protocol is GroupProtocol.CONSUMER:
        return view.group_epoch
    if view.protocol is not GroupProtocol.CLASSIC or view.state not in _JOINED_STATES:
        return None
    joined = [m.joined_generation for m in view.members if m.joined_generation is not None]
    newest = max(joined, default=-1)
    return newest + 1 if newest >= 0 else None


def _combined_state(
    view: BrokerGroupView | None, reports: Sequence[MemberReport]
) -> tuple[GroupState, Source]:
    """The broker's state when it knows one, else the one the reports suggest."""
    broker_state = view.state if view is not None else GroupState.UNKNOWN
    if broker_state is not GroupState.UNKNOWN:
        return broker_state, Source.BROKER
    if reports:
        return _state_from_reports(reports), Source.MEMBER_REPORTS
    return GroupState.UNKNOWN, Source.NONE


def _members_from_broker(
    members: Sequence[BrokerMember], reports: Sequence[MemberReport]
) -> tuple[list[MemberSummary], set[TopicPartition]]:
    """The broker's members named as they report themselves, and the partitions they own."""
    details: list[MemberSummary] = []
    owned: set[TopicPartition] = set()
    # The broker knows a member by its id and its client's address; the member's own report
    # carries the same id and the pod's name, which is what a reader of status looks for.
    by_id = {report.member_id: report for report in reports if report.member_id}
    by_host = {report.host: report for report in reports}
    for member in members:
        reported = (
            by_id.get(member.member_id) or by_host.get(member.host) or by_host.get(member.client_id)
        )
        details.append(
            MemberSummary(
                host=(reported.host if reported and reported.host else member.host),
                member_id=member.member_id,
                instance_id=member.instance_id,
                generation=reported.generation if reported else None,
                partitions=len(member.partitions),
                source=Source.BROKER,
                target_partitions=(
                    None if member.target_partitions is None else len(member.target_partitions)
                ),
            )
        )
        owned.update(member.partitions)
    return details, owned


def _members_from_reports(
    reports: Sequence[MemberReport],
) -> tuple[list[MemberSummary], set[TopicPartition]]:
    details: list[MemberSummary] = []
    owned: set[TopicPartition] = set()
    for report in reports:
        details.append(
            MemberSummary(
                host=report.host or report.client_id,
                member_id=report.member_id,
                instance_id=report.instance_id,
                generation=report.generation if report.generation >= 0 else None,
                partitions=len(report.partitions),
                source=Source.MEMBER_REPORTS,
            )
        )
        owned.update(report.partitions)
    return details, owned


def _combined_protocol(view: BrokerGroupView | None, reports: Sequence[MemberReport]) -> str | None:
    if view is not None and view.protocol.value != "unknown":
        return view.protocol.value
    if reports and reports[0].protocol:
        return reports[0].protocol
    return None


def _combined_assignor(view: BrokerGroupView | None, reports: Sequence[MemberReport]) -> str | None:
    """The broker's assignor, else the strategies the members report, joined."""
    if view is not None and view.assignor:
        return view.assignor
    strategies = {r.assignment_strategy for r in reports if r.assignment_strategy}
    return ",".join(sorted(strategies)) or None


def coordinator_from_status(status: Mapping[str, Any]) -> int | None:
    """The coordinator status.group names: where a restarted operator's observer resumes, so a
    move while it was away is told and one it already told is not told again."""
    found = (status.get("group") or {}).get("coordinator")
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def coordinator_moved(before: int | None, after: int | None) -> bool:
    """Whether the group is coordinated by another node than at the last look; not when
    either is unknown (a first look, a broker that did not say, an observation that failed)."""
    return before is not None and after is not None and before != after


def coordinator_move_message(before: int, after: int, brokers: int | None) -> str:
    """The CoordinatorMoved Event's words: which node had the group and which has it now, and
    how many brokers the cluster counts (fewer than usual after a broker was lost)."""
    message = f"group coordinator moved from node {before} to node {after}"
    if brokers is None:
        return message
    return f"{message}; {brokers} broker{'' if brokers == 1 else 's'} in the cluster"
