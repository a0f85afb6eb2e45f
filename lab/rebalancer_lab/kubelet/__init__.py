"""The lab's kubelet: pods in the API run as local process groups on one node, "lab"."""

from .jitter import (
    DELAY_ANNOTATION,
    JITTER_ANNOTATION,
    JITTER_SEED_ANNOTATION,
    START_DELAY_REASON,
    Jitter,
)
from .pods import KubeletSettings
from .running import Kubelet

__all__ = [
    "DELAY_ANNOTATION",
    "JITTER_ANNOTATION",
    "JITTER_SEED_ANNOTATION",
    "START_DELAY_REASON",
    "Jitter",
    "Kubelet",
    "KubeletSettings",
]
