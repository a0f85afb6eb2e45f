"""Fixtures for the join gate and the rollout actuator: the session's cluster, an admin client
of it, and a namespace per test."""

from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
