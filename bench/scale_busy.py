"""Groups of bench/scale.py with consumers that rebalance during the soak.

BUSY of the groups get two real consumer processes each (rebalancer_lab.consumer, on the bench's
topic). Through the soak one consumer at a time is restarted every EVERY seconds, walking the
busy groups in turn, so those groups leave and join while the rest stay at rest; the restarts
stop UNTIL seconds into the soak, so the last ones are seen too. The figures: restarts made,
rebalances the ConsumerGroups' status counted meanwhile, and per restart the time until its
group's status counts a rebalance more (looked at every LOOK_SECONDS).
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from rebalancer_lab.processes import ChildProcess, stop_all
from rebalancer_lab.running import Lab
from scale_figures import Counts, Restart, percentile, restart_latencies

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"
CONSUMERS_PER_GROUP = 2
LOOK_SECONDS = 2.0
SETTLE_SECONDS = 120.0


def _group_status(api: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    found = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return dict((found.get("status") or {}).get("group") or {})


class BusyGroups:
    """The busy groups' consumers, their restarts and the looks at their status."""

    def __init__(
        self,
        lab: Lab,
        api: client.CustomObjectsApi,
        groups: list[tuple[str, str]],
        topic: str,
        every: float,
        until: float,
    ) -> None:
        self.lab, self.api, self.groups, self.topic = lab, api, groups, topic
        self.every, self.until = every, until
        self.consumers: dict[str, list[ChildProcess]] = {}
        self.restarts: list[Restart] = []
        self.looks: list[Counts] = []
        self.rebalances_before: dict[str, int] = {}
        self._next_restart = every
        self._next_look = 0.0
        self._turn = 0

    def start(self) -> None:
        """Start every consumer and wait until each group's status shows both members."""
        for _, name in self.groups:
            self.consumers[name] = [
                self._consumer(name, index) for index in range(CONSUMERS_PER_GROUP)
            ]
        deadline = time.monotonic() + SETTLE_SECONDS
        waiting = list(self.groups)
        while waiting and time.monotonic() < deadline:
            waiting = [g for g in waiting if self._members(*g) != CONSUMERS_PER_GROUP]
            time.sleep(LOOK_SECONDS)
        if waiting:
            raise RuntimeError(f"{len(waiting)} busy groups without both members: {waiting[:3]}")
        self.rebalances_before = self._rebalances()

    def tick(self, seconds: float) -> None:
        """Called often through the soak: restart the next consumer when due, look when due."""
        if seconds >= self._next_look:
            self._look(seconds)
            self._next_look = seconds + LOOK_SECONDS
        if self._next_restart <= seconds < self.until:
            self._restart(seconds)
            self._next_restart += self.every

    def figures(self) -> dict[str, Any]:
        after = self._rebalances()
        latencies = restart_latencies(self.restarts, self.looks)
        seen = [value for value in latencies if value is not None]
        return {
            "busy_groups": len(self.groups),
            "restart_every_s": self.every,
            "restarts": len(self.restarts),
            "rebalances_in_status": sum(
                after.get(name, 0) - self.rebalances_before.get(name, 0) for _, name in self.groups
            ),
            "restart_to_status_s": {
                "seen": len(seen),
                "p50": round(percentile(seen, 50), 1) if seen else None,
                "max": round(max(seen), 1) if seen else None,
            },
        }

    def stop(self) -> None:
        stop_all([child for children in self.consumers.values() for child in children], grace=5)

    def _consumer(self, name: str, index: int) -> ChildProcess:
        return self.lab.start_consumer(
            index, group_id=name, prefix=f"{name}-consumer", env={"KAFKA_TOPICS": self.topic}
        )

    def _restart(self, seconds: float) -> None:
        namespace, name = self.groups[self._turn % len(self.groups)]
        index = (self._turn // len(self.groups)) % CONSUMERS_PER_GROUP
        self._turn += 1
        before = _group_status(self.api, namespace, name).get("rebalances")
        self.consumers[name][index].stop(grace=5)
        self.consumers[name][index] = self._consumer(name, index)
        self.restarts.append((seconds, name, before))

    def _look(self, seconds: float) -> None:
        self.looks.append(
            (
                seconds,
                {
                    name: _group_status(self.api, ns, name).get("rebalances")
                    for ns, name in self.groups
                },
            )
        )

    def _members(self, namespace: str, name: str) -> int | None:
        members = _group_status(self.api, namespace, name).get("members")
        return int(members) if members is not None else None

    def _rebalances(self) -> dict[str, int]:
        return {
            name: int(_group_status(self.api, ns, name).get("rebalances") or 0)
            for ns, name in self.groups
        }
