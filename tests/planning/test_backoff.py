from rebalancer.planning.backoff import backoff_delay


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_delay(n) for n in range(6)] == [0.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert backoff_delay(7) == 60.0
    assert backoff_delay(10_000) == 60.0
