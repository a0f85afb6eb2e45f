"""Which deleted pods the kubelet's sweep removes (rebalancer_lab.kubelet.reaping)."""

from __future__ import annotations

from typing import Any

from rebalancer_lab.kubelet.reaping import Reaper, orphaned


def pod(uid: str, node: str = "lab", deleted: bool = True, name: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "name": name or f"p-{uid}", "namespace": "ns"}
    if deleted:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}}


def test_only_deleted_pods_of_this_node_that_no_worker_runs_are_orphaned() -> None:
    pods = [pod("a"), pod("b", deleted=False), pod("c", node="other"), pod("d")]
    assert set(orphaned(pods, "lab", running={"d"})) == {"a"}


class Deletes:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def delete(self, path: str, **options: Any) -> None:
        self.calls.append((path, options.get("uid")))


def test_a_pod_is_removed_only_when_two_sweeps_in_a_row_find_it_orphaned() -> None:
    api = Deletes()
    pods = [pod("a", name="web-0")]
    running: set[str] = set()
    reaper = Reaper(api, "lab", lambda: pods, lambda: running)  # type: ignore[arg-type]
    reaper.sweep()
    assert api.calls == []  # its worker may be about to be made
    reaper.sweep()
    assert api.calls == [("/api/v1/namespaces/ns/pods/web-0", "a")]
    pods.pop()  # the API removed it
    # A pod a worker took on between two sweeps is left to it.
    pods.append(pod("b"))
    reaper.sweep()
    running.add("b")
    reaper.sweep()
    assert [uid for _, uid in api.calls] == ["a"]
