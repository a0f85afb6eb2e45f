"""Another writer changes the workload under a rollout: the planner's part.

A partition moved by another field manager is set back once and said; moved again, it is left to
that writer for the rest of the rollout (no fight), and the batches go on at their gates; once
no manager but the operator's owns the field, it is taken back at rest and parked again. A new
template or other replicas supersede the rollout, which status and an Event say. The real-cluster
side is tests/operator/reliability/test_cluster_faults.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest
from tests.planning.rollout_world import T0, World, drive, roundtrip, setup_for, with_pods

from rebalancer.planning.rollout_actions import (
    Action,
    ForeignWrite,
    OpenGate,
    SetStatefulSetPartition,
)
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollouts import step
from rebalancer.planning.workload_views import view_workload
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.workloads import FIELD_MANAGER

Phase = RolloutPhase


def rolling(replicas: int = 3) -> tuple[World, RolloutSetup]:
    """A parked StatefulSet whose template moved to r2; batches of one."""
    world = with_pods(World(replicas=replicas, partition=replicas), T0)
    world.partition_writer = FIELD_MANAGER
    world.revision = "r2"
    return world, setup_for(RolloutPolicy(max_batch_size=1, settle_seconds=1))


def run(
    world: World,
    setup: RolloutSetup,
    state: RolloutState,
    start: float,
    until: Callable[[RolloutState], bool],
    **options: object,
) -> tuple[RolloutState, float]:
    """drive() from `start` until `until`; the state and the time of the step that got there."""
    after, history = drive(world, setup, start=start, state=state, until=until, **options)  # type: ignore[arg-type]
    return after, start + len(history) - 2


def at(phase: Phase, batch: int) -> Callable[[RolloutState], bool]:
    return lambda state: state.phase is phase and state.batch == batch


def ended(state: RolloutState) -> bool:
    return state.phase in (Phase.COMPLETED, Phase.FAILED)


def logged(world: World, kind: type[Action], since: float = 0.0) -> list[Action]:
    return [action for moment, action in world.log if moment >= since and isinstance(action, kind)]


def opened(world: World) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.batch.split("/")[1], a.pods) for a in logged(world, OpenGate)]  # type: ignore[attr-defined]


def test_a_partition_lowered_mid_batch_is_set_back_once_and_said() -> None:
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    # Someone applies partition 0: the controller replaces orders-1 ahead of its batch.
    world.set_partition(0, "someone-else", now + 0.5)
    state, now = run(world, setup, state, now + 1, ended)
    assert state.phase is Phase.COMPLETED, state.message
    [said] = logged(world, ForeignWrite)
    assert isinstance(said, ForeignWrite)
    assert said.reason == "PartitionOverridden" and said.warning
    assert "someone-else set spec.updateStrategy.rollingUpdate.partition to 0" in said.message
    assert "during batch 1 of 3; set back to 2" in said.message
    assert "replaced orders-1 meanwhile, which waits at its gate for its own batch" in said.message
    # Set back, then lowered batch by batch as planned, then parked.
    partitions = [a.partition for a in logged(world, SetStatefulSetPartition)]  # type: ignore[attr-defined]
    assert partitions == [2, 2, 1, 0, 3]
    # The pod the controller took early waited for its own batch: no batch skipped or repeated.
    assert opened(world) == [("1", ("orders-2",)), ("2", ("orders-1",)), ("3", ("orders-0",))]
    assert world.incarnations == {"orders-0": 2, "orders-1": 2, "orders-2": 2}
    assert {pod.revision for pod in world.pods.values()} == {"r2"}
    assert state.members_joined == 3
    assert state.contested_by == "someone-else" and not state.yielded
    assert state.message is not None and said.message in state.message


def test_a_writer_that_keeps_moving_the_partition_is_left_to_it() -> None:
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    world.set_partition(0, "gitops", now + 0.5)
    state, now = run(world, setup, state, now + 1, lambda s: s.contested_by is not None)
    assert world.partition == 2 and world.partition_writer == FIELD_MANAGER
    # It applies its manifest again.
    world.set_partition(0, "gitops", now + 0.5)
    yielded_at = now + 1
    # Through status and back on the way (an operator restart): the truce is remembered.
    state, now = run(world, setup, state, yielded_at, ended, restart_at=3)
    assert state.phase is Phase.COMPLETED, state.message
    reasons = [a.reason for a in logged(world, ForeignWrite)]  # type: ignore[attr-defined]
    assert reasons == ["PartitionOverridden", "PartitionContested"]
    contested = logged(world, ForeignWrite)[-1]
    assert isinstance(contested, ForeignWrite) and contested.warning
    assert "leaves the partition to gitops for the rest of this rollout" in contested.message
    # From then on the operator never wrote the partition, nor parked it at the end.
    assert not logged(world, SetStatefulSetPartition, since=yielded_at)
    assert world.partition == 0 and world.partition_writer == "gitops"
    assert state.yielded and not state.parked
    # Every batch still opened once, in order, at the gates.
    assert opened(world) == [("1", ("orders-2",)), ("2", ("orders-1",)), ("3", ("orders-0",))]
    assert {pod.revision for pod in world.pods.values()} == {"r2"}
    # At rest it stays so: no parking that would start the quarrel again.
    later, actions = step(state, world.observe(setup, now + 30), now + 30)
    assert not [a for a in actions if isinstance(a, SetStatefulSetPartition)]
    assert later.phase is Phase.COMPLETED


def test_the_next_rollout_takes_the_partition_back_and_parks_it_again() -> None:
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    world.set_partition(0, "gitops", now + 0.5)
    state, now = run(world, setup, state, now + 1, lambda s: s.contested_by is not None)
    world.set_partition(0, "gitops", now + 0.5)
    state, now = run(world, setup, state, now + 1, ended)
    assert state.yielded
    world.revision = "r3"  # the writer went away; the next template
    state, now = run(world, setup, state, now + 1, lambda s: s.phase is Phase.BATCH_OPENING)
    assert not state.yielded and state.contested_by is None
    state, now = run(world, setup, state, now + 1, ended)
    assert state.phase is Phase.COMPLETED and state.parked
    assert world.partition == 3 and world.partition_writer == FIELD_MANAGER


def yielded_to(writer: str) -> tuple[World, RolloutSetup, RolloutState, float]:
    """A rollout of three whose partition `writer` moved twice: left to it, Completed."""
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    world.set_partition(0, writer, now + 0.5)
    state, now = run(world, setup, state, now + 1, lambda s: s.contested_by is not None)
    world.set_partition(0, writer, now + 0.5)
    state, now = run(world, setup, state, now + 1, ended)
    assert state.phase is Phase.COMPLETED and state.yielded, state
    return world, setup, state, now


def test_a_partition_left_to_a_writer_is_taken_back_once_the_writer_drops_it() -> None:
    world, setup, state, now = yielded_to("gitops")
    # At rest, while gitops still owns the field, nothing is parked.
    resting_from = now + 1
    state, now = run(world, setup, state, resting_from, lambda _: False, seconds=60)
    assert state.yielded and not state.parked
    assert not logged(world, SetStatefulSetPartition, since=resting_from)
    # Its manifest no longer sets the partition: the field is dropped, nobody owns it.
    world.drop_partition(now + 0.5)
    back_from = now + 1
    state, now = run(world, setup, state, back_from, lambda s: s.parked)
    [taken] = logged(world, ForeignWrite, since=back_from)
    assert isinstance(taken, ForeignWrite)
    assert taken.reason == "PartitionTakenBack" and not taken.warning
    assert (
        "gitops no longer owns spec.updateStrategy.rollingUpdate.partition "
        "(no field manager owns it in managedFields; it is 0)" in taken.message
    ), taken.message
    assert "parks the StatefulSet at 3" in taken.message, taken.message
    assert not state.yielded and state.parked and state.contested_by == "gitops"
    # Status says it: after what the rollout said of the writer, that it was taken back.
    assert state.message is not None
    assert state.message.index("leaves the partition to gitops") < state.message.index(
        taken.message
    )
    assert roundtrip(state).yielded is False
    assert world.partition == 3 and world.partition_writer == FIELD_MANAGER
    # Said once: the steps after it at rest write and say nothing more.
    quiet_from = now + 1
    state, now = run(world, setup, state, quiet_from, lambda _: False, seconds=30)
    assert not logged(world, ForeignWrite, since=quiet_from)
    assert not logged(world, SetStatefulSetPartition, since=quiet_from)
    # The next template rolls in the operator's batches, nothing replaced before its batch.
    lives = dict(world.incarnations)
    world.revision = "r3"
    rolled_from = now + 1
    state, now = run(world, setup, state, rolled_from, ended)
    assert state.phase is Phase.COMPLETED and not state.yielded, state.message
    partitions = [
        a.partition  # type: ignore[attr-defined]
        for a in logged(world, SetStatefulSetPartition, since=rolled_from)
    ]
    assert partitions == [2, 1, 0, 3], partitions
    assert not logged(world, ForeignWrite, since=rolled_from)
    assert {pod: world.incarnations[pod] - lives[pod] for pod in lives} == {
        "orders-0": 1,
        "orders-1": 1,
        "orders-2": 1,
    }
    assert {pod.revision for pod in world.pods.values()} == {"r3"}


def test_a_partition_is_not_taken_back_while_its_ownership_is_unknown() -> None:
    """Without managedFields the view cannot tell a writer gone from one still there: the
    partition stays with the writer it was left to."""
    world, setup, state, now = yielded_to("gitops")
    world.drop_partition(now + 0.5)
    world.fields_listed = False
    since = now + 1
    state, now = run(world, setup, state, since, lambda _: False, seconds=60)
    assert state.yielded and not state.parked
    assert not logged(world, ForeignWrite, since=since)
    assert not logged(world, SetStatefulSetPartition, since=since)


def test_a_partition_another_manager_takes_over_stays_left_to_writers() -> None:
    """The writer dropped the field but another took it (a kubectl patch): still not the
    operator's alone."""
    world, setup, state, now = yielded_to("gitops")
    world.set_partition(1, "kubectl-patch", now + 0.5)
    since = now + 1
    state, now = run(world, setup, state, since, lambda _: False, seconds=60)
    assert state.yielded and not logged(world, ForeignWrite, since=since)
    assert not logged(world, SetStatefulSetPartition, since=since)


