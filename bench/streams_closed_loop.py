"""The closed loop for a Kafka Streams group on the streams protocol (KIP-1071): cold starts of a
managed Streams fleet with the broker's initial delay, `rebalancer learn` on the history the
operator recorded, the group's own delay learned and applied by `spec.policy.learning.mode:
auto`, read back from the broker, and the same cold starts again, side by side.

    .venv/bin/python bench/streams_closed_loop.py --pods 8 --cold-starts 3
    .venv/bin/python bench/streams_closed_loop.py --pods 4 --cold-starts 1   # a quick look

One lab (bench/streams.py's: Apache Kafka with the 3 s initial delay, which streams groups get as
group.streams.initial.rebalance.delay.ms, Kubernetes' own control plane, the lab kubelet, the
operator with `--history-dir <state>/history`) and one fleet for the whole loop: a StatefulSet of
--pods pods of the example Streams application (examples/streams-app, GROUP_PROTOCOL=streams)
set up as bench/streams.py's `managed` strategy (Parallel, static members, the join gate), with
a ConsumerGroup of `spec.policy.protocol: streams`, rollouts enabled, `groupConfigs: {streams:
{}}` (the block learning may write to; nothing set) and learning off. The StatefulSet is created
with 0 replicas and the input holds --records records before the first cold start.

0. warm-up: --warm-ups cold starts (default 1), measured and written with phase `warm-up` but
   left out of the comparison: the first start of a new application creates its streams group
   and internal topics, which no later start repeats (measured at N=4: the epoch rose 6 on the
   first start, 4 on each later one), and its joins are history like any other start's;
1. before: --cold-starts cold starts, each replicas 0 -> N once the streams group is Empty (its
   static members' sessions expired), so each meets the group's initial delay;
2. `rebalancer learn --master local[2]` on <state>/history (bench/closed_loop.py's run_learn);
3. spec.policy.learning.mode auto: the loop waits until spec.policy.groupConfigs.streams holds
   the learned initialRebalanceDelayMs and status.settings.perGroupConfigs.configs shows the
   broker's DescribeConfigs read-back of streams.initial.rebalance.delay.ms, with source
   group-config, at that value;
4. after: the same cold starts again.

Each cold start is measured as bench/streams.py measures its cold start (bench/streams_timeline.py
on the instances' own events): the group epoch's rise (as `rebalances`), time to Stable from the
scale-up, unowned task-seconds (one sub-topology over one input topic: a task is an input
partition, so these are the closed loop's unowned partition-seconds), tasks moved, stores
restored. Every cold start is a line of --out; the table, verdict and plot are
bench/closed_loop_summary.py's. When no delay is recommended, or the learned one is the broker's
default, the loop says so and why (the recommendation's evidence and notes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import closed_loop_summary
from bench_labs import bench_lab, stop_on_sigterm
from closed_loop import GROUP, describe, learning_decided, recommendation_of, run_learn
from rebalancer.structs.gates import GateHold
from rebalancer_lab.running import Lab
from rebalancer_lab.streams_example import example_jar
from rollouts import append_line, say
from streams import (
    KAFKA_DELAY_MS,
    KEYS_PER_POD,
    NS,
    Bench,
    Cell,
    Run,
    consumer_group,
    draw_seed_of,
    fill_input,
    jittered,
    record,
    setup_for,
    workload,
)

DELAY_CONFIG = "streams.initial.rebalance.delay.ms"
GROUP_SOURCE = "group-config"
SCENARIO = "cold-start"
EXTRA_FIGURES = (("tasks_moved", "tasks moved"), ("restored_tasks", "stores restored"))

# -- pure: what the loop reads and decides -------------------------------------------------------


def loop_policy(body: dict[str, Any]) -> dict[str, Any]:
    """bench/streams.py's managed ConsumerGroup with the streams block turned on (nothing set, so
    the broker's default delay holds) and learning off."""
    policy = body["spec"]["policy"]
    policy["groupConfigs"] = {"streams": {}}
    policy["learning"] = {"mode": "off"}
    return body


