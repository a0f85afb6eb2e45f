"""The optional learning CronJob: off by default, valid when on, and no API grants needed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.deploy.chart.support import ALL_FEATURES, CHART, Helm, by_kind, only
from tests.deploy.chart.test_chart import UNVALIDATED_KINDS, validate

from rebalancer import __version__

LEARNING: dict[str, Any] = {
    **ALL_FEATURES,
    "learning": {
        "enabled": True,
        "timeZone": "Europe/Paris",
        "extraArgs": ["--samples=8"],
        "image": {"repository": "example.com/rebalancer-spark", "tag": "1.0"},
    },
}


def test_off_by_default(helm: Helm) -> None:
    assert not by_kind(helm.render(), "CronJob")


def test_on_it_lints_validates_and_runs_learn_on_the_history_volume(helm: Helm) -> None:
    lint = helm.run("lint", "--strict", str(CHART), "--values", "-", stdin=json.dumps(LEARNING))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    manifests = helm.render(LEARNING)
    assert validate(manifests) <= UNVALIDATED_KINDS
    cron = only(manifests, "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["timeZone"] == "Europe/Paris"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert container["image"] == "example.com/rebalancer-spark:1.0"
    assert container["args"] == [
        "learn",
        "--history=/var/lib/rebalancer/history",
        "--output=/var/lib/rebalancer/history/_recommendations",
        "--master=local[*]",
        "--driver-memory=2g",
        "--samples=8",
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    claims = {v["name"]: v for v in pod["volumes"]}
    assert claims["history"]["persistentVolumeClaim"]["claimName"] == "rebalancer-history"
    affinity = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["topologyKey"] == "kubernetes.io/hostname"


def test_the_learning_image_is_the_default_and_colocation_can_be_off(helm: Helm) -> None:
    values = {
        "history": {"enabled": True},
        "learning": {"enabled": True, "colocateWithOperator": False},
    }
    pod = only(helm.render(values), "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    # The operator's image is the base install, without Spark: the job has an image of its own,
    # at the operator's version.
    assert pod["containers"][0]["image"] == (
        f"ghcr.io/rebalancer-dev/rebalancer-learning:{__version__}"
    )
    assert "affinity" not in pod


def test_learning_without_history_fails_clearly(helm: Helm) -> None:
    result = helm.template({"learning": {"enabled": True}})
    assert result.returncode != 0
    assert "learning.enabled needs history.enabled" in result.stderr


@pytest.mark.parametrize("master", ["mesos://x", "spark://spark-master", "local[0]"])
def test_schema_rejects_a_bad_master(helm: Helm, master: str) -> None:
    # The same forms `rebalancer learn --master` accepts: a standalone master needs its port.
    result = helm.template({"history": {"enabled": True}, "learning": {"master": master}})
    assert result.returncode != 0
    assert "master" in result.stderr


def test_schema_takes_a_standalone_master(helm: Helm) -> None:
    values = {
        "history": {"enabled": True},
        "learning": {"enabled": True, "master": "spark://spark-master:7077"},
    }
    job = only(helm.render(values), "CronJob")
    args = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--master=spark://spark-master:7077" in args
