"""The lab's consumer: `python -m rebalancer_lab.consumer` runs the example application
(examples/consumer, `rebalancer_example_consumer.app`), so the fleet the lab, the tests and the
benchmarks measure is the one a real cluster runs from its image. The names below are the
application's own objects, kept under the lab's module for the lab's manifests and tests."""

from rebalancer_example_consumer.app import (
    JOIN_GATE_POLL_S,
    JOIN_GATE_WARM_UP_S,
    lag_from_statistics,
    main,
    wait_for_join_gate,
)
from rebalancer_example_consumer.app import ExampleConsumer as LabConsumer

__all__ = [
    "JOIN_GATE_POLL_S",
    "JOIN_GATE_WARM_UP_S",
    "LabConsumer",
    "lag_from_statistics",
    "main",
    "wait_for_join_gate",
]

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m rebalancer_lab.consumer"))
