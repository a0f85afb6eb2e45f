"""Identity slots: a Deployment's new pods take over the group.instance.id of pods that leave,
never share one, and keep the one they were given."""

from __future__ import annotations

from dataclasses import replace

from rebalancer.planning.identity_slots import decode_slots, encode_slots, hand_out
from rebalancer.planning.rollout_actions import DeletePods, OpenGate
from rebalancer.planning.rollout_plans import RolloutSetup, resolve_static
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.planning.workload_views import view_workload
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GateState
from rebalancer.structs.rollout_policy import RolloutPolicy, StaticMembership
from rebalancer.structs.snapshots import GroupSnapshot
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import PodView, WorkloadView

T0 = 1_700_000_000.0
SETUP = RolloutSetup(
    RolloutPolicy(settle_seconds=1, max_batch_size=2), BrokerProfile.APACHE_KAFKA, 3.0
)


def pod(
    name: str,
    *,
    updated: bool,
    slot: str | None = None,
    gate: GateState = GateState.PASSED,
    terminating: bool = False,
    created: float = T0,
) -> PodView:
    return PodView(
        name=name,
        uid=f"uid-{name}",
        ordinal=None,
        updated=updated,
        gate=gate,
        gate_batch=None,
        held_at=None,
        ready=gate.through,
        terminating=terminating,
        created_at=created,
        instance_id=slot,
    )


def deployment(pods: list[PodView], replicas: int = 3) -> WorkloadView:
    return WorkloadView(
        kind=WorkloadKind.DEPLOYMENT,
        name="web",
        replicas=replicas,
        current_replicas=len(pods),
        updated_replicas=sum(p.updated for p in pods),
        ready_replicas=sum(p.ready for p in pods),
        update_revision="new",
        current_revision="old",
        generation=2,
        observed_generation=2,
        max_surge=replicas,
        max_unavailable=0,
        gate_installed=True,
        identity_slots=True,
        pods=tuple(pods),
    )


def old_fleet(count: int = 3) -> list[PodView]:
    return [
        pod(f"old-{k}", updated=False, slot=f"web-{k}", created=T0 - 100 + k) for k in range(count)
    ]


def waiting(*names: str) -> list[PodView]:
    return [pod(name, updated=True, gate=GateState.WAITING, created=T0) for name in names]


def test_a_new_pod_takes_the_slot_a_terminating_pod_released_before_swapping_any() -> None:
    fleet = old_fleet()
    fleet[1] = replace(fleet[1], terminating=True)
    new = waiting("new-a")
    handout = hand_out(deployment(fleet + new), new, {}, swap=True)
    assert handout.slots == (("new-a", "web-1"),)
    assert handout.retiring == ()


def test_without_a_released_slot_an_old_pod_is_retired_for_its_slot_oldest_first() -> None:
    fleet = old_fleet()
    new = waiting("new-a", "new-b")
    handout = hand_out(deployment(fleet + new), new, {}, swap=True)
    assert handout.slots == (("new-a", "web-0"), ("new-b", "web-1"))
    assert [p.name for p in handout.retiring] == ["old-0", "old-1"]


def test_no_two_pods_get_one_slot_and_a_pod_without_one_waits() -> None:
    fleet = old_fleet()
    new = waiting("new-a", "new-b", "new-c", "new-d")
    handout = hand_out(deployment(fleet + new), new, {}, swap=True)
    slots = [slot for _, slot in handout.slots]
    assert sorted(slots) == ["web-0", "web-1", "web-2"]
    assert "new-d" not in handout.pods  # nothing left to take over: it waits


def test_a_pod_keeps_the_slot_it_was_given_even_if_the_observation_predates_the_patch() -> None:
    fleet = old_fleet()
    fleet[0] = replace(fleet[0], terminating=True)
    new = waiting("new-a", "new-b")
    # new-a was given web-2 a step ago (its old pod deleted then; the view has not caught up).
    remembered = {"new-a": "web-2"}
    handout = hand_out(deployment(fleet + new), new, remembered, swap=True)
    assert dict(handout.slots) == {"new-a": "web-2", "new-b": "web-0"}
    assert handout.retiring == ()


def test_what_a_pod_carries_wins_over_what_was_remembered() -> None:
    new = [replace(waiting("new-a")[0], instance_id="web-1")]
    handout = hand_out(deployment(new), new, {"new-a": "web-0"}, swap=True)
    assert handout.slots == (("new-a", "web-1"),)


def test_a_cold_start_fills_the_lowest_slots_and_never_swaps() -> None:
    new = waiting("a", "b", "c")
    handout = hand_out(deployment(new), new, {}, swap=False)
    assert dict(handout.slots) == {"a": "web-0", "b": "web-1", "c": "web-2"}
    # A scale-up past the replica count goes on above it rather than wait.
    more = waiting("d")
    taken = [replace(p, gate=GateState.PASSED, instance_id=f"web-{k}") for k, p in enumerate(new)]
    handout = hand_out(deployment(taken + more), more, {}, swap=False)
    assert handout.slots == (("d", "web-3"),)


def test_slots_survive_the_round_trip_through_status() -> None:
    slots = {"new-a": "web-2", "new-b": "web-0"}
    state = RolloutState(slots=encode_slots(slots))
    again = RolloutState.from_status(state.to_status())
    assert decode_slots(again.slots) == slots


