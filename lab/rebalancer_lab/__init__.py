"""The lab: Rebalancer on one machine, with Apache Kafka, Kubernetes' control plane, a kubelet
that runs pods as local processes, and an example fleet (`rebalancer lab`).
"""
