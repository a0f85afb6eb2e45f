"""A Kafka consumer application for trying Rebalancer on any cluster, and the one the lab runs.

`app` is the consumer (confluent-kafka, KAFKA_* settings, member reports, the join gate, a clean
leave on SIGTERM); `settings` reads its environment. examples/README.md shows it deployed.
"""

from rebalancer import __version__

__all__ = ["__version__"]
