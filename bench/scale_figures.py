"""Figures of bench/scale.py from what it sampled, with no lab: percentiles, the take-over of a
killed replica's groups, RSS growth over a window, and the targets beside the figures."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

# status.servedBy: "<replica> (shard <i> of <n>)"; outside a pod the replica is "host/pid".
SERVED = re.compile(r"^(?P<who>\S+) \(shard (?P<shard>\d+) of (?P<of>\d+)\)$")

# A sample of who serves each group: seconds since the kill, and group name -> replica pid.
Owners = tuple[float, Mapping[str, int | None]]


def namespace_of(index: int, namespaces: int) -> str:
    """The namespace of the index-th group: "default" with one namespace, else the groups dealt
    round-robin over scale-000, scale-001, ..."""
    if namespaces < 1:
        raise ValueError(f"namespaces must be at least 1, got {namespaces}")
    return "default" if namespaces == 1 else f"scale-{index % namespaces:03d}"


def churn_schedule(groups: int, percent: float, seconds: float) -> list[tuple[float, int]]:
    """(seconds from the start, group index) of each change when `percent` of `groups` change
    per minute for `seconds`: evenly spaced, and walking through the groups in order so that no
    group changes twice before every other has changed once."""
    if groups < 1 or percent <= 0 or seconds <= 0:
        return []
    per_minute = groups * percent / 100
    count = int(per_minute * seconds / 60)
    gap = 60 / per_minute
    return [(step * gap, step % groups) for step in range(count)]


# A restart of a busy group's consumer: (seconds into the soak, group, its status's count of
# rebalances before it).
Restart = tuple[float, str, int | None]
# A look at the busy groups' status: (seconds into the soak, group -> rebalances counted).
Counts = tuple[float, Mapping[str, int | None]]


def restart_latencies(restarts: Sequence[Restart], looks: Sequence[Counts]) -> list[float | None]:
    """Per restart, seconds from it to the first look whose status counts more rebalances of
    the group than before it; None when no later look did."""
    found: list[float | None] = []
    for at, group, before in restarts:
        seen = None
        for when, generations in looks:
            now = generations.get(group)
            newer = now is not None and (before is None or now > before)
            if when >= at and newer:
                seen = when - at
                break
        found.append(seen)
    return found


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def served_pid(served: str | None) -> int | None:
    """The pid of the replica a servedBy names (host/pid), None when unset or not of that form."""
    match = SERVED.match(served or "")
    if match is None:
        return None
    pid = match["who"].rsplit("/", 1)[-1]
    return int(pid) if pid.isdigit() else None


def takeover_times(
    moving: Collection[str], samples: Sequence[Owners], live: Collection[int]
) -> dict[str, float]:
    """For each group of `moving`, the seconds from the kill to the first sample in which its
    servedBy names a live replica; a group never seen so is left out (it did not move)."""
    found: dict[str, float] = {}
    for seconds, owners in sorted(samples, key=lambda sample: sample[0]):
        for name in moving:
            if name not in found and owners.get(name) in live:
                found[name] = seconds
    return found


def takeover_summary(times: Mapping[str, float], moving: Collection[str]) -> dict[str, Any]:
    """How many of the killed replica's groups moved, how fast (p50, max), and which did not."""
    stuck = sorted(set(moving) - set(times))
    values = list(times.values())
    return {
        "groups": len(moving),
        "moved": len(times),
        "not_moved": len(stuck),
        "not_moved_names": stuck[:20],
        "p50_s": round(percentile(values, 50), 2) if values else None,
        "max_s": round(max(values), 2) if values else None,
    }


def rss_growth(samples: Sequence[Mapping[str, float]], start: float, end: float) -> float | None:
    """RSS growth (MB) over the second half of the window [start, end] of soak time: the last
    sample in it minus the first; None with fewer than two samples there."""
    middle = (start + end) / 2
    half = [s for s in samples if middle <= s["t"] <= end]
    if len(half) < 2:
        return None
    return round(half[-1]["rss_mb"] - half[0]["rss_mb"], 1)


def target_rows(result: Mapping[str, Any], coordinators: int) -> list[dict[str, Any]]:
    """Each figure the scale target names, its value, its limit (from the groups and the
    interval) and whether it is met; a figure not measured (no kill, no soak) is left out.
    Every group must have its status; the other figures are ceilings. Flat RSS: a replica's
    growth over the second half of a soak window of at most 10 MB."""
    groups, interval = result["groups"], result["interval_seconds"]
    api_limit, kafka_limit = 0.02 * groups / interval, groups / 50 + coordinators
    after = result.get("after_takeover") or {}
    ceilings = [
        ("all with status after the last creation (s)", result.get("all_status_after_last_s"), 120),
        ("p99 creation to status (s)", result.get("latency_s", {}).get(99), 60),
        ("soak API requests/s", result.get("soak_requests_per_s"), api_limit),
        (
            "soak Kafka requests per interval",
            result.get("soak_kafka_requests_per_interval"),
            kafka_limit,
        ),
        ("RSS per replica, largest (MB)", result.get("rss_mb_largest_replica"), 500),
        (
            "RSS growth, second half of a soak window (MB)",
            result.get("soak_rss_growth_second_half_mb"),
            10,
        ),
        ("killed replica's groups served again, max (s)", result.get("takeover_max_s"), 15),
        ("after the take-over: API requests/s", after.get("requests_per_s"), api_limit),
        (
            "after the take-over: Kafka requests per interval",
            after.get("kafka_per_interval"),
            kafka_limit,
        ),
    ]
    rows = [
        {
            "figure": "ConsumerGroups with status",
            "value": result["reconciled"],
            "target": groups,
            "met": result["reconciled"] >= groups,
        }
    ]
    return rows + [
        {"figure": name, "value": value, "target": round(limit, 2), "met": value <= limit}
        for name, value, limit in ceilings
        if value is not None
    ]
