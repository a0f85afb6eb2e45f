"""The kubectl plugin against the session's control plane: its CRDs installed, a namespace of
each test's own. No operator and no broker: the tests write status and Events as the operator
would, and check what the plugin reads and writes."""

from __future__ import annotations

from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
