"""The injected gate init container locks itself down, whatever the pod template says."""

from __future__ import annotations

from rebalancer.planning.gate_templates import GateOptions, gate_container, render_gate_patch


def test_the_gate_container_runs_as_non_root_read_only_without_escalation() -> None:
    context = gate_container(GateOptions())["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_patch_carries_the_locked_down_container_into_a_permissive_template() -> None:
    workload = {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "template": {
                "spec": {
                    "securityContext": {"runAsUser": 0},
                    "containers": [{"name": "app", "securityContext": {"privileged": True}}],
                }
            }
        },
    }
    ops = render_gate_patch(workload, GateOptions())
    added = [op for op in ops if op["op"] == "add"]
    assert len(added) == 1
    gate = added[0]["value"][0]
    assert gate["securityContext"]["runAsNonRoot"] is True
    assert gate["securityContext"]["allowPrivilegeEscalation"] is False
    assert gate["securityContext"]["readOnlyRootFilesystem"] is True
