"""kubectl 1.32 against the emulator, with its default flags (server-side validation)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client
from tests.apiserver.conftest import Kubectl
from tests.apiserver.support import GROUP, HERE, PLURAL

CRD_FILE = str(HERE / "widgets-crd.yaml")
WIDGET = """\
apiVersion: test.rebalancer.dev/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
  backend:
    url: https://kafka:9092
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: app:1
          env: [{name: A, value: "1"}]
"""


@pytest.fixture
def widgets(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-f", CRD_FILE)
    kubectl("apply", "-f", "-", input=WIDGET)
    return kubectl


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_apply_create_and_get_with_printer_columns(widgets: Kubectl) -> None:
    table = rows(widgets("get", "widgets").stdout)
    assert table[0] == ["NAME", "SIZE", "MODE", "READY", "AGE"]
    assert table[1][:3] == ["w1", "3", "Safe"]
    wide = rows(widgets("get", "wd", "-o", "wide").stdout)
    assert wide[0] == ["NAME", "SIZE", "MODE", "READY", "BACKEND", "AGE"]
    assert wide[1][3] == "https://kafka:9092" or wide[1][4] == "https://kafka:9092"
    every = rows(widgets("get", "wd", "--all-namespaces").stdout)
    assert every[0][:2] == ["NAMESPACE", "NAME"] and every[1][:2] == ["default", "w1"]
    widgets("patch", "wd", "w1", "--subresource=status", "--type=merge", "-p",
            '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}')  # fmt: skip
    assert rows(widgets("get", "wd", "w1").stdout)[1][3] == "True"
    assert (
        "configured"
        in widgets("apply", "-f", "-", input=WIDGET.replace("size: 3", "size: 4")).stdout
    )
    assert (
        "unchanged"
        in widgets("apply", "-f", "-", input=WIDGET.replace("size: 3", "size: 4")).stdout
    )
    created = widgets("create", "-f", "-", input=WIDGET.replace("w1", "w2")).stdout
    assert created.strip() == "widget.test.rebalancer.dev/w2 created"
    yaml_out = widgets("get", "wd", "w1", "-o", "json").stdout
    obj = json.loads(yaml_out)
    assert obj["spec"]["size"] == 4 and obj["metadata"]["generation"] == 2


def test_validation_errors_reach_kubectl_without_validate_false(widgets: Kubectl) -> None:
    bad = WIDGET.replace("size: 3", "size: 0\n  mode: Slow").replace("w1", "bad")
    failed = widgets("apply", "-f", "-", input=bad, check=False)
    assert failed.returncode == 1
    assert 'The Widget "bad" is invalid' in failed.stderr
    assert (
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
        in failed.stderr
    )
    assert 'spec.mode: Unsupported value: "Slow": supported values: "Fast", "Safe"' in failed.stderr
    unknown = widgets(
        "create", "-f", "-", input=WIDGET.replace("size: 3", "size: 3\n  bogus: 1"), check=False
    )
    assert 'strict decoding error: unknown field "spec.bogus"' in unknown.stderr


def test_patch_replace_and_strategic_merge(widgets: Kubectl) -> None:
    widgets("patch", "wd", "w1", "--type=merge", "-p", '{"spec":{"size":5}}')
    widgets(
        "patch", "wd", "w1", "--type=json", "-p", '[{"op":"replace","path":"/spec/size","value":6}]'
    )
    failed = widgets(
        "patch",
        "wd",
        "w1",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/size","value":1}]',
        check=False,
    )
    assert failed.returncode == 1 and "test failed" in failed.stderr
    strategic = widgets("patch", "wd", "w1", "-p", '{"spec":{"size":7}}', check=False)
    assert "application/strategic-merge-patch+json is not supported" in strategic.stderr
    current = json.loads(widgets("get", "wd", "w1", "-o", "json").stdout)
    current["spec"]["size"] = 8
    widgets("replace", "-f", "-", input=json.dumps(current))
    assert json.loads(widgets("get", "wd", "w1", "-o", "json").stdout)["spec"]["size"] == 8
    widgets("apply", "-f", "-", input=DEPLOYMENT)
    image = '{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}'
    widgets("patch", "deployment", "web", "-p", image)
    container = json.loads(widgets("get", "deploy", "web", "-o", "json").stdout)["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert container["image"] == "app:2" and container["env"] == [{"name": "A", "value": "1"}]
    widgets(
        "apply",
        "-f",
        "-",
        input=DEPLOYMENT.replace("app:1", "app:3").replace('value: "1"', 'value: "2"'),
    )
    container = json.loads(widgets("get", "deploy", "web", "-o", "json").stdout)["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert container["image"] == "app:3" and container["env"] == [{"name": "A", "value": "2"}]
    widgets("scale", "deployment", "web", "--replicas=4")
    assert json.loads(widgets("get", "deploy", "web", "-o", "json").stdout)["spec"]["replicas"] == 4
    widgets("label", "wd", "w1", "tier=front")
    widgets("annotate", "wd", "w1", "note=hi")
    labelled = json.loads(widgets("get", "wd", "-l", "tier=front", "-o", "json").stdout)["items"]
    assert [i["metadata"]["annotations"]["note"] for i in labelled] == ["hi"]


def test_describe_lists_events_of_the_object(widgets: Kubectl, core: client.CoreV1Api) -> None:
    uid = json.loads(widgets("get", "wd", "w1", "-o", "json").stdout)["metadata"]["uid"]
    for reason in ("Created", "Reconciled"):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"generateName": "w1-"},
                "involvedObject": {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Widget",
                    "name": "w1",
                    "namespace": "default",
                    "uid": uid,
                },
                "reason": reason,
                "message": f"widget {reason.lower()}",
                "type": "Normal",
                "source": {"component": "tester"},
            },
        )
    described = widgets("describe", "widget", "w1").stdout
    assert "Name:         w1" in described
    assert "Events:" in described and "widget reconciled" in described and "tester" in described
    events = widgets("get", "events").stdout
    assert "widget/w1" in events and "Reconciled" in events
    events_v1 = rows(widgets("get", "events.v1.events.k8s.io").stdout)
    assert events_v1[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert ["Normal", "Reconciled", "widget/w1", "widget", "reconciled"] in [
        r[1:] for r in events_v1
    ]
    assert rows(widgets("get", "events", "-o", "wide").stdout)[0][-1] == "NAME"


def test_get_watch_streams_table_rows(widgets: Kubectl, kubeconfig: Path, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            "kubectl",
            f"--kubeconfig={kubeconfig}",
            f"--cache-dir={tmp_path / 'kube-cache'}",
            "get",
            PLURAL,
            "-w",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert process.stdout is not None
    try:
        header = process.stdout.readline().split()
        assert header == ["NAME", "SIZE", "MODE", "READY", "AGE"]
        assert process.stdout.readline().split()[:3] == ["w1", "3", "Safe"]
        widgets("patch", "wd", "w1", "--subresource=status", "--type=merge", "-p",
                '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}')  # fmt: skip
        assert process.stdout.readline().split()[:4] == ["w1", "3", "Safe", "True"]
        widgets("apply", "-f", "-", input=WIDGET.replace("w1", "w9"))
        assert process.stdout.readline().split()[0] == "w9"
    finally:
        process.kill()
        process.wait()


def test_wait_for_condition(widgets: Kubectl) -> None:
    def later() -> None:
        time.sleep(0.5)
        widgets("patch", "wd", "w1", "--subresource=status", "--type=merge", "-p",
                '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}')  # fmt: skip

    thread = threading.Thread(target=later)
    thread.start()
    waited = widgets("wait", "--for=condition=Ready", "widget/w1", "--timeout=10s")
    thread.join()
    assert "condition met" in waited.stdout
    widgets(
        "wait", "--for=condition=established", "crd/widgets.test.rebalancer.dev", "--timeout=5s"
    )
    widgets("wait", "--for=jsonpath={.spec.mode}=Safe", "widget/w1", "--timeout=5s")


def test_delete_waits_until_gone_and_honours_finalizers(widgets: Kubectl) -> None:
    widgets("patch", "wd", "w1", "--type=merge", "-p", '{"metadata":{"finalizers":["test/hold"]}}')
    pending = widgets("delete", "wd", "w1", "--wait=false")
    assert 'widget.test.rebalancer.dev "w1" deleted' in pending.stdout
    assert json.loads(widgets("get", "wd", "w1", "-o", "json").stdout)["metadata"][
        "deletionTimestamp"
    ]
    widgets(
        "patch", "wd", "w1", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
    )
    assert widgets("get", "wd", "w1", check=False).returncode == 1
    widgets("apply", "-f", "-", input=WIDGET.replace("w1", "w2"))
    widgets("delete", "-f", "-", input=WIDGET.replace("w1", "w2"))
    assert "No resources found" in widgets("get", "wd").stderr


def test_typed_create_commands_and_builtin_tables(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "settings", "--from-literal=a=1", "-n", "team")
    kubectl("create", "secret", "generic", "creds", "--from-literal=pw=x", "-n", "team")
    kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=2", "-n", "team")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "team")
    kubectl("run", "shell", "--image=busybox", "-n", "team", "--", "sleep", "1")
    deploy = json.loads(kubectl("get", "deploy", "web", "-n", "team", "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert json.loads(kubectl("get", "cm", "settings", "-n", "team", "-o", "json").stdout)[
        "data"
    ] == {"a": "1"}
    table = rows(kubectl("get", "cm", "-n", "team").stdout)
    assert table[0] == ["NAME", "DATA", "AGE"] and table[1][:2] == ["settings", "1"]
    assert rows(kubectl("get", "deploy", "-n", "team").stdout)[0] == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
    ]
    assert rows(kubectl("get", "ns", "team").stdout)[1][:2] == ["team", "Active"]
    kubectl("delete", "namespace", "team")
    assert kubectl("get", "ns", "team", check=False).returncode == 1


def test_explain_and_api_resources(widgets: Kubectl) -> None:
    explained = widgets("explain", "widgets.spec.backend").stdout
    assert "url" in explained and "-required-" in explained
    resources = widgets("api-resources").stdout
    assert "widgets" in resources and "wd" in resources and "test.rebalancer.dev/v1" in resources


def test_auth_reviews_allow_everything(kubectl: Kubectl) -> None:
    assert kubectl("auth", "can-i", "delete", "widgets").stdout.strip() == "yes"
    assert "rebalancer-lab" in kubectl("auth", "whoami").stdout
