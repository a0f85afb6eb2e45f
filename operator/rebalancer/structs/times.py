"""The one reader and writer of RFC 3339 times, as the API server, kopf and this operator
write them."""

from __future__ import annotations

import datetime


def parse_rfc3339(text: str) -> float:
    """Epoch seconds of an RFC 3339 time ("Z" or a numeric offset); one without an offset is
    taken as UTC, the zone every writer here uses. Raises ValueError when `text` is not a time.
    """
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def read_rfc3339(value: object) -> float | None:
    """`parse_rfc3339` of a field read from a resource: None when it is absent, not a string,
    empty or not a time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


def format_rfc3339(moment: float, *, milliseconds: bool = False) -> str:
    """`moment` (epoch seconds) in UTC with "Z": in whole seconds, as Kubernetes writes its own
    times (conditions, status.group), or in milliseconds where a time must come back as it
    was stored (the rollout state, the gate's annotations)."""
    value = datetime.datetime.fromtimestamp(moment, tz=datetime.UTC)
    if milliseconds:
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