def delay_read_back(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The broker's read-back of the group's delay in status.settings.perGroupConfigs: its
    value, source and the configs' state; None while status shows none."""
    configs = (status.get("settings") or {}).get("perGroupConfigs") or {}
    entry = (configs.get("configs") or {}).get(DELAY_CONFIG)
    if not isinstance(entry, Mapping):
        return None
    state = configs.get("state")
    return {"value": entry.get("value"), "source": entry.get("source"), "state": state}


def spec_delay(policy: Mapping[str, Any]) -> int | None:
    streams = (policy.get("groupConfigs") or {}).get("streams") or {}
    value = streams.get("initialRebalanceDelayMs")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def delay_in_force(policy: Mapping[str, Any], status: Mapping[str, Any], delay_ms: int) -> bool:
    """Whether the spec asks for `delay_ms` and the broker read it back as the group's own."""
    shown = delay_read_back(status)
    if spec_delay(policy) != delay_ms or shown is None:
        return False
    return shown == {"value": str(delay_ms), "source": GROUP_SOURCE, "state": "applied"}


def learned_delay(recommendation: Mapping[str, Any] | None) -> int | None:
    """The group's own delay the run recommended, as the operator applies it (whole ms)."""
    if recommendation is None or recommendation.get("delayScope") != "group":
        return None
    value = recommendation.get("initialRebalanceDelayMs")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def why_unchanged(
    recommendation: Mapping[str, Any] | None, summary: Mapping[str, Any], default_ms: int
) -> str | None:
    """Why the after phase runs the before phase's delay, with the evidence; None when the
    learned delay differs from the broker's default."""
    delay = learned_delay(recommendation)
    if delay is not None and delay != default_ms:
        return None
    found = describe(dict(recommendation) if recommendation else None, dict(summary))
    if recommendation is None:
        return f"nothing was recommended for the group: {found}"
    if delay is None:
        scope = recommendation.get("delayScope")
        return f"no delay of the group's own was recommended (delayScope {scope}): {found}"
    return f"the learned delay is the broker's default {default_ms} ms: {found}"


def measured_of(run: Run) -> dict[str, Any]:
    """A cold start's figures under bench/closed_loop_summary.py's names, and the Streams ones."""
    stable = run.stable_s
    return {
        "rebalances": run.epochs,
        "time_to_stable_s": None if stable is None else round(stable, 3),
        "unowned_ps": round(run.figures.unowned_task_s, 2),
        "tasks_moved": run.figures.tasks_moved,
        "restored_tasks": run.figures.restored_tasks,
        "restore_s": round(run.figures.restore_s, 2),
        "operator_rebalances": run.operator_rebalances,
        "settled": run.settled,
    }


def extra_rows(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    """Before and after of the Streams figures the closed-loop table has not: median and range."""
    rows = []
    for key, label in EXTRA_FIGURES:
        shown = []
        for phase in closed_loop_summary.PHASES:
            values = [
                float(line["measured"][key])
                for line in lines
                if line.get("phase") == phase and line["measured"].get(key) is not None
            ]
            if not values:
                shown.append(f"{phase} -")
                continue
            low, high = min(values), max(values)
            shown.append(f"{phase} {statistics.median(values):g} [{low:g}-{high:g}]")
        rows.append(f"{label}: {', '.join(shown)}")
    return rows


# -- the fleet on the lab ------------------------------------------------------------------------


class StreamsLoop:
    def __init__(self, lab: Lab, args: argparse.Namespace) -> None:
        self.lab = lab
        self.args = args
        self.bench = Bench(lab, args)
        self.name = f"sloop-{uuid.uuid4().hex[:5]}"
        self.cell = Cell("streams", SCENARIO, args.pods, args.partitions, args.jitter)
        self.setup = setup_for(self.cell, "managed", None, args.gate_holds)

    def cg(self) -> dict[str, Any]:
        return dict(self.bench.custom.get_namespaced_custom_object(*GROUP, self.name))

    def policy(self) -> dict[str, Any]:
        return dict((self.cg().get("spec") or {}).get("policy") or {})

    def status(self) -> dict[str, Any]:
        return self.bench.status(self.name)

    def scale(self, replicas: int) -> None:
        patch = {"spec": {"replicas": replicas}}
        self.bench.apps.patch_namespaced_stateful_set(self.name, NS, patch)

    def set_up(self) -> None:
        """The input, the ConsumerGroup and the StatefulSet at 0 replicas."""
        keys = self.args.pods * KEYS_PER_POD
        topic = f"{self.name}-input"
        fill_input(self.lab.bootstrap, topic, self.args.partitions, self.args.records, keys)
        body = loop_policy(consumer_group(self.lab, self.cell, self.setup, self.name))
        self.bench.custom.create_namespaced_custom_object(*GROUP, body)
        sts = workload(self.lab, self.cell, self.setup, self.name, 0)
        seed = draw_seed_of(self.cell, 0)
        sts["spec"]["template"]["metadata"]["annotations"] = jittered(self.args.jitter, seed)
        self.bench.apps.create_namespaced_stateful_set(NS, sts, _preload_content=False)
        say(f"  {self.name}: {self.args.pods} pods at most, policy {json.dumps(self.policy())}")

    def empty(self) -> None:
        """Scale to 0; wait until no pod is left and the operator sees the streams group Empty
        (its static members' sessions expired), so the next start meets the initial delay."""
        self.scale(0)

        def gone() -> bool:
            if self.bench.pods(self.name):
                return False
            group = self.status().get("group") or {}
            return group.get("state") in ("Empty", "Dead") and not group.get("members")

        self.bench.wait(gone, 240, f"{self.name}: the group Empty")
        time.sleep(3)

    def cold_start(self, phase: str, index: int) -> Run:
        self.empty()
        before = self.status()
        previous = (before.get("rollout") or {}).get("rolloutId")
        started = time.time()
        self.scale(self.args.pods)
        settled = self.bench.settle(
            self.cell, self.setup, self.name, self.args.pods, started, "1", previous
        )
        moments = (started, time.time(), settled, before)
        say(f"  {phase} cold start {index}:")
        return self.bench.measured(
            self.cell, "managed", index, self.setup, self.name, moments, started
        )

    def apply(self, delay_ms: int | None) -> dict[str, Any]:
        """learning.mode auto; status.learning once decided, and (a delay learned) once the
        spec holds it and the broker read it back as the group's own."""
        policy_before = self.policy()
        patch = {"spec": {"policy": {"learning": {"mode": "auto"}}}}
        self.bench.custom.patch_namespaced_custom_object(*GROUP, self.name, patch)
        self.bench.wait(lambda: learning_decided(self.status()) is not None, 180, "status.learning")
        learning = dict(self.status().get("learning") or {})
        say(f"  status.learning: {json.dumps(learning, sort_keys=True)}")
        in_force = False
        if delay_ms is not None:
            in_force = self.bench.wait(
                lambda: delay_in_force(self.policy(), self.status(), delay_ms),
                180,
                f"{DELAY_CONFIG}={delay_ms} read back from the broker",
            )
        read_back = delay_read_back(self.status())
        say(f"  status.settings.perGroupConfigs read-back: {json.dumps(read_back)}")
        return {
            "learning": learning,
            "policy_before": policy_before,
            "policy_after": self.policy(),
            "read_back": read_back,
            "in_force": in_force,
        }


# -- the loop ------------------------------------------------------------------------------------


def line_of(
    run: Run, phase: str, loop: StreamsLoop, recommendation: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        **record(run, loop.args.gate_holds),
        "loop": loop.name,
        "phase": phase,
        "index": run.repeat,
        "measured": measured_of(run),
        "policy": loop.policy(),
        "read_back": delay_read_back(loop.status()),
        "recommendation": recommendation,
        "load": [round(value, 2) for value in os.getloadavg()],
    }


def phases(warm_ups: int, cold_starts: int) -> list[tuple[str, int]]:
    """The loop's phases and their cold starts: the warm-ups first, which the comparison leaves
    out (bench/closed_loop_summary.py compares before and after only)."""
    found = [("warm-up", warm_ups)] if warm_ups > 0 else []
    return [*found, *((phase, cold_starts) for phase in closed_loop_summary.PHASES)]


def learn_and_apply(loop: StreamsLoop) -> tuple[dict[str, Any], str | None]:
    """`rebalancer learn`, then auto; the recommendation with what applying it did, and why the
    after phase runs the same delay (None when it does not)."""
    summary = run_learn(loop.lab.config.state_dir, loop.args.master)
    found = recommendation_of(summary, loop.name)
    say(f"  the recommendation: {describe(found, summary)}")
    print(json.dumps(found, sort_keys=True, indent=1))
    unchanged = why_unchanged(found, summary, KAFKA_DELAY_MS)
    if unchanged is not None:
        say(f"  NOTE: {unchanged}")
    applied = loop.apply(learned_delay(found))
    return {**(found or {}), "applied": applied}, unchanged


def run_loop(loop: StreamsLoop, args: argparse.Namespace) -> tuple[list[dict[str, Any]], Any]:
    """Before, learn and apply, after; each cold start appended to --out as it ends."""
    lines: list[dict[str, Any]] = []
    recommendation: dict[str, Any] | None = None
    unchanged: str | None = None
    for phase, count in phases(args.warm_ups, args.cold_starts):
        if phase == "after":
            recommendation, unchanged = learn_and_apply(loop)
        for index in range(1, count + 1):
            line = line_of(loop.cold_start(phase, index), phase, loop, recommendation)
            append_line(args.out, line)
            lines.append(line)
    return lines, unchanged


def print_report(lines: Sequence[dict[str, Any]], unchanged: str | None, args: Any) -> None:
    rows = [row for row in closed_loop_summary.compare(lines) if row.scenario == SCENARIO]
    loop = lines[0]["loop"] if lines else "-"
    print(f"\nStreams closed loop {loop}: N={args.pods}, P={args.partitions}, streams protocol, "
          f"jitter {args.jitter}, {args.cold_starts} cold start(s) per phase")  # fmt: skip
    print(closed_loop_summary.table(rows))
    print("\n".join(extra_rows(lines)))
    print(closed_loop_summary.verdict(rows, unchanged is None).text())
    recommendation = next((ln["recommendation"] for ln in lines if ln["recommendation"]), None)
    applied = (recommendation or {}).get("applied") or {}
    print(f"learned delay: {learned_delay(recommendation)} ms (broker default {KAFKA_DELAY_MS})")
    print(f"spec.policy.groupConfigs.streams after: "
          f"{(applied.get('policy_after') or {}).get('groupConfigs')}")  # fmt: skip
    print(f"broker read-back: {applied.get('read_back')} (in force: {applied.get('in_force')})")
    if unchanged is not None:
        print(f"NOTE: {unchanged}")
    if args.plot is not None and lines:
        title = f"Streams closed loop on Apache Kafka 4.4, N={args.pods}: the group's delay"
        written = closed_loop_summary.plot(rows, lines, args.plot, title, (SCENARIO,))
        if written is not None:
            say(f"plot: {written}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    example_jar(progress=say)
    lab = bench_lab(args.state_dir, "rebalancer-bench-streams-loop-", KAFKA_DELAY_MS)
    state = lab.config.state_dir
    stop_on_sigterm()
    lines: list[dict[str, Any]] = []
    unchanged: str | None = None
    try:
        lab.start(fleet=False, pods=True, jitter="0")
        say(f"lab up in {state}: Apache Kafka at {lab.bootstrap}; history in {state}/history")
        loop = StreamsLoop(lab, args)
        loop.set_up()
        lines, unchanged = run_loop(loop, args)
    finally:
        lab.stop()
    say(f"{len(lines)} cold start(s) appended to {args.out}; lab state and logs in {state}")
    print_report(lines, unchanged, args)
    return 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--pods", type=int, default=8, help="N, the fleet's replicas (default 8)")
    add("--partitions", type=int, default=None, help="partitions of the input (default 2N)")
    add("--cold-starts", type=int, default=3, help="cold starts per phase (default 3)")
    add("--warm-ups", type=int, default=1, help="cold starts before the measured ones (default 1)")
    add("--jitter", default="uniform(0,6)", help="each pod's start jitter (lab kubelet)")
    add("--records", type=int, default=24000, help="records in the input before the start")
    add("--gate-holds", choices=[hold.value for hold in GateHold], default=GateHold.POD.value)
    add("--master", default="local[2]", help="Spark master of `rebalancer learn`")
    add("--settle-timeout", type=float, default=300.0, help="seconds a cold start may take")
    add("--out", type=Path, default=Path(__file__).with_name("streams-closed-loop-results.jsonl"))
    add("--plot", default=str(Path(__file__).with_name("streams-closed-loop.png")))
    add("--state-dir", type=Path, default=None, help="the lab's state and logs (default: tmp)")
    args = parser.parse_args(argv)
    args.partitions = args.partitions or 2 * args.pods
    args.plot = Path(args.plot) if args.plot else None
    if args.pods < 1 or args.cold_starts < 1:
        parser.error("--pods and --cold-starts must be at least 1")
    if args.warm_ups < 0:
        parser.error("--warm-ups must be 0 or more")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