def test_a_template_that_reads_the_slot_annotation_asks_for_slots() -> None:
    env = [
        {
            "name": "KAFKA_GROUP_INSTANCE_ID",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['rebalancer.dev/instance-id']"}
            },
        }
    ]
    body = {
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": env}]}}},
    }
    assert view_workload(body, []).identity_slots
    body["spec"]["template"]["spec"]["containers"][0]["env"] = []  # type: ignore[index]
    assert not view_workload(body, []).identity_slots


def test_a_deployment_taking_slots_counts_as_static_unless_disabled() -> None:
    view = deployment(old_fleet())
    assert resolve_static(RolloutPolicy(), view, None)
    off = RolloutPolicy(static_membership=StaticMembership.DISABLED)
    assert not resolve_static(off, view, None)
    assert not resolve_static(RolloutPolicy(), replace(view, identity_slots=False), None)


def group(members: int, generation: int = 5) -> GroupSnapshot:
    return GroupSnapshot(
        state="Stable",
        protocol="consumer",
        assignor="range",
        generation=generation,
        members=members,
        member_details=(),
        assigned_partitions=12,
        total_partitions=12,
        lag=0,
        observed_at=T0 + 3600,
    )


def test_the_planner_swaps_each_waiting_new_pod_for_an_old_one_in_one_step() -> None:
    new = waiting("new-a", "new-b")
    view = deployment(old_fleet() + new)
    observation = Observation(SETUP, view, group(3))
    state, actions = step(RolloutState(), observation, T0)
    # Planned, then opened at the next step.
    if state.phase is RolloutPhase.PLANNING or state.phase is RolloutPhase.BATCH_OPENING:
        state, actions = step(state, observation, T0 + 1)
    assert state.kind is RolloutKind.ROLLING_UPDATE
    assert state.mechanism is Mechanism.GATE_QUEUE and state.static
    opens = [a for a in actions if isinstance(a, OpenGate)]
    deletes = [a for a in actions if isinstance(a, DeletePods)]
    assert len(opens) == 1 and dict(opens[0].slots) == {"new-a": "web-0", "new-b": "web-1"}
    assert deletes and deletes[0].pods == ("old-0", "old-1")
    # The deletes go before the opens: the old consumers stop as the new ones start.
    assert actions.index(deletes[0]) < actions.index(opens[0])
    assert decode_slots(state.slots) == {"new-a": "web-0", "new-b": "web-1"}
    assert state.phase is RolloutPhase.BATCH_JOINING


def test_an_old_pod_still_listed_after_its_slot_went_to_a_new_pod_is_not_retired_again() -> None:
    # new-a took old-0's slot a step ago; old-0's deletion is not in this observation yet.
    fleet = old_fleet()
    new = waiting("new-a", "new-b")
    handout = hand_out(deployment(fleet + new), new[1:], {"new-a": "web-0"}, swap=True)
    assert handout.slots == (("new-b", "web-1"),)
    assert [p.name for p in handout.retiring] == ["old-1"]


def test_a_swap_batch_takes_a_new_pod_in_as_soon_as_one_of_its_pods_is_ready() -> None:
    fleet = old_fleet(4)
    first = waiting("new-a", "new-b")
    view = deployment(fleet + first, replicas=4)
    observation = Observation(SETUP, view, group(4))
    state, _ = step(RolloutState(), observation, T0)
    if state.phase is not RolloutPhase.BATCH_JOINING:
        state, _ = step(state, observation, T0 + 1)
    assert state.opened == ("new-a", "new-b")
    # new-a is Ready under web-0 (old-0 gone); new-b still starting; new-c reached its gate.
    ready = replace(first[0], gate=GateState.PASSED, ready=True, instance_id="web-0")
    starting = replace(first[1], gate=GateState.OPEN, instance_id="web-1")
    later = [fleet[2], fleet[3], ready, starting, *waiting("new-c")]
    state, actions = step(state, Observation(SETUP, deployment(later, 4), group(4)), T0 + 3)
    assert state.phase is RolloutPhase.BATCH_JOINING and state.batch == 1
    opens = [a for a in actions if isinstance(a, OpenGate)]
    assert [dict(a.slots) for a in opens] == [{"new-c": "web-2"}]
    deletes = [a for a in actions if isinstance(a, DeletePods)]
    assert [d.pods for d in deletes] == [("old-2",)]
    assert state.opened == ("new-a", "new-b", "new-c")
    # The window is full (new-b and new-c in flight): a fourth pod waits.
    full = [fleet[3], ready, starting, replace(waiting("new-c")[0], gate=GateState.OPEN)]
    full.append(waiting("new-d")[0])
    _, actions = step(state, Observation(SETUP, deployment(full, 4), group(4)), T0 + 4)
    assert not [a for a in actions if isinstance(a, OpenGate) and "new-d" in a.pods]


def test_slots_the_old_pods_were_given_by_an_earlier_rollout_do_not_block_their_swap() -> None:
    fleet = old_fleet()
    new = waiting("new-a")
    remembered = {"old-0": "web-0", "old-1": "web-1", "old-2": "web-2"}
    handout = hand_out(deployment(fleet + new), new, remembered, swap=True)
    assert handout.slots == (("new-a", "web-0"),)
    assert [p.name for p in handout.retiring] == ["old-0"]
