"""The lab cluster rides out API errors and dropped watches, as kube's components do."""

from __future__ import annotations

from tests.lab.support import DEPLOYMENTS, PODS, deployment, new_version, wait_for
from tests.lab.test_deployments import complete

from rebalancer.lab.apiserver import ApiServerThread
from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.kube.requesting import Api


def test_a_rollout_completes_through_api_errors_and_dropped_watches(
    api: Api, apiserver: ApiServerThread, cluster: LabCluster
) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 3))
    wait_for(lambda: complete(api, "app"), what="first rollout")

    faults = apiserver.faults
    faults.inject(status=500, method="PUT", path_regex=r"/pods/[^/]+/status$", times=6)
    faults.inject(status=500, method="POST", path_regex=r"/pods$", times=2)
    faults.inject(status=503, method="PATCH", path_regex=r"/replicasets/", times=2)
    faults.inject(status=500, method="PATCH", path_regex=r"/pods/[^/]+$", times=2)
    api.patch(f"{DEPLOYMENTS}/app", new_version(created, "2"))
    faults.drop_watches()
    wait_for(lambda: complete(api, "app"), timeout=30, what="the rollout despite the faults")
    faults.drop_watches()

    # No pod process was lost on the way: every container runs its first incarnation.
    for pod in api.list(PODS)["items"]:
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not faults.active(), "every injected fault was met"
