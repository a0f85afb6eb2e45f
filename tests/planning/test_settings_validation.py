"""The validation table of consumer settings: each refusal names the key and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancer.planning.consumer_settings import (
    KeyScope,
    SettingsContext,
    SettingsRefused,
    check_settings,
    classify_key,
    resolve_settings,
)
from rebalancer.structs.broker_configs import (
    ApplyState,
    BrokerLimits,
    LimitSource,
    limits_from_configs,
    verify_configs,
)
from rebalancer.structs.brokers import GroupProtocol
from rebalancer.structs.consumer_settings_policy import (
    ClientLibrary,
    EnvConvention,
    EnvPolicy,
    SettingsPolicy,
)
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind

# Groups without members: nothing to migrate, so the assignor is never in the way.
STS = SettingsContext(workload_kind=WorkloadKind.STATEFULSET, group_active=False)
DEPLOY = SettingsContext(workload_kind=WorkloadKind.DEPLOYMENT, group_active=False)
KIP848 = SettingsContext(
    WorkloadKind.STATEFULSET, protocol_choice=ProtocolChoice.CONSUMER, group_active=False
)
BASE = SettingsPolicy(session_timeout_ms=30000)


def props(**items: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key.replace("_", "."), value) for key, value in items.items()))


@pytest.mark.parametrize(
    ("key", "scope"),
    [
        ("fetch.min.bytes", KeyScope.CLIENT),
        ("group.remote.assignor", KeyScope.CLIENT),
        ("session.timeout.ms", KeyScope.MANAGED),
        ("group.instance.id", KeyScope.MANAGED),
        ("group.initial.rebalance.delay.ms", KeyScope.BROKER),
        ("group.min.session.timeout.ms", KeyScope.BROKER),
        ("group.consumer.session.timeout.ms", KeyScope.BROKER),
        ("offsets.retention.minutes", KeyScope.BROKER),
        ("group_initial_rebalance_delay", KeyScope.BROKER),
        ("consumer.session.timeout.ms", KeyScope.GROUP),
        ("consumer.heartbeat.interval.ms", KeyScope.GROUP),
        ("bootstrap.servers", KeyScope.CONNECTION),
        ("group.id", KeyScope.CONNECTION),
        ("sasl.password", KeyScope.SECRET),
        ("sasl.jaas.config", KeyScope.SECRET),
        ("ssl.key.pem", KeyScope.SECRET),
    ],
)
def test_keys_are_classified(key: str, scope: KeyScope) -> None:
    assert classify_key(key) is scope


# (case, policy, context, refused field, words in the message, words in the fix)
REFUSALS = [
    (
        "broker key in consumer settings",
        replace(BASE, properties=(("group.initial.rebalance.delay.ms", "5000"),)),
        STS,
        "properties[group.initial.rebalance.delay.ms]",
        "broker setting",
        "spec.policy.brokerDelay.delayMs",
    ),
    (
        "another broker key",
        replace(BASE, properties=(("group.max.session.timeout.ms", "60000"),)),
        STS,
        "properties[group.max.session.timeout.ms]",
        "broker setting",
        "brokers",
    ),
    (
        "group config in consumer settings",
        replace(BASE, properties=(("consumer.session.timeout.ms", "45000"),)),
        STS,
        "properties[consumer.session.timeout.ms]",
        "group config",
        "sessionTimeoutMs",
    ),
    (
        "classic key for a KIP-848 group (the broker owns it)",
        replace(BASE, session_timeout_ms=45000, properties=(("heartbeat.interval.ms", "1000"),)),
        KIP848,
        "properties[heartbeat.interval.ms]",
        "owned by the broker",
        "heartbeatIntervalMs",
    ),
    (
        "typed setting given as a property",
        replace(BASE, properties=(("session.timeout.ms", "10000"),)),
        STS,
        "properties[session.timeout.ms]",
        "set by the operator",
        "sessionTimeoutMs",
    ),
    (
        "credential in a ConfigMap",
        replace(BASE, properties=(("sasl.password", "hunter2"),)),
        STS,
        "properties[sasl.password]",
        "plain text",
        "Secret",
    ),
    (
        "identity",
        replace(BASE, properties=(("group.id", "other"),)),
        STS,
        "properties[group.id]",
        "identity",
        "spec.groupId",
    ),
    (
        "heartbeat not below the session",
        replace(BASE, heartbeat_interval_ms=30000),
        STS,
        "heartbeatIntervalMs",
        "not below sessionTimeoutMs",
        "at most 10000",
    ),
    (
        "heartbeat above a third of the session",
        replace(BASE, heartbeat_interval_ms=12000),
        STS,
        "heartbeatIntervalMs",
        "more than a third",
        "at most 10000",
    ),
    (
        "session below the broker's minimum (Kafka's default when the broker says nothing)",
        replace(BASE, session_timeout_ms=3000),
        STS,
        "sessionTimeoutMs",
        "Kafka's default",
        "between 6000 and 1800000",
    ),
    (
        "session above the broker's reported maximum",
        replace(BASE, session_timeout_ms=400000, max_poll_interval_ms=400000),
        replace(
            STS,
            limits=limits_from_configs(
                {"group.min.session.timeout.ms": "6000", "group.max.session.timeout.ms": "300000"}
            ),
        ),
        "sessionTimeoutMs",
        "the broker's group.min/max.session.timeout.ms (6000 to 300000)",
        "between 6000 and 300000",
    ),
    (
        "KIP-848 session outside group.consumer limits",
        replace(BASE, session_timeout_ms=30000, heartbeat_interval_ms=5000),
        KIP848,
        "sessionTimeoutMs",
        "group.consumer.min/max.session.timeout.ms",
        "between 45000 and 60000",
    ),
    (
        "KIP-848 heartbeat outside group.consumer limits",
        replace(BASE, session_timeout_ms=45000, heartbeat_interval_ms=2000),
        KIP848,
        "heartbeatIntervalMs",
        "heartbeat.interval.ms (5000 to 15000)",
        "between 5000 and 15000",
    ),
    (
        "max poll below session for librdkafka",
        replace(BASE, max_poll_interval_ms=10000),
        STS,
        "maxPollIntervalMs",
        "librdkafka refuses",
        "at least 30000",
    ),
    (
        "static membership on a Deployment",
        replace(BASE, static_membership=True),
        DEPLOY,
        "staticMembership",
        "Deployment",
        "StatefulSet",
    ),
    (
        "static membership without env vars",
        replace(BASE, static_membership=True, env=EnvPolicy(EnvConvention.NONE)),
        STS,
        "staticMembership",
        "environment variable",
        "env.convention",
    ),
    (
        "two properties, one variable",
        replace(BASE, properties=(("fetch-min-bytes", "1"), ("fetch.min.bytes", "2"))),
        STS,
        "properties[fetch.min.bytes]",
        "both become the variable KAFKA_FETCH_MIN_BYTES",
        "keep one",
    ),
    (
        "a property spelled like a typed one",
        replace(BASE, properties=(("session-timeout-ms", "1"),)),
        STS,
        "properties[session-timeout-ms]",
        "KAFKA_SESSION_TIMEOUT_MS",
        "sessionTimeoutMs",
    ),
    (
        "Java's eager sticky on librdkafka",
        replace(BASE, assignment_strategy=SettingsPolicy().strategy.STICKY),
        STS,
        "assignmentStrategy",
        "does not exist in librdkafka",
        "clientLibrary: java",
    ),
    (
        "eager to cooperative on librdkafka with a live group",
        BASE,
        replace(STS, current_strategy=("range",), group_active=True),
        "assignmentStrategy",
        "librdkafka cannot list cooperative-sticky together",
        "scale to 0",
    ),
    (
        "a live group whose assignor nobody knows is assumed on librdkafka's default",
        BASE,
        replace(STS, group_active=True),
        "assignmentStrategy",
        "assumed to run librdkafka's default, the eager range,roundrobin",
        "keep assignmentStrategy: range",
    ),
]


@pytest.mark.parametrize(
    ("policy", "context", "field", "message", "fix"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_refusals_name_the_key_and_the_fix(
    policy: SettingsPolicy, context: SettingsContext, field: str, message: str, fix: str
) -> None:
    problems = check_settings(policy, context)
    assert [p.path for p in problems] == [f"spec.policy.settings.{field}"], problems
    assert message in problems[0].message
    assert fix in problems[0].fix
    with pytest.raises(SettingsRefused):
        resolve_settings(policy, context)


def test_defaults_pass_everywhere_they_should() -> None:
    assert check_settings(SettingsPolicy(), STS) == []
    assert check_settings(SettingsPolicy(), DEPLOY) == []
    assert check_settings(SettingsPolicy(), KIP848) == []
    assert check_settings(SettingsPolicy(static_membership=True), STS) == []


def test_a_declared_streams_group_takes_no_client_settings() -> None:
    """What an older CRD lets through: the settings' reconciler refuses them itself."""
    streams = replace(STS, protocol_choice=ProtocolChoice.STREAMS)
    [problem] = check_settings(SettingsPolicy(), streams)
    assert problem.path == "spec.policy.settings"
    assert "streams group (spec.policy.protocol: streams)" in problem.message
    assert "spec.policy.groupConfigs.streams.sessionTimeoutMs" in problem.fix
    with pytest.raises(SettingsRefused):
        resolve_settings(SettingsPolicy(), streams)