def test_a_dropped_partition_and_a_new_template_in_one_apply_say_both() -> None:
    """One apply drops the partition and changes the template: the partition is taken back
    and the new template rolls out; the Event comes first."""
    world, setup, state, now = yielded_to("gitops")
    world.revision = "r3"
    world.drop_partition(now + 0.5)
    since = now + 1
    state, now = run(world, setup, state, since, ended)
    assert state.phase is Phase.COMPLETED and not state.yielded, state.message
    [taken] = logged(world, ForeignWrite, since=since)
    assert taken.reason == "PartitionTakenBack"  # type: ignore[attr-defined]
    assert {pod.revision for pod in world.pods.values()} == {"r3"}
    assert world.partition == 3 and world.partition_writer == FIELD_MANAGER


@pytest.mark.parametrize("lost", range(0, 40, 3))
def test_a_partition_the_operator_set_before_losing_its_state_is_not_another_writers(
    lost: int,
) -> None:
    """A crash between acting and saving leaves the partition ahead of the saved state: the
    value alone would look overridden; its writer says it was the operator."""
    world, setup = rolling()
    state, _ = drive(world, setup, seconds=300, until=ended, crash_at=lost)
    assert state.phase is Phase.COMPLETED, (lost, state.message)
    assert not logged(world, ForeignWrite), lost


