"""Kafka configs of the settings feature: broker limits, KIP-848 group configs, a live delay.

Calls go through the cluster's shared AdminGateway, so they share its connection, timeouts and
readable errors. Every change is read back: brokers differ in what they keep and describe (a
Kafka-protocol broker may accept IncrementalAlterConfigs and describe nothing), and the status
must say "accepted, not verifiable" rather than "applied" when that is all that is known.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

# The public module re-exports these without declaring them, which mypy reads as private.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import NOT_AUTHORIZED, KafkaRequestFailed
from rebalancer.structs.broker_configs import (
    ApplyState,
    BrokerLimits,
    ConfigOutcome,
    limits_from_configs,
    verify_configs,
)


def _only(futures: Mapping[Any, Future[Any]]) -> Future[Any]:
    """The future of the one resource a request was made for."""
    return next(iter(futures.values()))


async def broker_ids(gateway: AdminGateway) -> list[int]:
    """The cluster's broker ids, the controller first (it answers for the cluster)."""
    result = await gateway.call(
        "describing the cluster",
        lambda admin: admin.describe_cluster(request_timeout=gateway.request_timeout),
    )
    ids = [int(node.id) for node in (getattr(result, "nodes", None) or [])]
    controller = getattr(result, "controller", None)
    if controller is not None and int(controller.id) in ids:
        ids.remove(int(controller.id))
        ids.insert(0, int(controller.id))
    return ids


def _acl(operation: str, resource: ConfigResource) -> str:
    """What an ACL must allow for `operation` on a config resource (a BROKER's configs are the
    CLUSTER's to Kafka's authorizer)."""
    if resource.restype == ResourceType.GROUP:
        return f"{operation} on group {resource.name!r}"
    return f"{operation} on the cluster"


async def _entries(gateway: AdminGateway, resource: ConfigResource, what: str) -> dict[str, Any]:
    entries = await gateway.call(
        f"describing {what}",
        lambda admin: _only(
            admin.describe_configs([resource], request_timeout=gateway.request_timeout)
        ),
        acl=_acl("DescribeConfigs", resource),
    )
    return {str(name): entry for name, entry in (entries or {}).items()}


async def _describe(gateway: AdminGateway, resource: ConfigResource, what: str) -> dict[str, Any]:
    entries = await _entries(gateway, resource, what)
    return {name: getattr(entry, "value", None) for name, entry in entries.items()}


# A change the controller has committed reaches each broker's metadata a moment later, so a
# describe right after the alter may still read the old value (seen on Apache Kafka 4.4: a
# group config read back as its default once in a CI run). Read again before calling it failed.
READ_BACK_ATTEMPTS = 10
READ_BACK_PAUSE_SECONDS = 0.3


async def _read_back(
    gateway: AdminGateway, resource: ConfigResource, what: str, wanted: Mapping[str, str]
) -> dict[str, Any]:
    """The configs as the broker reads them once they show `wanted`, or as last read."""
    described = await _describe(gateway, resource, what)
    for _ in range(READ_BACK_ATTEMPTS - 1):
        if all(described.get(key) == value for key, value in wanted.items()):
            break
        await asyncio.sleep(READ_BACK_PAUSE_SECONDS)
        described = await _describe(gateway, resource, what)
    return described


def source_name(raw: Any) -> str | None:
    """A DescribeConfigs source as status spells it (STATIC_BROKER_CONFIG: static-broker-config)."""
    try:
        name = ConfigSource(int(raw)).name
    except (TypeError, ValueError):
        return None
    return None if name == "UNKNOWN_CONFIG" else name.lower().replace("_", "-")


