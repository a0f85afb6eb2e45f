"""A fresh API emulator per test, with the operator's Kubernetes client pointed at it."""

from tests.emulator_fixtures import api, kube  # noqa: F401  (fixtures, found by name)
