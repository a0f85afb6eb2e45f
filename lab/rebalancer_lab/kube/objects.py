"""Small helpers on API objects as plain dicts: times, conditions, phases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Body = dict[str, Any]


def now_text(now: float | None = None) -> str:
    moment = datetime.now(UTC) if now is None else datetime.fromtimestamp(now, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def condition(obj: Body, kind: str) -> Body | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return dict(cond)
    return None


def set_condition(
    conditions: list[Body],
    kind: str,
    status: str,
    reason: str | None = None,
    message: str | None = None,
    *,
    now: str | None = None,
    update_time: bool = False,
) -> list[Body]:
    """A copy of `conditions` with one set; lastTransitionTime moves only when status does."""
    now = now or now_text()
    out: list[Body] = []
    found = False
    for cond in conditions:
        if cond.get("type") != kind:
            out.append(cond)
            continue
        found = True
        fresh = dict(cond)
        if cond.get("status") != status:
            fresh["lastTransitionTime"] = now
        fresh["status"] = status
        _set_optional(fresh, "reason", reason)
        _set_optional(fresh, "message", message)
        if update_time and (
            cond.get("status") != status
            or cond.get("reason") != reason
            or cond.get("message") != message
        ):
            fresh["lastUpdateTime"] = now
        out.append(fresh)
    if not found:
        fresh = {"type": kind, "status": status, "lastTransitionTime": now}
        _set_optional(fresh, "reason", reason)
        _set_optional(fresh, "message", message)
        if update_time:
            fresh["lastUpdateTime"] = now
        out.append(fresh)
    return out


def _set_optional(target: Body, key: str, value: str | None) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def is_terminating(obj: Body) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def pod_phase(pod: Body) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")
