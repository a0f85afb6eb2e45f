"""Rebalancer: a Kubernetes operator that keeps Kafka consumer groups calm."""

__version__ = "0.1.0"
