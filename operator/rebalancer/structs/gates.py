"""The join gate's contract: the names the operator, the gate and the pod template agree on.

The gate is an init container that holds its pod until the operator writes `open` into the
pod's GATE_ANNOTATION. A pod is a fresh object each time a controller recreates it, so an open
gate never leaks into the pod's next incarnation the way a name listed elsewhere would.
"""

from __future__ import annotations

from enum import StrEnum

# The init container's name in a pod template; the operator finds gated pods by it.
GATE_CONTAINER = "rebalancer-gate"

# A gate that holds only the join: the gate runs as a native sidecar (an init container with
# restartPolicy Always), so the pod's consumer starts at once and does its start-up while the
# batch gathers; the consumer waits for JOIN_GATE_FILE in JOIN_GATE_DIR (a shared emptyDir)
# before it subscribes, which the gate writes when it is opened. Where a consumer takes seconds
# to start (a JVM, a state store to open), this takes the start-up off the batch's path.
JOIN_GATE_VOLUME = "rebalancer-join-gate"
JOIN_GATE_DIR = "/var/run/rebalancer/join-gate"
JOIN_GATE_FILE = "open"
# The identity slot, for a consumer that started before the operator wrote it (a gate that
# holds only the join): the gate writes the pod's INSTANCE_ID_ANNOTATION here when it opens.
JOIN_GATE_INSTANCE_ID_FILE = "instance-id"
# The environment variable that tells the pod's consumer where JOIN_GATE_FILE appears.
JOIN_GATE_ENV = "REBALANCER_JOIN_GATE"

# Written by the operator: `open` releases the pod.
GATE_ANNOTATION = "rebalancer.dev/gate"
GATE_OPEN = "open"
# Written by the operator with GATE_ANNOTATION: which rollout and batch opened the pod, so a
# restarted operator can tell a batch it opened from one it has still to open.
GATE_BATCH_ANNOTATION = "rebalancer.dev/gate-batch"
# Written by the operator with GATE_ANNOTATION: the wall-clock moment (epoch seconds) at which
# every gate of the batch lets go. The patches of a batch reach its pods over a spread of
# moments (API latency, a busy API server); a common moment a little ahead of the last patch
# makes the pods start together anyway.
GATE_OPEN_AT_ANNOTATION = "rebalancer.dev/gate-open-at"
# A gate waits for GATE_OPEN_AT_ANNOTATION at most this long: a moment further ahead means
# the clocks disagree, and an open gate should not hold its pod on a clock's word.
GATE_OPEN_AT_MAX_WAIT_SECONDS = 10.0
# Refreshed by the operator while it holds a pod: the gate counts the operator as present while
# this value keeps changing, and may bypass itself when it stops (policy).
GATE_HELD_ANNOTATION = "rebalancer.dev/gate-held-at"
# Written by the operator on a pod whose gate let it go without being opened (a bypass): when it
# noticed, so each bypass is told once (an Event, a metric) across operator restarts.
GATE_BYPASSED_ANNOTATION = "rebalancer.dev/gate-bypassed"

# Written by the operator with GATE_ANNOTATION on a pod of a workload whose consumers take their
# group.instance.id from it (downward API): the identity slot the pod joins the group under
# (planning.identity_slots). Never changed once written: the consumer read it when it started.
INSTANCE_ID_ANNOTATION = "rebalancer.dev/instance-id"
# The downward-API field path a pod template uses to pass INSTANCE_ID_ANNOTATION to its consumer.
INSTANCE_ID_FIELD_PATH = f"metadata.annotations['{INSTANCE_ID_ANNOTATION}']"

# Seconds without a sign of the operator after which a gate lets its pod start anyway, unless
# the ConsumerGroup or the operator (--gate-bypass-after-seconds, the chart's
# gate.bypassAfterSeconds) says otherwise. Bounded by default: with one operator replica, a
# gate that waited forever would turn one operator crash into every managed deploy stuck in
# Init. Two minutes covers an operator restart (seconds) and a reschedule onto another node.
DEFAULT_BYPASS_SECONDS = 120

# Written by users on the ConsumerGroup to resume a failed rollout: any new value does.
RESUME_ANNOTATION = "rebalancer.dev/resume-rollout"


class GateHold(StrEnum):
    """What the gate holds until the operator opens it."""

    POD = "Pod"  # an init container: the pod's containers start once it is opened
    JOIN = "Join"  # a native sidecar: the consumer starts, and joins once it is opened


class GateState(StrEnum):
    """Where a pod stands with respect to its gate, as its spec, status and annotations tell."""

    NONE = "none"  # the pod has no gate init container: it joins when it starts
    PENDING = "pending"  # it has a gate that is not running yet (scheduling, image pull)
    WAITING = "waiting"  # the gate is running and holding the pod
    OPEN = "open"  # the operator opened it; the gate may still be exiting
    PASSED = "passed"  # the gate exited 0 (opened or bypassed): the consumer is starting

    @property
    def through(self) -> bool:
        """Whether the pod is (or is about to be) running its consumer."""
        return self in (GateState.NONE, GateState.OPEN, GateState.PASSED)
