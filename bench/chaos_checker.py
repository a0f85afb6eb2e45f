"""The invariants of the chaos bench (bench/chaos.py), checked on a stream of observations.

No I/O here: the bench samples the lab and feeds what it saw as `Event`s, in time order (seconds
since the run began); `Checker.feed` returns the violations an event shows at once, `finish`
those only the end can show, and `figures` what the table reports. The unit tests feed it
synthetic streams (tests/bench/test_chaos_checker.py).

Event kinds and their data:
- change: {"change": "rollout", "revision": str} (a template change), {"change": "scale",
  "replicas": int, "previous": int}, or another change named by "change";
- fault: {"fault": str, "phase": "start" | "end", "id": int};
- rollout: status.rollout sampled, plus what the pods show: {"rolloutId", "phase", "updated":
  every live pod at the latest revision and as many as the workload asks};
- pod_new / pod_gone: a pod (uid) first seen, or gone: {"pod", "uid", "revision"};
- gate: a pod held at its gate: {"pod", "uid", "silent": seconds since the operator last
  refreshed its hold, or since the gate started};
- group: {"status": (members, state) from status.group, "broker": (members, state) from the
  broker, "fresh": status.group.observedAt within an observe interval, "generation": status's,
  "rebalances": status's count of them, "degraded": Degraded condition True, "reason": its
  reason, "sidecars": (sidecar members on the broker, pods) for a fleet that runs the
  enforcement sidecar, once the faults have stopped, else None};
- proc: {"replica": str, "pid": int, "rss": bytes, "fds": int};
- exit: {"replica": str, "code": int} (an operator replica that ended without a fault killing it);
- ledger: {"produced", "lost", "unknown", "redeliveries", "failed_deliveries"} (once a fleet);
- quiet: the faults and changes have stopped (no data).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A pod at the latest revision that disappears within this long of a scale-down of its fleet
# may be the one the scale-down removed.
SCALE_EXCUSE_S = 120.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class Event:
    t: float
    kind: str
    fleet: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    t: float
    rule: str
    fleet: str
    what: str

    def line(self, seed: int) -> str:
        where = f" {self.fleet}" if self.fleet else ""
        return f"seed {seed} t={self.t:.0f}s {self.rule}{where}: {self.what}"


@dataclass(frozen=True)
class Limits:
    rollout_s: float = 900.0  # a template change not rolled out by then is stalled
    bypass_s: float = 120.0  # the gates' --bypass-after
    bypass_slack_s: float = 30.0  # the gate's own watch and the bench's sampling
    observe_s: float = 2.0  # spec.policy.observe.intervalSeconds
    agree_slack_s: float = 10.0  # the bench's sampling of status and broker
    degraded_grace_s: float = 120.0  # after the last fault ended
    flat_span_s: float = 300.0  # an operator process judged for growth only after this long
    flat_warmup_s: float = 60.0
    rss_growth: float = 0.3  # and at least RSS_GROWTH_MIB
    rss_growth_mib: float = 30.0
    fds_growth: float = 0.5  # and at least FDS_GROWTH
    fds_growth_count: int = 20


@dataclass
class Pending:
    """A template change not rolled out yet."""

    at: float
    revision: str
    before: str | None  # the rolloutId status showed when it was made
    faulted: bool = False  # a fault was active at some moment of the rollout
    stalled: bool = False


@dataclass
class Rollout:
    fleet: str
    revision: str
    started: float
    took: float
    faulted: bool


@dataclass
class FleetState:
    revision: str | None = None
    rollout_id: str | None = None
    pending: list[Pending] = field(default_factory=list)
    scaled_down_at: float | None = None
    degraded_since: float | None = None
    degraded_told: bool = False
    disagree_since: float | None = None
    disagree_told: bool = False
    broker_view: Any = None
    broker_changed: float = 0.0
    generation: int | None = None
    rebalances: int = 0
    sidecars: tuple[int, int] | None = None  # the last look after the faults stopped


class Checker:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.fleets: dict[str, FleetState] = defaultdict(FleetState)
        self.active: dict[int, str] = {}  # fault id -> type
        self.faults: Counter[str] = Counter()
        self.changes: Counter[str] = Counter()
        self.fault_spans: list[tuple[float, float | None, str]] = []
        self.last_fault_end = 0.0
        self.quiet_at: float | None = None
        self.rollouts: list[Rollout] = []
        self.superseded = 0
        self.violations: list[Violation] = []
        self.gates_told: set[str] = set()
        self.procs: dict[tuple[str, int], list[tuple[float, int, int]]] = defaultdict(list)
        self.ledgers: dict[str, dict[str, int]] = {}
        self.exits: list[tuple[float, str, int]] = []
        self.now = 0.0

    # -- feeding ------------------------------------------------------------------------------

    def feed(self, event: Event) -> list[Violation]:
        self.now = max(self.now, event.t)
        handler = getattr(self, f"_on_{event.kind}", None)
        found = list(handler(event) if handler is not None else [])
        self.violations += found
        return found

    def feed_all(self, events: Iterable[Event]) -> list[Violation]:
        found: list[Violation] = []
        for event in events:
            found += self.feed(event)
        return found

    def _on_change(self, event: Event) -> list[Violation]:
        kind = str(event.data["change"])
        self.changes[kind] += 1
        fleet = self.fleets[event.fleet]
        if kind == "rollout":
            revision = str(event.data["revision"])
            if fleet.pending:
                self.superseded += len(fleet.pending)
            fleet.pending = [
                Pending(event.t, revision, fleet.rollout_id, faulted=bool(self.active))
            ]
            fleet.revision = revision
        elif kind == "scale" and int(event.data["replicas"]) < int(event.data["previous"]):
            fleet.scaled_down_at = event.t
        return []

    def _on_fault(self, event: Event) -> list[Violation]:
        ident, kind = int(event.data["id"]), str(event.data["fault"])
        if event.data["phase"] == "start":
            self.faults[kind] += 1
            self.active[ident] = kind
            self.fault_spans.append((event.t, None, kind))
            for fleet in self.fleets.values():
                for pending in fleet.pending:
                    pending.faulted = True
        else:
            self.active.pop(ident, None)
            self.last_fault_end = event.t
            for index, (start, end, name) in enumerate(self.fault_spans):
                if end is None and name == kind:
                    self.fault_spans[index] = (start, event.t, name)
                    break
        return []

    def _on_quiet(self, event: Event) -> list[Violation]:
        self.quiet_at = event.t
        return []

    def _on_rollout(self, event: Event) -> list[Violation]:
        fleet = self.fleets[event.fleet]
        rollout_id = event.data.get("rolloutId")
        found: list[Violation] = []
        done = event.data.get("phase") == "Completed" and bool(event.data.get("updated"))
        for pending in list(fleet.pending):
            if done and rollout_id != pending.before:
                took = event.t - pending.at
                self.rollouts.append(
                    Rollout(event.fleet, pending.revision, pending.at, took, pending.faulted)
                )
                fleet.pending.remove(pending)
            elif event.t - pending.at > self.limits.rollout_s and not pending.stalled:
                pending.stalled = True
                found.append(
                    Violation(
                        event.t,
                        "rollout-stalled",
                        event.fleet,
                        f"revision {pending.revision} (changed at t={pending.at:.0f}s) not "
                        f"rolled out after {self.limits.rollout_s:.0f} s; status.rollout "
                        f"{event.data.get('phase')} {event.data.get('batch')}/"
                        f"{event.data.get('batches')}",
                    )
                )
        if rollout_id is not None and (not fleet.pending or fleet.rollout_id is None):
            fleet.rollout_id = rollout_id
        return found

    def _on_pod_new(self, event: Event) -> list[Violation]:
        return []

    def _on_pod_gone(self, event: Event) -> list[Violation]:
        fleet = self.fleets[event.fleet]
        revision = str(event.data.get("revision"))
        if fleet.revision is None or revision != fleet.revision:
            return []
        scaled = fleet.scaled_down_at
        if scaled is not None and event.t - scaled <= SCALE_EXCUSE_S:
            return []
        return [
            Violation(
                event.t,
                "replaced-twice",
                event.fleet,
                f"pod {event.data.get('pod')} (uid {str(event.data.get('uid'))[:8]}) already at "
                f"revision {revision}, the latest, was deleted with no scale-down to explain it",
            )
        ]

    def _on_gate(self, event: Event) -> list[Violation]:
        silent = float(event.data["silent"])
        uid = str(event.data.get("uid"))
        limit = self.limits.bypass_s + self.limits.bypass_slack_s
        if silent <= limit or uid in self.gates_told:
            return []
        self.gates_told.add(uid)
        return [
            Violation(
                event.t,
                "gate-past-bypass",
                event.fleet,
                f"pod {event.data.get('pod')} held at its gate {silent:.0f} s without a sign of "
                f"the operator (bypass after {self.limits.bypass_s:.0f} s)",
            )
        ]

    def _on_group(self, event: Event) -> list[Violation]:
        fleet = self.fleets[event.fleet]
        found: list[Violation] = []
        # Rebalances: the operator's count (status.group.rebalances) when it gives one, else the
        # group's generation; a static member swapped in keeps the generation.
        counter = event.data.get("rebalances", event.data.get("generation"))
        if isinstance(counter, int):
            if fleet.generation is not None and counter > fleet.generation:
                fleet.rebalances += counter - fleet.generation
            fleet.generation = counter
        # Degraded after its cause is gone: no fault active, and Degraded for longer than the
        # grace since both the last fault's end and the condition's start.
        if event.data.get("degraded"):
            fleet.degraded_since = fleet.degraded_since if fleet.degraded_since else event.t
            since = max(fleet.degraded_since, self.last_fault_end)
            calm = not self.active and not any(p for p in fleet.pending if not p.stalled)
            if calm and event.t - since > self.limits.degraded_grace_s and not fleet.degraded_told:
                fleet.degraded_told = True
                found.append(
                    Violation(
                        event.t,
                        "degraded-after-cause",
                        event.fleet,
                        f"Degraded ({event.data.get('reason')}) since t={fleet.degraded_since:.0f}s"
                        f", {event.t - since:.0f} s after the last fault ended",
                    )
                )
        else:
            fleet.degraded_since = None
            fleet.degraded_told = False
        sidecars = event.data.get("sidecars")
        if self.quiet_at is not None and sidecars is not None:
            fleet.sidecars = (int(sidecars[0]), int(sidecars[1]))
        return found + self._agreement(fleet, event)

    def _agreement(self, fleet: FleetState, event: Event) -> list[Violation]:
        """Status against the broker, once the faults have stopped."""
        found: list[Violation] = []
        broker = event.data.get("broker")
        if broker != fleet.broker_view:
            fleet.broker_view = broker
            fleet.broker_changed = event.t
        if self.quiet_at is None or broker is None:
            fleet.disagree_since = None
            return found
        agrees = tuple(event.data.get("status") or ()) == tuple(broker) and bool(
            event.data.get("fresh")
        )
        if agrees:
            fleet.disagree_since = None
            fleet.disagree_told = False
            return found
        fleet.disagree_since = fleet.disagree_since or event.t
        since = max(fleet.disagree_since, fleet.broker_changed, self.quiet_at)
        limit = self.limits.observe_s + self.limits.agree_slack_s
        if event.t - since > limit and not fleet.disagree_told:
            fleet.disagree_told = True
            found.append(
                Violation(
                    event.t,
                    "status-disagrees",
                    event.fleet,
                    f"status.group {event.data.get('status')} (fresh: {event.data.get('fresh')}) "
                    f"against the broker's {broker} for {event.t - since:.0f} s after the faults "
                    f"stopped (allowed {limit:.0f} s)",
                )
            )
        return found

    def _on_proc(self, event: Event) -> list[Violation]:
        key = (str(event.data["replica"]), int(event.data["pid"]))
        self.procs[key].append((event.t, int(event.data["rss"]), int(event.data["fds"])))
        return []

    def _on_exit(self, event: Event) -> list[Violation]:
        """An operator replica that ended on its own: counted and listed, not a violation by
        itself (its pod's container would be started again); what it left undone is checked
        where it shows, a rollout unfinished or a status stale."""
        self.exits.append((event.t, str(event.data["replica"]), int(event.data["code"])))
        return []

    def _on_ledger(self, event: Event) -> list[Violation]:
        data = {k: int(v) for k, v in event.data.items()}
        self.ledgers[event.fleet] = data
        found = []
        if data.get("lost"):
            found.append(
                Violation(
                    event.t,
                    "message-lost",
                    event.fleet,
                    f"{data['lost']} of {data['produced']} delivered messages never processed",
                )
            )
        if data.get("unknown"):
            found.append(
                Violation(
                    event.t, "message-unknown", event.fleet, f"{data['unknown']} never produced"
                )
            )
        return found

    # -- the end ------------------------------------------------------------------------------

    def finish(self, t: float) -> list[Violation]:
        self.now = max(self.now, t)
        found: list[Violation] = []
        for name, fleet in sorted(self.fleets.items()):
            for pending in fleet.pending:
                found.append(
                    Violation(
                        t,
                        "rollout-unfinished",
                        name,
                        f"revision {pending.revision} (changed at t={pending.at:.0f}s) not rolled "
                        "out at the end",
                    )
                )
            if fleet.sidecars is not None and fleet.sidecars[0] < fleet.sidecars[1]:
                seen, pods = fleet.sidecars
                found.append(
                    Violation(
                        t,
                        "sidecar-missing",
                        name,
                        f"{seen} sidecars members of the group for {pods} pods at the last look "
                        "after the faults stopped",
                    )
                )
        for (replica, pid), samples in sorted(self.procs.items()):
            found += self._flat(replica, pid, samples)
        self.violations += found
        return found

    def _flat(
        self, replica: str, pid: int, samples: Sequence[tuple[float, int, int]]
    ) -> list[Violation]:
        limits = self.limits
        if not samples or samples[-1][0] - samples[0][0] < limits.flat_span_s:
            return []
        begin = samples[0][0] + limits.flat_warmup_s
        judged = [s for s in samples if s[0] >= begin]
        third = max(1, len(judged) // 3)
        early, late = judged[:third], judged[-third:]
        found = []
        rss0 = statistics.median(s[1] for s in early)
        rss1 = statistics.median(s[1] for s in late)
        if rss1 - rss0 > max(limits.rss_growth * rss0, limits.rss_growth_mib * MIB):
            found.append(
                Violation(
                    samples[-1][0],
                    "operator-memory-grows",
                    "",
                    f"{replica} (pid {pid}) RSS {rss0 / MIB:.0f} -> {rss1 / MIB:.0f} MiB",
                )
            )
        fds0 = statistics.median(s[2] for s in early)
        fds1 = statistics.median(s[2] for s in late)
        if fds1 - fds0 > max(limits.fds_growth * fds0, limits.fds_growth_count):
            found.append(
                Violation(
                    samples[-1][0],
                    "operator-files-grow",
                    "",
                    f"{replica} (pid {pid}) open files {fds0:.0f} -> {fds1:.0f}",
                )
            )
        return found

    # -- figures ------------------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        clean = [r.took for r in self.rollouts if not r.faulted]
        faulted = [r.took for r in self.rollouts if r.faulted]
        changes = sum(self.changes.values())
        rebalances = sum(fleet.rebalances for fleet in self.fleets.values())
        ledgers = self.ledgers.values()
        procs = {
            f"{replica}/{pid}": {
                "span_s": round(s[-1][0] - s[0][0]),
                "rss_mib": [round(s[0][1] / MIB, 1), round(s[-1][1] / MIB, 1)],
                "fds": [s[0][2], s[-1][2]],
            }
            for (replica, pid), s in self.procs.items()
            if s
        }
        return {
            "faults": dict(sorted(self.faults.items())),
            "changes": dict(sorted(self.changes.items())),
            "rollouts_requested": self.changes.get("rollout", 0),
            "rollouts_completed": len(self.rollouts),
            "rollouts_superseded": self.superseded,
            "rollout_s_without_fault": spread(clean),
            "rollout_s_with_fault": spread(faulted),
            "rebalances": rebalances,
            "rebalances_per_change": round(rebalances / changes, 2) if changes else None,
            "produced": sum(ledger.get("produced", 0) for ledger in ledgers),
            "lost": sum(ledger.get("lost", 0) for ledger in ledgers),
            "redeliveries": sum(ledger.get("redeliveries", 0) for ledger in ledgers),
            "failed_deliveries": sum(ledger.get("failed_deliveries", 0) for ledger in ledgers),
            "operator_processes": procs,
            "operator_exits": [
                {"t": t, "replica": replica, "code": code} for t, replica, code in self.exits
            ],
            "violations": len(self.violations),
        }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def _exits(exits: Sequence[dict[str, Any]]) -> str:
    told = ", ".join(f"{e['replica']} at {e['t']:.0f} s ({e['code']})" for e in exits)
    return f"{len(exits)} ({told}; each started again)" if exits else "0"


def table(figures: dict[str, Any], violations: Sequence[Violation], seed: int) -> str:
    """The run's figures as the bench prints them."""

    def seconds(block: dict[str, Any]) -> str:
        if not block["n"]:
            return "none"
        return f"n={block['n']} p50 {block['p50']} s, p99 {block['p99']} s, max {block['max']} s"

    faults = ", ".join(f"{k} {v}" for k, v in figures["faults"].items()) or "none"
    changes = ", ".join(f"{k} {v}" for k, v in figures["changes"].items()) or "none"
    rows = [
        ("faults injected", f"{sum(figures['faults'].values())} ({faults})"),
        ("changes made", f"{sum(figures['changes'].values())} ({changes})"),
        (
            "rollouts completed",
            f"{figures['rollouts_completed']} of {figures['rollouts_requested']} template changes"
            f" ({figures['rollouts_superseded']} superseded by a newer one)",
        ),
        ("rollout time, no fault", seconds(figures["rollout_s_without_fault"])),
        ("rollout time, with a fault", seconds(figures["rollout_s_with_fault"])),
        (
            "rebalances per change",
            f"{figures['rebalances_per_change']} ({figures['rebalances']} generations)",
        ),
        (
            "messages",
            f"{figures['produced']} produced, {figures['lost']} lost, "
            f"{figures['redeliveries']} redelivered, {figures['failed_deliveries']} not delivered"
            " to Kafka",
        ),
        ("operator exits, no fault", _exits(figures.get("operator_exits") or [])),
        ("invariant violations", str(len(violations))),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    lines += [f"  {violation.line(seed)}" for violation in violations]
    return "\n".join(lines)
