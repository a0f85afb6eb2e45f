"""The lab kubelet rides out errors on its own API requests and dropped watches, as a kubelet
does: a kubelet of the test's own reaches the API server through a proxy that fails chosen
requests (lab/rebalancer_lab/api_faults.py).

Only the kubelet's requests pass the proxy: kube-controller-manager talks to the API server
directly, so faults on the controllers' requests cannot be injected here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tests.kube_clusters import SharedCluster
from tests.lab.conftest import OwnKubelet, register_tainted_node
from tests.lab.support import (
    ROLLOUT_S,
    Lab,
    complete,
    container,
    deployment,
    is_ready,
    new_version,
    pod,
    wait_for,
)

from rebalancer_lab.api_faults import FaultyApi
from rebalancer_lab.kube.objects import condition
from rebalancer_lab.kube.requesting import Api, resource_path
from rebalancer_lab.kubelet.node import LEASE_NAMESPACE, NodeAgent
from rebalancer_lab.kubelet.reaping import SWEEP_SECONDS

# The kubelet's own writes, by path.
POD_STATUS = r"/pods/[^/]+/status$"
POD = r"/pods/[^/]+$"
# Its pod informer's list and watch (the field selector is in the query, not the path).
ALL_PODS = r"^/api/v1/pods$"


@pytest.fixture
def faulty(cluster: SharedCluster) -> Iterator[FaultyApi]:
    # Requested before own_kubelet: it outlives the kubelet, which stops talking through it.
    with FaultyApi(cluster.plane) as proxy:
        yield proxy


@pytest.fixture
def behind_proxy(faulty: FaultyApi, own_kubelet: OwnKubelet, tmp_path: Path) -> Lab:
    """A kubelet of the test's own whose every request goes through the proxy."""
    return own_kubelet(faulty.write_kubeconfig(tmp_path / "faulty.kubeconfig"))


def test_a_rollout_completes_through_errors_on_the_kubelets_requests_and_dropped_watches(
    faulty: FaultyApi, behind_proxy: Lab
) -> None:
    lab = behind_proxy
    created = lab.api.create(lab.path("deployments"), deployment(lab, "app", 3))
    wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "first rollout")

    faulty.inject(status=500, method="PUT", path_regex=POD_STATUS, times=6)
    # The kubelet's final delete (grace 0) of the pods the ReplicaSet controller deleted.
    faulty.inject(status=500, method="DELETE", path_regex=POD, times=2)
    faulty.inject(status=503, method="GET", path_regex=ALL_PODS, times=2)
    lab.api.patch(lab.path("deployments", "app"), new_version(created, "2"))
    faulty.drop_watches()
    wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "the rollout despite the faults")
    faulty.drop_watches()

    wait_for(
        lambda: len(lab.api.list(lab.pods)["items"]) == 3,
        ROLLOUT_S,
        "every old pod stopped and removed",
    )
    # No pod process was lost on the way: every container runs its first incarnation.
    for body in lab.api.list(lab.pods)["items"]:
        assert body["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not faulty.active(), f"faults never met: {faulty.active()}"


@pytest.fixture
def agent(faulty: FaultyApi, lab: Lab, tmp_path: Path) -> Iterator[NodeAgent]:
    """The kubelet's node agent on a Node of its own, through the proxy, renewing every 0.2 s
    and posting its status every 0.4 s: a LabCluster's renews every 10 s (a kubelet's default),
    so two renewals, one failed and one after it, would cost the test 20 s."""
    name = f"agent-{uuid.uuid4().hex[:6]}"
    register_tainted_node(lab.api, name)
    api = Api.connect(faulty.write_kubeconfig(tmp_path / "agent.kubeconfig"))
    node = NodeAgent(api, name, renew_every=0.2, status_every=0.4)
    node.start()
    yield node
    node.stop()
    api.close()
    lab.api.delete(resource_path("v1", "nodes", name=name))


def renewed_at(lab: Lab, node: str) -> datetime:
    lease = lab.api.get(resource_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE, node))
    assert lease is not None
    return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))


def heartbeat(lab: Lab, node: str) -> str:
    found = lab.api.get(resource_path("v1", "nodes", name=node))
    assert found is not None
    ready = condition(found, "Ready")
    assert ready is not None and ready["status"] == "True", ready
    return str(ready["lastHeartbeatTime"])


def test_the_node_renews_its_lease_and_posts_its_status_after_failed_attempts(
    faulty: FaultyApi, lab: Lab, agent: NodeAgent
) -> None:
    faulty.inject(status=503, method="PATCH", path_regex=f"/leases/{agent.name}$", times=3)
    faulty.inject(status=500, method="PATCH", path_regex=f"/nodes/{agent.name}/status$", times=2)
    wait_for(lambda: not faulty.active(), 10, "the failed renewals and status posts")
    renewed, beat = renewed_at(lab, agent.name), heartbeat(lab, agent.name)

    wait_for(lambda: renewed_at(lab, agent.name) > renewed, 10, "the Lease renewed again")
    # Heartbeats are stamped to the second.
    wait_for(lambda: heartbeat(lab, agent.name) > beat, 10, "the Ready condition posted again")


