"""The one reader of RFC 3339 times, as the API server, kopf and this operator write them."""

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
