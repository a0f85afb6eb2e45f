"""One base for the operator's own errors: every exception class it defines derives from
RebalancerError, and `retriable` says what a loop may do with one."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from rebalancer.clients.enforcing import EnforceRequestFailed
from rebalancer.clients.kafka_errors import KafkaRequestFailed, KafkaUnavailable
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.problems import SpecInvalid

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "rebalancer"
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def test_every_exception_the_package_defines_on_a_builtin_also_derives_from_the_base() -> None:
    roots: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = _base_names(node)
            own = node.name == "RebalancerError" or "RebalancerError" in bases
            if bases & BUILTIN_ERRORS and not own:
                roots.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not roots, f"derive these from RebalancerError: {roots}"


def test_the_base_keeps_what_callers_catch_them_as() -> None:
    assert issubclass(SpecInvalid, ValueError)
    assert issubclass(SpecInvalid, RebalancerError)
    assert issubclass(PermissionDenied, RebalancerError)
    assert issubclass(KafkaUnavailable, RebalancerError)


def test_retriable_defaults_to_false_and_errors_that_can_tell_say_per_instance() -> None:
    assert not RebalancerError.retriable
    assert not SpecInvalid.retriable
    assert KafkaRequestFailed("busy", retriable=True).retriable
    assert not KafkaRequestFailed("refused").retriable
    for status in (0, 429, 502, 503, 504):
        assert EnforceRequestFailed("no answer", status).retriable
    for status in (400, 401, 403, 404, 422):
        assert not EnforceRequestFailed("refused", status).retriable
