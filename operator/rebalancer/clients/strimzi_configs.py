"""Kubernetes writes of the brokers' configuration: the delay in a Strimzi Kafka resource's
spec.kafka.config, which Strimzi rolls out to its brokers.

I/O only; what to write is decided in rebalancer.planning.broker_delay. Each call sets an end
state and reads first, so repeating it changes nothing and writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.workload_patching import (
    MERGE_PATCH,
    Body,
    ConfiguringFailed,
    _failed,
    _json,
)
from rebalancer.structs.broker_configs import DELAY_KEY

STRIMZI_GROUP = "kafka.strimzi.io"
# The Kafka resource's versions, newest first: Strimzi serves v1 since 0.49 and only v1 since
# 1.0; before 0.49 it served v1beta2 alone. The first one served is read and written.
STRIMZI_VERSIONS = ("v1", "v1beta2")
STRIMZI_PLURAL = "kafkas"


@dataclass(frozen=True)
class StrimziChange:
    changed: bool
    previous: str | None  # the value the Kafka resource had, as text; None when unset


async def read_strimzi_delay(api: KubernetesApi, namespace: str, name: str) -> str | None:
    """The delay in a Strimzi Kafka resource's spec.kafka.config, or None when not set there."""
    _, body = await _read_kafka(api, namespace, name)
    value = ((body.get("spec") or {}).get("kafka") or {}).get("config", {}).get(DELAY_KEY)
    return None if value is None else str(value)


async def _read_kafka(api: KubernetesApi, namespace: str, name: str) -> tuple[str, Body]:
    """The Kafka resource and the version it was read at, trying each of STRIMZI_VERSIONS.

    A 404 is the same answer for a version the API server does not serve and for an object
    that is not there, so a miss at one version is asked again at the next."""
    for version in STRIMZI_VERSIONS:
        try:
            body = _json(
                await asyncio.to_thread(
                    api.custom.get_namespaced_custom_object,
                    STRIMZI_GROUP,
                    version,
                    namespace,
                    STRIMZI_PLURAL,
                    name,
                    _preload_content=False,
                )
            )
        except ApiException as error:
            if error.status == 404:
                continue
            raise _failed(f"reading Kafka {namespace}/{name}", error) from None
        return version, body
    tried = " or ".join(f"{STRIMZI_GROUP}/{version}" for version in STRIMZI_VERSIONS)
    raise ConfiguringFailed(
        f"Kafka {namespace}/{name} ({tried}) not found: create it or fix "
        "spec.policy.brokerDelay.strimzi"
    )


async def set_strimzi_delay(
    api: KubernetesApi, namespace: str, name: str, patch: Mapping[str, Any]
) -> StrimziChange:
    """Merge `patch` (planning.broker_delay.strimzi_config_patch) into a Strimzi Kafka resource.

    Only when the value differs: every change makes Strimzi roll the brokers, so an unchanged
    value must never be written again. The write is guarded by the resourceVersion read.
    """
    version, body = await _read_kafka(api, namespace, name)
    config = ((body.get("spec") or {}).get("kafka") or {}).get("config") or {}
    wanted = patch["spec"]["kafka"]["config"]
    previous = config.get(DELAY_KEY)
    if all(str(config.get(key)) == str(value) for key, value in wanted.items()):
        return StrimziChange(False, None if previous is None else str(previous))
    guarded = {
        **patch,
        "metadata": {"resourceVersion": (body.get("metadata") or {}).get("resourceVersion")},
    }
    try:
        await asyncio.to_thread(
            api.custom.patch_namespaced_custom_object,
            STRIMZI_GROUP,
            version,
            namespace,
            STRIMZI_PLURAL,
            name,
            guarded,
            _content_type=MERGE_PATCH,
            _preload_content=False,
        )
    except ApiException as error:
        raise _failed(f"patching Kafka {namespace}/{name}", error) from None
    return StrimziChange(True, None if previous is None else str(previous))
