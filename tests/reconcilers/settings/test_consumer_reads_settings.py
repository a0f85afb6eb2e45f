"""The lab's example consumer reads what the operator renders: the mounted file, the KAFKA_*
variables over it, group.instance.id from the pod name, and the settings hash it reports."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rebalancer.planning.consumer_settings import SettingsContext, resolve_settings
from rebalancer.planning.consumer_settings_templates import render_settings
from rebalancer.structs.consumer_settings_policy import EnvConvention, EnvPolicy, SettingsPolicy
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer_lab.consumer_settings import load_settings

POLICY = SettingsPolicy(
    session_timeout_ms=6000,
    max_poll_interval_ms=60000,
    static_membership=True,
    properties=(("fetch.wait.max.ms", "100"),),
)
STS = SettingsContext(WorkloadKind.STATEFULSET, group_active=False)


def started(policy: SettingsPolicy, context: SettingsContext, tmp_path: Path) -> dict[str, str]:
    """The consumer's properties when started as the rendered pod template would start it."""
    resolved = resolve_settings(policy, context)
    rendered = render_settings("orders", policy, resolved)
    mounted = tmp_path / "consumer.properties"
    mounted.write_text(rendered.properties_text)
    env = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092", "KAFKA_GROUP_ID": "orders"}
    env["KAFKA_TOPICS"] = "orders"
    env["POD_NAME"] = "orders-consumer-1"
    for variable in rendered.env:
        if variable.field_path == "metadata.name":
            env[variable.name] = "orders-consumer-1"
        elif variable.name == rendered.config_file_variable:
            env[variable.name] = str(mounted)  # the kubelet mounts it there
        else:
            env[variable.name] = variable.value or ""
    settings = load_settings(env)
    assert settings.settings_hash == rendered.hash
    return settings.properties


def test_the_consumer_runs_with_the_rendered_settings(tmp_path: Path) -> None:
    properties = started(POLICY, STS, tmp_path)
    assert properties["session.timeout.ms"] == "6000"
    assert properties["heartbeat.interval.ms"] == "2000"
    assert properties["max.poll.interval.ms"] == "60000"
    assert properties["partition.assignment.strategy"] == "cooperative-sticky"
    assert properties["group.instance.id"] == "orders-consumer-1"
    assert properties["fetch.wait.max.ms"] == "100"  # from the file: no variable for it


def test_file_only_delivery_reaches_the_consumer_too(tmp_path: Path) -> None:
    policy = replace(POLICY, static_membership=False, env=EnvPolicy(EnvConvention.NONE))
    properties = started(policy, STS, tmp_path)
    assert properties["session.timeout.ms"] == "6000"
    assert "group.instance.id" not in properties


def test_a_kip848_consumer_gets_no_classic_settings(tmp_path: Path) -> None:
    context = replace(STS, protocol_choice=ProtocolChoice.CONSUMER)
    policy = replace(POLICY, session_timeout_ms=45000)
    properties = started(policy, context, tmp_path)
    assert properties["group.protocol"] == "consumer"
    for classic in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
        assert classic not in properties
