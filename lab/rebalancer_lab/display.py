"""What the lab shows while it runs: the operator's view of the group, refreshed every second."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client
from rich.console import Group
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class LabView:
    group: dict[str, Any]
    conditions: list[dict[str, Any]]
    events: list[dict[str, Any]]
    consumers_running: int


def read_view(
    api_client: client.ApiClient, namespace: str, name: str, consumers_running: int
) -> LabView:
    custom = client.CustomObjectsApi(api_client)
    body: dict[str, Any] = custom.get_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", namespace, "consumergroups", name
    )
    status = body.get("status") or {}
    core = client.CoreV1Api(api_client)
    events = [
        item.to_dict()
        for item in core.list_namespaced_event(namespace).items
        if item.involved_object.name == name and item.involved_object.kind == "ConsumerGroup"
    ]
    events.sort(key=lambda e: str(e.get("last_timestamp") or e.get("event_time") or ""))
    return LabView(
        group=status.get("group") or {},
        conditions=status.get("conditions") or [],
        events=events[-8:],
        consumers_running=consumers_running,
    )


def summary_line(view: LabView) -> str:
    group = view.group
    ready = next((c for c in view.conditions if c.get("type") == "Ready"), {})
    return (
        f"state={group.get('state', '?')} members={group.get('members', '?')} "
        f"generation={group.get('generation', '?')} rebalances={group.get('rebalances', 0)} "
        f"assigned={group.get('assignedPartitions', '?')}/{group.get('totalPartitions', '?')} "
        f"lag={group.get('lag', '?')} ready={ready.get('status', '?')}"
        f"({ready.get('reason', '')}) consumers-running={view.consumers_running}"
    )


def render(view: LabView, title: str) -> Group:
    group = view.group
    overview = Table(title=title, show_header=False, expand=False)
    overview.add_column("field", style="bold")
    overview.add_column("value")
    sources = group.get("sources") or {}
    for label, key in (
        ("State", "state"),
        ("Members", "members"),
        ("Generation", "generation"),
        ("Rebalances", "rebalances"),
        ("Assigned partitions", "assignedPartitions"),
        ("Lag", "lag"),
        ("Assignor", "assignor"),
        ("Last rebalance", "lastRebalanceTime"),
        ("Last cause", "lastRebalanceCause"),
    ):
        source = sources.get(key) or sources.get(
            {"assignedPartitions": "assignment"}.get(key, ""), ""
        )
        value = str(group.get(key, "-"))
        if key == "assignedPartitions":
            value += f" / {group.get('totalPartitions', '?')}"
        overview.add_row(label, value + (f"  [dim]({source})[/dim]" if source else ""))
    for condition in view.conditions:
        style = (
            "green"
            if (condition.get("status") == "True") != (condition.get("type") == "Degraded")
            else "red"
        )
        overview.add_row(
            condition.get("type", ""),
            Text(f"{condition.get('status')} {condition.get('reason', '')}", style=style),
        )
    members = Table(title="Members", expand=False)
    for column in ("host", "generation", "partitions", "source"):
        members.add_column(column)
    for member in group.get("memberDetails") or []:
        members.add_row(
            *(
                str(member.get(column, "-"))
                for column in ("host", "generation", "partitions", "source")
            )
        )
    events = Table(title="Recent events", expand=False)
    events.add_column("type")
    events.add_column("reason")
    events.add_column("message", overflow="fold")
    for event in view.events:
        events.add_row(str(event.get("type")), str(event.get("reason")), str(event.get("message")))
    return Group(overview, members, events, Text("Ctrl-C stops the lab and everything it started."))