def test_a_new_template_mid_rollout_supersedes_it_and_says_so() -> None:
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    first = state.rollout_id
    # A new template while batch 1 is out; the controller replaces orders-2 (at the partition)
    # again at once.
    world.revision, world.template_writer = "r3", "kubectl-patch"
    world.pods["orders-2"].deleted_at = now + 0.5
    state, now = run(world, setup, state, now + 1, ended)
    assert state.phase is Phase.COMPLETED, state.message
    assert state.rollout_id != first
    [said] = logged(world, ForeignWrite)
    assert isinstance(said, ForeignWrite)
    assert said.reason == "RolloutSuperseded" and not said.warning
    assert f"rollout {first} stopped at batch 1 of 3" in said.message
    assert "the pod template was changed by kubectl-patch (revision r2 to r3)" in said.message
    assert {pod.revision for pod in world.pods.values()} == {"r3"}
    # orders-2, being replaced by its controller as the new rollout planned, keeps its place:
    # the new rollout's first batch, then the others in ordinal order, one at a time.
    assert state.batches == 3 and state.members_joined == 3
    assert opened(world)[-3:] == [("1", ("orders-2",)), ("2", ("orders-1",)), ("3", ("orders-0",))]
    assert state.message is not None and said.message in state.message


def test_the_writers_are_read_from_managed_fields() -> None:
    def entry(manager: str, time: str, fields: dict[str, object], **more: str) -> dict[str, object]:
        return {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields, **more}

    partition = {"f:spec": {"f:updateStrategy": {"f:rollingUpdate": {"f:partition": {}}}}}
    template = {"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}
    body = {
        "kind": "StatefulSet",
        "metadata": {
            "name": "orders",
            "managedFields": [
                entry("kubectl-client-side-apply", "2026-01-01T00:00:00Z", {**template}),
                entry("kubectl-patch", "2026-01-01T00:01:00Z", template),
                # The operator's own entry is newer and owns part of the template (its gate).
                entry(
                    FIELD_MANAGER,
                    "2026-01-01T00:02:00Z",
                    {"f:spec": {**template["f:spec"], **partition["f:spec"]}},
                ),
                entry(
                    "kubectl",
                    "2026-01-01T00:03:00Z",
                    {"f:spec": {"f:replicas": {}}},
                    subresource="scale",
                ),
                entry(
                    "kube-controller-manager",
                    "2026-01-01T00:04:00Z",
                    {"f:status": {}},
                    subresource="status",
                ),
            ],
        },
        "spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 3}}},
        "status": {},
    }
    view = view_workload(body, [])
    assert view.partition_writer == FIELD_MANAGER
    assert view.template_writer == "kubectl-patch"
    assert view.replicas_writer == "kubectl"
    assert view.partition_owners == (FIELD_MANAGER,)
    bare = view_workload({**body, "metadata": {"name": "orders"}}, [])
    assert bare.partition_writer is None and bare.partition_owners is None
    # Two appliers of the same value own it together; one that dropped it owns nothing.
    fields = body["metadata"]["managedFields"]  # type: ignore[index]
    shared = {
        **body,
        "metadata": {
            "name": "orders",
            "managedFields": [*fields, entry("gitops", "2026-01-01T00:05:00Z", partition)],
        },
    }
    assert view_workload(shared, []).partition_owners == ("gitops", FIELD_MANAGER)
    dropped = {"name": "orders", "managedFields": [fields[0], fields[1]]}
    assert view_workload({**body, "metadata": dropped}, []).partition_owners == ()


def test_a_partition_is_set_back_only_once_its_controller_has_acted_on_it() -> None:
    # Woken by the other writer's change itself (the workload watch), the planner can look
    # before the StatefulSet controller has: the pod it is about to delete is still there, and
    # a partition set back at that moment brought that pod back at the old revision, to be
    # replaced again in its own batch.
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    seen = world.observe(setup, now + 0.1)
    assert seen.workload is not None
    moved = replace(
        seen.workload,
        partition=0,
        partition_writer="someone-else",
        generation=2,
        observed_generation=1,
    )
    waited, actions = step(state, replace(seen, workload=moved), now + 0.1)
    assert not [a for a in actions if isinstance(a, SetStatefulSetPartition | ForeignWrite)]
    assert waited.contested_by is None
    acted = replace(moved, observed_generation=2)
    after, actions = step(waited, replace(seen, workload=acted), now + 0.2)
    assert SetStatefulSetPartition(2, acted.resource_version) in actions
    assert after.contested_by == "someone-else"


def test_a_set_back_outrun_by_the_controller_waits_for_the_pod_it_took() -> None:
    # The controller's pass over the other writer's partition had not seen orders-2 Ready yet,
    # so it took no pod; the pass that does takes orders-1 between the planner's look and its
    # set-back. Landed after that, the set-back brought orders-1 back at the old revision, to
    # be replaced again in its own batch; written on condition, it is refused instead.
    world, setup = rolling()
    state, now = run(world, setup, RolloutState(), T0, at(Phase.BATCH_JOINING, 1))
    world.set_partition(0, "someone-else", now + 0.5, acted=False)
    raced: list[float] = []

    def controller_pass(world: World, actions: Sequence[Action], moment: float) -> None:
        if not raced and any(isinstance(a, SetStatefulSetPartition) for a in actions):
            raced.append(moment)
            world.controller_pass(moment)

    world.meanwhile = controller_pass
    state, now = run(world, setup, state, now + 1, ended)
    assert raced, "the planner never set the partition back"
    assert state.phase is Phase.COMPLETED, state.message
    # Said once, after the pod the controller took was back, at the new revision.
    [said] = logged(world, ForeignWrite)
    assert isinstance(said, ForeignWrite) and said.reason == "PartitionOverridden"
    assert "set back to 2" in said.message
    assert "replaced orders-1 meanwhile, which waits at its gate for its own batch" in said.message
    # Every pod replaced once: orders-1 by the controller ahead of its batch, not twice.
    assert world.incarnations == {"orders-0": 2, "orders-1": 2, "orders-2": 2}
    assert opened(world) == [("1", ("orders-2",)), ("2", ("orders-1",)), ("3", ("orders-0",))]
    assert {pod.revision for pod in world.pods.values()} == {"r2"}
