"""Fixtures for the join gate and the rollout actuator: a fresh API emulator per test."""

from tests.emulator_fixtures import api, kube  # noqa: F401  (fixtures, found by name)
