"""Moving a classic group from an eager assignor to cooperative-sticky: KIP-429's upgrade path.

A group can rebalance only with an assignor every member lists, and members on the eager
protocol revoke everything while cooperative ones keep their partitions; a leader that only
knows eager could hand out partitions cooperative members still hold. KIP-429 therefore
documents two rolling bounces:

1. every member lists `cooperative-sticky` first and its current eager assignor(s) after it
   ("cooperative-sticky, range"): the group keeps rebalancing eagerly, so this bounce is safe;
2. once every member runs step 1, the eager assignor is removed, leaving `cooperative-sticky`.

Each step is one staggered rollout; step 2 starts only once step 1 has reached every pod.
librdkafka refuses a list that mixes protocol types ("All partition.assignment.strategy
assignors must have the same protocol type"), so librdkafka fleets cannot take this path: the
only safe switch is with every member stopped, which the operator will not do on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rebalancer.structs.consumer_settings_policy import AssignmentStrategy, ClientLibrary

JAVA_CLASSES: dict[str, str] = {
    AssignmentStrategy.COOPERATIVE_STICKY: (
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
    ),
    AssignmentStrategy.RANGE: "org.apache.kafka.clients.consumer.RangeAssignor",
    AssignmentStrategy.ROUNDROBIN: "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    AssignmentStrategy.STICKY: "org.apache.kafka.clients.consumer.StickyAssignor",
}
_SHORT_NAMES = {cls: name for name, cls in JAVA_CLASSES.items()}
# Java's own short class names as they appear in configs and in JoinGroup protocol names.
_ALIASES = {
    "cooperativestickyassignor": AssignmentStrategy.COOPERATIVE_STICKY.value,
    "rangeassignor": AssignmentStrategy.RANGE.value,
    "roundrobinassignor": AssignmentStrategy.ROUNDROBIN.value,
    "stickyassignor": AssignmentStrategy.STICKY.value,
}
COOPERATIVE = AssignmentStrategy.COOPERATIVE_STICKY.value
EAGER = frozenset({AssignmentStrategy.RANGE.value, AssignmentStrategy.ROUNDROBIN.value, "sticky"})
# What consumers use when nothing sets the strategy.
LIBRARY_DEFAULTS: dict[ClientLibrary, tuple[str, ...]] = {
    ClientLibrary.LIBRDKAFKA: ("range", "roundrobin"),
    ClientLibrary.JAVA: ("range", "cooperative-sticky"),  # Kafka 3.0 and later
}


def parse_strategy(text: str | None) -> tuple[str, ...]:
    """Assignor names from a partition.assignment.strategy value, as librdkafka's short names.

    Java class names (and Java's protocol names such as "cooperative-sticky") map to their
    short names; unknown (custom) assignors are kept as written.
    """
    names: list[str] = []
    for raw in (text or "").split(","):
        item = raw.strip()
        if not item:
            continue
        name = _short_name(item)
        if name not in names:
            names.append(name)
    return tuple(names)


def _short_name(item: str) -> str:
    if item in _SHORT_NAMES:
        return _SHORT_NAMES[item]
    lowered = item.lower()
    if lowered in EAGER or lowered == COOPERATIVE:
        return lowered
    return _ALIASES.get(item.rsplit(".", 1)[-1].lower(), item)


def render_strategy(names: Sequence[str], library: ClientLibrary) -> str:
    """The property value: short names for librdkafka, class names for Java."""
    if library is ClientLibrary.JAVA:
        return ",".join(JAVA_CLASSES.get(name, name) for name in names)
    return ",".join(names)


@dataclass(frozen=True)
class AssignorStep:
    strategies: tuple[str, ...]
    # 0: no migration under way; 1 or 2: KIP-429's first or second rolling bounce.
    step: int = 0
    note: str | None = None
    # Why the wanted assignor cannot be reached safely (the caller refuses the settings).
    problem: str | None = None
    fix: str | None = None


def _is_mixed(names: Sequence[str]) -> bool:
    return COOPERATIVE in names and any(name in EAGER for name in names)


def plan_assignor(
    wanted: AssignmentStrategy,
    library: ClientLibrary,
    current: Sequence[str] | None,
    *,
    rolled_out: bool,
    group_active: bool,
) -> AssignorStep:
    """The strategy list to render now.

    `current`: the assignors the running consumers list (None: not known, the library's
    default is assumed); `rolled_out`: every pod runs the workload's latest template;
    `group_active`: the group has members (an empty group has nothing to migrate).
    """
    if library is ClientLibrary.LIBRDKAFKA and wanted is AssignmentStrategy.STICKY:
        return AssignorStep(
            (wanted.value,),
            problem="sticky (Java's eager StickyAssignor) does not exist in librdkafka",
            fix="use cooperative-sticky, range or roundrobin, or set clientLibrary: java",
        )
    if not wanted.cooperative or not group_active:
        return AssignorStep((wanted.value,))
    running = tuple(current) if current else LIBRARY_DEFAULTS[library]
    known = "run" if current else f"are assumed to run {library.value}'s default,"
    if tuple(running) == (COOPERATIVE,):
        return AssignorStep((COOPERATIVE,))
    if _is_mixed(running):
        return _mixed_step(running, rolled_out)
    eager = tuple(name for name in running if name in EAGER)
    if not eager:
        # Custom assignors only: nothing KIP-429 describes; the user chose to switch.
        return AssignorStep(
            (COOPERATIVE,),
            note=f"switching from {','.join(running)} to {COOPERATIVE} in one rollout",
        )
    if library is ClientLibrary.LIBRDKAFKA:
        return AssignorStep(
            (COOPERATIVE,),
            problem=(
                f"the consumers {known} the eager {','.join(running)}, and librdkafka cannot list "
                f"{COOPERATIVE} together with it, so KIP-429's two-rollout upgrade is not "
                "possible and a rolling switch would split the group"
            ),
            fix=(
                f"keep assignmentStrategy: {eager[0]}, or stop every consumer (scale to 0) and "
                f"start them again with {COOPERATIVE}"
            ),
        )
    first = (COOPERATIVE, *eager)
    return AssignorStep(
        first,
        step=1,
        note=(
            f"assignor migration step 1 of 2: rolling out {','.join(first)} (the group stays "
            f"eager); {COOPERATIVE} alone follows once every pod runs it (KIP-429)"
        ),
    )


def _mixed_step(running: Sequence[str], rolled_out: bool) -> AssignorStep:
    """Consumers listing the cooperative assignor beside an eager one: step 1 while that list
    rolls out, step 2 (cooperative alone) once every pod runs it."""
    if not rolled_out:
        return AssignorStep(
            tuple(running),
            step=1,
            note=(
                f"assignor migration step 1 of 2: {','.join(running)} is rolling out; "
                f"{COOPERATIVE} alone follows once every pod runs it (KIP-429)"
            ),
        )
    return AssignorStep(
        (COOPERATIVE,),
        step=2,
        note=(
            f"assignor migration step 2 of 2: every pod lists {','.join(running)}, so the "
            f"eager assignor is removed (KIP-429)"
        ),
    )
