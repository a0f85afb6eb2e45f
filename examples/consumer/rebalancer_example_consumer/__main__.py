"""`python -m rebalancer_example_consumer`: the `rebalancer-example-consumer` command."""

from rebalancer_example_consumer.app import main

raise SystemExit(main(prog="python -m rebalancer_example_consumer"))
