"""Problems with user input, each naming the field and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    path: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path} {self.message}; fix: {self.fix}"


class SpecInvalid(ValueError):
    """A ConsumerGroup spec the operator cannot act on."""

    def __init__(self, problems: tuple[FieldProblem, ...]) -> None:
        self.problems = problems or (FieldProblem("spec", "is invalid", "check the resource"),)
        super().__init__(self.summary())

    def summary(self, limit: int = 5) -> str:
        shown = "; ".join(str(problem) for problem in self.problems[:limit])
        hidden = len(self.problems) - limit
        return shown + (f" (and {hidden} more)" if hidden > 0 else "")
