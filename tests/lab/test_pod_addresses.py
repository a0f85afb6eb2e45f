"""Each lab pod has an address of its own on the loopback network, as each pod on a cluster has
an IP: its processes listen on `$(POD_IP):<port>` next to other pods on the same port, the
downward API gives that address, probes go to it, and it is free again once the pod is gone."""

from __future__ import annotations

import ipaddress
import socket
import time
import urllib.request

import pytest
from tests.lab.conftest import OwnKubelet
from tests.lab.support import Lab, container, is_ready, pod, python_script, wait_for

from rebalancer_lab.kubelet.addresses import (
    POD_NETWORK_VARIABLE,
    PodAddresses,
    configured_pod_network,
)
from rebalancer_lab.ports import free_port

# Answers every GET with "<pod name> <POD_IP>", listening where $LISTEN says.
SERVER = python_script(
    "import http.server, os\n"
    "host, port = os.environ['LISTEN'].rsplit(':', 1)\n"
    "class Handler(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = f\"{os.environ['HOSTNAME']} {os.environ['POD_IP']}\".encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "http.server.HTTPServer((host, int(port)), Handler).serve_forever()\n"
)
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def server(name: str, port: int, listen: str, **probes: object) -> dict:
    main = container(
        command=SERVER,
        env=[
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            # Expanded by the kubelet from the variable above, as the injected sidecar's is.
            {"name": "LISTEN", "value": listen},
        ],
        ports=[{"name": "http", "containerPort": port}],
        **probes,
    )
    return pod(name, main)


def fetch(host: str, port: int) -> str:
    with DIRECT.open(f"http://{host}:{port}/", timeout=2) as answer:
        return str(answer.read().decode())


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def status_of(lab: Lab, name: str) -> dict:
    return dict(lab.get(name).get("status") or {})


def test_pods_listening_on_one_port_each_have_their_address_and_are_probed_there(
    lab: Lab,
) -> None:
    port = free_port()
    names = ["one", "two", "three"]
    probes = {
        "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
        # failureThreshold 1: one probe sent anywhere but the pod's address restarts it.
        "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 1},
    }
    for name in names:
        lab.create(server(name, port, f"$(POD_IP):{port}", **probes))

    def all_ready() -> list[dict] | None:
        bodies = [lab.find(name) for name in names]
        return bodies if all(b is not None and is_ready(b) for b in bodies) else None

    bodies = wait_for(all_ready, 30, "three pods on one port, Ready")
    addresses = [b["status"]["podIP"] for b in bodies]
    assert len(set(addresses)) == 3, addresses
    for body, address in zip(bodies, addresses, strict=True):
        assert ipaddress.ip_address(address) in ipaddress.ip_network("127.0.0.0/8")
        assert address != "127.0.0.1", "the node's own address is not a pod's"
        assert body["status"]["podIPs"] == [{"ip": address}]
        assert body["status"]["hostIP"] == "127.0.0.1"
        # The process got the same address from the downward API and listens on it.
        assert fetch(address, port) == f"{body['metadata']['name']} {address}"
    assert refused("127.0.0.1", port), "no pod listens on the node's address"
    # Probes kept passing: the liveness probe went to each pod's address, not to the node's.
    time.sleep(2.5)
    restarts = {n: status_of(lab, n)["containerStatuses"][0]["restartCount"] for n in names}
    assert restarts == {"one": 0, "two": 0, "three": 0}
    assert lab.kubelet.kubelet is not None
    held = lab.kubelet.kubelet.addresses.held()
    # The session's kubelet holds other tests' pods' addresses too.
    assert [held[b["metadata"]["uid"]] for b in bodies] == addresses


def test_a_pod_listening_on_loopback_only_is_not_ready_as_on_a_cluster(lab: Lab) -> None:
    port = free_port()
    readiness = {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1, "failureThreshold": 1}
    lab.create(server("loopback", port, f"127.0.0.1:{port}", readinessProbe=readiness))
    address = wait_for(lambda: status_of(lab, "loopback").get("podIP"), 15, "a pod IP")
    # It serves on 127.0.0.1, but the kubelet probes the pod's address, where nothing listens.
    served = wait_for(lambda: _answer("127.0.0.1", port), 15, "the process serving on 127.0.0.1")
    assert served == f"loopback {address}"
    assert refused(address, port)
    # Three probe periods, each a failure: still not Ready.
    time.sleep(3)
    body = lab.get("loopback")
    assert not is_ready(body)
    assert body["status"]["containerStatuses"][0]["restartCount"] == 0