def test_limits_from_configs_say_where_they_came_from() -> None:
    assert limits_from_configs({}).source is LimitSource.DEFAULT
    partly = limits_from_configs({"group.min.session.timeout.ms": "1000"})
    assert (partly.source, partly.min_session_ms, partly.max_session_ms) == (
        LimitSource.PARTLY,
        1000,
        1800000,
    )
    full = limits_from_configs(
        {
            "group.min.session.timeout.ms": "1000",
            "group.max.session.timeout.ms": "2000",
            "group.initial.rebalance.delay.ms": "3000",
        }
    )
    assert full.source is LimitSource.BROKER
    assert full.initial_rebalance_delay_ms == 3000
    assert (
        limits_from_configs({"group_initial_rebalance_delay": "500"}).initial_rebalance_delay_ms
        == 500
    )
    assert limits_from_configs({"group.min.session.timeout.ms": "x"}) == BrokerLimits()


# (case, policy, context, properties, group configs)
RESOLVED = [
    (
        "classic defaults",
        SettingsPolicy(),
        STS,
        {
            "heartbeat.interval.ms": "3000",
            "max.poll.interval.ms": "300000",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": "45000",
        },
        {},
    ),
    (
        "short session: heartbeat a third of it",
        SettingsPolicy(session_timeout_ms=6000, max_poll_interval_ms=60000),
        STS,
        {
            "heartbeat.interval.ms": "2000",
            "max.poll.interval.ms": "60000",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": "6000",
        },
        {},
    ),
    (
        "Java class names",
        SettingsPolicy(client_library=ClientLibrary.JAVA, properties=props(fetch_min_bytes="1")),
        STS,
        {
            "fetch.min.bytes": "1",
            "heartbeat.interval.ms": "3000",
            "max.poll.interval.ms": "300000",
            "partition.assignment.strategy": (
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
            ),
            "session.timeout.ms": "45000",
        },
        {},
    ),
    (
        "KIP-848 chosen: no session, heartbeat or assignor on the client",
        SettingsPolicy(),
        KIP848,
        {"group.protocol": "consumer", "max.poll.interval.ms": "300000"},
        {"consumer.heartbeat.interval.ms": "5000", "consumer.session.timeout.ms": "45000"},
    ),
    (
        "KIP-848 observed under auto: the client already chose it",
        SettingsPolicy(session_timeout_ms=50000, heartbeat_interval_ms=10000),
        replace(STS, observed_protocol=GroupProtocol.CONSUMER),
        {"max.poll.interval.ms": "300000"},
        {"consumer.heartbeat.interval.ms": "10000", "consumer.session.timeout.ms": "50000"},
    ),
]


