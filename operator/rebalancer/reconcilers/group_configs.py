"""spec.policy.groupConfigs, reconciled: read the broker's bounds and the group's configs,
check, set what differs live (IncrementalAlterConfigs on the GROUP), read back, report.

Level-based: a reconcile that finds the broker already holding every wanted value writes
nothing, so the settings timer may call it every round. The result is
status.settings.perGroupConfigs and, when something changed or went wrong, an Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.clients.broker_configs import (
    describe_broker_configs,
    read_group_configs,
    set_group_configs,
)
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import NOT_AUTHORIZED, KafkaRequestFailed
from rebalancer.planning.group_configs import (
    check_group_configs,
    configs_status,
    differing,
    wanted_configs,
)
from rebalancer.planning.notices import Notice
from rebalancer.structs.broker_configs import ApplyState, verify_configs
from rebalancer.structs.group_configs_spec import GroupConfigsSpec
from rebalancer.structs.problems import FieldProblem

STATUS_KEY = "perGroupConfigs"
REFUSED = "refused"  # the spec asks for what the broker's bounds forbid: nothing was sent
APPLIED_REASON = "GroupConfigsApplied"
REFUSED_REASON = "GroupConfigsRefused"
FAILED_REASON = "GroupConfigsFailed"
ONE_ACL = "the one ACL spec.policy.groupConfigs needs is AlterConfigs on group"


@dataclass(frozen=True)
class GroupConfigsOutcome:
    status: dict[str, Any]  # status.settings.perGroupConfigs
    notices: tuple[Notice, ...] = ()


def _new_warning(previous: Mapping[str, Any], reason: str, message: str) -> tuple[Notice, ...]:
    """A warning once per new message: the status keeps saying it meanwhile."""
    if previous.get("message") == message:
        return ()
    return (Notice(reason, message, warning=True),)


async def _broker_configs(gateway: AdminGateway) -> dict[str, Any]:
    """The broker's configs, for its bounds; {} (bounds unchecked, the broker still refuses
    out-of-range values itself) when the operator may not describe them."""
    try:
        return await describe_broker_configs(gateway)
    except KafkaRequestFailed as error:
        if error.reason == NOT_AUTHORIZED:
            return {}
        raise


def _refused(problems: list[FieldProblem], previous: Mapping[str, Any]) -> GroupConfigsOutcome:
    message = "; ".join(str(problem) for problem in problems)
    status = {"state": REFUSED, "message": message}
    return GroupConfigsOutcome(status, _new_warning(previous, REFUSED_REASON, message))


async def reconcile_group_configs(
    gateway: AdminGateway,
    group_id: str,
    spec: GroupConfigsSpec,
    previous: Mapping[str, Any],
    settings_managed: bool = False,
) -> GroupConfigsOutcome:
    """Set the group's configs the spec asks for, live; see the module docstring.

    `previous`: the last status.settings.perGroupConfigs; `settings_managed`:
    spec.policy.settings is set (it owns the KIP-848 session and heartbeat). Raises
    KafkaUnavailable when the cluster cannot be reached (the caller retries)."""
    wanted = wanted_configs(spec)
    if not wanted:
        message = f"group {group_id!r}: no group configs to set"
        return GroupConfigsOutcome({"state": ApplyState.NOT_NEEDED.value, "message": message})
    problems = check_group_configs(spec, await _broker_configs(gateway), settings_managed)
    if problems:
        return _refused(problems, previous)
    try:
        current, held_as = await read_group_configs(gateway, group_id)
        changes = differing(wanted, current, held_as)
        if changes:
            await set_group_configs(gateway, group_id, changes)
        after, sources = await read_group_configs(gateway, group_id)
    except KafkaRequestFailed as error:
        message = f"group {group_id!r}: {error}"
        if error.reason == NOT_AUTHORIZED:
            # Granting what a read-back asks for would only move the refusal to the write.
            message += f"; {ONE_ACL} {group_id!r} (it allows DescribeConfigs on it too)"
        failed = {"state": ApplyState.FAILED.value, "message": message}
        return GroupConfigsOutcome(failed, _new_warning(previous, FAILED_REASON, message))
    outcome = verify_configs(wanted, after, f"group {group_id!r}")
    status: dict[str, Any] = {
        "state": outcome.state.value,
        "message": outcome.message,
        "configs": configs_status(wanted, after, sources),
    }
    if outcome.state is ApplyState.FAILED:
        return GroupConfigsOutcome(status, _new_warning(previous, FAILED_REASON, outcome.message))
    notices: tuple[Notice, ...] = ()
    if changes:
        was = ", ".join(f"{key} was {current.get(key)}" for key in sorted(changes))
        notices = (Notice(APPLIED_REASON, f"{outcome.message}, set live ({was})"),)
    return GroupConfigsOutcome(status, notices)
