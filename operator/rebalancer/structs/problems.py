"""Problems with user input, each naming the field and the fix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rebalancer.structs.errors import RebalancerError

# Messages quote the offending value; a 100 kB string must not be copied into status and Events
# (an Event's message is capped at 1 kB by the API server, status objects at 1.5 MB in etcd).
MAX_MESSAGE = 300


@dataclass(frozen=True)
class FieldProblem:
    path: str
    message: str
    fix: str

    def __str__(self) -> str:
        message = self.message
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE] + "…"
        return f"{self.path} {message}; fix: {self.fix}"


class SpecInvalid(RebalancerError, ValueError):
    """A ConsumerGroup spec the operator cannot act on."""

    def __init__(self, problems: tuple[FieldProblem, ...]) -> None:
        self.problems = problems or (FieldProblem("spec", "is invalid", "check the resource"),)
        super().__init__(self.summary())

    def summary(self, limit: int = 5) -> str:
        shown = "; ".join(str(problem) for problem in self.problems[:limit])
        hidden = len(self.problems) - limit
        return shown + (f" (and {hidden} more)" if hidden > 0 else "")


def kind_of(value: object) -> str:
    """The JSON kind of a value, as a problem names what it got: "null", "boolean", "list"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "list"
    return type(value).__name__
