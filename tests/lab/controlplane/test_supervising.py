"""The back-off between restarts of a control-plane component, as a kubelet's."""

from __future__ import annotations

import pytest

from rebalancer_lab.controlplane.supervising import backoff_after


@pytest.mark.parametrize(
    ("exits", "seconds"),
    [(1, 0.0), (2, 10.0), (3, 20.0), (4, 40.0), (6, 160.0), (7, 300.0), (30, 300.0)],
)
def test_a_component_is_restarted_at_once_then_after_a_doubling_back_off(
    exits: int, seconds: float
) -> None:
    assert backoff_after(exits) == seconds