def test_a_finished_pods_status_is_written_though_the_first_writes_fail(
    faulty: FaultyApi, behind_proxy: Lab, tmp_path: Path
) -> None:
    lab = behind_proxy
    flag = tmp_path / "finish"
    command = ["sh", "-c", f"while ! test -e {flag}; do sleep 0.05; done"]
    lab.create(pod("once", container(command=command), restartPolicy="Never"))
    # Ready is the last write of its start: the faults below meet the writes of its end.
    wait_for(lambda: is_ready(lab.get("once")), 15, "Ready")

    # The writes of the pod's end fail: no later event of the pod would bring them again.
    faulty.inject(status=500, method="PUT", path_regex=r"/pods/once/status$", times=3)
    flag.touch()
    wait_for(lambda: lab.phase_of("once") == "Succeeded", 15, "Succeeded in the API")
    assert not faulty.active(), "the status was written before the faults were met"
    terminated = lab.get("once")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0


def test_a_deleted_pod_is_removed_though_the_kubelets_last_writes_fail(
    faulty: FaultyApi, behind_proxy: Lab
) -> None:
    lab = behind_proxy
    lab.create(pod("doomed", container()))
    wait_for(lambda: is_ready(lab.get("doomed")), 15, "Ready")

    # Its last status writes fail, so no event of its own write comes back to the kubelet
    # after its final delete (grace 0) failed too: only trying again removes the pod.
    faulty.inject(status=500, method="PUT", path_regex=r"/pods/doomed/status$", times=2)
    faulty.inject(status=500, method="DELETE", path_regex=r"/pods/doomed$", times=1)
    lab.api.delete(lab.path("pods", "doomed"))
    wait_for(lambda: lab.find("doomed") is None, 15, "the pod removed")
    assert not faulty.active(), "the pod was removed before the faults were met"


def test_a_deleted_pod_is_removed_though_a_restarted_api_server_forbids_it_at_first(
    faulty: FaultyApi, behind_proxy: Lab
) -> None:
    """A kube-apiserver just restarted answers the node 403 until its node authorizer has
    synced; the kubelet's final delete met that once and gave up, and the pod stayed
    Terminating for good (found by bench/chaos.py, seed 1, apiserver-restart)."""
    lab = behind_proxy
    lab.create(pod("forbidden", container()))
    wait_for(lambda: is_ready(lab.get("forbidden")), 15, "Ready")

    faulty.inject(status=403, method="DELETE", path_regex=r"/pods/forbidden$", times=2)
    lab.api.delete(lab.path("pods", "forbidden"))
    wait_for(lambda: lab.find("forbidden") is None, 15, "the pod removed")
    assert not faulty.active(), "the pod was removed before the faults were met"


def test_a_deleted_pod_is_removed_though_an_answer_is_not_a_status_object(
    faulty: FaultyApi, behind_proxy: Lab
) -> None:
    """An error answered in plain text (a server still starting, a proxy) failed the kubelet's
    final delete as bad JSON, outside its retries: the worker ended and the pod stayed
    Terminating (found by bench/chaos.py, seed 1, apiserver-restart)."""
    lab = behind_proxy
    lab.create(pod("plain", container()))
    wait_for(lambda: is_ready(lab.get("plain")), 15, "Ready")

    faulty.inject(
        status=503, method="DELETE", path_regex=r"/pods/plain$", times=2, text="not ready"
    )
    lab.api.delete(lab.path("pods", "plain"))
    wait_for(lambda: lab.find("plain") is None, 15, "the pod removed")
    assert not faulty.active(), "the pod was removed before the faults were met"


def test_a_deleted_pod_whose_worker_took_a_404_for_its_removal_is_removed_by_the_sweep(
    faulty: FaultyApi, behind_proxy: Lab
) -> None:
    """The worker's final delete answered 404 (a restarting API server's answer, taken as
    "removed already") ends its tries with the pod still Terminating; the kubelet's periodic
    sweep, as a kubelet's status manager, removes it all the same."""
    lab = behind_proxy
    lab.create(pod("lost", container()))
    wait_for(lambda: is_ready(lab.get("lost")), 15, "Ready")

    faulty.inject(status=404, method="DELETE", path_regex=r"/pods/lost$", times=1)
    lab.api.delete(lab.path("pods", "lost"))
    wait_for(lambda: not faulty.active(), 15, "the worker's final delete answered 404")
    assert lab.find("lost") is not None, "the pod was removed by the worker itself"
    wait_for(lambda: lab.find("lost") is None, 3 * SWEEP_SECONDS + 5, "the pod removed")
