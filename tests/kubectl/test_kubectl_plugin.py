"""rebalancer.kubectl: the plugin's command line, its `get` table, `history` and `why` from the
operator's Rebalance Events, and the patches of `enforce`, `pause` and `resume`; plus the
plugin's loops (watch, the enforce baseline) against an in-memory API."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rebalancer import kubectl_plugin
from rebalancer.kubectl.arguments import Connection, Verb, parse_request
from rebalancer.kubectl.rebalances import (
    HISTORY_HEADERS,
    explain_last,
    parse_description,
    rebalances_from_events,
    render_history,
)
from rebalancer.kubectl.requests import (
    baseline_taken,
    enforce_change,
    new_token,
    pause_change,
    resume_change,
)
from rebalancer.kubectl.tables import (
    GROUP_HEADERS,
    age,
    group_row,
    render_groups,
    render_table,
)
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.structs.gates import RESUME_ANNOTATION
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.times import format_rfc3339, parse_rfc3339

NOW = parse_rfc3339("2026-03-01T12:00:00Z")
DOC = Path(__file__).resolve().parents[2] / "docs" / "kubectl-plugin.md"


def at(seconds_ago: float) -> str:
    return format_rfc3339(NOW - seconds_ago, milliseconds=True)


def body(
    name: str = "orders",
    namespace: str = "shop",
    *,
    status: Mapping[str, Any] | None = None,
    policy: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str = "uid-1",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "generation": 1,
        "creationTimestamp": at(3 * 3600 + 5),
    }
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": metadata,
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
            "policy": dict(policy or {"rollout": {"enabled": True}}),
        },
        "status": dict(status or {}),
    }


ROLLING = {
    "phase": "BatchJoining",
    "kind": "rolling-update",
    "mechanism": "statefulset-replace",
    "batch": 2,
    "batches": 3,
    "batchSizes": [1, 1, 1],
    "startedAt": at(120),
    "phaseSince": at(20),
}
OBSERVED = {
    "state": "PreparingRebalance",
    "members": 3,
    "generation": 7,
    "rebalances": 12,
    "lastRebalanceCause": "member-joined",
    "lastRebalanceTime": at(30),
    "observedAt": at(2),
}
READY = [{"type": "Ready", "status": "False", "reason": "Rebalancing", "message": "m"}]


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "verb", "group", "connection"),
    [
        (["get"], Verb.GET, None, Connection()),
        (["-n", "shop", "get"], Verb.GET, None, Connection(namespace="shop")),
        (["get", "-n", "shop"], Verb.GET, None, Connection(namespace="shop")),
        (
            ["--kubeconfig", "/k", "why", "orders", "--context", "lab"],
            Verb.WHY,
            "orders",
            Connection(kubeconfig="/k", context="lab"),
        ),
        (["history", "orders"], Verb.HISTORY, "orders", Connection()),
        (["enforce", "orders"], Verb.ENFORCE, "orders", Connection()),
        (["pause", "-n", "shop", "orders"], Verb.PAUSE, "orders", Connection(namespace="shop")),
        (["resume", "orders"], Verb.RESUME, "orders", Connection()),
    ],
)
def test_flags_are_taken_before_and_after_the_verb(
    argv: list[str], verb: Verb, group: str | None, connection: Connection
) -> None:
    request = parse_request(argv)
    assert (request.verb, request.group, request.connection) == (verb, group, connection)


def test_get_options() -> None:
    request = parse_request(["get", "-A", "-w", "--interval", "0.5"])
    assert (request.all_namespaces, request.watch, request.interval_seconds) == (True, True, 0.5)
    assert parse_request(["history", "orders", "--limit", "3"]).limit == 3
    assert parse_request(["enforce", "orders", "--timeout", "5"]).timeout_seconds == 5.0


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["why"],
        ["promote", "orders"],
        ["get", "--interval", "0"],
        ["history", "orders", "--limit", "x"],
        ["get", "orders"],
    ],
)
def test_bad_command_lines_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_request(argv)
    assert stopped.value.code == 2
    assert "usage: kubectl rebalancer" in capsys.readouterr().err


# -- get -------------------------------------------------------------------------------------


def test_a_row_reads_status_group_rollout_and_ready() -> None:
    row = group_row(body(status={"group": OBSERVED, "rollout": ROLLING, "conditions": READY}))
    assert (row.state, row.members, row.generation, row.rebalances) == (
        "PreparingRebalance",
        3,
        7,
        12,
    )
    assert (row.rollout, row.batch, row.ready) == ("BatchJoining", "2/3", "False")


def test_a_group_not_observed_yet_shows_dashes() -> None:
    row = group_row(body(status={}))
    assert (row.state, row.members, row.rollout, row.batch, row.ready) == (
        "-",
        None,
        "-",
        "-",
        "-",
    )


def test_the_table_lines_up_as_kubectl_does() -> None:
    bodies = [
        body("payments", status={"group": {**OBSERVED, "state": "Stable", "members": 12}}),
        body(status={"group": OBSERVED, "rollout": ROLLING, "conditions": READY}),
    ]
    assert render_groups(bodies, NOW, namespace="shop").splitlines() == [
        "NAME       GROUP      STATE                MEMBERS   GENERATION   REBALANCES   "
        "ROLLOUT        BATCH   READY   AGE",
        "orders     orders     PreparingRebalance   3         7            12           "
        "BatchJoining   2/3     False   3h",
        "payments   payments   Stable               12        7            12           "
        "-              -       -       3h",
    ]


def test_every_namespace_adds_a_namespace_column() -> None:
    lines = render_groups([body(namespace="b"), body(namespace="a")], NOW, namespace=None)
    assert lines.splitlines()[0].startswith("NAMESPACE   NAME")
    assert [line.split()[0] for line in lines.splitlines()[1:]] == ["a", "b"]


def test_nothing_to_list_is_said_as_kubectl_says_it() -> None:
    assert render_groups([], NOW, namespace="shop") == "No ConsumerGroups found in shop namespace."
    assert render_groups([], NOW, namespace=None) == "No ConsumerGroups found."


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (119, "119s"), (120, "2m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"),
     (47 * 3600, "47h"), (3 * 86400, "3d"), (-5, "0s")],
)  # fmt: skip
def test_ages(seconds: float, text: str) -> None:
    assert age(seconds) == text


def test_render_table_leaves_no_trailing_space() -> None:
    assert render_table(("A", "B"), [["x", ""], ["yy", "z"]]) == "A    B\nx\nyy   z"


# -- history and why -------------------------------------------------------------------------


def described(
    generation: int | None,
    cause: RebalanceCause,
    joined: tuple[str, ...] = (),
    left: tuple[str, ...] = (),
    members: int = 3,
    source: str = "member-reports",
) -> str:
    return RebalanceEvent(
        namespace="shop",
        name="orders",
        group_id="orders",
        cluster="c",
        generation=generation,
        previous_generation=None,
        cause=cause,
        detected_at=0.0,
        started_at=None,
        members=members,
        joined=joined,
        left=left,
        source=source,
        state="Stable",
    ).describe()


def event(message: str, seconds_ago: float, *, uid: str = "uid-1", reason: str = "Rebalance"):
    return {
        "reason": reason,
        "message": message,
        "type": "Normal",
        "involvedObject": {"kind": "ConsumerGroup", "name": "orders", "uid": uid},
        "lastTimestamp": at(seconds_ago),
        "eventTime": None,
    }


def test_the_operators_event_message_reads_back() -> None:
    message = described(8, RebalanceCause.MEMBERS_CHANGED, ("orders-2",), ("orders-1", "x"))
    entry = parse_description(message)
    assert entry is not None
    assert (entry.generation, entry.members, entry.cause) == (8, 3, "members-changed")
    assert (entry.joined, entry.left, entry.source) == (
        ("orders-2",),
        ("orders-1", "x"),
        "member-reports",
    )


def test_a_rebalance_seen_on_the_broker_only_reads_back_without_a_generation() -> None:
    entry = parse_description(described(None, RebalanceCause.STATE_CHANGE, source="broker"))
    assert entry is not None
    assert (entry.generation, entry.cause, entry.joined, entry.source) == (
        None,
        "state-change",
        (),
        "broker",
    )


def test_other_messages_are_not_rebalances() -> None:
    assert parse_description("the group is observed again") is None


def test_history_keeps_the_objects_rebalance_events_in_time_order() -> None:
    events = [
        event(described(9, RebalanceCause.ENFORCED), 10),
        event(described(7, RebalanceCause.MEMBER_JOINED, ("orders-2",)), 100),
        event("ignored", 50, reason="CoordinatorMoved"),
        event(described(3, RebalanceCause.MEMBER_LEFT), 60, uid="an-older-object"),
        event(described(8, RebalanceCause.MEMBER_LEFT, left=("orders-0",)), 50),
    ]
    entries = rebalances_from_events(events, "uid-1")
    assert [e.generation for e in entries] == [7, 8, 9]
    text = render_history(body(status={"group": OBSERVED}), entries, NOW, limit=2)
    assert text.splitlines() == [
        "ConsumerGroup shop/orders (group orders): 12 rebalances recorded since it was created",
        "AGE   GENERATION   MEMBERS   CAUSE         JOINED   LEFT       SOURCE",
        "50s   8            3         member-left   -        orders-0   member-reports",
        "10s   9            3         enforced      -        -          member-reports",
        "9 older rebalances have no Event left (the API server keeps Events for --event-ttl, an "
        "hour by default); the operator's history store keeps them all (docs/history.md).",
    ]


def test_history_without_events_falls_back_on_status() -> None:
    text = render_history(body(status={"group": OBSERVED}), [], NOW, limit=10)
    assert "the last rebalance, 30s ago: member-joined" in text
    assert render_history(body(), [], NOW, 10).endswith("No rebalance seen yet.")


def test_why_explains_the_last_rebalance_within_its_rollout() -> None:
    events = [
        event(described(6, RebalanceCause.MEMBER_LEFT, left=("orders-2",)), 70),
        event(described(7, RebalanceCause.MEMBER_JOINED, ("orders-2",)), 30),
    ]
    status = {"group": OBSERVED, "rollout": ROLLING}
    text = explain_last(body(status=status), rebalances_from_events(events), NOW)
    assert text.splitlines() == [
        "ConsumerGroup shop/orders (group orders): last rebalance 2026-03-01T11:59:30Z (30s ago),"
        " generation 7, 3 members",
        "cause:   member-joined: members joined the group (a new pod, or a pod restarted under a "
        "new member id); the coordinator rebalanced to give them partitions",
        "joined:  orders-2",
        "left:    none",
        "source:  member-reports",
        "rollout: during the rolling-update started 2026-03-01T11:58:00Z, 3 batches "
        "(now BatchJoining, batch 2)",
    ]


def test_why_names_the_enforcement_request_of_an_enforced_rebalance() -> None:
    status = {
        "group": OBSERVED,
        "enforcement": {
            "lastCause": "on-demand",
            "lastTime": at(12),
            "lastStatus": "enforced",
            "lastRequestId": "token-abc",
        },
    }
    entries = rebalances_from_events([event(described(9, RebalanceCause.ENFORCED), 10)])
    text = explain_last(body(status=status), entries, NOW)
    assert "cause:   enforced: an enforced rebalance the operator asked a sidecar for" in text
    assert "request: last enforcement request: on-demand 2026-03-01T11:59:48Z, enforced" in text
    assert "rollout:" not in text


def test_why_after_the_events_expired_reads_status() -> None:
    text = explain_last(body(status={"group": OBSERVED}), [], NOW)
    assert "from status.group (its Event has expired)" in text
    assert "cause:   member-joined: members joined" in text
    assert explain_last(body(), [], NOW).endswith("no rebalance seen yet.")


def test_a_rebalance_after_the_rollout_ended_is_not_blamed_on_it() -> None:
    done = {**ROLLING, "phase": "Completed", "phaseSince": at(60)}
    entries = rebalances_from_events([event(described(9, RebalanceCause.MEMBER_LEFT), 10)])
    text = explain_last(body(status={"group": OBSERVED, "rollout": done}), entries, NOW)
    assert "rollout:" not in text


# -- enforce, pause, resume ------------------------------------------------------------------

ENFORCE = {"sidecar": {"tokenSecretRef": {"name": "orders-sidecar-token", "key": "token"}}}
SEEN = {"enforcement": {"memory": {"token": "a", "tokenSeen": True}}}


def test_enforce_writes_a_new_request_token_once_the_operator_has_a_baseline() -> None:
    policy = {"rollout": {"enabled": True}, "enforce": {**ENFORCE, "requestToken": "a"}}
    change = enforce_change(body(policy=policy, status=SEEN), NOW)
    token = change.patch["spec"]["policy"]["enforce"]["requestToken"] if change.patch else None
    assert token == "kubectl-20260301T120000.000000Z"
    assert change.baseline is None and not change.refused
    assert "requested an enforced rebalance" in change.message


def test_enforce_before_any_baseline_writes_one_first() -> None:
    change = enforce_change(body(policy={"enforce": ENFORCE}), NOW)
    assert change.baseline == "kubectl-20260301T120000.000000Z"
    taken = {"enforcement": {"memory": {"token": change.baseline, "tokenSeen": True}}}
    assert baseline_taken(body(status=taken), change.baseline)
    assert not baseline_taken(body(status=SEEN), change.baseline)
    assert not baseline_taken(body(), change.baseline)


def test_enforce_without_the_sidecar_token_is_refused() -> None:
    change = enforce_change(body(status=SEEN), NOW)
    assert change.refused and change.patch is None
    assert "tokenSecretRef is not set" in change.message


def test_an_invalid_spec_is_refused() -> None:
    broken = body()
    del broken["spec"]["kafka"]
    for change in (enforce_change(broken, NOW), pause_change(broken), resume_change(broken, NOW)):
        assert change.refused and "invalid spec" in change.message


def test_tokens_never_repeat() -> None:
    token = new_token(NOW, None)
    assert new_token(NOW, token) != token


def test_pause_sets_the_rollout_policys_paused() -> None:
    change = pause_change(body(status={"rollout": ROLLING}))
    assert change.patch == {"spec": {"policy": {"rollout": {"paused": True}}}}
    assert change.notes == ()


@pytest.mark.parametrize(
    ("policy", "rollout", "refused", "patched", "said"),
    [
        ({"rollout": {"enabled": False}}, ROLLING, True, False, "rollouts are not managed"),
        ({"rollout": {"enabled": True, "paused": True}}, ROLLING, False, False, "already paused"),
        ({"rollout": {"enabled": True}}, {"phase": "Failed"}, False, True, "had failed"),
        ({"rollout": {"enabled": True}}, {"phase": "Completed"}, False, True, "next one waits"),
    ],
)
def test_pause_cases(
    policy: dict[str, Any], rollout: dict[str, Any], refused: bool, patched: bool, said: str
) -> None:
    change = pause_change(body(policy=policy, status={"rollout": rollout}))
    assert (change.refused, change.patch is not None) == (refused, patched)
    assert said in " ".join((change.message, *change.notes))


def test_resume_unpauses_a_paused_rollout() -> None:
    paused = {**ROLLING, "phase": "Paused", "pausedFrom": "BatchJoining", "pausedAt": at(5)}
    change = resume_change(
        body(policy={"rollout": {"enabled": True, "paused": True}}, status={"rollout": paused}),
        NOW,
    )
    assert change.patch == {"spec": {"policy": {"rollout": {"paused": False}}}}
    assert "goes back to BatchJoining" in change.message


def test_resume_writes_a_new_resume_annotation_for_a_failed_rollout() -> None:
    failed = {"phase": "Failed", "reason": "BatchDidNotSettle", "resumeToken": "old"}
    change = resume_change(
        body(status={"rollout": failed}, annotations={RESUME_ANNOTATION: "old"}), NOW
    )
    value = "kubectl-20260301T120000.000000Z"
    assert change.patch == {"metadata": {"annotations": {RESUME_ANNOTATION: value}}}
    assert "failed rollout (BatchDidNotSettle) resumed" in change.message


def test_resume_with_nothing_held_writes_nothing() -> None:
    change = resume_change(body(status={"rollout": ROLLING}), NOW)
    assert change.patch is None and not change.refused
    assert "nothing to resume" in change.message


def test_the_rollout_status_the_tests_write_is_the_planners() -> None:
    # The fixtures above are what the planner writes: they read back without loss.
    state = RolloutState.from_status(ROLLING)
    assert (state.batch, state.batches, state.message) == (2, 3, None)


# -- the plugin's loops, against an in-memory API --------------------------------------------


class FakeApi:
    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.patches: list[dict[str, Any]] = []
        self.reads = 0
        self.default_namespace = "shop"

    def read_group(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads == 3:  # the operator takes the baseline between two looks
            token = self.stored["spec"]["policy"]["enforce"]["requestToken"]
            self.stored["status"] = {"enforcement": {"memory": {"token": token, "tokenSeen": True}}}
        return self.stored

    def patch_group(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        self.stored["spec"]["policy"]["enforce"].update(patch["spec"]["policy"]["enforce"])
        return self.stored


def test_enforce_writes_the_baseline_waits_for_it_then_requests() -> None:
    api = FakeApi(body(policy={"enforce": dict(ENFORCE)}))
    out, err = io.StringIO(), io.StringIO()
    moments = iter([NOW, NOW + 1.5])
    status = kubectl_plugin.enforce(
        api,  # type: ignore[arg-type]
        "shop",
        "orders",
        out,
        err,
        timeout=10,
        clock=lambda: next(moments),
        monotonic=lambda: 0.0,
        sleep=lambda _: None,
    )
    assert status == 0, err.getvalue()
    tokens = [p["spec"]["policy"]["enforce"]["requestToken"] for p in api.patches]
    assert tokens == ["kubectl-20260301T120000.000000Z", "kubectl-20260301T120001.500000Z"]
    assert "baseline" in out.getvalue() and "requested an enforced rebalance" in out.getvalue()


def test_enforce_gives_up_when_no_operator_takes_the_baseline() -> None:
    api = FakeApi(body(policy={"enforce": dict(ENFORCE)}))
    api.reads = -100  # never
    clock = iter([0.0, 5.0, 11.0])
    err = io.StringIO()
    status = kubectl_plugin.enforce(
        api,  # type: ignore[arg-type]
        "shop",
        "orders",
        io.StringIO(),
        err,
        timeout=10,
        clock=lambda: NOW,
        monotonic=lambda: next(clock),
        sleep=lambda _: None,
    )
    assert status == 1 and "did not take the baseline" in err.getvalue()
    assert len(api.patches) == 1


def test_watch_prints_again_only_when_a_row_changed() -> None:
    states = iter(["Stable", "Stable", "PreparingRebalance"])

    def fetch() -> list[dict[str, Any]]:
        state = next(states, None)
        if state is None:
            raise KeyboardInterrupt
        return [body(status={"group": {**OBSERVED, "state": state}})]

    out = io.StringIO()
    moments = iter([NOW, NOW + 200, NOW + 400])
    with pytest.raises(KeyboardInterrupt):
        kubectl_plugin.watch_groups(
            fetch, out, namespace="shop", interval=1, clock=lambda: next(moments),
            sleep=lambda _: None,
        )  # fmt: skip
    tables = out.getvalue().split("\n\n")
    assert len(tables) == 2
    assert "Stable" in tables[0] and "PreparingRebalance" in tables[1]


# -- the docs --------------------------------------------------------------------------------


def test_the_docs_show_the_plugins_own_columns() -> None:
    headers = [
        line.split()
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith(("NAME ", "AGE "))
    ]
    assert headers == [list(GROUP_HEADERS), list(HISTORY_HEADERS)]
