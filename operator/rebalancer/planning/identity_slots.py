"""Identity slots: a Deployment's consumers take over their predecessors' group.instance.id.

A StatefulSet's pod keeps its name across a restart, so its name can be its group.instance.id,
and a replaced pod takes its predecessor's place in the group without a rebalance (KIP-345: a
static member that comes back within its session gets its old assignment). A Deployment's pods
get new names, so the name cannot be the identity. The operator hands out identities instead:
slots "<deployment>-<k>", each written on a pod's INSTANCE_ID_ANNOTATION in the same patch that
opens its gate. The consumer container starts after the gate and reads the annotation through
the downward API (the pod template says so: WorkloadView.identity_slots), so it joins as the
slot's static member.

The rules, so that no two live consumers ever share an identity and no identity is lost:

- a slot is held by every pod that carries it and is not terminating, and by every pod this
  rollout gave it to (remembered in the rollout's state, since an observation can predate the
  patch that wrote it);
- a pod is given a slot once and never another: a remembered slot is given again;
- a new pod takes, in this order: a free slot below the replica count (one a terminating or
  deleted pod released: the Deployment controller's own replacement under maxUnavailable); in a
  rolling update, the slot of an old pod still running, which the operator deletes in the same
  step (the swap that maxUnavailable: 0 needs, since the controller deletes no old pod before its
  replacement is Ready); else the lowest free slot above (a scale-up past the old slots).

The member the coordinator holds for a slot whose pod stopped keeps its partitions until the new
pod joins under the slot, or until its session expires: the session timeout must cover the time
from an old consumer's stop to its successor's join (the planner's static budget).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from rebalancer.structs.workloads import PodView, WorkloadView


def slot_name(workload: str, index: int) -> str:
    return f"{workload}-{index}"


def decode_slots(entries: Sequence[str]) -> dict[str, str]:
    """The rollout state's "pod=slot" entries as a mapping."""
    slots: dict[str, str] = {}
    for entry in entries:
        pod, _, slot = entry.partition("=")
        if pod and slot:
            slots[pod] = slot
    return slots


def encode_slots(slots: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(f"{pod}={slot}" for pod, slot in sorted(slots.items()))


def remembered_slots(entries: Sequence[str], workload: WorkloadView) -> dict[str, str]:
    """The rollout state's slots of pods that still exist (a pod that is gone holds none)."""
    present = {pod.name for pod in workload.pods}
    return {pod: slot for pod, slot in decode_slots(entries).items() if pod in present}


@dataclass(frozen=True)
class Handout:
    """Slots for pods about to be opened, and the old pods leaving to free theirs."""

    slots: tuple[tuple[str, str], ...]  # (pod, slot), in the order the pods were given
    retiring: tuple[PodView, ...] = ()

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(pod for pod, _ in self.slots)


def held_slots(workload: WorkloadView, remembered: Mapping[str, str]) -> set[str]:
    present = {pod.name: pod for pod in workload.pods if not pod.terminating}
    held = {pod.instance_id for pod in present.values() if pod.instance_id}
    held |= {slot for pod, slot in remembered.items() if pod in present}
    return held


def swappable(workload: WorkloadView) -> list[PodView]:
    """Old pods running a consumer under a slot, oldest first: each can hand its slot over."""
    return sorted(
        (
            pod
            for pod in workload.live_pods
            if not pod.updated and pod.instance_id and pod.gate.through
        ),
        key=lambda pod: (pod.created_at, pod.name),
    )


def hand_out(
    workload: WorkloadView,
    pods: Sequence[PodView],
    remembered: Mapping[str, str],
    *,
    swap: bool,
) -> Handout:
    """Slots for `pods` (in order), under the rules above; a pod that can have none this step
    is left out (it waits for a slot to be released)."""
    held = held_slots(workload, remembered)
    # Who holds each slot: an old pod whose slot another pod holds too was retired a step ago
    # (the observation predates its deletion) and has nothing left to hand over.
    holders: dict[str, set[str]] = {}
    for present in workload.pods:
        if present.instance_id and not present.terminating:
            holders.setdefault(present.instance_id, set()).add(present.name)
    for name, slot_given in remembered.items():
        holders.setdefault(slot_given, set()).add(name)
    below = (
        slot
        for slot in (slot_name(workload.name, k) for k in range(workload.replicas))
        if slot not in held
    )
    old = iter(
        [
            pod
            for pod in swappable(workload)
            if pod.instance_id and holders.get(pod.instance_id, set()) <= {pod.name}
        ]
        if swap
        else []
    )
    above = _free_above(workload, held)
    given: list[tuple[str, str]] = []
    retiring: list[PodView] = []
    for pod in pods:
        # What the pod carries wins: its consumer may have read it already.
        slot = pod.instance_id or remembered.get(pod.name)
        if slot is None:
            slot = next(below, None)
        if slot is None and swap:
            leaving = next(old, None)
            if leaving is not None and leaving.instance_id:
                slot = leaving.instance_id
                retiring.append(leaving)
        if slot is None and not swap:
            slot = next(above)
        if slot is None:
            continue
        held.add(slot)
        given.append((pod.name, slot))
    return Handout(tuple(given), tuple(retiring))


def _free_above(workload: WorkloadView, held: set[str]) -> Iterator[str]:
    for index in itertools.count(workload.replicas):
        slot = slot_name(workload.name, index)
        if slot not in held:
            yield slot
