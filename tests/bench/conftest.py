"""The real control plane of the session, for the bench tools' tests that talk to one."""

from __future__ import annotations

from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
