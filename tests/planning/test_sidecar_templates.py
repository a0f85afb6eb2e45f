"""The injected enforcement sidecar: the container rendered, the template patch, the plan."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rebalancer.planning.consumer_settings_plans import (
    SidecarInputs,
    plan_sidecar,
    settings_conditions,
    sidecar_status,
)
from rebalancer.planning.sidecar_templates import (
    SIDECAR_CONTAINER,
    TOKEN_VOLUME,
    PatchFailed,
    SidecarOptions,
    apply_ops,
    render_sidecar,
    render_sidecar_patch,
    sidecar_hash,
)
from rebalancer.sidecar.settings import parse_listen
from rebalancer.structs.conditions import ConditionType
from rebalancer.structs.enforce_policy import SidecarPolicy, parse_enforce_policy
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import WorkloadKind
from rebalancer_lab.kubelet.environment import expand

POLICY = SidecarPolicy(inject=True, port=9095, token_secret="orders-token", token_key="tok")
SASL = {"secretKeyRef": {"name": "kafka-user", "key": "password"}}


def consumer(**extra: Any) -> dict[str, Any]:
    return {
        "name": "consumer",
        "image": "example/consumer:1",
        "env": [
            {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": "stale:9092"},
            {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "6000"},
            {"name": "KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "value": "cooperative-sticky"},
            {"name": "KAFKA_SASL_PASSWORD", "valueFrom": SASL},
            {"name": "APP_DATABASE_URL", "value": "postgres://db"},
        ],
        "volumeMounts": [{"name": "certs", "mountPath": "/etc/kafka/certs"}],
        **extra,
    }


def workload(container: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "orders-consumer", "resourceVersion": "7"},
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "orders"}},
                "spec": {
                    "containers": [container or consumer()],
                    "volumes": [{"name": "certs", "secret": {"secretName": "certs"}}],
                },
            },
            **spec,
        },
    }


def rendered(container: dict[str, Any] | None = None, policy: SidecarPolicy = POLICY) -> Any:
    return render_sidecar(
        container or consumer(),
        group_id="orders",
        bootstrap_servers=("k1:9092", "k2:9092"),
        policy=policy,
        options=SidecarOptions(image="registry.local/rebalancer:1.2"),
    )


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_sidecar_joins_the_applications_cluster_and_group_with_its_settings() -> None:
    container = rendered().container
    env = env_of(container)
    assert container["name"] == SIDECAR_CONTAINER
    assert container["image"] == "registry.local/rebalancer:1.2"
    assert container["args"] == ["sidecar"]  # the image's entrypoint is `rebalancer`
    # The ConsumerGroup's cluster and group win over the application's copy.
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "k1:9092,k2:9092"
    assert env["KAFKA_GROUP_ID"] == "orders"
    # Same session and assignor, or the coordinator refuses the sidecar.
    assert env["KAFKA_SESSION_TIMEOUT_MS"] == "6000"
    assert env["KAFKA_PARTITION_ASSIGNMENT_STRATEGY"] == "cooperative-sticky"
    assert env["KAFKA_SASL_PASSWORD"] == SASL  # a reference, copied as one
    assert "APP_DATABASE_URL" not in env
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # The operator calls each sidecar at its pod's IP; it listens there and nowhere else.
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["REBALANCER_SIDECAR_LISTEN"] == "$(POD_IP):9095"
    assert [name for name in env if name == "KAFKA_BOOTSTRAP_SERVERS"] == [
        "KAFKA_BOOTSTRAP_SERVERS"
    ]


@pytest.mark.parametrize("pod_ip", ["10.244.1.7", "fd00:10:244::7"])
def test_the_listen_address_expands_to_the_pod_ip_as_kubernetes_expands_it(pod_ip: str) -> None:
    # Kubernetes expands $(NAME) only from variables defined earlier in the list: POD_IP must
    # come before the listen address, or the sidecar would get the literal text.
    container = rendered().container
    values: dict[str, str] = {}
    for entry in container["env"]:
        field = (entry.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
        if field == "status.podIP":
            values[entry["name"]] = pod_ip
        elif "value" in entry:
            values[entry["name"]] = expand(entry["value"], values)
    assert values["REBALANCER_SIDECAR_LISTEN"] == f"{pod_ip}:9095"
    assert parse_listen(values["REBALANCER_SIDECAR_LISTEN"]) == (pod_ip, 9095)


def test_the_token_comes_from_the_secret_as_a_file_and_never_inline() -> None:
    sidecar = rendered()
    env = env_of(sidecar.container)
    token_file = env["REBALANCER_SIDECAR_TOKEN_FILE"]
    mount = next(m for m in sidecar.container["volumeMounts"] if m["name"] == TOKEN_VOLUME)
    assert token_file.startswith(mount["mountPath"] + "/") and mount["readOnly"] is True
    assert sidecar.volume["secret"]["secretName"] == "orders-token"
    assert sidecar.volume["secret"]["items"] == [{"key": "tok", "path": "token"}]
    assert "secretKeyRef" not in json.dumps(
        [e for e in sidecar.container["env"] if "TOKEN" in e["name"]]
    )


def test_the_sidecar_is_locked_down_probed_and_bounded() -> None:
    container = rendered().container
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9095}
    assert container["ports"][0]["containerPort"] == 9095
    assert container["resources"]["limits"]["memory"]
    assert container["resources"]["requests"]["cpu"]
    # The application's mounts are there for its config and TLS files, but read-only.
    certs = next(m for m in container["volumeMounts"] if m["name"] == "certs")
    assert certs == {"name": "certs", "mountPath": "/etc/kafka/certs", "readOnly": True}


def test_env_from_is_shared_and_group_ids_are_not_expanded() -> None:
    source = consumer(envFrom=[{"configMapRef": {"name": "kafka-env"}}])
    sidecar = render_sidecar(source, group_id="a$(B)", bootstrap_servers=("k:9092",), policy=POLICY)
    assert sidecar.container["envFrom"] == [{"configMapRef": {"name": "kafka-env"}}]
    assert env_of(sidecar.container)["KAFKA_GROUP_ID"] == "a$$(B)"


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c["env"].append({"name": "KAFKA_HEARTBEAT_INTERVAL_MS", "value": "1500"}),
        lambda c: c["env"].__setitem__(1, {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "9000"}),
        lambda c: c["volumeMounts"].append({"name": "more", "mountPath": "/more"}),
    ],
)
def test_the_hash_follows_every_kafka_change_of_the_application(change: Any) -> None:
    source = consumer()
    before = rendered(source).hash
    changed = copy.deepcopy(source)
    change(changed)
    assert rendered(changed).hash != before


def test_a_change_the_sidecar_does_not_read_keeps_the_hash() -> None:
    source = consumer()
    changed = copy.deepcopy(source)
    changed["env"].append({"name": "APP_LOG_LEVEL", "value": "debug"})
    changed["image"] = "example/consumer:2"
    assert rendered(changed).hash == rendered(source).hash


def test_inject_adds_the_container_once_and_parks_the_statefulset() -> None:
    body = workload()
    sidecar = rendered()
    patch = render_sidecar_patch(body, sidecar, kind=WorkloadKind.STATEFULSET, park=True)
    assert patch.problem is None
    assert patch.ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    after = apply_ops(body, patch.ops)
    names = [c["name"] for c in after["spec"]["template"]["spec"]["containers"]]
    assert names == ["consumer", SIDECAR_CONTAINER]
    volumes = [v["name"] for v in after["spec"]["template"]["spec"]["volumes"]]
    assert volumes == ["certs", TOKEN_VOLUME]
    assert sidecar_hash(after) == sidecar.hash
    assert after["spec"]["template"]["metadata"]["labels"] == {"app": "orders"}
    assert after["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    # Level-based: the template that carries it gets nothing more, even re-read with defaults.
    after["spec"]["template"]["spec"]["containers"][1]["terminationMessagePath"] = "/dev/x"
    again = render_sidecar_patch(after, sidecar, kind=WorkloadKind.STATEFULSET, park=True)
    assert again.ops == () and again.problem is None


def test_a_template_without_metadata_or_volumes_gets_them() -> None:
    body = workload()
    del body["spec"]["template"]["metadata"]
    del body["spec"]["template"]["spec"]["volumes"]
    patch = render_sidecar_patch(body, rendered(), kind=WorkloadKind.DEPLOYMENT, park=True)
    after = apply_ops(body, patch.ops)
    assert [v["name"] for v in after["spec"]["template"]["spec"]["volumes"]] == [TOKEN_VOLUME]
    assert sidecar_hash(after) == rendered().hash
    assert "updateStrategy" not in after["spec"]  # Deployments are not parked


def test_a_changed_sidecar_replaces_the_container_in_place() -> None:
    body = apply_ops(
        workload(), render_sidecar_patch(workload(), rendered(), kind=WorkloadKind.DEPLOYMENT).ops
    )
    moved = SidecarPolicy(inject=True, port=9200, token_secret="orders-token", token_key="tok")
    patch = render_sidecar_patch(body, rendered(policy=moved), kind=WorkloadKind.DEPLOYMENT)
    assert [op["op"] for op in patch.ops if op["op"] != "test"] == ["replace", "add"]
    after = apply_ops(body, patch.ops)
    containers = after["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 2 and containers[1]["ports"][0]["containerPort"] == 9200


def test_inject_off_takes_out_exactly_what_the_operator_put_in() -> None:
    original = workload()
    injected = apply_ops(
        original, render_sidecar_patch(original, rendered(), kind=WorkloadKind.DEPLOYMENT).ops
    )
    injected["metadata"]["resourceVersion"] = "8"
    patch = render_sidecar_patch(injected, None, kind=WorkloadKind.DEPLOYMENT)
    removed = apply_ops(injected, patch.ops)
    removed["metadata"]["resourceVersion"] = "7"
    original["spec"]["template"]["metadata"]["annotations"] = {}
    assert removed == original
    assert render_sidecar_patch(removed, None, kind=WorkloadKind.DEPLOYMENT).ops == ()


def test_a_sidecar_of_the_users_own_is_never_touched_and_blocks_injection() -> None:
    own = {
        "name": "enforcer",
        "image": "ghcr.io/rebalancer-dev/rebalancer:0.1",
        "args": ["sidecar"],
    }
    body = workload()
    body["spec"]["template"]["spec"]["containers"].append(own)
    patch = render_sidecar_patch(body, rendered(), kind=WorkloadKind.STATEFULSET)
    assert patch.ops == () and patch.problem is not None
    assert patch.problem.path == "spec.policy.enforce.sidecar.inject"
    assert "enforcer" in patch.problem.message and "inject: false" in patch.problem.fix
    assert render_sidecar_patch(body, None, kind=WorkloadKind.STATEFULSET).ops == ()
    # A container that only has our name, without the operator's annotation, is the user's too.
    named = workload()
    named["spec"]["template"]["spec"]["containers"].append({"name": SIDECAR_CONTAINER})
    assert render_sidecar_patch(named, rendered(), kind=WorkloadKind.STATEFULSET).problem
    assert render_sidecar_patch(named, None, kind=WorkloadKind.STATEFULSET).ops == ()


def test_a_port_another_container_declares_is_refused() -> None:
    body = workload(consumer(ports=[{"name": "metrics", "containerPort": 9095}]))
    patch = render_sidecar_patch(body, rendered(), kind=WorkloadKind.STATEFULSET)
    assert patch.ops == () and patch.problem is not None
    assert patch.problem.path == "spec.policy.enforce.sidecar.port"
    assert "'consumer'" in patch.problem.message
    other = SidecarPolicy(inject=True, port=9096, token_secret="orders-token")
    assert render_sidecar_patch(body, rendered(policy=other), kind=WorkloadKind.STATEFULSET).ops


def test_apply_ops_refuses_what_the_api_server_would() -> None:
    body = workload()
    with pytest.raises(PatchFailed):
        apply_ops(body, [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}])
    with pytest.raises(PatchFailed):
        apply_ops(body, [{"op": "remove", "path": "/spec/template/metadata/annotations"}])
    escaped = apply_ops(
        body, [{"op": "add", "path": "/spec/template/metadata/labels/a~1b", "value": "c"}]
    )
    assert escaped["spec"]["template"]["metadata"]["labels"]["a/b"] == "c"
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "orders"}  # untouched


def inputs(body: dict[str, Any] | None = None, **changes: Any) -> SidecarInputs:
    base: dict[str, Any] = {
        "policy": POLICY,
        "group_id": "orders",
        "bootstrap_servers": ("k:9092",),
        "workload_kind": WorkloadKind.STATEFULSET,
        "container": None,
        "workload": body or workload(),
        "view": None,
    }
    base.update(changes)
    return SidecarInputs(**base)


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"staggered": False}, "spec.policy.rollout.enabled", "SidecarRefused"),
        ({"pattern": ".*"}, "spec.subscription.pattern", "PatternTakesControlTopics"),
        ({"container": "app"}, "spec.workload.container", "SidecarRefused"),
        ({"streams": True}, "spec.policy.enforce.sidecar.inject", "SidecarRefused"),
    ],
)
def test_injection_is_refused_with_the_field_and_its_fix(
    changes: dict[str, Any], field: str, reason: str
) -> None:
    plan = plan_sidecar(inputs(**changes))
    assert plan.refused and plan.patch.ops == ()
    assert [problem.path for problem in plan.problems] == [field]
    assert plan.problems[0].fix
    status = sidecar_status(plan, applied=False)
    assert status["reason"] == reason and field in status["message"]
    [condition] = settings_conditions({"sidecar": status})
    assert condition.type is ConditionType.DEGRADED and condition.reason == reason


def test_a_refusal_leaves_an_injected_sidecar_where_it_is() -> None:
    body = workload()
    injected = apply_ops(body, plan_sidecar(inputs(body)).patch.ops)
    plan = plan_sidecar(inputs(injected, staggered=False))
    assert plan.refused and plan.patch.ops == ()


def test_the_plan_reports_injected_then_removed() -> None:
    body = workload()
    plan = plan_sidecar(inputs(body))
    assert plan.patch.changes and not plan.carried
    status = sidecar_status(plan, applied=True)
    assert plan.rendered is not None
    assert status["injected"] is True and status["hash"] == plan.rendered.hash
    assert status["reason"] == "SidecarInjected" and settings_conditions({"sidecar": status}) == []
    injected = apply_ops(body, plan.patch.ops)
    steady = plan_sidecar(inputs(injected))
    assert steady.carried and steady.patch.ops == ()
    off = plan_sidecar(inputs(injected, policy=SidecarPolicy()))
    assert off.patch.changes and not off.carried
    removed = apply_ops(injected, off.patch.ops)
    assert sidecar_hash(removed) is None
    status = sidecar_status(plan_sidecar(inputs(removed, policy=SidecarPolicy())), applied=True)
    assert (status["inject"], status["injected"], status["reason"]) == (
        False,
        False,
        "SidecarRemoved",
    )


def test_the_parser_and_the_crd_agree_that_inject_needs_a_token_secret() -> None:
    with pytest.raises(SpecInvalid) as error:
        parse_enforce_policy({"sidecar": {"inject": True}})
    assert [p.path for p in error.value.problems] == ["spec.policy.enforce.sidecar.tokenSecretRef"]
    parsed = parse_enforce_policy({"sidecar": {"inject": True, "tokenSecretRef": {"name": "t"}}})
    assert parsed.sidecar.inject and parsed.sidecar.token_secret == "t"
    assert parsed.sidecar.token_key == "token" and parsed.sidecar.port == 8091


def test_a_kip848_fleet_gets_a_sidecar_that_speaks_its_protocol() -> None:
    # One sidecar per pod elects one actor in a KIP-848 group on Apache Kafka as in a classic
    # one (tests/clients/kafka/test_kip848_groups.py), so injection is planned for such fleets too.
    app = consumer()
    app["env"] = [*app["env"], {"name": "KAFKA_GROUP_PROTOCOL", "value": "consumer"}]
    plan = plan_sidecar(inputs(workload(app)))
    assert not plan.refused and plan.rendered is not None
    assert env_of(plan.rendered.container)["KAFKA_GROUP_PROTOCOL"] == "consumer"
