"""The enforced-rebalance sidecar (`rebalancer sidecar`): docs/enforcing.md."""
