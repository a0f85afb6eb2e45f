"""The base of the operator's own errors, and what a loop may do with one."""

from __future__ import annotations


class RebalancerError(Exception):
    """An error the operator, the join gate or the sidecar raises on purpose; its message is a
    sentence for users.

    `retriable` says whether the same call may succeed later with nothing changed (a broker
    that answers again, a sidecar back from a restart); False where only a fix helps (a spec,
    a permission, a missing object). Subclasses that can tell per error set it per instance.
    """

    retriable: bool = False
