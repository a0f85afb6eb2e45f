"""Small helpers on API objects as plain dicts: times, conditions, pod health, owner refs."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

Body = dict[str, Any]

# kube's rand.SafeEncodeString alphabet: no vowels, no look-alike digits, so that generated
# names never spell words.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


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


def is_pod_ready(pod: Body) -> bool:
    cond = condition(pod, "Ready")
    return pod_phase(pod) == "Running" and cond is not None and cond.get("status") == "True"


def ready_since(pod: Body) -> float | None:
    cond = condition(pod, "Ready")
    if pod_phase(pod) != "Running" or cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime")) or 0.0


def is_pod_available(pod: Body, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least minReadySeconds, as kube's podutil.IsPodAvailable decides."""
    since = ready_since(pod)
    if since is None:
        return False
    return min_ready_seconds <= 0 or since + min_ready_seconds <= now


def available_in(pod: Body, min_ready_seconds: int, now: float) -> float | None:
    """Seconds until a ready pod becomes available; None if it is not ready."""
    since = ready_since(pod)
    if since is None:
        return None
    return max(0.0, since + min_ready_seconds - now)


def is_active(pod: Body) -> bool:
    """Counted by ReplicaSets: not terminating and not finished."""
    return not is_terminating(pod) and pod_phase(pod) not in ("Succeeded", "Failed")


def owner_reference(owner: Body, *, controller: bool = True) -> Body:
    return {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def template_hash(template: Any, collision_count: int = 0) -> str:
    """A short stable hash of a pod template, in kube's safe alphabet (pod-template-hash)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    if collision_count:
        text += f"#{collision_count}"
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    chars = []
    for _ in range(10):
        number, index = divmod(number, len(_SAFE))
        chars.append(_SAFE[index])
    return "".join(chars)


def scaled_value(value: Any, total: int, *, round_up: bool, default: str) -> int:
    """An intOrString like maxSurge: an int, or a percentage of `total` rounded as kube does."""
    if value is None:
        value = default
    if isinstance(value, int):
        return max(0, value)
    text = str(value).strip()
    if text.endswith("%"):
        fraction = float(text[:-1]) * total / 100.0
        return max(0, math.ceil(fraction) if round_up else math.floor(fraction))
    return max(0, int(text))


def labels_match(selector: Body | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against a label map."""
    if not selector:
        return False  # kube: an empty selector on a workload selects nothing
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
