"""Pure parts of the kubelet: jitter distributions, $(VAR) expansion, commands and paths."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from rebalancer_lab.kubelet import (
    DELAY_ANNOTATION,
    JITTER_ANNOTATION,
    JITTER_SEED_ANNOTATION,
    Jitter,
)
from rebalancer_lab.kubelet.environment import (
    ConfigMissing,
    command_line,
    expand,
    field_value,
    map_program,
    rewrite_paths,
)


@pytest.mark.parametrize(
    ("text", "kind", "params"),
    [
        ("0", "fixed", (0.0,)),
        (2.5, "fixed", (2.5,)),
        ("fixed(1.5)", "fixed", (1.5,)),
        ("uniform(0, 5)", "uniform", (0.0, 5.0)),
        ("exponential(2)", "exponential", (2.0,)),
        ("normal(3,1)", "normal", (3.0, 1.0)),
        ("cycle(0, 2.5,5)", "cycle", (0.0, 2.5, 5.0)),
    ],
)
def test_jitter_forms(text: str | float, kind: str, params: tuple[float, ...]) -> None:
    jitter = Jitter.parse(text)
    assert (jitter.kind, jitter.params) == (kind, params)


@pytest.mark.parametrize(
    "text",
    ["gauss(1)", "uniform(1)", "uniform(5,1)", "normal(-1,1)", "exponential(0)", "cycle()", "x"],
)
def test_bad_jitter_is_refused_with_the_forms_to_use(text: str) -> None:
    with pytest.raises(ValueError):
        Jitter.parse(text)


def test_jitter_samples_follow_their_distribution_and_repeat_with_the_seed() -> None:
    again = Jitter.parse("uniform(1,3)", seed=7)
    draws = Jitter.parse("uniform(1,3)", seed=7)
    samples = [draws.sample() for _ in range(4000)]
    assert [again.sample() for _ in range(3)] == samples[:3], "a seed repeats its sequence"
    assert min(samples) >= 1 and max(samples) <= 3
    assert statistics.mean(samples) == pytest.approx(2.0, abs=0.05)

    exponential = Jitter.parse("exponential(2)", seed=1)
    samples = [exponential.sample() for _ in range(4000)]
    assert min(samples) >= 0
    assert statistics.mean(samples) == pytest.approx(2.0, rel=0.08)

    normal = Jitter.parse("normal(3,0.5)", seed=1)
    samples = [normal.sample() for _ in range(4000)]
    assert statistics.mean(samples) == pytest.approx(3.0, abs=0.05)
    assert statistics.stdev(samples) == pytest.approx(0.5, rel=0.08)

    cut = Jitter.parse("normal(0,1)", seed=1)
    assert min(cut.sample() for _ in range(500)) == 0.0, "negative delays are cut at 0"

    assert Jitter.parse("uniform(0,9)").delay_for({DELAY_ANNOTATION: "1.25"}) == 1.25


def test_owners_naming_one_seed_draw_the_same_delays_and_others_their_own() -> None:
    kubelet = Jitter()
    paired = {JITTER_ANNOTATION: "uniform(0,20)", JITTER_SEED_ANNOTATION: "7"}
    first = [kubelet.delay_for(paired, "statefulset-a") for _ in range(24)]
    second = [kubelet.delay_for(paired, "statefulset-b") for _ in range(24)]
    unseeded = {JITTER_ANNOTATION: "uniform(0,20)"}
    shared = [kubelet.delay_for(unseeded, "statefulset-c") for _ in range(24)]
    other_seed = {**paired, JITTER_SEED_ANNOTATION: "8"}

    assert second == first
    assert shared != first
    assert [kubelet.delay_for(other_seed, "statefulset-a") for _ in range(24)] != first
    # Without a seed every owner shares the kubelet's generator: draws go on, never repeat.
    assert [kubelet.delay_for(unseeded, "statefulset-d") for _ in range(24)] != shared


def test_a_cycle_gives_every_value_to_any_run_of_that_many_pods() -> None:
    cycle = Jitter.parse("cycle(0,2.5,5)")
    draws = [cycle.sample() for _ in range(10)]
    assert draws[:4] == [0.0, 2.5, 5.0, 0.0]
    for start in range(len(draws) - 2):
        assert sorted(draws[start : start + 3]) == [0.0, 2.5, 5.0]


def test_expansion_follows_kube() -> None:
    env = {"A": "x", "B": "y"}
    assert expand("$(A)-$(B)", env) == "x-y"
    assert expand("$$(A)", env) == "$(A)"
    assert expand("$(MISSING) and $A", env) == "$(MISSING) and $A"
    assert expand("$(A", env) == "$(A"


def test_python_and_the_project_cli_map_to_the_labs_interpreter() -> None:
    python = sys.executable
    assert map_program(["python", "-m", "x"], python) == [python, "-m", "x"]
    assert map_program(["/usr/local/bin/python3.11", "-c", "1"], python) == [python, "-c", "1"]
    assert map_program(["rebalancer", "gate"], python) == [python, "-m", "rebalancer", "gate"]
    assert map_program(["sh", "-c", "true"], python) == ["sh", "-c", "true"]


def test_a_container_without_command_uses_its_images_entrypoint() -> None:
    images = {"ghcr.io/rebalancer-dev/rebalancer": ("python", "-m", "rebalancer")}
    spec = {"name": "gate", "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0", "args": ["gate"]}
    assert command_line(spec, {}, "/py", images) == ["/py", "-m", "rebalancer", "gate"]
    with pytest.raises(ConfigMissing, match="runs no images"):
        command_line({"name": "x", "image": "nginx:1"}, {}, "/py", images)


def test_the_example_consumers_image_runs_its_entrypoint_from_the_checkout() -> None:
    # examples/consumer/Dockerfile: ENTRYPOINT ["rebalancer-example-consumer"], no command in
    # the example fleet's manifests (docs/quickstart.md runs them on the lab as they are).
    spec = {"name": "consumer", "image": "ghcr.io/rebalancer-dev/rebalancer-example-consumer:0.1.0"}
    argv = ["/py", "-m", "rebalancer_example_consumer"]
    assert command_line(spec, {}, "/py") == argv


def test_mounts_rewrite_the_containers_paths_but_never_the_labs_interpreter() -> None:
    # The chart mounts an emptyDir at /tmp; a checkout under /tmp keeps its own Python.
    python = "/tmp/checkout/.venv/bin/python"
    root = Path("/state/rootfs/operator")
    spec = {"name": "operator", "command": ["rebalancer"], "args": ["operator", "--dir=/tmp/h"]}

    def rewrite(text: str) -> str:
        return rewrite_paths(text, ["/tmp"], root)

    argv = command_line(spec, {}, python, rewrite=rewrite)
    assert argv == [python, "-m", "rebalancer", "operator", "--dir=/state/rootfs/operator/tmp/h"]


def test_mount_paths_are_rewritten_only_where_they_start_a_path() -> None:
    root = Path("/state/rootfs/main")
    mounts = ["/etc/app", "/etc/app/secrets"]
    assert rewrite_paths("/etc/app/x.yaml", mounts, root) == "/state/rootfs/main/etc/app/x.yaml"
    assert rewrite_paths("--config=/etc/app", mounts, root) == "--config=/state/rootfs/main/etc/app"
    assert rewrite_paths("/etc/app/secrets/pw", mounts, root) == (
        "/state/rootfs/main/etc/app/secrets/pw"
    )
    assert rewrite_paths("/etc/application", mounts, root) == "/etc/application"
    assert rewrite_paths("/x/etc/app", mounts, root) == "/x/etc/app"


def test_downward_api_field_paths() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "labels": {"a": "1"},
            "annotations": {"b": "2"},
        },
        "spec": {"nodeName": "lab", "serviceAccountName": "default"},
        "status": {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]},
    }
    assert field_value(pod, "metadata.labels['a']") == "1"
    assert field_value(pod, "metadata.annotations['b']") == "2"
    assert field_value(pod, "metadata.labels['missing']") == ""
    assert field_value(pod, "spec.nodeName") == "lab"
    assert field_value(pod, "status.podIPs") == "127.0.0.1"
    assert field_value(pod, "metadata.labels") == 'a="1"'
    with pytest.raises(ConfigMissing):
        field_value(pod, "spec.containers")


def test_a_rewritten_path_is_not_rewritten_again_when_the_root_lies_under_a_mount() -> None:
    # The root is under /tmp and the pod mounts an emptyDir at /tmp, as the chart's operator
    # pod does: the certificate's path is rewritten once, not prefixed twice.
    root = Path("/tmp/kubelet/rootfs/operator")
    mounts = ["/tmp", "/etc/rebalancer/webhook"]
    assert (
        rewrite_paths("--admission-cert=/etc/rebalancer/webhook/tls.crt", mounts, root)
        == "--admission-cert=/tmp/kubelet/rootfs/operator/etc/rebalancer/webhook/tls.crt"
    )
    assert rewrite_paths("/tmp/x", mounts, root) == "/tmp/kubelet/rootfs/operator/tmp/x"