def _answer(host: str, port: int) -> str | None:
    try:
        return fetch(host, port)
    except OSError:
        return None


def test_an_address_lasts_for_the_pods_life_and_is_free_again_after_it(
    own_kubelet: OwnKubelet,
) -> None:
    # A kubelet of its own: lowest free first is only predictable with no other test's pods.
    lab = own_kubelet()
    assert lab.kubelet.kubelet is not None
    addresses = lab.kubelet.kubelet.addresses
    lab.create(pod("first", container()))
    first = wait_for(lambda: status_of(lab, "first").get("podIP"), 15, "first's address")
    # A container that exits at once and restarts: its pod keeps the address across restarts.
    echo = container(
        command=["sh", "-c", 'echo "$POD_IP"; sleep 0.2'],
        env=[{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    )
    lab.create(pod("restarts", echo))
    wait_for(
        lambda: (
            (s := status_of(lab, "restarts").get("containerStatuses")) and s[0]["restartCount"] >= 2
        ),
        20,
        "two restarts",
    )
    second = status_of(lab, "restarts")["podIP"]
    assert second != first
    logs = sorted(lab.state.glob(f"logs/pods/{lab.namespace}_restarts_*/main/*.log"))
    assert len(logs) >= 2
    assert {log.read_text().strip() for log in logs} == {second}

    # A pod that ran to completion gives its address back, though the pod object stays.
    done = pod("done", container(command=["true"]), restartPolicy="Never")
    uid = lab.create(done)["metadata"]["uid"]
    wait_for(lambda: status_of(lab, "done").get("phase") == "Succeeded", 15, "done Succeeded")
    wait_for(lambda: uid not in addresses.held(), 5, "done's address freed")

    # Deleted: once its processes are gone its address is the next pod's (lowest free first).
    lab.api.delete(lab.path("pods", "first"))
    wait_for(lambda: lab.find("first") is None, 15, "first gone")
    assert first not in addresses.held().values()
    lab.create(pod("after", container()))
    assert wait_for(lambda: status_of(lab, "after").get("podIP"), 15, "after's address") == first


def test_addresses_are_lowest_free_first_never_the_nodes_and_kept_per_pod() -> None:
    pool = PodAddresses("127.0.0.0/29", aliases=True)  # hosts .1 to .6; .1 is the node
    assert [pool.acquire(uid) for uid in "abc"] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert pool.acquire("b") == "127.0.0.3", "a pod keeps its address"
    pool.release("a")
    assert pool.acquire("d") == "127.0.0.2"
    # The address an earlier kubelet gave a pod, when free; else the lowest free one.
    assert pool.acquire("e", preferred="127.0.0.6") == "127.0.0.6"
    assert pool.acquire("f", preferred="127.0.0.3") == "127.0.0.5"
    with pytest.raises(RuntimeError, match="no free pod address"):
        pool.acquire("g", preferred="127.0.0.1")
    pool.release("c")
    assert pool.acquire("g", preferred="127.0.0.7") == "127.0.0.4", "outside the network"
    # Without loopback aliases every pod has the node's address, as the lab had before.
    assert PodAddresses(aliases=False).acquire("a") == "127.0.0.1"


def test_the_pod_network_comes_from_the_environment_and_must_be_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(POD_NETWORK_VARIABLE, raising=False)
    assert configured_pod_network() == "127.0.0.0/16"
    monkeypatch.setenv(POD_NETWORK_VARIABLE, "127.3.0.0/16")
    assert configured_pod_network() == "127.3.0.0/16"
    # Two labs with different networks never hand out one address.
    first = PodAddresses("127.0.0.0/16", aliases=True).acquire("a")
    second = PodAddresses(configured_pod_network(), aliases=True).acquire("a")
    assert (first, second) == ("127.0.0.2", "127.3.0.1")
    for bad, says in (("10.0.0.0/16", "not in 127.0.0.0/8"), ("127.0.0.0/33", "127.0.0.0/33")):
        monkeypatch.setenv(POD_NETWORK_VARIABLE, bad)
        with pytest.raises(ValueError, match=POD_NETWORK_VARIABLE) as refused:
            configured_pod_network()
        assert says in str(refused.value)