@pytest.mark.parametrize(
    ("policy", "context", "properties", "group_configs"),
    [case[1:] for case in RESOLVED],
    ids=[case[0] for case in RESOLVED],
)
def test_resolved_settings_follow_the_protocol(
    policy: SettingsPolicy,
    context: SettingsContext,
    properties: dict[str, str],
    group_configs: dict[str, str],
) -> None:
    resolved = resolve_settings(policy, context)
    assert dict(resolved.properties) == properties
    assert dict(resolved.group_configs) == group_configs


def test_a_kip848_group_says_the_assignor_it_does_not_apply() -> None:
    policy = SettingsPolicy(assignment_strategy=SettingsPolicy().strategy.RANGE)
    resolved = resolve_settings(policy, KIP848)
    assert resolved.assignor is None
    assert any("assignmentStrategy range is not applied" in note for note in resolved.notes)


# (case, wanted, read back) -> state
VERIFICATIONS = [
    ("read back equal", {"a": "1"}, {"a": "1", "b": "2"}, ApplyState.APPLIED),
    ("nothing described", {"a": "1"}, {}, ApplyState.UNVERIFIABLE),
    ("read back otherwise", {"a": "1"}, {"a": "3"}, ApplyState.FAILED),
    ("missing from what is described", {"a": "1"}, {"b": "2"}, ApplyState.FAILED),
]


@pytest.mark.parametrize(
    ("wanted", "described", "state"),
    [case[1:] for case in VERIFICATIONS],
    ids=[case[0] for case in VERIFICATIONS],
)
def test_changes_are_verified_by_reading_back(
    wanted: dict[str, str], described: dict[str, str | None], state: ApplyState
) -> None:
    assert verify_configs(wanted, described, "group 'g'").state is state