def _values_and_sources(entries: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Each described config's value, and its source where the broker names a known one."""
    values = {name: getattr(entry, "value", None) for name, entry in entries.items()}
    sources = {
        name: source
        for name, entry in entries.items()
        if (source := source_name(getattr(entry, "source", None))) is not None
    }
    return values, sources


async def describe_broker_configs(gateway: AdminGateway) -> dict[str, Any]:
    """One broker's configs (name -> value); {} when the broker reports none."""
    values, _ = await describe_broker_config_sources(gateway)
    return values


async def describe_broker_config_sources(
    gateway: AdminGateway,
) -> tuple[dict[str, Any], dict[str, str]]:
    """One broker's configs: name -> value, and name -> where the broker says it comes from."""
    ids = await broker_ids(gateway)
    if not ids:
        return {}, {}
    resource = ConfigResource(ResourceType.BROKER, str(ids[0]))
    entries = await _entries(gateway, resource, f"the configs of broker {ids[0]}")
    return _values_and_sources(entries)


async def read_broker_limits(gateway: AdminGateway) -> BrokerLimits:
    """The session limits the broker enforces; Kafka's defaults where it does not say.

    A broker that refuses to describe its configs (no DescribeConfigs ACL on the cluster) is
    treated like one that says nothing, the defaults hold, but the refusal is kept: the status
    must say what to grant, not that the broker has no configs.
    """
    try:
        configs, sources = await describe_broker_config_sources(gateway)
    except KafkaRequestFailed as error:
        if error.reason == NOT_AUTHORIZED:
            return replace(limits_from_configs({}, {}), refusal=str(error))
        configs, sources = {}, {}
    return limits_from_configs(configs, sources)


async def _alter(
    gateway: AdminGateway, resource_type: ResourceType, name: str, configs: Mapping[str, str]
) -> None:
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in sorted(configs.items())
    ]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    what = "group" if resource_type is ResourceType.GROUP else "broker"
    await gateway.call(
        f"altering the configs of {what} {name!r}",
        lambda admin: _only(
            admin.incremental_alter_configs([resource], request_timeout=gateway.request_timeout)
        ),
        acl=_acl("AlterConfigs", resource),
    )


async def alter_group_configs(
    gateway: AdminGateway, group_id: str, configs: Mapping[str, str]
) -> ConfigOutcome:
    """Set KIP-848 per-group configs (IncrementalAlterConfigs on the GROUP) and read them back.

    A refusal (an old broker, no AlterConfigs right on the group) is an outcome, not an
    exception; an unreachable cluster raises KafkaUnavailable as every gateway call does.
    """
    what = f"group {group_id!r}"
    if not configs:
        return ConfigOutcome(ApplyState.NOT_NEEDED, f"{what}: no group configs to set")
    try:
        await _alter(gateway, ResourceType.GROUP, group_id, configs)
        resource = ConfigResource(ResourceType.GROUP, group_id)
        described = await _read_back(gateway, resource, what, configs)
    except KafkaRequestFailed as error:
        return ConfigOutcome(ApplyState.FAILED, f"{what}: {error}")
    return verify_configs(configs, described, what)


async def alter_broker_config(gateway: AdminGateway, key: str, value: str) -> ConfigOutcome:
    """Set one dynamic broker config on every broker, then read it back from the first.

    Per broker, because the cluster-wide default (the empty broker name) cannot be addressed
    through this client; setting each broker gives every broker the value all the same.
    """
    ids = await broker_ids(gateway)
    if not ids:
        return ConfigOutcome(ApplyState.FAILED, "the cluster described no brokers")
    try:
        for broker in ids:
            await _alter(gateway, ResourceType.BROKER, str(broker), {key: value})
        first = ConfigResource(ResourceType.BROKER, str(ids[0]))
        described = await _read_back(gateway, first, f"broker {ids[0]}", {key: value})
    except KafkaRequestFailed as error:
        return ConfigOutcome(ApplyState.FAILED, f"{key} on the brokers: {error}")
    return verify_configs({key: value}, described, f"{key} on {len(ids)} broker(s)")


async def read_group_configs(
    gateway: AdminGateway, group_id: str
) -> tuple[dict[str, str | None], dict[str, str]]:
    """A group's configs as the broker reads them: name -> value, and name -> where the value
    comes from (group-config for the group's own, default-config for the broker's default).

    Any group id may be described, even one with no members yet: the GROUP resource exists
    apart from the group (measured on Apache Kafka 4.4)."""
    resource = ConfigResource(ResourceType.GROUP, group_id)
    entries = await _entries(gateway, resource, f"the configs of group {group_id!r}")
    return _values_and_sources(entries)


async def set_group_configs(
    gateway: AdminGateway, group_id: str, configs: Mapping[str, str]
) -> None:
    """IncrementalAlterConfigs SET on the group's configs; KafkaRequestFailed carries the
    broker's refusal as it came (INVALID_CONFIG names the config and the range it allows)."""
    await _alter(gateway, ResourceType.GROUP, group_id, configs)
